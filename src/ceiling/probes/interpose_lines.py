"""The interposer's record as types: one dataclass per kind of line (csrc/interpose/calls.def's
CEIL_IP_LINES), and ``Record``, one process image's record.

A field is its key's name (``class_`` for class, a Python keyword); a size histogram's line is
``Hist`` (its lead key's value in ``of``, the 18 buckets in ``buckets``). A field is None where
the line did not have the key (an older interposer's line, or a value that did not fit its key
and was skipped): the analysis says what a missing value means where it reads it.
tests/test_interpose_names.py checks that every line kind of the table has its class here with
a field for each of its keys, no more and no fewer.

A name (``Name``) is the text of its bytes, decoded as UTF-8 with U+FFFD for what is not, and
keeps the bytes themselves in ``raw``: two files whose names differ only in bytes that are not
UTF-8 are two files (profile_files keys on ``raw``), and the report shows the text.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple, Type, TypeVar, Union


class Name(str):
    """A name from the record: the text, and the bytes it was written as (``raw``)."""
    raw: bytes

    def __new__(cls, raw: bytes) -> "Name":
        s = super().__new__(cls, raw.decode("utf-8", errors="replace"))
        s.raw = raw
        return s

    def __reduce__(self):
        return (Name, (self.raw,))


U = Optional[int]
S = Optional[str]


@dataclass
class Process:
    pid: U = None
    ppid: U = None
    forked: U = None
    host: S = None
    exe: S = None
    reason: S = None
    signal: U = None
    by: S = None
    threads: U = None
    slots: U = None
    threads_lost: U = None
    start_ns: U = None
    end_ns: U = None
    start_unix_ns: U = None
    utime_us: U = None
    stime_us: U = None


@dataclass
class Module:
    name: S = None
    version: U = None
    enabled: U = None


@dataclass
class End:
    pid: U = None
    truncated: U = None
    self_read: U = None
    self_reads: U = None


@dataclass
class NullCounts:
    flushes: U = None
    calls: U = None
    threads: U = None


@dataclass
class Work:
    """work.c's line: the work the program stated with ceiling_work, summed over its threads."""
    calls: U = None
    flops: U = None
    bytes: U = None
    refused: U = None
    threads: U = None


@dataclass
class Region:
    """region.c's line: one user region's pairs ended and their inclusive time, every thread."""
    name: S = None
    calls: U = None
    ns: U = None
    threads: U = None


@dataclass
class RegionsLost:
    """region.c's last line, only when the process named more regions than it counts."""
    lost: U = None


@dataclass
class IOClass:
    """posix's class lines (random on read and write only); stdio's and copy's have no random."""
    class_: S = None
    calls: U = None
    errors: U = None
    bytes: U = None
    ns: U = None
    random: U = None


@dataclass
class StreamClass:
    """stdio's and copy's class lines."""
    class_: S = None
    calls: U = None
    errors: U = None
    bytes: U = None
    ns: U = None


@dataclass
class KernelRequests:
    """stdio's estimate of the requests its streams' buffers sent the kernel."""
    class_: S = None
    requests: U = None
    bytes: U = None


@dataclass
class FnCalls:
    fn: S = None
    calls: U = None


@dataclass
class Hist:
    """A size histogram: ``kind`` its line's (hist, hist_ns or hist_bytes), ``of`` what it is of
    (a class, or MPI's p2p, post, coll, io), ``buckets`` bucket -> count (those present)."""
    kind: str = "hist"
    of: S = None
    buckets: Dict[str, int] = field(default_factory=dict)


@dataclass
class FilesSummary:
    files: U = None
    lost: U = None
    max: U = None
    io_uring: U = None
    aio: U = None


@dataclass
class File:
    id: U = None
    dev: U = None
    ino: U = None
    blksize: U = None
    api: U = None
    opens: U = None
    meta_ns: U = None
    reads: U = None
    read_bytes: U = None
    read_ns: U = None
    writes: U = None
    write_bytes: U = None
    write_ns: U = None
    random: U = None
    unaligned: U = None
    syncs: U = None
    sync_ns: U = None
    extent: U = None
    flagged_writes: U = None
    flagged_write_ns: U = None
    maps: U = None
    map_bytes: U = None
    stdio_reads: U = None              # the stdio library calls among reads, writes and their bytes
    stdio_read_bytes: U = None
    stdio_writes: U = None
    stdio_write_bytes: U = None
    stdio_kernel_reads: U = None       # what the file's streams' buffers asked of the kernel (stdio.c's estimate)
    stdio_kernel_read_bytes: U = None
    stdio_kernel_writes: U = None
    stdio_kernel_write_bytes: U = None
    stdio_pending_writes: U = None     # its streams with bytes in their buffers when the record was written
    stdio_pending_write_bytes: U = None
    recreated: U = None
    oflags: U = None
    map_prot: U = None
    first_open_ns: U = None
    last_close_ns: U = None
    path: S = None


@dataclass
class Task:
    task: U = None
    life_ns: U = None
    run_ns: U = None
    runq_ns: U = None
    utime_ticks: U = None
    stime_ticks: U = None


@dataclass
class ProcSummary:
    tasks: U = None
    shown: U = None
    schedstat: U = None
    clk_tck: U = None
    maxrss_kb: U = None
    rchar: U = None
    wchar: U = None
    read_bytes: U = None
    write_bytes: U = None


@dataclass
class MpiHead:
    rank: U = None
    size: U = None
    family: S = None
    world: U = None
    thread_level: U = None
    init_ns: U = None
    finalize_ns: U = None
    library: S = None
    comms_lost: U = None


@dataclass
class MpiCounts:
    """mpi's class and fn lines (one of class_ and fn is set)."""
    class_: S = None
    fn: S = None
    calls: U = None
    ns: U = None
    bytes: U = None


@dataclass
class Peer:
    peer: Union[int, str, None] = None     # a world rank, or "other"
    calls: U = None
    bytes: U = None
    ns: U = None


Line = Union[NullCounts, Work, Region, RegionsLost, IOClass, StreamClass, KernelRequests, FnCalls, Hist,
             FilesSummary, File, Task, ProcSummary, MpiHead, MpiCounts, Peer]

# calls.def's line kinds -> their types; (word, kind) as in CEIL_IP_LINES
KINDS: Dict[Tuple[str, str], type] = {
    ("process", "process"): Process, ("module", "module"): Module, ("end", "end"): End,
    ("null", "counts"): NullCounts, ("work", "work"): Work,
    ("region", "region"): Region, ("region", "lost"): RegionsLost,
    ("posix", "class"): IOClass, ("posix", "hist"): Hist, ("posix", "fn"): FnCalls,
    ("stdio", "class"): StreamClass, ("stdio", "kernel"): KernelRequests, ("stdio", "fn"): FnCalls,
    ("copy", "class"): StreamClass, ("copy", "fn"): FnCalls,
    ("file", "summary"): FilesSummary, ("file", "file"): File,
    ("proc", "task"): Task, ("proc", "summary"): ProcSummary,
    ("mpi", "mpi"): MpiHead, ("mpi", "class"): MpiCounts, ("mpi", "hist"): Hist, ("mpi", "hist_ns"): Hist,
    ("mpi", "hist_bytes"): Hist, ("mpi", "fn"): MpiCounts, ("mpi", "peer"): Peer,
}


def field_of(key: str) -> str:
    """The field a key is read into: its name, but class_ for class."""
    return "class_" if key == "class" else key


def key_of(name: str) -> str:
    return "class" if name == "class_" else name


def fields_of(t: type) -> List[str]:
    return [f.name for f in dataclasses.fields(t)]


L = TypeVar("L")


@dataclass
class Record:
    """One process image's record: its process line, modules (by name), its end line (None:
    cut short, the process died while writing it) and its modules' lines by first word, each a
    typed line, in the record's order."""
    process: Process = field(default_factory=Process)
    modules: Dict[str, Module] = field(default_factory=dict)
    end: Optional[End] = None
    lines: Dict[str, List[Line]] = field(default_factory=dict)
    version: int = 1

    def of(self, word: str, t: Type[L]) -> List[L]:
        """The lines of module ``word`` of type ``t``, in order."""
        return [ln for ln in self.lines.get(word, ()) if type(ln) is t]

    def has(self, word: str) -> bool:
        """Whether the record has any line of module ``word``."""
        return bool(self.lines.get(word))

    def iter(self, word: str) -> Iterator[Line]:
        return iter(self.lines.get(word, ()))

    def as_dict(self) -> dict:
        """The record as the dict the reader gave before it was typed (the golden fixtures'
        form): {"version", "process", "modules", "lines": {word: [fields]}, "end"}, absent
        keys left out."""
        return {"version": self.version, "process": _plain(self.process),
                "modules": {n: _plain(m) for n, m in self.modules.items()},
                "lines": {w: [_plain(ln) for ln in lines] for w, lines in self.lines.items()},
                "end": _plain(self.end) if self.end is not None else {}}


def _plain(x) -> dict:
    if isinstance(x, Hist):
        return {x.kind: x.of, **x.buckets} if x.of is not None else dict(x.buckets)
    return {key_of(k): v for k, v in dataclasses.asdict(x).items() if v is not None}
