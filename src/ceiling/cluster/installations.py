"""The MPI installations on this node besides the one a run measured.

A user reads "MPI latency 1.08 µs" as this node's, but it is the latency of
the library mpi4py loaded (often the MPICH wheel from PyPI), which their
application may never use. So a network run names the other installations
it can see, each by its compiler wrapper, and the one command that measures
with it (``ceiling bench network --site-mpi MPICC``, cluster/site_mpi.py).

Where they are looked for, in this order: Debian's and Ubuntu's packages
(``/usr/bin/mpicc.mpich``, ``/usr/bin/mpicc.openmpi``), ``mpicc`` on PATH
(named after the environment modules loaded, ``LOADEDMODULES``, whose name
says MPI), and ``bin/mpicc`` under ``$MPI_HOME``, ``$MPI_ROOT`` and
``$I_MPI_ROOT``. Each is identified by the ``mpi.h`` it compiles with
(library.header_identity), and its launcher is the ``mpiexec`` / ``mpirun``
beside it of the same family (Debian's suffixed names first).
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .library import Library, _launcher_matches, executables, header_identity, launcher_identity

DISTRIBUTION = (("/usr/bin/mpicc.mpich", "the distribution's MPICH package"),
                ("/usr/bin/mpicc.openmpi", "the distribution's Open MPI package"))
HOME_VARS = ("MPI_HOME", "MPI_ROOT", "I_MPI_ROOT")


@dataclass(frozen=True)
class Installation:
    """An MPI found on this node, by its compiler wrapper."""

    mpicc: str                # path of the compiler wrapper
    how: str                  # where it was found, in words
    family: str               # "MPICH", "Open MPI", ...; "" when its mpi.h names none
    version: str              # its version; the reason when family is ""
    launcher: str = ""        # the mpiexec / mpirun of the same family beside it; "" when none

    @property
    def name(self) -> str:
        return f"{self.family} {self.version}" if self.family else f"an unknown MPI ({self.version})"

    @property
    def prefix(self) -> str:
        return str(Path(os.path.realpath(self.mpicc)).parent.parent)

    def command(self) -> str:
        """The one command that measures the network with this MPI."""
        return f"ceiling bench network --site-mpi {self.mpicc}"

    def to_dict(self) -> Dict[str, str]:
        return {"mpicc": self.mpicc, "found": self.how, "family": self.family, "version": self.version,
                "launcher": self.launcher, "command": self.command()}


def _mpi_modules(env: Dict[str, str]) -> List[str]:
    return [m for m in env.get("LOADEDMODULES", "").split(":") if m and "mpi" in m.lower()]


def candidates(env: Optional[Dict[str, str]] = None,
               distribution: Sequence[Tuple[str, str]] = DISTRIBUTION) -> List[Tuple[str, str]]:
    """(mpicc path, how it was found) in search order, each file once."""
    env = dict(os.environ if env is None else env)
    out: List[Tuple[str, str]] = list(distribution)
    found = shutil.which("mpicc", path=env.get("PATH", ""))
    if found:
        mods = _mpi_modules(env)
        out.append((found, "mpicc on PATH" + (f" (module {', '.join(mods)} loaded)" if mods else "")))
    for var in HOME_VARS:
        if env.get(var):
            out.append((str(Path(env[var]) / "bin" / "mpicc"), f"${var}"))
    return executables(out)


def launcher_beside(mpicc: str, family: str, version: str) -> str:
    """The launcher of ``family`` beside ``mpicc``: Debian's suffixed names first
    (mpicc.mpich -> mpiexec.mpich), then mpiexec and mpirun; "" when none matches."""
    d, base = os.path.split(mpicc)
    suffix = base[len("mpicc"):] if base.startswith("mpicc") else ""
    names = [f"mpiexec{suffix}", f"mpirun{suffix}", "mpiexec", "mpirun"] if suffix else ["mpiexec", "mpirun"]
    want = Library(version="", family=family, family_version=version, standard="", path=None)
    for name in dict.fromkeys(names):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            fam, ver = launcher_identity(p)
            if _launcher_matches(fam, ver, want):
                return p
    return ""


def installations(env: Optional[Dict[str, str]] = None,
                  distribution: Sequence[Tuple[str, str]] = DISTRIBUTION) -> List[Installation]:
    """Every MPI installation found (see the module doc), identified."""
    out = []
    for path, how in candidates(env, distribution):
        fam, ver = header_identity(path)
        out.append(Installation(path, how, fam, ver, launcher_beside(path, fam, ver) if fam else ""))
    return out


def is_measured(inst: Installation, lib: Library) -> bool:
    """Whether ``inst`` is the library that was measured: same family and version, and the
    library file lies under the wrapper's prefix (the wheel's MPICH and Debian's of the same
    version are two installations)."""
    if inst.family != lib.family or inst.version.split(".")[:2] != lib.family_version.split(".")[:2]:
        return False
    if not lib.path:
        return True
    return os.path.realpath(lib.path).startswith(inst.prefix.rstrip("/") + "/")


def others(lib: Library, found: Optional[List[Installation]] = None) -> List[Installation]:
    """The installations found that are not the measured library, and that can be measured
    (their mpi.h names a family): those are what a report names."""
    found = installations() if found is None else found
    return [i for i in found if i.family and not is_measured(i, lib)
            and not os.path.realpath(i.mpicc).startswith(os.path.realpath(sys.prefix) + os.sep)]


_FACTS: Dict[str, Dict] = {}


def mpi_facts(lib: Library, look_for_others: bool = True) -> Dict:
    """What a run records of the MPI it measured (``Run.environment["mpi"]``): the library, its
    device and origin, what can be known of the transport, how this rank was launched (launch.py's
    answer: the launcher, its variables and why), and the other installations found with the
    command that measures each. Computed once per process (it runs their mpicc)."""
    from .launch import launch
    from .library import transport
    key = f"{lib.version}\0{lib.path}\0{look_for_others}"
    if key not in _FACTS:
        tr = transport(lib)
        out: Dict = {"library": lib.description, "version_string": lib.first_line, "family": lib.family,
                     "version": lib.family_version, "standard": lib.standard, "path": lib.path or "",
                     "origin": lib.origin,
                     "device": lib.device or f"not named by {lib.family}'s version string",
                     "thread_level": lib.thread_level, "transport": tr["text"],
                     "transport_environment": tr["environment"], "transport_libraries": tr["libraries"]}
        if tr["components"]:
            out["components"] = tr["components"]
        out["launch"] = launch().to_dict()       # which launcher started this rank, and why the table says so
        if look_for_others:
            out["others"] = [i.to_dict() for i in others(lib)]
        _FACTS[key] = out
    return _FACTS[key]
