"""Text shared by the terminal and HTML reports: times, machine facts, axis ticks.

Numbers themselves are formatted by ceiling.units (num, pct, size, with_unit),
which every layer shares so that a figure reads the same everywhere; they are
imported here so that reports say F.num, F.pct as before. Everything here is
plain text; callers escape it.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import re
from typing import Any, Dict, List, Sequence

from ..results.base import CV_WARN
from ..results.machine_view import MachineFacts, as_dict, peak_from  # noqa: F401
from ..units import (DASH, count, figure, num, pct, pct_sig, printable, quantity, size,  # noqa: F401
                     time_scale, with_unit)

def size_tick(nbytes: float) -> str:
    """Short size label for an axis tick: "4K", "512K", "32M", "1G"."""
    v = float(nbytes)
    for unit in ("", "K", "M", "G", "T"):
        if abs(v) < 1024 or unit == "T":
            text = f"{v:.0f}" if v == int(v) else num(v)
            return f"{text}{unit}" if unit else f"{text}B"
        v /= 1024.0
    return str(nbytes)


def duration(seconds: float) -> str:
    """Elapsed time for a progress line: "4.2 s", "1 min 05 s", "1 h 02 min"."""
    s = max(0.0, float(seconds))
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


def when(iso: str) -> str:
    """An ISO 8601 UTC time as "2024-05-02 09:14:03 UTC"."""
    if not iso:
        return "time unknown"
    text = iso.replace("T", " ")
    for utc in ("Z", "+00:00"):
        if text.endswith(utc):
            text = text[: -len(utc)]
            if "." in text[-7:]:
                text = text[: text.rindex(".")]     # fractions of a second say nothing here
            return text + " UTC"
    return text


# -- text from outside --------------------------------------------------------------

# What json.dumps (ASCII) writes for a character printable() replaces: \u0000-\u001f, \u007f and
# \u0080-\u009f escaped, \b \f \r in short. An escaped backslash before "u00.." or "r" matches too:
# a false alarm only sends that run the slow way.
_ESCAPED_CONTROL = re.compile(r"\\u00(?:[01][0-9a-fA-F]|7[fF]|[89][0-9a-fA-F])|\\[bfr]")


def may_need_printable(v: Any) -> bool:
    """Whether some string inside ``v`` (keys too; a run's dataclasses as their field values) may
    hold a character printable() replaces: False only when none does. One pass of the C JSON
    encoder instead of printable_value's walk (nor a to_dict first), since nearly every run holds
    none and is then shown as it is; anything the encoder refuses says True."""
    try:
        text = json.dumps(v, ensure_ascii=True, check_circular=False, default=_field_values)
    except (TypeError, ValueError, RecursionError):
        return True
    return _ESCAPED_CONTROL.search(text) is not None


def _field_values(obj: Any) -> List[Any]:
    names = _field_names(type(obj))
    if names is None:
        raise TypeError(type(obj).__name__)
    return [getattr(obj, n) for n in names]


@functools.lru_cache(maxsize=None)
def _field_names(cls) -> Any:
    return tuple(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else None


def printable_value(v: Any) -> Any:
    """Every string inside ``v`` (dicts, lists, keys too) made printable."""
    if isinstance(v, str):
        return printable(v)
    if isinstance(v, dict):
        return {printable_value(k): printable_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(printable_value(x) for x in v)
    return v


# -- machine facts in words ------------------------------------------------------------

def cache_name(cache: Dict[str, Any]) -> str:
    level = cache.get("level", "?")
    return f"L{level}d" if cache.get("type") == "data" else f"L{level}"


def topology(machine: Dict[str, Any]) -> str:
    """ "2 sockets × 64 cores × 2 threads = 256 CPUs", from what is known."""
    m = as_dict(machine)
    sockets, cores, threads = (max(0, count(m.get(k)) or 0) for k in ("sockets", "cores", "threads"))
    smt = count(m.get("smt")) or 1
    if not (sockets and cores):
        return f"{threads} CPUs" if threads else "unknown"
    per = cores // sockets if sockets else cores

    def plural(n: int, word: str) -> str:
        return f"{n} {word}" + ("" if n == 1 else "s")

    if cores % sockets or (threads and sockets * per * smt != threads):
        # sockets of unequal size, or sibling lists that do not add up (offline CPUs, a garbled
        # tree): totals, never a product that does not hold ("2 sockets × 0 cores")
        return f"{plural(sockets, 'socket')}, {plural(cores, 'core')}, {threads or '?'} CPUs (uneven)"
    text = f"{plural(sockets, 'socket')} × {plural(per, 'core')} × {plural(smt, 'thread')}"
    if threads:
        text += f" = {threads} CPUs"
    return text


def clocks(machine: Dict[str, Any]) -> List[str]:
    """One phrase per clock figure, each with its source."""
    c = as_dict(as_dict(machine).get("clocks"))
    unknowns = as_dict(machine).get("unknowns", {}) or {}
    parts = []
    for key, label in (("base", "base"), ("max", "max")):
        v = figure(c.get(f"{key}_ghz"))
        if v is not None:
            src = c.get(f"{key}_source") or "source not recorded"
            parts.append(f"{label} {num(v)} GHz ({src})")
        else:
            why = unknowns.get(f"clocks.{key}_ghz") or unknowns.get(f"clocks.{key}") or ""
            parts.append(f"{label} unknown" + (f" ({why})" if why else ""))
    single, all_ = figure(c.get("measured_single_ghz")), figure(c.get("measured_all_ghz"))
    if single is not None or all_ is not None:
        measured = []
        if single is not None:
            measured.append(f"{num(single)} GHz one core busy")
        if all_ is not None:
            measured.append(f"{num(all_)} GHz all cores busy")
        how = c.get("measured_method")
        parts.append("measured " + ", ".join(measured) + (f" ({how})" if how else ""))
        if c.get("measured_disturbed"):
            parts.append("disturbed: " + str(c["measured_disturbed"]))
    return parts


def _from(m: Dict[str, Any], key: str) -> str:
    """Where a figure not read from this node came from, for the text beside it ("" when read)."""
    src = str((m.get("sources") or {}).get(key) or "")
    if "families data file" in src:
        return " (assumed from the CPU family table, not read from this node)"
    if src.startswith("config"):
        return f" ({src})"
    return ""


def memory(machine: Dict[str, Any]) -> str:
    m = as_dict(machine)
    total = m.get("mem_total_bytes")
    text = size(total) if total else "unknown size"
    ch, mts = count(m.get("memory_channels")), count(m.get("memory_mts"))
    if ch and mts:
        text += f", {ch} channels{_from(m, 'memory_channels')} × {mts} MT/s{_from(m, 'memory_mts')} per socket"
    elif ch:
        text += f", {ch} channels per socket{_from(m, 'memory_channels')}, speed unknown"
    elif mts:
        text += f", {mts} MT/s, channel count unknown"
    else:
        why = (m.get("unknowns") or {}).get("memory_channels") or (m.get("unknowns") or {}).get("memory_mts")
        text += ", channels and speed unknown" + (f" ({why})" if why else "")
    return text


def cpu_model(machine: Dict[str, Any]) -> str:
    m = as_dict(machine)
    name = m.get("model_name") or "unknown CPU"
    extra = []
    if m.get("microarch"):
        extra.append(m["microarch"])
    if m.get("family") is not None and m.get("model") is not None:
        extra.append(f"family {m['family']} model {m['model']}")
    elif m.get("part"):
        extra.append(f"part {m['part']}")
    return name + (f" ({', '.join(extra)})" if extra else "")


def isa_text(machine: Dict[str, Any], limit: int = 12) -> str:
    m = as_dict(machine)
    isa: Sequence[str] = m.get("isa") or []
    text = " ".join(isa[:limit]) + (f" (+{len(isa) - limit} more)" if len(isa) > limit else "")
    extra = []
    if m.get("vector_bits"):
        extra.append(f"{m['vector_bits']}-bit vectors")
    if m.get("fma_units"):
        extra.append(f"{m['fma_units']} FMA pipes/core{_from(m, 'fma_units')}")
    if extra:
        text = (text + "; " if text else "") + ", ".join(extra)
    return text or "unknown"


def caches_text(machine: Dict[str, Any]) -> str:
    parts = []
    for c in MachineFacts(machine).caches():
        inst = c.get("instances")
        parts.append(f"{cache_name(c)} {size(c['size_bytes'])}" + (f" ×{inst}" if inst else ""))
    return ", ".join(parts) or "unknown"


def numa_text(machine: Dict[str, Any]) -> str:
    nodes = as_dict(machine).get("nodes") or []
    if not nodes:
        return "NUMA nodes unknown"
    return f"{len(nodes)} NUMA node" + ("" if len(nodes) == 1 else "s")


def affinity_text(machine: Dict[str, Any]) -> str:
    """The CPUs this process may use, of how many online, and who said so."""
    from ..sysfs import format_cpulist
    m = as_dict(machine)
    cpus = [c for c in (m.get("affinity") or []) if isinstance(c, int) and not isinstance(c, bool)]
    if not cpus:
        return "unknown"
    online = count(m.get("threads"))
    src = (m.get("sources") or {}).get("affinity")
    return (f"CPUs {format_cpulist(cpus)}" + (f" ({len(cpus)} of {online} online)" if online else "")
            + (f", {src}" if src else ""))


def limits_text(machine: Dict[str, Any]) -> str:
    """The cgroup's CPU quota, cpuset and memory limit, or that there is none."""
    cg = as_dict(machine).get("cgroup") or {}
    if not isinstance(cg, dict) or not cg:
        return "no cgroup information"
    parts = []
    quota = figure(cg.get("cpu_quota_cpus"))
    if quota is not None:
        parts.append(f"CPU quota {num(quota)} CPUs")
    if cg.get("cpuset"):
        parts.append(f"cpuset {cg['cpuset']}")
    mem = figure(cg.get("memory_limit_bytes"))
    if mem is not None:
        parts.append(f"memory limit {size(mem)}")
    if quota is None:
        parts.append("no CPU quota")
    if mem is None:
        parts.append("no memory limit")
    return f"cgroup {cg.get('version') or '?'}: " + ", ".join(parts)


# -- notes said once per run --------------------------------------------------------

# A high spread and competing load are said once under the metrics table, not on every row
# (runs stored before said them on each metric's note: they are taken out of the row here).
_SPREAD_NOTE = re.compile(r"spread \d+% \(CV\) is high(: [^;]*)?")
BUSY_NOTE = "other processes were busy during this measurement"
SPREAD_WHY = "other load or frequency changes; rerun on an idle node"
# Why a spread is high, by the metric's first name component, where it differs from SPREAD_WHY.
SPREAD_WHY_OF = {"storage": "other I/O on this file system or device caching; rerun, or use --size to write more",
                 "net": "other load on the CPUs or the network; rerun on idle nodes"}


def high_spread(m: Any) -> bool:
    st = getattr(m, "stats", None)
    cv = figure(getattr(st, "cv", None))
    return bool(st is not None and (count(getattr(st, "n", 0)) or 0) > 1 and cv is not None and cv > CV_WARN)


def row_note(m: Any) -> str:
    """The metric's own note without what ``run_notes`` says once for the whole run."""
    parts = [p.strip() for p in str(getattr(m, "note", "") or "").split(";")]
    return "; ".join(p for p in parts if p and p != BUSY_NOTE and not _SPREAD_NOTE.fullmatch(p))


def _names(ms: Sequence[Any], limit: int = 6) -> str:
    names = [str(m.name) for m in ms]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def run_notes(metrics: Sequence[Any], marked: bool = True) -> List[str]:
    """What the metrics table says once, below it: the metrics of high spread (``marked``: the
    table shows their CV with a "!"; a table too narrow for the CV column does not), and those
    measured while other processes were busy."""
    out = []
    by_why: Dict[str, List[Any]] = {}
    for m in metrics:
        if high_spread(m):
            by_why.setdefault(SPREAD_WHY_OF.get(str(m.name).split(".", 1)[0], SPREAD_WHY), []).append(m)
    for why, spread in by_why.items():
        mark = " (marked !)" if marked else ""
        out.append(f"CV above {CV_WARN:.0%}{mark} on {len(spread)} metric{'s' if len(spread) > 1 else ''}: "
                   f"{_names(spread)}: {why}")
    busy = [m for m in metrics if BUSY_NOTE in str(getattr(m, "note", "") or "")]
    if busy:
        out.append(f"Other processes were busy while {len(busy)} metric{'s were' if len(busy) > 1 else ' was'} "
                   f"measured ({_names(busy)}): see the competing-load finding")
    return out


def mpi_text(run: Any, short: bool = False) -> str:
    """The MPI a run was measured with, from what it recorded (environment["mpi"], else
    Run.job): library, device, launcher and ranks, transport; ``short``: library and device only.
    "" for a run not made under MPI."""
    mpi = as_dict((run.environment or {}).get("mpi"))
    job = run.job
    lib = mpi.get("library") or (job.mpi_library if job is not None else "")
    if not lib:
        return ""
    if short:
        return str(lib)
    text = str(lib)
    if job is not None and job.launcher:
        text += f"; {job.launcher}, {job.ranks} ranks on {job.nodes} node{'s' if job.nodes != 1 else ''}"
    if mpi.get("transport"):
        text += f"; transport: {mpi['transport']}"
    if mpi.get("path"):
        text += f"; {mpi['path']}"
    return text


def page_notes(m: Any) -> List[str]:
    """A latency figure's pages, and what base pages gave where they were measured too."""
    ctx = m.context or {}
    out = []
    if ctx.get("pages"):
        out.append(f"measured on {ctx['pages']}")
    if ctx.get("small_pages"):
        out.append(f"base pages: {ctx['small_pages']}")
    return out
