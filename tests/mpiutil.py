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
