"""Reading the records libceiling_interpose.so writes (format: csrc/interpose/interpose.h).

One file may hold the records of many processes (every process of a job appends
its own with one write); a record cut short (no "end" line: the process died
while writing) is kept and marked, and lines that are not understood are skipped.
A process may write more than one record (a checkpoint at MPI_Finalize, then
its record at exit): ``latest`` keeps the one that supersedes the others.

This is the one place that checks a record: what it returns has an int for every
number and a str for every name, so the analysis (analysis/profile*.py) trusts
the types. A record file is the program's to write (and to damage: a program
may append to it, a disk may fill), so nothing in it may raise. A value is an
unsigned 64-bit decimal (at most 20 ASCII digits, checked before ``int()``, whose
4,300-digit limit then never applies), a signed 32-bit one for the few keys the
interposer writes as signed (``SIGNED``), or, for the keys in ``STRINGS``, text
in which every byte outside '!'..'~' and every '%' and '=' is %XX: the bytes are
the name's (a path is UTF-8 on any Linux that chose a locale since 2005), decoded
as UTF-8 with U+FFFD for what is not. A field whose value does not fit its key
is left out and counted (``skipped_fields``), as is a line outside any record
or not of the format's shape (``skipped_lines``) and a record of an unknown
format version or without a process id (``skipped_records``); ``finding`` says
so in one line of the report.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, List, Optional

from ..results.model import WARN, Finding

FORMAT_VERSION = 1          # CEIL_IP_FORMAT_VERSION: the version this reader understands
READ_BYTES = 1 << 24        # of each record file: a job's records are far smaller

# Keys whose values are names (ceil_ip_put_str in csrc/interpose/; tests/test_interpose_record.py
# checks the list against the sources): every other key is a number.
STRINGS = frozenset({"host", "exe", "reason", "by", "name", "family", "library", "class", "fn", "path",
                     "hist", "hist_ns", "hist_bytes"})
# Keys written with ceil_ip_put_i64, from C ints: a signed 32-bit range.
SIGNED = frozenset({"signal", "rank", "size", "thread_level"})
# "peer" is a world rank (unsigned), or "other" for the peers past the table (mpi.c).
WORDS = {"peer": frozenset({"other"})}

U64_MAX = (1 << 64) - 1
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
_U64 = re.compile(r"[0-9]{1,20}")            # ASCII digits only: int() also takes "١٢", "1_0", " 1"
_I32 = re.compile(r"-?[0-9]{1,10}")
_KEY = re.compile(r"[a-z0-9_]+")              # a key, and a line's first word (a module's name)
_NAME = re.compile(r"(?:[!-$&-<>-~]|%[0-9A-Fa-f]{2})*")   # printable ASCII but '%' and '=', and %XX
_ESC = re.compile(rb"%([0-9A-Fa-f]{2})")


class Records(list):
    """Records in file order (see ``parse``), and what reading them skipped."""
    skipped_records = 0
    skipped_lines = 0
    skipped_fields = 0

    def counts(self) -> Dict[str, int]:
        return {"records": self.skipped_records, "lines": self.skipped_lines, "fields": self.skipped_fields}

    def add_counts(self, other: "Records") -> None:
        self.skipped_records += other.skipped_records
        self.skipped_lines += other.skipped_lines
        self.skipped_fields += other.skipped_fields


_BAD = object()


def value(key: str, text: str) -> Any:
    """``text`` as its key's type (int or str), or _BAD; never raises."""
    if key in STRINGS:
        if not _NAME.fullmatch(text):
            return _BAD
        raw = _ESC.sub(lambda m: bytes([int(m.group(1), 16)]), text.encode("ascii"))
        return raw.decode("utf-8", errors="replace")
    if key in SIGNED:
        if not _I32.fullmatch(text):
            return _BAD
        v = int(text)
        return v if I32_MIN <= v <= I32_MAX else _BAD
    if _U64.fullmatch(text):
        v = int(text)
        return v if v <= U64_MAX else _BAD
    return text if text in WORDS.get(key, ()) else _BAD


def fields(words: List[str], out: Optional[Records] = None) -> Dict[str, Any]:
    """key=value words as a dict; a word that is no key=value, or a value that does not fit its
    key, is left out and counted in ``out.skipped_fields``."""
    got: Dict[str, Any] = {}
    bad = 0
    for w in words:
        k, eq, v = w.partition("=")
        x = value(k, v) if eq and _KEY.fullmatch(k) else _BAD
        if x is _BAD:
            bad += 1
        else:
            got[k] = x
    if out is not None:
        out.skipped_fields += bad
    return got


def parse(text: str) -> Records:
    """Records in file order: {"version", "process": fields, "modules": {name: fields},
    "lines": {module: [fields, ...]}, "end": fields ({} when cut short)}. A record of another
    format version, or whose process line has no pid, is skipped and counted, its lines with it."""
    out = Records()
    rec: Optional[Dict[str, Any]] = None     # the record being read
    skipping = False                         # inside a record that is skipped: its lines go with it
    for line in text.split("\n"):
        if not line:
            continue
        word, *rest = line.split(" ")
        if word == "ceiling-interpose":
            _close(out, rec)
            rec, skipping = None, rest != [str(FORMAT_VERSION)]
            if skipping:
                out.skipped_records += 1
            else:
                rec = {"version": FORMAT_VERSION, "process": {}, "modules": {}, "lines": {}, "end": {}}
        elif rec is None:
            # before the first record or after an "end": not the interposer's
            out.skipped_lines += 0 if skipping else 1
        elif not _KEY.fullmatch(word):
            out.skipped_lines += 1
        elif word == "process":
            rec["process"] = fields(rest, out)
        elif word == "module":
            f = fields(rest, out)
            if "name" in f:
                rec["modules"][f["name"]] = f
        elif word == "end":
            rec["end"] = fields(rest, out)
            _close(out, rec)
            rec = None
        else:
            rec["lines"].setdefault(word, []).append(fields(rest, out))
    _close(out, rec)
    return out


def _close(out: Records, rec: Optional[Dict[str, Any]]) -> None:
    if rec is None:
        return
    if isinstance(rec["process"].get("pid"), int):
        out.append(rec)
    else:
        out.skipped_records += 1


def read(paths: Iterable[str]) -> Records:
    """The records of every file in ``paths`` (the first READ_BYTES of each), in that order;
    a file that cannot be read is passed over."""
    out = Records()
    for path in paths:
        try:      # never through a link, never blocking on a FIFO: only the interposer's own files are records
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
            with open(fd, "rb") as f:
                data = f.read(READ_BYTES)
        except OSError:
            continue
        # undecodable bytes stay one character each, which no field allows: counted, not raised
        got = parse(data.decode("utf-8", errors="surrogateescape"))
        out.extend(got)
        out.add_counts(got)
    return out


def read_dir(path: str) -> Records:
    """The records of every file in the directory ``path``, by name."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return Records()
    return read(os.path.join(path, n) for n in names)


def latest(records: List[Dict[str, Any]]) -> Records:
    """One record per process (host, pid, start), in first-seen order: its last complete
    one (with an "end" line), else its last one. A checkpoint is superseded by the record
    the same process wrote at exit, which counts everything the checkpoint did and more.
    What reading skipped goes with them."""
    best: Dict[tuple, Dict[str, Any]] = {}
    order: List[tuple] = []
    for rec in records:
        p = rec.get("process", {})
        key = (p.get("host"), p.get("pid"), p.get("start_ns"))
        if key not in best:
            order.append(key)
            best[key] = rec
        elif rec.get("end") or not best[key].get("end"):
            best[key] = rec
    out = Records(best[k] for k in order)
    if isinstance(records, Records):
        out.add_counts(records)
    return out


def finding(records: Records) -> Optional[Finding]:
    """One line for the report when reading the records skipped anything, else None."""
    n = records.counts()
    if not any(n.values()):
        return None
    parts = []
    for k, one in (("fields", "field"), ("lines", "line")):
        if n[k]:
            parts.append(f"{n[k]} malformed {k if n[k] != 1 else one}")
    if n["records"]:
        parts.append(f"{n['records']} record{'s' if n['records'] != 1 else ''} of another format version or "
                     "without a process id")
    return Finding(
        id="profile.interposer.malformed", status=WARN,
        title=f"{_and(parts)} in the interposer's records {'were' if sum(n.values()) != 1 else 'was'} skipped",
        evidence=(f"skipped: {n['fields']} field(s) whose value did not fit its key, {n['lines']} line(s) outside "
                  f"any record or not of the format's shape, {n['records']} record(s) of another format version "
                  f"or without a process id; the figures are from the rest"),
        why="The records are written by the interposer inside the program, into a file the program can also "
            "write: a program that writes to it, a full disk, or an interposer of another ceiling version "
            "leaves values this ceiling cannot read. What was skipped is not counted in the figures.",
        fix="Profile again; if it recurs, check that the program does not write into $CEILING_INTERPOSE_OUT's "
            "directory and that every node runs the same ceiling.",
        data=dict(n))


def _and(parts: List[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
