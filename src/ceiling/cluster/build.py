"""The MPI timing loops built against the library mpi4py loaded.

``csrc/mpi/netbench.c`` (installed as ``ceiling/_core/netbench.c``;
``$CEILING_MPI_SOURCE`` overrides) is compiled with the matching wrapper
(library.find_mpicc) into ``$XDG_CACHE_HOME/ceiling/mpi-<hash>.so`` (default
``~/.cache/ceiling``), the hash covering the source, the library's version
string and the compiler's identity, so a new MPI or a new ceiling builds
anew. The build goes to a temporary file (mkstemp: O_EXCL, 0600) and is
renamed into place (atomic), so ranks of several nodes sharing a home
directory never load a half-written file; on each node only its first rank
builds while the others wait (``build_per_node``), then every rank loads it
(netbench.NetBench).

The cache is private (cache.py): its directory is ours and 0700, each
library has its SHA-256 recorded beside it, and a cached file that is not
ours, is writable by others, or does not match its record is rebuilt over,
never loaded; every rank checks again before loading.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Optional, Tuple

from ..errors import CeilingError, CoreError
from . import cache
from .launch import node_name
from .library import Library, Tool, find_mpicc, library, run_tool
from .netbench import NetBench
from .stop import raise_agreed

COMPILE_FLAGS = ("-O2", "-fPIC", "-shared", "-std=gnu11")


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
        rc, out = run_tool([mpicc.path, flag])
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
    """Compile netbench.c unless the cache holds it, verified (cache.verified);
    a missing, stale or foreign file is compiled anew and renamed over."""
    src = src or source_path()
    target = library_file(lib, mpicc, src)
    cache.private_dir(target.parent)
    if cache.verified(target):
        return target
    tmp = cache.temporary(target)
    try:
        rc, out = run_tool([mpicc.path, *COMPILE_FLAGS, "-o", str(tmp), str(src)], timeout=120)
        if rc != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
            last = out.strip().splitlines()[-1] if out.strip() else f"exit {rc}"
            raise CoreError(f"compiling {src} with {mpicc.path} failed: {last}")
        cache.install(tmp, target)
    finally:
        try:
            tmp.unlink()        # only still there when the build failed or was interrupted
        except OSError:
            pass
    return target


def build_per_node(comm, leader: bool) -> Tuple[NetBench, Library, Tool]:
    """Find the wrapper and build the loops on each node's first rank, load them
    everywhere. Only leaders run the wrapper (a 128-rank node would otherwise
    start 128 ``mpicc -E`` at once); the others take their leader's answer,
    and every rank checks the file again as it loads it (NetBench.load).
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
