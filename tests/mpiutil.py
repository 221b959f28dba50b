"""What the MPI tests share: whether mpi4py is there, the environment of a
launched rank, and the probe that finds the library, compiler wrapper and
launcher (the `mpi_setup` fixture in conftest.py runs it once per session)."""
from __future__ import annotations

import importlib.util
import os
import textwrap
from pathlib import Path

import pytest

HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI4PY, reason="mpi4py is not installed (pip install mpi4py mpich)")

PROBE = textwrap.dedent("""
    import json
    from ceiling.cluster.comm import world
    from ceiling.cluster.gather import pids_on_this_host
    from ceiling.cluster.library import find_launcher, find_mpicc, library
    world()
    lib = library()
    cc = find_mpicc(lib)
    ln = find_launcher(lib, cc)
    import os
    assert pids_on_this_host(world()) == [os.getpid()]
    print(json.dumps({"family": lib.family, "version": lib.family_version, "mpicc": cc.path,
                      "cc_family": cc.family, "cc_version": cc.version, "launcher": ln.path,
                      "launcher_family": ln.family, "argv2": ln.argv(2), "argv4": ln.argv(4, oversubscribe=True)}))
""")


def run_env(tmp: Path, **extra) -> dict:
    """The environment of a launched rank: the ceiling these tests import (this checkout's
    sources in development, the installed package with its C core in CI), a private build cache."""
    import ceiling
    env = dict(os.environ)
    where = str(Path(ceiling.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [where, env.get("PYTHONPATH")]))
    env["XDG_CACHE_HOME"] = str(tmp / "cache")
    env.update(extra)
    return env


def build_mpi(found: dict, tmp: Path, where: Path, name: str, source: str) -> Path:
    """``source`` written to where/name.c and built with the mpicc of the MPI mpi4py loads (``found``,
    mpi_setup's): the program's path; the compiler's message in the assertion when it fails."""
    import subprocess
    (where / f"{name}.c").write_text(source)
    r = subprocess.run([found["mpicc"], "-O1", "-o", str(where / name), str(where / f"{name}.c")],
                       capture_output=True, text=True, timeout=120, env=run_env(tmp))
    assert r.returncode == 0, r.stderr
    return where / name


def ranks_of(mark: str):
    """{rank: pid} of the launched ranks whose environment carries TEST_MARK=mark."""
    found = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = dict(kv.split("=", 1) for kv in (d / "environ").read_text(errors="replace").split("\0") if "=" in kv)
        except OSError:
            continue
        if env.get("TEST_MARK") == mark:
            rank = env.get("PMI_RANK") or env.get("OMPI_COMM_WORLD_RANK")
            try:      # it may have ended since its environ was read
                comm = (d / "comm").read_text()
            except OSError:
                continue
            if rank is not None and "python" in comm:
                found[int(rank)] = int(d.name)
    return found


def measuring(pid: int) -> bool:
    """Whether the rank has loaded the MPI timing loops (cached as mpi-*.so): it is past
    MPI's start-up, where signals are held for an agreement point."""
    try:
        return any("/mpi-" in line and line.rstrip().endswith(".so")
                   for line in Path(f"/proc/{pid}/maps").read_text().splitlines())
    except OSError:
        return False


class FakeMPI:
    """What ceiling asks of mpi4py's MPI module to name the library (vendor and version
    string), for the tests that check a launcher against it without starting MPI."""

    def __init__(self, name, ver):
        self.name, self.ver = name, ver

    def get_vendor(self):
        return self.name, self.ver

    def Get_library_version(self):
        return f"{self.name} {'.'.join(map(str, self.ver))}\0"
