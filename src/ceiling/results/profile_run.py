"""The application section (profile.py), part one: what one watched run of the program
gave, namely where its threads' time went, its I/O by class and by file, how it was
launched and watched, and its rates against this node's ceilings. One record per
dataclass, each field with its one-line description (schema.json mirrors them)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from .base import Record


# -- where the program's threads spent their time --------------------------------

@dataclass
class Spread(Record):
    """Minimum, mean and maximum of a figure over threads, ranks or runs."""

    min: float                     # smallest value
    mean: float                    # arithmetic mean
    max: float                     # largest value


@dataclass
class Shares(Record):
    """Where time went, as fractions of the threads' lives (they add up to 1)."""

    on_cpu: float                  # on a CPU, a fraction
    runq: float                    # runnable, waiting for a CPU, a fraction
    off_cpu: float                 # off any CPU (blocked, sleeping), a fraction


@dataclass
class PerThread(Record):
    """The split per thread: min / mean / max over the threads of each share."""

    on_cpu: Optional[Spread] = None     # on a CPU, fractions; null = no thread
    runq: Optional[Spread] = None       # waiting for a CPU, fractions; null = no thread
    off_cpu: Optional[Spread] = None    # off any CPU, fractions; null = no thread


@dataclass
class FromRecords(Record):
    """Processes whose threads joined the split from their interposer records (not sampled)."""

    processes: int = 0             # processes whose threads came from their records
    threads: int = 0               # threads those records gave
    without_proc_lines: int = 0    # records of processes that sent no thread times
    earlier_images: int = 0        # records of images before an exec, folded into the last


@dataclass
class Sampler(Record):
    """The /proc sampler's settings and its own cost."""

    interval_s: Optional[float] = None        # time between two readings of /proc, seconds
    cpu_s: Optional[float] = None             # CPU time the sampler used, seconds
    share_of_one_cpu: Optional[float] = None  # cpu_s over the run's wall time, a fraction of one CPU


@dataclass
class Runnable(Record):
    """The program's runnable threads per sample, against the CPUs it may use."""

    cpus: Optional[int] = None          # CPUs the program may use (its affinity)
    samples: int = 0                    # samples that saw a thread of it runnable
    max: Optional[int] = None           # most threads runnable at once
    mean: Optional[float] = None        # mean threads runnable per sample
    excess: Optional[float] = None      # runnable threads beyond the CPUs, a fraction of all runnable


@dataclass
class IoTotals(Record):
    """The program's /proc/PID/io totals, bytes (null = not read)."""

    rchar: Optional[int] = None         # bytes read through system calls (page cache included)
    wchar: Optional[int] = None         # bytes written through system calls
    read_bytes: Optional[int] = None    # bytes read from the device
    write_bytes: Optional[int] = None   # bytes sent to the device


@dataclass
class LoadProcess(Record):
    """Another process that ran beside the program."""

    pid: int                       # its process id
    comm: str                      # its command name
    cpu_share: float               # CPU it used, a fraction of one CPU


@dataclass
class CompetingLoad(Record):
    """Other load during the program's run (checks/load.py's finding)."""

    title: str                     # the finding's title
    evidence: str = ""             # what was read
    cause: str = ""                # the first cause ("competing_process", "steal", ...)
    causes: List[str] = field(default_factory=list)                 # every cause found
    processes: List[LoadProcess] = field(default_factory=list)      # the busiest other processes


# -- I/O -------------------------------------------------------------------------

@dataclass
class IoClass(Record):
    """The interposer's I/O calls of one class, summed over every process."""

    calls: int = 0                 # calls made
    errors: int = 0                # calls that failed
    bytes: int = 0                 # bytes moved
    ns: int = 0                    # time inside the calls, nanoseconds
    random: int = 0                # calls not where the previous one ended
    library_calls: int = 0         # stdio calls among them
    estimated: int = 0             # calls whose time was estimated (stdio buffering)


@dataclass
class FileRecord(Record):
    """One file the program used, all its processes on one node together."""

    path: str                      # the file's path as opened
    host: str = ""                 # node it was used on
    blksize: int = 0               # the file system's block size (st_blksize), bytes
    extent: int = 0                # highest offset reached, bytes
    opens: int = 0                 # opens
    reads: int = 0                 # read calls (POSIX, and stdio's library calls)
    read_bytes: int = 0            # bytes read
    writes: int = 0                # write calls (POSIX, and stdio's library calls)
    write_bytes: int = 0           # bytes written
    kernel_reads: Optional[int] = None        # read requests that reached the kernel (stdio's estimated)
    kernel_read_bytes: Optional[int] = None   # bytes they read
    kernel_writes: Optional[int] = None       # write requests that reached the kernel (stdio's estimated)
    kernel_write_bytes: Optional[int] = None  # bytes they wrote
    random: int = 0                # calls not where the previous one ended
    unaligned: int = 0             # calls that started off the file system's block
    syncs: int = 0                 # fsync and fdatasync calls
    flagged_writes: int = 0        # writes to it opened O_SYNC, O_DSYNC or O_DIRECT
    maps: int = 0                  # mmap calls on it
    map_bytes: int = 0             # bytes mapped
    recreated: int = 0             # times it was created again (O_CREAT|O_TRUNC of an existing path)
    meta_s: float = 0.0            # time in open, stat and close calls, seconds
    read_s: float = 0.0            # time in read calls, seconds
    write_s: float = 0.0           # time in write calls, seconds
    sync_s: float = 0.0            # time in sync calls, seconds
    flagged_write_s: float = 0.0   # time in the flagged writes, seconds
    time_s: float = 0.0            # meta_s + read_s + write_s + sync_s
    processes: int = 0             # processes that used it
    at_once: int = 0               # most processes that had it open at one time
    writers_at_once: int = 0       # most of them at a time one of them wrote
    api: List[str] = field(default_factory=list)       # APIs used: "POSIX", "stdio", "MPI-IO"
    oflags: List[str] = field(default_factory=list)    # "O_SYNC", "O_DSYNC", "O_DIRECT" it was opened with
    mapped: List[str] = field(default_factory=list)    # mapping protections: "read", "write", "shared"


@dataclass
class FilesRest(Record):
    """The files not listed, summed."""

    files: int = 0                 # files left out of the list
    bytes: int = 0                 # bytes they moved
    time_s: float = 0.0            # time inside their calls, seconds


@dataclass
class AsyncIo(Record):
    """Processes that set up I/O no wrapper counts."""

    io_uring: int = 0              # processes that set up an io_uring
    aio: int = 0                   # processes that set up Linux AIO (io_setup)


@dataclass
class Files(Record):
    """The per-file records of the interposer, summarised (analysis/profile_files.py)."""

    count: int = 0                 # files with a record
    lost: int = 0                  # files without a record (over the interposer's capacity)
    capacity: int = 0              # records one process can hold; 0 = not said
    shown: List[FileRecord] = field(default_factory=list)     # the files that took the most time
    rest: Optional[FilesRest] = None                          # the others, summed
    async_io: Optional[AsyncIo] = None                        # I/O set up outside the wrappers
    flagged: List[FileRecord] = field(default_factory=list)   # files opened O_SYNC, O_DSYNC or O_DIRECT, by bytes
    mapped: List[FileRecord] = field(default_factory=list)    # files mapped with mmap, by bytes


# -- how it was launched and watched -------------------------------------------------

@dataclass
class SignalNote(Record):
    """A signal ceiling received while the program ran."""

    signal: str                    # its name, e.g. "SIGTERM"
    sent_to: str = ""              # who it was sent to ("the process group", "ceiling alone", "unknown")
    passed_on: bool = False        # ceiling passed it to the program
    how: str = ""                  # who sent it ("from pid N", "from the kernel (a terminal)")
    why: str = ""                  # why it was not passed on


@dataclass
class SignalOutside(Record):
    """A signal that came before the program started or after it ended: noted, nothing stopped."""

    signal: str                    # its name
    when: str                      # "before the program started" or "after the program ended"


@dataclass
class LoaderReads(Record):
    """The dynamic loader's reads of the interposer, once per process image, taken off rchar and syscr."""

    images: int = 0                # process images that wrote a record (not children of fork without exec)
    read_bytes: int = 0            # bytes taken off rchar
    read_calls: int = 0            # calls taken off syscr
    per_image_bytes: Optional[int] = None   # bytes per image, as measured once per build (None: not measured)
    per_image_calls: Optional[int] = None   # read calls per image, as measured once per build
    how: str = ""                  # how they were measured, or why nothing was taken off


@dataclass
class ExecReads(Record):
    """What the kernel read to execute each recorded image's program, taken off rchar and syscr."""

    images: int = 0                # process images whose program's reads were known
    read_bytes: int = 0            # bytes taken off rchar
    read_calls: int = 0            # calls taken off syscr
    how: str = ""                  # what was counted, and the images left out


@dataclass
class InterposerIo(Record):
    """The interposer's own I/O, taken off the program's totals."""

    read_bytes: int = 0            # bytes it read (/proc/self, sysfs)
    written_bytes: int = 0         # bytes of its record files
    how: str = ""                  # how they were counted
    read_calls: int = 0            # read calls it made (/proc/self, sysfs), taken off syscr
    loader: Optional[LoaderReads] = None    # the dynamic loader's reads of it
    exec: Optional[ExecReads] = None        # the kernel's reads at exec, no system call of the program's


@dataclass
class Launch(Record):
    """How the program was started and waited for (probes/launch.py)."""

    how: str = ""                  # how it was started and waited for
    io_read_at_exit: Optional[bool] = None   # /proc/PID/io was read when it exited
    io_why: str = ""               # why it was not
    signals: List[SignalNote] = field(default_factory=list)          # signals while it ran
    interposer_io: Optional[InterposerIo] = None                     # the interposer's own I/O, taken off
    left_tree: List[str] = field(default_factory=list)               # processes that left its tree ("PID comm")
    signals_outside: List[SignalOutside] = field(default_factory=list)   # signals before or after it


@dataclass
class Skipped(Record):
    """Damaged parts of the interposer's records, skipped."""

    records: int = 0               # whole records
    lines: int = 0                 # lines
    fields: int = 0                # fields


@dataclass
class Interposer(Record):
    """The LD_PRELOAD interposer: whether it was put in, and what it wrote."""

    used: bool = False             # it was put into the program
    why: str = ""                  # why not
    records: int = 0               # records read back (one per process image)
    modules: List[str] = field(default_factory=list)   # its modules that wrote lines
    skipped: Optional[Skipped] = None                  # damaged parts skipped


@dataclass
class Wrapped(Record):
    """Every rank ran under a ceiling of its own (mpirun -n N ceiling profile -- ./app)."""

    rank: int                      # this ceiling's rank
    size: Optional[int] = None     # ranks in the job (None: the launcher did not say, as a bare PMIx server)


# -- against this node's ceilings ----------------------------------------------------

@dataclass
class Comparison(Record):
    """One of the program's rates against this node's ceiling (analysis/profile_ceilings.py)."""

    what: str                      # "I/O write", "MPI small messages", ...
    unit: str                      # unit of program and ceiling
    program: Optional[float] = None        # the program's figure; null = not known
    program_how: str = ""                  # how the program's figure was made
    through_calls: Optional[float] = None  # I/O: the rate through the calls, MB/s
    io_share: Optional[float] = None       # I/O: time inside I/O calls over the threads' time, a fraction
    device_bytes: Optional[int] = None     # I/O: bytes that reached the device
    page_cache_bytes: Optional[int] = None   # I/O: bytes the page cache served or absorbed
    ceiling: Optional[float] = None        # this node's figure; null = not measured
    why: str = ""                          # why there is no ceiling, or no comparison
    source: str = ""                       # where the ceiling comes from
    quick: Optional[bool] = None           # the ceiling was measured now, quickly
    share: Optional[float] = None          # program over ceiling (ceiling over program for a time), a fraction
    ratio: Optional[float] = None          # a time's multiple of the ceiling


@dataclass
class QuickCeiling(Record):
    """A ceiling measured quickly after the program (bench/quick_ceiling.py)."""

    what: str = ""                 # memory: "memory"
    dir: str = ""                  # storage: the directory measured
    threads: Optional[int] = None  # threads used
    bytes: Optional[int] = None    # storage: bytes written
    xfer_bytes: Optional[int] = None   # storage: bytes per request
    reps: Optional[int] = None     # repetitions
    io: str = ""                   # storage: "direct" or "buffered"
    direct_refused: str = ""       # storage: why O_DIRECT was refused
    seconds: Optional[float] = None    # time the measurement took, seconds
    why: str = ""                  # why it could not be measured


