"""Reading the records libceiling_interpose.so writes (format: csrc/interpose/interpose.h).

One file may hold the records of many processes (every process of a job appends
its own with one write; in a wrapped MPI launch rank 0's holds every rank's);
it is read whole, a line at a time, and a file that cannot be read is named
(``unread``); a record cut short (no "end" line: the process died while
writing) is kept and marked, and lines that are not understood are skipped.
A process may write more than one record (a checkpoint at MPI_Finalize, then
its record at exit): ``latest`` keeps the one that supersedes the others.

This is the one place that checks a record, and it gives it typed: each line as the
dataclass of its kind (probes/interpose_lines.py), with an int for every number and a str for
every name (which keys are which, and which lines there are: csrc/interpose/calls.def, through
probes/interpose_names.py), so the analysis (analysis/profile*.py) reads fields and trusts
their types. A record file is the program's to write (and to damage: a program
may append to it, a disk may fill), so nothing in it may raise. A value is an
unsigned 64-bit decimal (at most 20 ASCII digits, checked before ``int()``, whose
4,300-digit limit then never applies), a signed 32-bit one for the few keys the
interposer writes as signed (``SIGNED``), or, for the keys in ``STRINGS``, text
in which every byte outside '!'..'~' and every '%' and '=' is %XX: the bytes are
the name's (a path is UTF-8 on any Linux that chose a locale since 2005), decoded
as UTF-8 with U+FFFD for what is not, and kept (interpose_lines.Name.raw): a name of
digits stays a name, and two paths that differ in bytes that are not UTF-8 stay two. A
field whose value does not fit its key, repeats a key, or has a key its line does not
have, is left out and counted (``skipped_fields``), as is a line outside any record, not
of the format's shape, of no kind the table has, or the last of a file without its newline
(cut short: ``skipped_lines``), and a record of an unknown format version or without a
process id (``skipped_records``); the keys and lines the table lacks are named
(``Records.unknown``), and ``finding`` says all of it in one line of the report. No size
drops a record: a file is read whole, however many ranks' records it holds.
"""
from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Tuple

from ..results.model import WARN, Finding
from . import interpose_names
from .interpose_lines import KINDS, End, Hist, Name, Process, Record, field_of

FORMAT_VERSION = 1          # CEIL_IP_FORMAT_VERSION: the version this reader understands
# A record file is read whole, a line at a time: in a wrapped MPI launch rank 0's file holds every
# rank's record before its own (80 ranks with 600 files each: tens of MiB), so no size is too large.
# Only a line is bounded: the longest the interposer writes is a process line with a PATH_MAX path
# in %XX (under 13 KiB); a longer one is no record's, skipped and counted without being held.
LINE_BYTES = 1 << 20

# The keys' types are the interposer's own (csrc/interpose/calls.def, read through
# probes/interpose_names.py): STRINGS, the keys whose values are names; SIGNED, those written
# from C ints (a signed 32-bit range); WORDS, the words a number key may also be ("peer" is a
# world rank, or "other" for the peers past the table, mpi.c); every other key is an unsigned
# number. Read when first asked for (module __getattr__), so that importing this module needs
# no build.
_LAZY = {"STRINGS": lambda n: n.of_type("str"), "SIGNED": lambda n: n.of_type("i32"),
         "WORDS": lambda n: {k: frozenset({"other"}) for k in n.of_type("peer")}}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return _LAZY[name](interpose_names.names())
    raise AttributeError(name)


@lru_cache(maxsize=None)
def _types(where: str) -> Tuple[FrozenSet[str], FrozenSet[str], Dict[str, FrozenSet[str]]]:
    n = interpose_names.names()
    return _LAZY["STRINGS"](n), _LAZY["SIGNED"](n), _LAZY["WORDS"](n)

U64_MAX = (1 << 64) - 1
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
_U64 = re.compile(r"[0-9]{1,20}")            # ASCII digits only: int() also takes "١٢", "1_0", " 1"
_I32 = re.compile(r"-?[0-9]{1,10}")
_KEY = re.compile(r"[a-z0-9_]+")              # a key, and a line's first word (a module's name)
_NAME = re.compile(r"(?:[!-$&-<>-~]|%[0-9A-Fa-f]{2})*")   # printable ASCII but '%' and '=', and %XX
_ESC = re.compile(rb"%([0-9A-Fa-f]{2})")


class Records(list):
    """Records (``interpose_lines.Record``) in file order (see ``parse``), what reading them
    skipped, and the files (or their ends) that could not be read: ``unread``, [(file name,
    why)]. Of what was skipped, ``unknown`` names the keys and lines this ceiling's table does
    not have (a newer interposer's, or damage), and ``cut`` counts the last lines of files that
    were cut short (no newline: the writer was stopped mid-line); both are in the counts too."""
    skipped_records = 0
    skipped_lines = 0
    skipped_fields = 0
    cut = 0

    def __init__(self, *args):
        super().__init__(*args)
        self.unread: List[Tuple[str, str]] = []
        self.unknown: Dict[str, int] = {}

    def counts(self) -> Dict[str, int]:
        return {"records": self.skipped_records, "lines": self.skipped_lines, "fields": self.skipped_fields}

    def add_counts(self, other: "Records") -> None:
        self.skipped_records += other.skipped_records
        self.skipped_lines += other.skipped_lines
        self.skipped_fields += other.skipped_fields
        self.cut += getattr(other, "cut", 0)
        self.unread.extend(getattr(other, "unread", []))
        for k, n in getattr(other, "unknown", {}).items():
            self.unknown[k] = self.unknown.get(k, 0) + n

    def _unknown(self, what: str) -> None:
        self.unknown[what] = self.unknown.get(what, 0) + 1


_BAD = object()


def value(key: str, text: str, types=None) -> Any:
    """``text`` as its key's type (int, or a ``Name``), or _BAD; never raises. ``types``: _types's, given once."""
    strings, signed, words = types or _types(interpose_names.where())
    if key in strings:
        if not _NAME.fullmatch(text):
            return _BAD
        return Name(_ESC.sub(lambda m: bytes([int(m.group(1), 16)]), text.encode("ascii")))
    if key in signed:
        if not _I32.fullmatch(text):
            return _BAD
        v = int(text)
        return v if I32_MIN <= v <= I32_MAX else _BAD
    if _U64.fullmatch(text):
        v = int(text)
        return v if v <= U64_MAX else _BAD
    return text if text in words.get(key, ()) else _BAD


def fields(words: List[str], out: Optional[Records] = None) -> Dict[str, Any]:
    """key=value words as a dict, each value of its key's type; a word that is no key=value, a
    key given twice (its second value), or a value that does not fit its key is left out and
    counted in ``out.skipped_fields``."""
    raw, bad = _split(words)
    got: Dict[str, Any] = {}
    types = _types(interpose_names.where())
    for k, v in raw.items():
        x = value(k, v, types)
        if x is _BAD:
            bad += 1
        else:
            got[k] = x
    if out is not None:
        out.skipped_fields += bad
    return got


def _split(words: List[str]) -> Tuple[Dict[str, str], int]:
    """The key=value words as text, and how many were not one (or repeated a key)."""
    raw: Dict[str, str] = {}
    bad = 0
    for w in words:
        k, eq, v = w.partition("=")
        if not eq or not _KEY.fullmatch(k) or k in raw:
            bad += 1
        else:
            raw[k] = v
    return raw, bad


@lru_cache(maxsize=None)
def _kinds(where: str) -> Dict[str, List[Tuple[Any, type, FrozenSet[str], FrozenSet[str]]]]:
    """word -> [(line kind, its type, its keys, its lead's value set)] from the table."""
    n = interpose_names.names()
    out: Dict[str, list] = {}
    for ln in n.lines:
        out.setdefault(ln.word, []).append((ln, KINDS[(ln.word, ln.kind)], frozenset(ln.all_keys(n.buckets)),
                                            frozenset(n.sets[ln.set]) if ln.set else frozenset()))
    return out


def typed_line(word: str, words: List[str], out: Records) -> Any:
    """One line as its kind's dataclass (interpose_lines), or None when it is none of its word's
    kinds (counted: a skipped line; ``unknown`` when its word or lead names what the table
    lacks). A key its kind does not have is skipped and counted (``unknown`` names it), as is a
    value that does not fit its key."""
    kinds, types = _kinds(interpose_names.where()).get(word), _types(interpose_names.where())
    if not kinds:
        out.skipped_lines += 1
        out._unknown(f"{word} lines")
        return None
    raw, bad = _split(words)
    kind = None
    for k in kinds:
        lead = k[0].lead
        if lead is None or lead not in raw:
            continue
        v = value(lead, raw[lead], types)
        if v is not _BAD and (not k[3] or v in k[3]):
            kind = k
            break
    if kind is None:
        leads = [k[0].lead for k in kinds if k[0].lead in raw]
        if len(kinds) == 1 and not (leads and kinds[0][3]):
            kind = kinds[0]                     # a module of one kind of line: its lead is not needed
        else:
            out.skipped_lines += 1
            if leads:
                out._unknown(f"{word} {leads[0]}={raw[leads[0]]}")
            return None
    spec, cls, allowed, _ = kind
    got: Dict[str, Any] = {}
    for k, v in raw.items():
        if k not in allowed:
            bad += 1
            out._unknown(f"key {k} on {word} lines")
            continue
        x = value(k, v, types)
        if x is _BAD:
            bad += 1
        else:
            got[k] = x
    out.skipped_fields += bad
    if cls is Hist:
        lead = spec.lead
        return Hist(kind=lead, of=got.pop(lead, None), buckets=got)
    return cls(**{field_of(k): v for k, v in got.items()})


def parse(text: str) -> Records:
    """Records in file order (``interpose_lines.Record``). A record of another format version,
    or whose process line has no pid, is skipped and counted, its lines with it; a last line
    without its newline (the text was cut in the middle of it) is skipped and counted."""
    p = _Parser()
    *whole, last = text.split("\n")
    for line in whole:
        p.line(line)
    if last:
        p.cut()
    return p.finish()


class _Parser:
    """``parse`` a line at a time, so that a file is never held whole."""

    def __init__(self):
        self.out = Records()
        self.rec: Optional[Record] = None             # the record being read
        self.skipping = False                         # inside a record that is skipped: its lines go with it
        self.bytes = 0                                # read so far, of the file being read

    def line(self, line: str) -> None:
        out, rec = self.out, self.rec
        if not line:
            return
        word, *rest = line.split(" ")
        if word == "ceiling-interpose":
            _close(out, rec)
            self.rec, self.skipping = None, rest != [str(FORMAT_VERSION)]
            if self.skipping:
                out.skipped_records += 1
            else:
                self.rec = Record(version=FORMAT_VERSION)
        elif rec is None:
            # before the first record or after an "end": not the interposer's
            out.skipped_lines += 0 if self.skipping else 1
        elif not _KEY.fullmatch(word):
            out.skipped_lines += 1
        elif word == "process":
            rec.process = typed_line(word, rest, out) or Process()
        elif word == "module":
            m = typed_line(word, rest, out)
            if m is not None and m.name is not None:
                rec.modules[m.name] = m
        elif word == "end":
            rec.end = typed_line(word, rest, out) or End()
            _close(out, rec)
            self.rec = None
        else:
            ln = typed_line(word, rest, out)
            if ln is not None:
                rec.lines.setdefault(word, []).append(ln)

    def too_long(self) -> None:   # a line over LINE_BYTES: no record's line; it breaks no record it falls in
        self.out.skipped_lines += 1

    def cut(self) -> None:
        """The last line of a file without its newline: cut short, so none of it is trusted."""
        self.out.skipped_lines += 1
        self.out.cut += 1

    def finish(self) -> Records:
        _close(self.out, self.rec)
        self.rec = None
        return self.out


def _close(out: Records, rec: Optional[Record]) -> None:
    if rec is None:
        return
    if isinstance(rec.process.pid, int):
        out.append(rec)
    else:
        out.skipped_records += 1


def from_dicts(docs: Iterable[Dict[str, Any]]) -> Records:
    """Records in the dict form the reader gave before it was typed (``Record.as_dict``, the golden
    fixtures' form), written back as the interposer's text and parsed: checked as a file is."""
    def line(word: str, f: Dict[str, Any]) -> str:
        return " ".join([word] + [f"{k}={_escape(v) if isinstance(v, str) else v}" for k, v in f.items()]) + "\n"
    text = []
    for d in docs:
        text.append(f"ceiling-interpose {d.get('version', FORMAT_VERSION)}\n" + line("process", d.get("process", {})))
        text += [line("module", m) for m in d.get("modules", {}).values()]
        text += [line(w, f) for w, lines in d.get("lines", {}).items() for f in lines]
        text.append(line("end", d["end"]) if d.get("end") else "")
    return parse("".join(text))


def _escape(v: str) -> str:
    return "".join(chr(b) if 0x21 <= b <= 0x7E and b not in (0x25, 0x3D) else f"%{b:02X}"
                   for b in (v.raw if isinstance(v, Name) else v.encode("utf-8", errors="surrogateescape")))


def read(paths: Iterable[str]) -> Records:
    """The records of every file in ``paths``, whole, in that order; a file that cannot be
    read (or whose end cannot: an I/O error) is named in ``unread`` with why, and what was
    read of it kept."""
    out = Records()
    for path in paths:
        p = _Parser()
        try:      # never through a link, never blocking on a FIFO: only the interposer's own files are records
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
            with open(fd, "rb") as f:
                _lines(f, p)
        except OSError as e:
            done = f" after {p.bytes} bytes: the rest was not read" if p.bytes else ""
            out.unread.append((os.path.basename(path), f"{e.strerror or e}{done}"))
        got = p.finish()
        out.extend(got)
        out.add_counts(got)
    return out


def _lines(f, p: _Parser) -> None:
    """Every line of the binary file ``f`` to ``p``, none held past LINE_BYTES."""
    while True:
        raw = f.readline(LINE_BYTES)
        if not raw:
            return
        p.bytes += len(raw)
        if len(raw) == LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):      # the rest of it, dropped as it comes
                raw = f.readline(LINE_BYTES)
                p.bytes += len(raw)
            p.too_long()
            continue
        if not raw.endswith(b"\n"):        # the file's last line, cut short
            p.cut()
            return
        # undecodable bytes stay one character each, which no field allows: counted, not raised
        p.line(raw[:-1].decode("utf-8", errors="surrogateescape"))


def read_dir(path: str) -> Records:
    """The records of every file in the directory ``path``, by name."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return Records()
    return read(os.path.join(path, n) for n in names)


def latest(records: List[Record]) -> Records:
    """One record per process (host, pid, start), in first-seen order: its last complete
    one (with an "end" line), else its last one. A checkpoint is superseded by the record
    the same process wrote at exit, which counts everything the checkpoint did and more.
    What reading skipped goes with them."""
    best: Dict[tuple, Record] = {}
    order: List[tuple] = []
    for rec in records:
        p = rec.process
        key = (p.host, p.pid, p.start_ns)
        if key not in best:
            order.append(key)
            best[key] = rec
        elif rec.end is not None or best[key].end is None:
            best[key] = rec
    out = Records(best[k] for k in order)
    if isinstance(records, Records):
        out.add_counts(records)
    return out


def findings(records: Records, removed: str = "") -> List[Finding]:
    """What the report says about the records themselves: a record directory the program
    removed (``removed``: its path), files not read, what reading skipped, threads the
    interposer could not count."""
    out = [f for f in (_removed(removed) if removed else None, _unread(records), finding(records),
                       _threads_lost(records)) if f is not None]
    return out


def _removed(path: str) -> Finding:
    return Finding(
        id="profile.interposer.removed", status=WARN,
        title="The interposer's records were removed while the program ran: its I/O and MPI calls were not "
              "counted",
        evidence=f"{path}, made by ceiling before the program started, was gone when it ended; the profile "
                 "rests on /proc alone",
        why="ceiling keeps the interposer's records in a private directory under $TMPDIR (or /tmp) until the "
            "program ends; a job script or program that cleans that directory (rm -rf $TMPDIR/*) removes them "
            "with the rest.",
        fix="Clean $TMPDIR before ceiling starts or after it ends, or leave ceiling-profile-* alone; or give "
            "ceiling a directory the program does not clean: TMPDIR=$HOME/tmp ceiling profile -- ...",
        data={"path": path})


def _unread(records: Records) -> Optional[Finding]:
    unread = getattr(records, "unread", [])
    if not unread:
        return None
    return Finding(
        id="profile.interposer.unread", status=WARN,
        title=f"{len(unread)} of the interposer's record file{'s' if len(unread) != 1 else ''} could not be read "
              "whole: what they hold is not counted",
        evidence="; ".join(f"{name}: {why}" for name, why in unread[:20]) +
                 (f"; and {len(unread) - 20} more" if len(unread) > 20 else ""),
        why="A record file is the interposer's, in ceiling's private directory; one that cannot be opened or read "
            "(a program that changed its mode, a failing disk) leaves its processes out of the figures.",
        fix="Profile again; if it recurs, check the disk under $TMPDIR and that the program leaves ceiling-profile-* "
            "alone.",
        data={"files": [{"file": name, "why": why} for name, why in unread]})


def _threads_lost(records: Records) -> Optional[Finding]:
    hit = [r.process for r in records if (r.process.threads_lost or 0) > 0]
    if not hit:
        return None
    lost = sum(p.threads_lost for p in hit)
    slots = max(p.threads or 0 for p in hit)
    return Finding(
        id="profile.interposer.threads_lost", status=WARN,
        title=f"{lost} thread{'s were' if lost != 1 else ' was'} not counted: the interposer's {slots} thread "
              "slots ran out",
        evidence="; ".join(f"pid {p.pid} ({p.exe if p.exe is not None else '?'}): {p.threads or 0} threads "
                           f"counted, {p.threads_lost} not" for p in hit[:10]) +
                 (f"; and {len(hit) - 10} more processes" if len(hit) > 10 else ""),
        why="The interposer reserves its thread slots when the program starts (no allocation inside the "
            "program's calls); a thread that starts after they are all given out is not counted: its I/O and "
            "MPI calls are missing from the figures, which are then low.",
        fix=f"Reserve more slots (up to 1048576): CEILING_INTERPOSE_THREADS={min(max(2 * slots, 1024), 1 << 20)} "
            "ceiling profile -- ...",
        data={"threads_lost": lost, "slots": slots, "processes": len(hit)})


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
                  f"or without a process id" + _unknown_words(records) + "; the figures are from the rest"),
        why="The records are written by the interposer inside the program, into a file the program can also "
            "write: a program that writes to it, a full disk, or an interposer of another ceiling version "
            "leaves values this ceiling cannot read. What was skipped is not counted in the figures.",
        fix="Profile again; if it recurs, check that the program does not write into $CEILING_INTERPOSE_OUT's "
            "directory and that every node runs the same ceiling.",
        data=dict(n, **{k: v for k, v in (("unknown", dict(getattr(records, "unknown", {}))),
                                          ("cut", getattr(records, "cut", 0))) if v}))


def _unknown_words(records: Records) -> str:
    """What of the skipped the table does not know, and the files cut short, in words ("" for none)."""
    unknown = getattr(records, "unknown", {})
    cut = getattr(records, "cut", 0)
    out = ""
    if unknown:
        top = sorted(unknown.items(), key=lambda kv: (-kv[1], kv[0]))
        out += ("; not in this ceiling's table of the record (a newer interposer's, or damage): " +
                ", ".join(f"{k} ({n})" for k, n in top[:10]) + (f" and {len(top) - 10} more" if len(top) > 10 else ""))
    if cut:
        out += f"; {cut} file(s) ended in the middle of a line (cut short): that line was not read"
    return out


def unrecorded(seen: List[Tuple[int, str]], records: List[Record]) -> Optional[Finding]:
    """The processes of ``seen`` ((pid, comm): those the /proc sampler saw that the interposer
    was put into) with no record of this host, in one finding; None when every one wrote one.
    Their I/O and MPI calls are in no figure."""
    here = os.uname().nodename
    have = {r.process.pid for r in records if r.process.host == here}
    missing = [f"{pid} {comm}" for pid, comm in seen if pid not in have]
    if not missing:
        return None
    n = len(missing)
    return Finding(
        id="profile.interposer.no_record", status=WARN,
        title=f"{n} process{'es' if n != 1 else ''} of the program wrote no interposer record: "
              f"{'their' if n != 1 else 'its'} I/O and MPI calls are not counted",
        evidence="seen by the /proc sampler, no record: " + ", ".join(missing[:10]) +
                 (f" and {n - 10} more" if n > 10 else ""),
        why="The interposer writes a process's record when it exits, execs or dies of a catchable signal. "
            "It writes none for a process killed by SIGKILL (the kernel's OOM killer, a batch system's "
            "time limit, kill -9), one that ends by the raw exit_group system call without the C library "
            "(a Go program), one whose file descriptors are all in use with the soft limit already at the "
            "hard one (ulimit -Hn), or a statically linked or setuid program started by the program (the "
            "loader does not preload the interposer there).",
        fix="Check how the processes named ended (dmesg for the OOM killer, the job's log for a time limit); "
            "a Go program's or a static program's I/O is in the /proc totals (app.io.*) only.",
        data={"processes": missing})


def _and(parts: List[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
