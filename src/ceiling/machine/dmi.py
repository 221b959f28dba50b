"""DMI/SMBIOS: the system's name and its DIMM population.

The system strings come from /sys/class/dmi/id (world-readable). DIMMs are
SMBIOS type 17 records ("Memory Device"): read raw from
/sys/firmware/dmi/entries/17-*/raw when readable (root), else from the text
of ``dmidecode -t memory`` (also root). Without root the answer is ``None``
with the reason; nothing is guessed from the memory size.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..sysfs import Root, parse_size

SYSTEM_FIELDS = ("sys_vendor", "product_name", "product_version", "board_vendor", "board_name",
                 "bios_vendor", "bios_version", "bios_date", "chassis_vendor")
_PLACEHOLDERS = {"", "to be filled by o.e.m.", "not specified", "default string", "n/a", "none",
                 "system product name", "system manufacturer", "not applicable"}

# SMBIOS type 17 "Memory Type" byte (DSP0134).
MEMORY_TYPES = {0x12: "DDR", 0x13: "DDR2", 0x18: "DDR3", 0x1A: "DDR4", 0x1B: "LPDDR", 0x1C: "LPDDR2",
                0x1D: "LPDDR3", 0x1E: "LPDDR4", 0x1F: "Logical non-volatile device", 0x20: "HBM",
                0x21: "HBM2", 0x22: "DDR5", 0x23: "LPDDR5", 0x24: "HBM3", 0x07: "RAM", 0x02: "Unknown",
                0x01: "Other"}

Runner = Callable[[], Tuple[int, str, str]]


def read_system(root: Root) -> Dict[str, str]:
    """DMI identity strings that say something (placeholders dropped)."""
    out = {}
    for f in SYSTEM_FIELDS:
        v = root.read(f"sys/class/dmi/id/{f}")
        if v and v.strip().lower() not in _PLACEHOLDERS:
            out[f] = v.strip()
    return out


# ---- parsing -------------------------------------------------------------

def _speed(text: Optional[str]) -> Optional[int]:
    # dmidecode < 3.2 wrote "MHz" for what SMBIOS defines as the transfer rate.
    m = re.match(r"\s*(\d+)\s*(MT/s|MHz)", text or "")
    return int(m.group(1)) if m and int(m.group(1)) > 0 else None


def parse_dmidecode(text: str) -> List[Dict[str, Any]]:
    """The "Memory Device" records of ``dmidecode -t memory`` output, one dict per slot."""
    rows: List[Dict[str, Any]] = []
    cur: Optional[Dict[str, str]] = None
    expect_title = False
    for line in text.splitlines():
        if line.startswith("Handle "):
            if cur is not None:
                rows.append(_row_from_text(cur))
            cur = None
            expect_title = "DMI type 17," in line
            continue
        if expect_title:
            expect_title = False
            if line.strip() == "Memory Device":
                cur = {}
            continue
        if cur is not None and line.startswith("\t") and not line.startswith("\t\t"):
            key, sep, val = line.strip().partition(":")
            if sep:
                cur[key.strip()] = val.strip()
    if cur is not None:
        rows.append(_row_from_text(cur))
    return rows


def _row_from_text(d: Dict[str, str]) -> Dict[str, Any]:
    size_text = d.get("Size", "")
    populated = bool(size_text) and not re.match(r"(No Module Installed|Not Installed|0\b)",
                                                   size_text, flags=re.I)
    configured = d.get("Configured Memory Speed") or d.get("Configured Clock Speed")
    return {
        "locator": d.get("Locator", ""),
        "bank_locator": d.get("Bank Locator", ""),
        "populated": populated,
        "size_bytes": parse_size(size_text) if populated else None,
        "type": d.get("Type", "") if populated else "",
        "speed_mts": _speed(d.get("Speed")),
        "configured_mts": _speed(configured),
        "manufacturer": d.get("Manufacturer", "") if populated else "",
        "part_number": (d.get("Part Number") or "").strip() if populated else "",
        "rank": int(d["Rank"]) if d.get("Rank", "").isdigit() else None,
    }


def parse_smbios17(raw: bytes) -> Optional[Dict[str, Any]]:
    """One raw SMBIOS type 17 structure (formatted area + strings), as DSP0134 lays it out."""
    if len(raw) < 0x15 or raw[0] != 17:
        return None
    length = min(raw[1], len(raw))   # a truncated record declares more than it holds
    strings = [s.decode("latin-1").strip() for s in raw[length:].split(b"\0")]

    def string(off: int) -> str:
        if off >= length:
            return ""
        i = raw[off]
        return strings[i - 1] if 0 < i <= len(strings) else ""

    def word(off: int) -> Optional[int]:
        return int.from_bytes(raw[off:off + 2], "little") if off + 2 <= length else None

    def dword(off: int) -> Optional[int]:
        return int.from_bytes(raw[off:off + 4], "little") if off + 4 <= length else None

    size = word(0x0C)
    size_bytes: Optional[int] = None
    if size == 0x7FFF:
        ext = dword(0x1C)
        size_bytes = (ext & 0x7FFFFFFF) << 20 if ext else None
    elif size not in (None, 0, 0xFFFF):
        size_bytes = (size & 0x7FFF) << (10 if size & 0x8000 else 20)
    populated = size not in (None, 0)
    speed = word(0x15)
    if speed == 0xFFFF:
        speed = dword(0x54)
    conf = word(0x20)
    if conf == 0xFFFF:
        conf = dword(0x58)
    attrs = raw[0x1B] if length > 0x1B else 0
    return {
        "locator": string(0x10),
        "bank_locator": string(0x11),
        "populated": populated,
        "size_bytes": size_bytes,
        "type": MEMORY_TYPES.get(raw[0x12], f"0x{raw[0x12]:02x}") if populated else "",
        "speed_mts": speed or None,
        "configured_mts": conf or None,
        "manufacturer": string(0x17) if populated else "",
        "part_number": string(0x1A) if populated else "",
        "rank": (attrs & 0xF) or None,
    }


# ---- reading -------------------------------------------------------------

def run_dmidecode() -> Tuple[int, str, str]:
    """Run ``dmidecode -t memory``: (exit code, stdout, stderr); 127 when it is not installed."""
    exe = shutil.which("dmidecode") or next(
        (p for p in ("/usr/sbin/dmidecode", "/sbin/dmidecode") if os.access(p, os.X_OK)), None)
    if not exe:
        return 127, "", "dmidecode is not installed"
    try:
        cp = subprocess.run([exe, "-t", "memory"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as e:
        return 126, "", str(e)
    return cp.returncode, cp.stdout, cp.stderr


def _from_sysfs(root: Root) -> Tuple[Optional[List[Dict[str, Any]]], Optional[str]]:
    base = "sys/firmware/dmi/entries"
    names = [n for n in root.listdir(base) if re.fullmatch(r"17-\d+", n)]
    if not names:
        return None, None
    rows, denied = [], False
    for n in sorted(names, key=lambda s: int(s.split("-")[1])):
        try:
            raw = root.p(f"{base}/{n}/raw").read_bytes()
        except PermissionError:
            denied = True
            break
        except OSError:
            continue
        row = parse_smbios17(raw)
        if row:
            rows.append(row)
    if denied:
        return None, f"{root.p(base)}/17-*/raw: permission denied"
    return (rows or None), (None if rows else "no readable SMBIOS type 17 records")


# A recorded tree may carry the output of `dmidecode -t memory` (taken as root
# on the machine it describes) under this name at its top.
RECORDED = "dmidecode-memory.txt"


# Why the DIMM records are missing (Machine.dimms_unread): each calls for a different fix.
NOT_ROOT = "not_root"            # the records exist and only root may read them
TOOL_MISSING = "tool_missing"    # dmidecode is not installed and the kernel's copy cannot be read
NO_TABLES = "no_tables"          # the firmware (or hypervisor) provides no SMBIOS tables at all
NO_RECORDS = "no_records"        # tables, but no memory device in them
TOOL_FAILED = "tool_failed"      # dmidecode failed otherwise
NOT_RECORDED = "not_recorded"    # a recorded tree without them


def _has_tables(root: Root) -> bool:
    """Whether the kernel found SMBIOS tables (it exports them since Linux 4.2; the
    directory is world-readable even where the tables are not)."""
    return root.exists("sys/firmware/dmi/tables/smbios_entry_point") or root.exists("sys/firmware/dmi/entries")


def read_dimms(root: Root, runner: Optional[Runner] = None
               ) -> Tuple[Optional[List[Dict[str, Any]]], Optional[str], str, str]:
    """(DIMM rows, reason when None, source, cause when None: one of the words above).

    Tries the raw SMBIOS records under ``root``; then, on a live system (or
    when a ``runner`` is given, as tests do), ``dmidecode -t memory``; in a
    recorded tree, its ``dmidecode-memory.txt``.
    """
    rows, why_sysfs = _from_sysfs(root)
    if rows:
        return rows, None, str(root.p("sys/firmware/dmi/entries")) + "/17-*/raw (SMBIOS type 17)", ""
    denied = why_sysfs is not None and "permission denied" in why_sysfs
    if runner is None and not root.live:
        recorded = root.read(RECORDED)
        if recorded:
            rows = parse_dmidecode(recorded)
            if rows:
                return rows, None, str(root.p(RECORDED)), ""
        return None, why_sysfs or "no SMBIOS memory records in this tree", "", NOT_RECORDED
    rc, out, err = (runner or run_dmidecode)()
    if rc == 127:
        reason = "dmidecode is not installed"
        if denied:
            return None, f"{reason}; {why_sysfs}", "", NOT_ROOT
        if not _has_tables(root):
            return None, (f"no SMBIOS/DMI tables on this system, common in VMs and containers (no "
                          f"{root.p('sys/firmware/dmi/tables')}); {reason}"), "", NO_TABLES
        return None, reason + (f"; {why_sysfs}" if why_sysfs else ""), "", TOOL_MISSING
    text = out + "\n" + err
    if "Permission denied" in text:
        detail = next((ln.strip() for ln in text.splitlines() if "Permission denied" in ln), err.strip())
        return None, f"dmidecode needs root ({detail})", "", NOT_ROOT
    if "No SMBIOS nor DMI entry point" in text or (rc != 0 and "No such file or directory" in text):
        detail = next((ln.strip() for ln in text.splitlines()
                       if "No such file" in ln or "No SMBIOS" in ln), err.strip())
        return None, f"no SMBIOS/DMI tables on this system, common in VMs and containers ({detail})", "", NO_TABLES
    if rc != 0:
        return None, f"dmidecode failed (exit {rc}: {err.strip()[:120]})", "", TOOL_FAILED
    rows = parse_dmidecode(out)
    if not rows:
        return None, "dmidecode lists no memory devices (common in VMs and containers)", "", NO_RECORDS
    return rows, None, "dmidecode -t memory", ""


# ---- summary -------------------------------------------------------------

_CHANNEL_RULES = (
    # Bank locator "P0_Node0_Channel0_Dimm0" (AMD platforms).
    (re.compile(r"\bP(\d+)[_ ]Node(\d+)[_ ]Channel(\d+)", re.I), lambda m: (int(m[1]), f"{m[2]}.{m[3]}")),
    # Bank locator "P0 CHANNEL A".
    (re.compile(r"\bP(\d+)[_ ]CHANNEL[_ ]?([A-Z])\b", re.I), lambda m: (int(m[1]), m[2].upper())),
    # Locator "CPU1_DIMM_A1", "P1-DIMMA1", "CPU0_DIMM_B0", "P2_DIMM_C2".
    (re.compile(r"\b(?:CPU|PROC|SOCKET|P)[ _-]?(\d+)[ _-]*(?:DIMM|CHANNEL|CH)?[ _-]*([A-Z])[ _-]?\d+\b", re.I),
     lambda m: (int(m[1]), m[2].upper())),
)


def channel_of(row: Dict[str, Any]) -> Optional[Tuple[int, str]]:
    """(socket as written, channel name) when the slot's locators name both."""
    for text in (row.get("bank_locator", ""), row.get("locator", "")):
        for rx, conv in _CHANNEL_RULES:
            m = rx.search(text or "")
            if m:
                return conv(m)
    return None


def summarize(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Slots, populated DIMMs, their speed and type, and populated channels per socket when the locators say."""
    pop = [r for r in rows if r.get("populated")]
    speeds = sorted({r["configured_mts"] or r["speed_mts"] for r in pop
                     if r.get("configured_mts") or r.get("speed_mts")})
    out: Dict[str, Any] = {
        "slots": len(rows), "populated": len(pop),
        "total_bytes": sum(r["size_bytes"] or 0 for r in pop) if pop else 0,
        "types": sorted({r["type"] for r in pop if r.get("type")}),
        "mts": speeds[0] if speeds else None,          # the slowest DIMM sets the channel speed
        "mts_all": speeds,
        "channels_by_socket": None, "channels_reason": "",
    }
    if pop and not speeds:
        out["mts_reason"] = "the DIMM records give no speed"
    if not pop:
        out["channels_reason"] = "no populated DIMM slot"
        return out
    chans: Dict[int, set] = {}
    for r in pop:
        c = channel_of(r)
        if c is None:
            out["channels_reason"] = (f"DIMM locators do not name socket and channel "
                                      f"(e.g. {r.get('locator')!r} / {r.get('bank_locator')!r})")
            return out
        chans.setdefault(c[0], set()).add(c[1])
    out["channels_by_socket"] = {s: len(v) for s, v in sorted(chans.items())}
    return out
