"""Memory and machine-check errors: EDAC counters, rasdaemon's database, mcelog's log.

Three views of the same hardware events; a node usually has one or two of
them. EDAC is the kernel's count per memory controller and DIMM
(Documentation/admin-guide/ras.rst, "EDAC - Error Detection And
Correction"); rasdaemon records each event in SQLite; mcelog writes a text
log. Counts are since the driver was loaded (EDAC) or since the database or
log was started (rasdaemon, mcelog): the latter survive reboots.
"""
from __future__ import annotations

import os
import re
import sqlite3
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

from .base import Probe, check, fail, ok, skipped, warn

EDAC_MC = "sys/devices/system/edac/mc"
RASDAEMON_DB = "var/lib/rasdaemon/ras-mc_ctx.db"
MCELOG = "var/log/mcelog"

# MCi_STATUS bit 61: the error was not corrected (Intel SDM vol. 3B 16.3.2.2; AMD APM vol. 2 9.3).
MCI_STATUS_UC = 1 << 61


def _duration(seconds: int) -> str:
    d, rest = divmod(max(0, seconds), 86400)
    h = rest // 3600
    return f"{d} d {h} h" if d else f"{h} h {rest % 3600 // 60} min"


def _short(text: Any, n: int = 120) -> str:
    s = " ".join(str(text).split()) if text is not None else ""
    return s if len(s) <= n else s[:n - 1] + "…"


# ---- EDAC ----------------------------------------------------------------

def _edac_units(p: Probe, mc: str) -> List[Dict[str, Any]]:
    """The DIMMs (or ranks, or csrow channels on old drivers) of one memory controller.

    Each: where (sysfs name), label, location, ce, ue (None when not given).
    """
    d = f"{EDAC_MC}/{mc}"
    out: List[Dict[str, Any]] = []
    for name in p.listdir(d):
        sub = f"{d}/{name}"
        if re.fullmatch(r"(dimm|rank)\d+", name):
            out.append({"where": f"{mc}/{name}", "label": _short(p.read(f"{sub}/dimm_label"), 60),
                        "location": _short(p.read(f"{sub}/dimm_location"), 60),
                        "ce": p.read_int(f"{sub}/dimm_ce_count"), "ue": p.read_int(f"{sub}/dimm_ue_count")})
        elif re.fullmatch(r"csrow\d+", name):
            # Old layout: per chip-select row, UE per row, CE also per channel.
            chans = sorted({int(m[1]) for f in p.listdir(sub) for m in [re.fullmatch(r"ch(\d+)_ce_count", f)] if m})
            for ch in chans:
                out.append({"where": f"{mc}/{name}/ch{ch}", "label": _short(p.read(f"{sub}/ch{ch}_dimm_label"), 60),
                            "location": f"{name} channel {ch}", "ce": p.read_int(f"{sub}/ch{ch}_ce_count"), "ue": None})
            labels = "/".join(x for x in (p.read(f"{sub}/ch{ch}_dimm_label") for ch in chans) if x)
            out.append({"where": f"{mc}/{name}", "label": _short(labels, 60), "location": name,
                        "ce": None if chans else p.read_int(f"{sub}/ce_count"), "ue": p.read_int(f"{sub}/ue_count")})
    return out


def _unit_name(u: Dict[str, Any]) -> str:
    label, loc = u.get("label") or "", u.get("location") or ""
    if label and loc and loc not in label:
        return f"{label} ({loc}, {u['where']})"
    return f"{label or loc or u['where']} ({u['where']})" if (label or loc) else u["where"]


@check("ras.edac")
def edac(p: Probe):
    """Corrected and uncorrected memory errors counted by the kernel's EDAC drivers.

    Reads /sys/devices/system/edac/mc/mcN/: ce_count, ue_count,
    ce_noinfo_count, ue_noinfo_count (errors the driver could not place on
    a DIMM), mc_name, seconds_since_reset; and per DIMM (or rank)
    dimmM/dimm_ce_count, dimm_ue_count, dimm_label, dimm_location; on old
    drivers csrowK/ce_count, ue_count, chJ_ce_count, chJ_dimm_label
    (Documentation/admin-guide/ras.rst). Counts are since the EDAC driver was
    loaded (boot) or its counters were reset.

    fail: any uncorrected error (UE). Data was lost or the machine check was
    fatal to a process; the DIMM (or its channel) is bad and the next one may
    crash the node or corrupt results.
    warn: any corrected error (CE); the DIMMs are named by label and location
    with their counts. Each corrected error costs the memory controller a
    retry, firmware-first platforms stop the node for milliseconds to log it,
    and a DIMM with a rising CE count is the likeliest to fail next.
    skipped: no mc* under /sys/devices/system/edac/mc — no EDAC driver: a VM,
    a container without the host's /sys, or the driver for this memory
    controller is not loaded (``modprobe`` the platform's *_edac module, e.g.
    skx_edac, i10nm_edac, amd64_edac).

    Fix: watch the rate (``edac-util -v``, ``ras-mc-ctl --error-count``);
    replace DIMMs with uncorrected errors or a growing CE count at the next
    maintenance; ``ipmitool sel list`` shows what the BMC logged.
    """
    mcs = [n for n in p.listdir(EDAC_MC) if re.fullmatch(r"mc\d+", n)]
    if not mcs:
        where = "is absent" if not p.exists(EDAC_MC) else "has no mc* directories"
        return skipped("Memory error counters (EDAC): no EDAC driver",
                       evidence=f"/{EDAC_MC} {where}",
                       why="no EDAC driver is loaded: a VM, a container without the host's /sys, or the platform's "
                           "EDAC module (skx_edac, i10nm_edac, amd64_edac, ...) is not loaded")
    ce_total = ue_total = 0
    readable = 0
    bad_units: List[str] = []
    mc_lines: List[str] = []
    noinfo: List[str] = []
    since: List[int] = []
    for mc in mcs:
        d = f"{EDAC_MC}/{mc}"
        units = _edac_units(p, mc)
        ce = p.read_int(f"{d}/ce_count")
        ue = p.read_int(f"{d}/ue_count")
        # Without the controller's totals, the DIMMs' counts are the next best.
        if ce is None and any(u["ce"] is not None for u in units):
            ce = sum(u["ce"] or 0 for u in units)
        if ue is None and any(u["ue"] is not None for u in units):
            ue = sum(u["ue"] or 0 for u in units)
        if ce is None and ue is None:
            mc_lines.append(f"{mc}: counters not readable")
            continue
        readable += 1
        ce, ue = max(ce or 0, 0), max(ue or 0, 0)
        ce_total += ce
        ue_total += ue
        name = _short(p.read(f"{d}/mc_name"), 40)
        mc_lines.append(f"{mc}{f' ({name})' if name else ''}: {ce} CE, {ue} UE")
        for key in ("ce_noinfo_count", "ue_noinfo_count"):
            v = p.read_int(f"{d}/{key}")
            if v:
                noinfo.append(f"{mc} {key}={v}")
        s = p.read_int(f"{d}/seconds_since_reset")
        if s is not None and s >= 0:
            since.append(s)
        for u in units:
            parts = [f"{u[k]} {k.upper()}" for k in ("ue", "ce") if u[k]]
            if parts:
                bad_units.append(f"{_unit_name(u)}: {', '.join(parts)}")
    if not readable:
        return skipped("Memory error counters (EDAC): not readable",
                       evidence=f"{len(mcs)} controllers under /{EDAC_MC}, none with a readable ce_count/ue_count")
    period = (f"counted over {_duration(max(since))} (seconds_since_reset)" if since
              else "counted since the driver was loaded")
    evidence = "; ".join(mc_lines)
    if bad_units:
        more = f"; and {len(bad_units) - 8} more" if len(bad_units) > 8 else ""
        evidence += "; DIMMs: " + "; ".join(bad_units[:8]) + more
    if noinfo:
        evidence += "; not placed on a DIMM: " + ", ".join(noinfo)
    evidence += f"; {period}; /{EDAC_MC}"
    if ue_total:
        return fail(f"Uncorrected memory errors: {ue_total} (and {ce_total} corrected)", evidence=evidence,
                    why="an uncorrected error loses data: a process was killed or the node may crash, "
                        "and the same DIMM is likely to fail again",
                    fix="drain the node and replace the DIMM named here; ras-mc-ctl --errors and ipmitool sel list "
                        "show the events", needs_root=True, cause="uncorrected_errors")
    if ce_total:
        return warn(f"Corrected memory errors: {ce_total}", evidence=evidence,
                    why="each corrected error costs a retry, firmware-first platforms pause the node to log it, "
                        "and a DIMM with a rising count is the likeliest to fail next",
                    fix="watch the rate (edac-util -v, ras-mc-ctl --error-count); replace the DIMM at the next "
                        "maintenance if it keeps rising", needs_root=True, cause="corrected_errors")
    return ok(f"No memory errors on {readable} memory controller{'s' * (readable != 1)} (EDAC)", evidence=evidence)


# ---- rasdaemon -------------------------------------------------------------

def _classify(err_type: Any) -> str:
    """'uncorrected' | 'corrected' | 'other' from rasdaemon's err_type text.

    mc_event: Corrected, Uncorrected, Fatal, Deferred (AMD: not corrected,
    its handling postponed), Info; aer_event: Corrected, Uncorrected
    (Non-Fatal), Uncorrected (Fatal).
    """
    t = str(err_type or "").lower()
    if "uncorrect" in t or "fatal" in t or "deferred" in t:
        return "uncorrected"
    if "correct" in t:
        return "corrected"
    return "other"


def _open_ro(path: str) -> sqlite3.Connection:
    """Open read-only; a WAL database we may not write (no -shm) opens as immutable."""
    uri = "file:" + urllib.parse.quote(path) + "?mode=ro"
    first: Optional[sqlite3.Error] = None
    for extra in ("", "&immutable=1"):
        con = None
        try:
            con = sqlite3.connect(uri + extra, uri=True, timeout=1.0)
            con.execute("SELECT name FROM sqlite_master").fetchall()
            return con
        except sqlite3.Error as e:
            if con is not None:
                con.close()
            first = first or e
    assert first is not None
    raise first


def _columns(con: sqlite3.Connection, table: str) -> List[str]:
    return [str(r[1]) for r in con.execute(f"PRAGMA table_info({table})")]


def _mce_class_sql(cols: List[str]) -> str:
    """SQL for an mce_record row's class: 'uncorrected' when bit 61 (UC) of an
    integer MCi_STATUS is set, else 'corrected'; without an integer status,
    from the words in mcistatus_msg and error_msg, else 'other'. rasdaemon
    stores the 64-bit status signed; SQLite's & works on the same bits."""
    texts = [c for c in ("mcistatus_msg", "error_msg") if c in cols]
    if texts:
        joined = "lower(" + " || ' ' || ".join(f"coalesce(CAST({c} AS TEXT), '')" for c in texts) + ")"
        by_text = (f"CASE WHEN instr({joined}, 'uncorrected') > 0 THEN 'uncorrected' "
                   f"WHEN instr({joined}, 'corrected') > 0 THEN 'corrected' ELSE 'other' END")
    else:
        by_text = "'other'"
    if "status" not in cols:
        return by_text
    return (f"CASE WHEN typeof(status) = 'integer' THEN "
            f"(CASE WHEN status & {MCI_STATUS_UC} != 0 THEN 'uncorrected' ELSE 'corrected' END) ELSE {by_text} END")


def _rasdaemon_read(con: sqlite3.Connection) -> Tuple[Dict[str, Dict[str, List[int]]], List[Tuple[str, str]]]:
    """table -> class -> [events, errors]; and the latest events (timestamp, text)."""
    tables = {str(r[0]) for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    counts: Dict[str, Dict[str, List[int]]] = {}
    latest: List[Tuple[str, str]] = []
    if "mc_event" in tables:
        cols = _columns(con, "mc_event")
        c = counts.setdefault("mc_event", {})
        has_n = "err_count" in cols
        for et, events, errors in con.execute(
                f"SELECT err_type, COUNT(*), {'SUM(err_count)' if has_n else 'COUNT(*)'} FROM mc_event GROUP BY "
                "err_type"):
            k = _classify(et)
            slot = c.setdefault(k, [0, 0])
            slot[0] += int(events or 0)
            errs = errors if isinstance(errors, (int, float)) and errors > 0 else events
            slot[1] += int(errs or 0)
        want = [x for x in ("timestamp", "err_type", "err_count", "label", "err_msg", "mc") if x in cols]
        if "timestamp" in want:
            for row in con.execute(f"SELECT {', '.join(want)} FROM mc_event ORDER BY rowid DESC LIMIT 2"):
                r = dict(zip(want, row))
                text = f"mc_event {r.get('err_type')}"
                if r.get("err_count") not in (None, 1):
                    text += f" ×{r.get('err_count')}"
                if r.get("label"):
                    text += f" on {_short(r.get('label'), 50)}"
                if r.get("err_msg"):
                    text += f": {_short(r.get('err_msg'), 80)}"
                latest.append((str(r.get("timestamp") or ""), text))
    if "mce_record" in tables:
        cols = _columns(con, "mce_record")
        c = counts.setdefault("mce_record", {})
        cls = _mce_class_sql(cols)
        for k, events in con.execute(f"SELECT {cls} AS k, COUNT(*) FROM mce_record GROUP BY k"):
            slot = c.setdefault(str(k), [0, 0])
            slot[0] += int(events or 0)
            slot[1] += int(events or 0)
        want = [x for x in ("timestamp", "bank", "bank_name", "error_msg", "cpu") if x in cols]
        for row in con.execute(f"SELECT {', '.join(want + [cls])} FROM mce_record ORDER BY rowid DESC LIMIT 1"):
            r, k = dict(zip(want, row)), row[-1]
            text = f"mce_record {k}"
            if r.get("bank") is not None:
                text += f" bank {r.get('bank')}"
                text += f" ({_short(r.get('bank_name'), 30)})" if r.get("bank_name") else ""
            if r.get("cpu") is not None:
                text += f" CPU {r.get('cpu')}"
            if r.get("error_msg"):
                text += f": {_short(r.get('error_msg'), 80)}"
            latest.append((str(r.get("timestamp") or ""), text))
    if "aer_event" in tables:
        cols = _columns(con, "aer_event")
        c = counts.setdefault("aer_event", {})
        for et, events in con.execute("SELECT err_type, COUNT(*) FROM aer_event GROUP BY err_type"):
            slot = c.setdefault(_classify(et), [0, 0])
            slot[0] += int(events or 0)
            slot[1] += int(events or 0)
        want = [x for x in ("timestamp", "dev_name", "err_type", "err_msg") if x in cols]
        if "timestamp" in want:
            for row in con.execute(f"SELECT {', '.join(want)} FROM aer_event ORDER BY rowid DESC LIMIT 1"):
                r = dict(zip(want, row))
                latest.append((str(r.get("timestamp") or ""),
                               f"aer_event {r.get('err_type')} on {r.get('dev_name')}: {_short(r.get('err_msg'), 80)}"))
    latest.sort(key=lambda x: x[0], reverse=True)
    return counts, latest


@check("ras.rasdaemon")
def rasdaemon(p: Probe):
    """Memory, machine-check and PCIe errors recorded by rasdaemon.

    Opens rasdaemon's SQLite database /var/lib/rasdaemon/ras-mc_ctx.db
    read-only and counts the events per type in its tables mc_event
    (memory controller errors: err_type Corrected / Uncorrected / Fatal /
    Deferred / Info, err_count, label of the DIMM), mce_record (machine
    checks; corrected or not from bit 61 of MCi_STATUS) and aer_event (PCIe
    Advanced Error Reporting: Corrected / Uncorrected (Non-Fatal) /
    Uncorrected (Fatal)) where present, and shows the latest events. The
    database keeps events across reboots, so old events count too: the
    timestamps say when.

    fail: any uncorrected, fatal or deferred event: data was lost, a process
    was killed or the node may crash; the part is failing.
    warn: corrected events: the hardware fixed them, at a cost (retries,
    firmware pauses to log them), and a rising count predicts a failure.
    skipped: no database (rasdaemon not installed, or not run with
    ``--record``), or a database that cannot be read or is corrupt (the reason
    is given).

    Fix: ``ras-mc-ctl --summary`` and ``ras-mc-ctl --errors`` show the
    events; replace the DIMM or device named; a corrected count that keeps
    rising is a DIMM to replace at the next maintenance.
    """
    path = p.path(RASDAEMON_DB)
    if not p.exists(RASDAEMON_DB):
        # Installed but not recording is a flag to add; not installed is a package to install.
        exe = _installed(p, "rasdaemon")
        if exe:
            return skipped("rasdaemon: no error database", evidence=f"/{RASDAEMON_DB} is absent; {exe} is installed",
                           why="rasdaemon is installed but does not record events", cause="not_recording",
                           fix="run rasdaemon with --record (systemctl enable --now rasdaemon)", needs_root=True)
        return skipped("rasdaemon: no error database",
                       evidence=f"/{RASDAEMON_DB} is absent",
                       why="rasdaemon is not installed here, or does not record events (rasdaemon --record)"
                       if exe is None else "rasdaemon is not installed here",
                       cause="no_database" if exe is None else "not_installed")
    if not os.access(path, os.R_OK):
        if p.is_root:
            return skipped("rasdaemon: error database not readable", evidence=f"{path}: permission denied to root",
                           cause="denied_to_root")
        return skipped("rasdaemon: error database not readable", evidence=f"{path}: permission denied",
                       cause="not_root", fix="run ceiling as root, or ras-mc-ctl --summary as root", needs_root=True)
    con = None
    try:
        con = _open_ro(str(path))
        counts, latest = _rasdaemon_read(con)
    except (sqlite3.Error, ValueError, TypeError, OverflowError) as e:
        return skipped("rasdaemon: error database could not be read",
                       evidence=f"{path}: {type(e).__name__}: {e} (corrupt, or not a rasdaemon database)")
    finally:
        if con is not None:
            con.close()
    if not counts:
        return skipped("rasdaemon: no event tables in its database",
                       evidence=f"{path} has no mc_event, mce_record or aer_event table")
    per_table = []
    unc = cor = 0
    for table, classes in counts.items():
        if not classes:
            per_table.append(f"{table}: none")
            continue
        parts = []
        for k in ("uncorrected", "corrected", "other"):
            if k in classes:
                ev, errs = classes[k]
                parts.append(f"{ev} {k}" + (f" ({errs} errors)" if errs != ev else ""))
        per_table.append(f"{table}: {', '.join(parts)}")
        unc += classes.get("uncorrected", [0, 0])[0]
        cor += classes.get("corrected", [0, 0])[0]
    evidence = "; ".join(per_table)
    if latest:
        evidence += "; latest: " + "; ".join(f"{ts} {text}".strip() for ts, text in latest[:3])
    evidence += f"; {path}"
    if unc:
        return fail(f"rasdaemon recorded {unc} uncorrected error event{'s' * (unc != 1)}"
                    + (f" (and {cor} corrected)" if cor else ""), evidence=evidence,
                    why="an uncorrected error loses data: a process was killed or the node may crash, "
                        "and the failing part will fail again",
                    fix="ras-mc-ctl --errors shows the events; drain the node and replace the DIMM or device named",
                    needs_root=True, cause="uncorrected_errors")
    if cor:
        return warn(f"rasdaemon recorded {cor} corrected error event{'s' * (cor != 1)}", evidence=evidence,
                    why="corrected errors cost retries and firmware pauses, and a rising count predicts a failure",
                    fix="ras-mc-ctl --summary; replace the part named if the count keeps rising", needs_root=True,
                    cause="corrected_errors")
    return ok("rasdaemon recorded no corrected or uncorrected errors", evidence=evidence)


# ---- mcelog ----------------------------------------------------------------

def _mcelog_records(text: str) -> List[List[str]]:
    """The records of mcelog's text log. Each starts with mcelog's disclaimer
    ("Hardware event. This is not a software error." in current versions,
    "HARDWARE ERROR. This is *NOT* a software problem!" in old ones), else with
    its "MCE <n>" line."""
    lines = text.splitlines()
    head = re.compile(r"^\s*(Hardware event\b|HARDWARE ERROR\b)")
    if not any(head.match(ln) for ln in lines):
        head = re.compile(r"^\s*MCE \d+\s*$")
    records: List[List[str]] = []
    for ln in lines:
        if head.match(ln):
            records.append([ln])
        elif records:
            records[-1].append(ln)
    return records


def _mcelog_uncorrected(rec: List[str]) -> bool:
    for ln in rec:
        m = re.search(r"\bSTATUS ([0-9a-fA-F]{1,16})\b", ln)
        if m:
            return bool(int(m[1], 16) & MCI_STATUS_UC)
    return any(re.search(r"\buncorrected error\b", ln, re.I) for ln in rec)


def _mcelog_summary(rec: List[str]) -> str:
    keep = [" ".join(ln.split()) for ln in rec
            if re.match(r"\s*(CPU \d|TIME |MCA: |Transaction: |STATUS |Memory |(un)?corrected error)", ln, re.I)]
    return _short("; ".join(k for k in keep if k), 300)


def _installed(p: Probe, name: str):
    """The path of the daemon ``name`` on a live node, "" when it is not installed, None on a
    recorded tree (where the question is about another machine)."""
    if not p.live:
        return None
    import shutil
    return shutil.which(name) or next((d for d in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.access(d, os.X_OK)),
                                      "")


@check("ras.mcelog")
def mcelog(p: Probe):
    """Machine-check events in mcelog's log (/var/log/mcelog).

    Counts the records mcelog wrote (each begins "Hardware event. This is
    not a software error.", or "HARDWARE ERROR" in old versions) and shows the
    latest one (CPU, bank, time, the decoded error). A record is uncorrected
    when bit 61 (UC) of its STATUS is set, or it says "Uncorrected error".
    The log keeps records across reboots; the TIME lines say when.

    warn: any record: the CPU, its caches or the memory reported a hardware
    error it corrected; a count that keeps rising points at the part that
    will fail.
    fail: an uncorrected record: data was lost or a process was killed.
    ok: the log is there and empty.
    skipped: no log (mcelog not installed; most current distributions use
    rasdaemon instead, see ras.rasdaemon), or not readable (it is often
    root-only).

    Fix: ``mcelog --client`` or the log itself names the bank and, for
    memory, the DIMM; replace the part at the next maintenance, at once for
    uncorrected errors.
    """
    path = p.path(MCELOG)
    if not p.exists(MCELOG):
        return skipped("mcelog: no log", evidence=f"/{MCELOG} is absent",
                       why="mcelog is not installed here (current distributions use rasdaemon: see ras.rasdaemon)")
    data = p.raw(MCELOG)
    if data is not None and not data.strip():
        return ok("mcelog: no machine-check events logged", evidence=f"{path} is empty")
    text = p.read(MCELOG)
    if text is None:
        if p.is_root or not os.path.exists(path) or os.access(path, os.R_OK):
            return skipped("mcelog: log not readable", evidence=f"{path}: not readable as text", cause="not_text")
        return skipped("mcelog: log not readable", evidence=f"{path}: not readable (root-only)", cause="not_root",
                       fix="run ceiling as root", needs_root=True)
    records = _mcelog_records(text)
    if not records:
        return ok("mcelog: no machine-check events logged", evidence=f"{path}: no records")
    unc = sum(1 for r in records if _mcelog_uncorrected(r))
    evidence = (f"{len(records)} records ({unc} uncorrected) in {path}; "
                f"latest: {_mcelog_summary(records[-1]) or _short(' '.join(records[-1]), 200)}")
    if unc:
        return fail(f"mcelog logged {unc} uncorrected machine-check event{'s' * (unc != 1)} "
                    f"({len(records)} in all)", evidence=evidence,
                    why="an uncorrected machine check loses data: a process was killed or the node may crash",
                    fix="drain the node; the record names the bank (and for memory, the DIMM): replace that part",
                    needs_root=True, cause="uncorrected_errors")
    return warn(f"mcelog logged {len(records)} machine-check event{'s' * (len(records) != 1)}", evidence=evidence,
                why="corrected hardware errors cost time to handle, and a rising count points at a part that will fail",
                fix="look at the bank and DIMM named in the log; replace the part at the next maintenance "
                    "if the count rises",
                needs_root=True, cause="corrected_errors")
