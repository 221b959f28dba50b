"""``ceiling bench network --site-mpi [MPICC]``: measure with the site's MPI.

The network bench measures the library mpi4py loads. To measure another
MPI of this node (the one applications are built with), mpi4py must be
built against it, and the ranks started with its launcher. This makes that
one command:

1. the installation: the one ``MPICC`` names, else the only other one found
   (installations.py); several found and none named is a usage error that
   lists them;
2. a virtual environment for it under
   ``$XDG_CACHE_HOME/ceiling/site-mpi/<family>-<version>-<hash>/``, the hash
   over the wrapper's real path, its identity and this Python's version, so
   it is made once (minutes: pip builds mpi4py from source with
   ``MPICC=<wrapper>`` at ``MPI4PY_CFLAGS``, and installs numpy and
   threadpoolctl) and reused,
   never rebuilt, while it is complete (``.ready``). Made under a temporary
   name and renamed into place, so a build that fails or is interrupted
   leaves nothing a later run would take for complete;
3. ceiling itself is not installed there: a ``.pth`` file puts a directory
   holding a link to the running ceiling package on the path (its C core is
   loaded with ctypes and ties it to no Python), so the environment always
   runs the ceiling that made the command; ``bin/ceiling`` starts it, and
   ``bin/mpicc`` and ``bin/mpiexec`` (or ``mpirun``) link to the
   installation's, so that ceiling finds the matching wrapper and launcher
   there whatever ``mpicc`` on PATH is;
4. the ranks: ``<launcher> -n 2 <env>/bin/ceiling bench network ARGS``,
   printed, then run, its exit status returned.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, List, Optional

from ..errors import MPIUnavailableError, UsageError
from . import cache
from .build import cache_dir
from .installations import Installation, installations
from .library import header_identity, launcher_identity

READY = ".ready"
# mpi4py only starts MPI and hands buffers to the C timing loops (cluster/build.py compiles those
# with the same mpicc): its 10 MB of generated C build in a third of the time at -O1, which decides
# nothing measured. A user's own CFLAGS are kept.
MPI4PY_CFLAGS = "-O1 -g0"
RANKS = 2
# What ceiling needs beside mpi4py (pyproject.toml's dependencies).
DEPENDENCIES = ["numpy>=1.22", "threadpoolctl>=3.1"] + (["tomli>=1.1"] if sys.version_info < (3, 11) else [])


def choose(named: Optional[str], found: Optional[List[Installation]] = None) -> Installation:
    """The installation to measure: the wrapper ``named`` (a path or a name on PATH), else the
    only one found; UsageError (naming them) when there are several, MPIUnavailableError when none."""
    if named and named != "auto":
        path = named if os.sep in named else (shutil.which(named) or named)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise UsageError(f"--site-mpi {named}: no such compiler wrapper (give the path of an MPI's mpicc)")
        fam, ver = header_identity(path)
        if not fam:
            raise MPIUnavailableError(f"--site-mpi {named}: {ver}")
        from .installations import launcher_beside
        return Installation(path, "named on the command line", fam, ver, launcher_beside(path, fam, ver))
    found = [i for i in (installations() if found is None else found)
             if i.family and not os.path.realpath(i.mpicc).startswith(os.path.realpath(sys.prefix) + os.sep)]
    if not found:
        raise MPIUnavailableError("--site-mpi: no MPI installation found on this node besides this Python's "
                                  "(looked for /usr/bin/mpicc.mpich, /usr/bin/mpicc.openmpi, mpicc on PATH, "
                                  "$MPI_HOME, $MPI_ROOT, $I_MPI_ROOT); load your site's MPI module, or name "
                                  "its wrapper: --site-mpi /path/to/mpicc")
    if len(found) > 1:
        raise UsageError("--site-mpi: several MPI installations here, name one: " +
                         "; ".join(f"{i.name} ({i.how}): --site-mpi {i.mpicc}" for i in found))
    return found[0]


def env_dir(inst: Installation, root: Optional[Path] = None) -> Path:
    """Where the environment for ``inst`` lives: one per wrapper, identity and Python version."""
    h = hashlib.sha256("\0".join([os.path.realpath(inst.mpicc), inst.family, inst.version,
                                  "%d.%d" % sys.version_info[:2]]).encode()).hexdigest()[:12]
    slug = re.sub(r"[^a-z0-9.]+", "", inst.family.lower()) or "mpi"
    return (root or cache_dir()) / "site-mpi" / f"{slug}-{inst.version}-{h}"


def _run(argv: List[str], env: Optional[dict] = None, what: str = "") -> None:
    """Run a step of the build; no time limit (a compile on a busy login node can take long, and
    Ctrl-C stops it), MPIUnavailableError with the end of its output when it fails."""
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as e:
        raise MPIUnavailableError(f"--site-mpi: {what or argv[0]} failed: {e}") from None
    if p.returncode != 0:
        tail = " | ".join(p.stdout.strip().splitlines()[-4:])
        raise MPIUnavailableError(f"--site-mpi: {what or ' '.join(argv)} failed (exit {p.returncode}): {tail}")


def _link_ceiling(venv: Path) -> None:
    """Point the environment at the running ceiling (a link replaced atomically)."""
    here = Path(__file__).resolve().parents[1]     # the ceiling package
    d = venv / "ceiling-link"
    d.mkdir(exist_ok=True)
    tmp = d / f".ceiling.{os.getpid()}"
    if tmp.is_symlink():
        tmp.unlink()
    os.symlink(here, tmp)
    os.replace(tmp, d / "ceiling")


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _site_packages(venv: Path) -> Path:
    out = subprocess.run([str(_python(venv)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         stdout=subprocess.PIPE, text=True, check=True, timeout=60)
    return Path(out.stdout.strip())


def _build(inst: Installation, target: Path, say: Callable[[str], None]) -> None:
    cache.private_dir(target.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        base = getattr(sys, "_base_executable", None) or sys.executable
        say(f"making {target} for {inst.name} (once; pip builds mpi4py with MPICC={inst.mpicc}, a few minutes)")
        _run([base, "-m", "venv", str(tmp)], what="python -m venv")
        pip = [str(_python(tmp)), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run(pip + DEPENDENCIES, what="pip install " + " ".join(DEPENDENCIES))
        env = dict(os.environ, MPICC=inst.mpicc)
        env.setdefault("CFLAGS", MPI4PY_CFLAGS)
        _run(pip + ["--no-binary", "mpi4py", "--no-cache-dir", "mpi4py"], env=env,
             what=f"MPICC={inst.mpicc} pip install --no-binary mpi4py mpi4py")
        (_site_packages(tmp) / "ceiling-site-mpi.pth").write_text(str(target / "ceiling-link") + "\n")
        script = tmp / "bin" / "ceiling"
        script.write_text(f"#!{target / 'bin' / 'python'}\nimport sys\nfrom ceiling.cli import main\n"
                          "sys.exit(main())\n")
        script.chmod(0o755)
        try:
            os.rename(tmp, target)      # a venv's scripts name their own path: made for target, used there
        except OSError:
            if not target.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)     # another run made it meanwhile: use that one
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _link_tools(inst: Installation, venv: Path) -> None:
    """``bin/mpicc`` and ``bin/mpiexec`` (Open MPI: ``mpirun``) of the environment link to the
    installation's: ceiling looks there first after mpi4py's own record (library.find_mpicc), so
    the wrapper that built mpi4py is found whatever ``mpicc`` on PATH is (installing Open MPI
    beside Debian's MPICH turns /usr/bin/mpicc into Open MPI's)."""
    tools = [("mpicc", inst.mpicc)]
    if inst.launcher:
        tools.append(("mpirun" if inst.family == "Open MPI" else "mpiexec", inst.launcher))
    for name, target in tools:
        link = venv / "bin" / name
        if link.is_symlink() and os.readlink(link) == target:
            continue
        tmp = venv / "bin" / f".{name}.{os.getpid()}"
        if tmp.is_symlink():
            tmp.unlink()
        os.symlink(target, tmp)
        os.replace(tmp, link)


def prepare(inst: Installation, say: Callable[[str], None], root: Optional[Path] = None) -> Path:
    """The environment for ``inst``, made if it is not there yet (module doc); its path."""
    venv = env_dir(inst, root)
    if not (venv / READY).is_file():
        if venv.exists():               # left incomplete by a crash after the rename: start again
            shutil.rmtree(venv)
        _build(inst, venv, say)
        _link_ceiling(venv)
        _link_tools(inst, venv)
        _check(inst, venv)
        (venv / READY).write_text(f"{inst.mpicc}\n{inst.family} {inst.version}\n")
    else:
        _link_ceiling(venv)
        if (venv / "bin").is_dir():
            _link_tools(inst, venv)
    return venv


def _check(inst: Installation, venv: Path) -> None:
    """The environment's mpi4py loads ``inst``'s family (else nothing is marked ready)."""
    code = "from mpi4py import MPI; print(MPI.get_vendor()[0])"
    p = subprocess.run([str(_python(venv)), "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    if p.returncode != 0 or inst.family.split()[0].lower() not in p.stdout.lower():
        raise MPIUnavailableError(f"--site-mpi: mpi4py in {venv} does not load {inst.name}: "
                                  f"{p.stdout.strip()[-300:]}")


def launch_argv(inst: Installation, venv: Path, argv: List[str], ranks: int = RANKS) -> List[str]:
    """The command that measures: the installation's launcher, ``ranks`` ranks, the environment's
    ceiling given ``argv`` (the verb and its arguments, less --site-mpi)."""
    if not inst.launcher:
        raise MPIUnavailableError(f"--site-mpi: no launcher (mpiexec, mpirun) of {inst.name} beside {inst.mpicc}")
    out = [inst.launcher, "-n", str(ranks)]
    if launcher_identity(inst.launcher)[0] == "Open MPI" and os.geteuid() == 0:
        out.append("--allow-run-as-root")      # Open MPI's mpirun refuses root without it
    return out + [str(venv / "bin" / "ceiling"), *argv]


def without_site_mpi(argv: List[str]) -> List[str]:
    """The verb's arguments less --site-mpi and its value: what the ranks are given."""
    out: List[str] = []
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a == "--site-mpi":
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            skip = bool(nxt) and not nxt.startswith("-") and nxt != "network"
            continue
        if a.startswith("--site-mpi="):
            continue
        out.append(a)
    return out
