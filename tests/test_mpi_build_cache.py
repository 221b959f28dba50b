"""The cache of compiled MPI timing loops (cluster/build.py, cluster/cache.py) is
trusted only when it is private: what another user could plant there is
replaced, never executed.

No MPI needed: build() is given a fake "mpicc" (a shell script that copies a
library compiled here with cc) and NetBench.load a library that answers
nb_abi / nb_library like the real loops. The "planted" library has a
constructor that writes a marker file: the marker existing means the planted
code ran.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from ceiling.cluster import build
from ceiling.cluster.library import Library, Tool
from ceiling.cluster.netbench import NB_ABI, NetBench
from ceiling.errors import PathError

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

VERSION = "fake MPI 1.0"

LOOPS = r"""
#include <string.h>
int nb_abi(void) { return %d; }
int nb_library(char *b, int n) { strncpy(b, "%s", n); return 1; }
int nb_pingpong(void) { return -1; }
int nb_stream(void) { return -1; }
int nb_coll(void) { return -1; }
int nb_pairs(void) { return -1; }
"""

PLANT = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen("%s", "w");
    if (f) { fputs("ran", f); fclose(f); }
}
"""

# Copies the prebuilt library to the -o name, writing *through* it as a compiler may;
# logs the mode of the output it was handed (absent: "none") and counts its runs.
FAKE_MPICC = """#!/bin/sh
case "$1" in -show|--showme) echo "fake-cc -lmpi"; exit 0;; esac
out=""
while [ $# -gt 0 ]; do
    case "$1" in -o) out="$2"; shift 2;; *) shift;; esac
done
if [ -e "$out" ]; then stat -c '%a' "$out" >> "{log}"; else echo none >> "{log}"; fi
cat "{lib}" > "$out"
"""


def _cc(src: str, out: Path) -> Path:
    c = out.with_suffix(".c")
    c.write_text(src)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(c)], check=True)
    return out


@pytest.fixture
def env(tmp_path, monkeypatch):
    """(lib, mpicc, src, target, good .so, planted .so, marker, compiler log)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    os.makedirs(tmp_path / "xdg", 0o700)
    marker = tmp_path / "MARKER"
    good = _cc(LOOPS % (NB_ABI, VERSION), tmp_path / "good.so")
    planted = _cc(LOOPS % (NB_ABI, VERSION) + PLANT % marker, tmp_path / "planted.so")
    log = tmp_path / "mpicc.log"
    cc = tmp_path / "mpicc"
    cc.write_text(FAKE_MPICC.replace("{log}", str(log)).replace("{lib}", str(good)))
    cc.chmod(0o755)
    src = tmp_path / "netbench.c"
    src.write_text("/* the source only feeds the cache key here */\n")
    lib = Library(version=VERSION, family="MPICH", family_version="1.0", standard="4.1", path=None)
    mpicc = Tool(str(cc), "test", "MPICH", "1.0")
    target = build.library_file(lib, mpicc, src)
    return lib, mpicc, src, target, good, planted, marker, log


def _runs(log: Path) -> list:
    return log.read_text().split() if log.exists() else []


def _plant(src: Path, target: Path) -> None:
    target.parent.mkdir(mode=0o700, exist_ok=True)
    shutil.copyfile(src, target)
    target.chmod(0o600)


def test_a_planted_library_is_replaced_not_executed(env):
    lib, mpicc, src, target, good, planted, marker, log = env
    _plant(planted, target)
    path = build.build(lib, mpicc, src)
    NetBench.load(path, VERSION)
    assert not marker.exists(), "the planted library's code ran"
    assert path == target and target.read_bytes() == good.read_bytes()
    assert len(_runs(log)) == 1


def test_a_planted_symlink_is_replaced_not_followed(env):
    lib, mpicc, src, target, good, planted, marker, log = env
    target.parent.mkdir(mode=0o700)
    target.symlink_to(planted)
    path = build.build(lib, mpicc, src)
    NetBench.load(path, VERSION)
    assert not marker.exists()
    assert not target.is_symlink() and target.read_bytes() == good.read_bytes()
    assert planted.read_bytes() != good.read_bytes(), "wrote through the link"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_library_owned_by_another_user_is_replaced(env):
    lib, mpicc, src, target, good, planted, marker, log = env
    build.build(lib, mpicc, src)
    shutil.copyfile(planted, target)
    rec = target.with_name(target.name + ".sha256")
    rec.write_text(hashlib.sha256(planted.read_bytes()).hexdigest() + "\n")   # even a matching record
    os.chown(target, 54321, 54321)
    path = build.build(lib, mpicc, src)
    NetBench.load(path, VERSION)
    assert not marker.exists()
    assert target.stat().st_uid == os.geteuid() and target.read_bytes() == good.read_bytes()


def test_the_build_records_its_digest_in_a_private_directory(env):
    lib, mpicc, src, target, good, planted, marker, log = env
    build.build(lib, mpicc, src)
    rec = target.with_name(target.name + ".sha256")
    assert rec.read_text().strip() == hashlib.sha256(target.read_bytes()).hexdigest()
    assert stat.S_IMODE(os.lstat(target.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(rec).st_mode) == 0o600
    assert stat.S_IMODE(os.lstat(target).st_mode) == 0o600
    assert not [p for p in target.parent.iterdir() if p.name.endswith(".tmp")]
    build.build(lib, mpicc, src)
    assert len(_runs(log)) == 1, "a verified library is reused, not rebuilt"


@pytest.mark.parametrize("tamper", ["library", "record"])
def test_a_digest_mismatch_rebuilds(env, tamper):
    lib, mpicc, src, target, good, planted, marker, log = env
    build.build(lib, mpicc, src)
    if tamper == "library":
        with open(target, "ab") as f:
            f.write(b"\0")
    else:
        target.with_name(target.name + ".sha256").write_text("0" * 64 + "\n")
    build.build(lib, mpicc, src)
    assert len(_runs(log)) == 2
    assert target.read_bytes() == good.read_bytes()
    NetBench.load(target, VERSION)


def test_every_loading_rank_checks_the_file(env):
    """A rank that only loads (not its node's builder) refuses a file changed after the build."""
    lib, mpicc, src, target, good, planted, marker, log = env
    build.build(lib, mpicc, src)
    shutil.copyfile(planted, target)
    with pytest.raises(PathError) as e:
        NetBench.load(target, VERSION)
    assert "\n" not in str(e.value) and str(target) in str(e.value)
    assert not marker.exists()


def test_the_compiler_output_is_a_new_private_file(env):
    """The temporary output name is not predictable and made O_EXCL: a file planted at
    the old predictable name (a link to a victim) is not written through."""
    lib, mpicc, src, target, good, planted, marker, log = env
    target.parent.mkdir(mode=0o700)
    victim = target.parent.parent / "victim"
    victim.write_bytes(b"precious")
    old_name = target.with_name(f"{target.name}.{socket.gethostname()}.{os.getpid()}.tmp")
    old_name.symlink_to(victim)
    build.build(lib, mpicc, src)
    assert victim.read_bytes() == b"precious"
    assert _runs(log) == ["600"], "the compiler was not handed an existing 0600 file"
    assert target.read_bytes() == good.read_bytes() and not target.is_symlink()


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o777])
def test_a_cache_directory_others_can_write_is_refused(env, mode):
    lib, mpicc, src, target, good, planted, marker, log = env
    target.parent.mkdir()
    target.parent.chmod(mode)
    with pytest.raises(PathError) as e:
        build.build(lib, mpicc, src)
    assert e.value.exit_code == 4 and "\n" not in str(e.value)
    assert "writable by group or others" in str(e.value)
    assert stat.S_IMODE(os.lstat(target.parent).st_mode) == mode, "chmod-ed a directory"
    assert _runs(log) == []


def test_loading_from_a_cache_directory_others_can_write_is_refused(env):
    lib, mpicc, src, target, good, planted, marker, log = env
    build.build(lib, mpicc, src)
    target.parent.chmod(0o777)
    with pytest.raises(PathError) as e:
        NetBench.load(target, VERSION)
    assert e.value.exit_code == 4 and "\n" not in str(e.value)


def test_a_symlinked_cache_directory_is_refused(env, tmp_path):
    lib, mpicc, src, target, good, planted, marker, log = env
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    target.parent.symlink_to(elsewhere)
    with pytest.raises(PathError) as e:
        build.build(lib, mpicc, src)
    assert e.value.exit_code == 4 and "\n" not in str(e.value) and "symbolic link" in str(e.value)
    assert list(elsewhere.iterdir()) == []


def test_a_cache_directory_of_another_user_is_refused(env, monkeypatch):
    """Another owner, through the seam that says who the owner must be."""
    lib, mpicc, src, target, good, planted, marker, log = env
    target.parent.mkdir(mode=0o700)
    _plant(planted, target)
    import ceiling.cluster.cache as cache
    monkeypatch.setattr(cache, "expected_uid", lambda: os.geteuid() + 1)
    with pytest.raises(PathError) as e:
        build.build(lib, mpicc, src)
    assert e.value.exit_code == 4 and "\n" not in str(e.value) and "owned by uid" in str(e.value)
    with pytest.raises(PathError):
        NetBench.load(target, VERSION)
    assert not marker.exists()
    assert _runs(log) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_cache_directory_chowned_to_another_user_is_refused(env):
    """The same with a real foreign owner, and without trusting what it holds."""
    lib, mpicc, src, target, good, planted, marker, log = env
    _plant(planted, target)
    os.chown(target.parent, 54321, 54321)
    with pytest.raises(PathError) as e:
        build.build(lib, mpicc, src)
    assert e.value.exit_code == 4 and "\n" not in str(e.value) and "owned by uid 54321" in str(e.value)
    with pytest.raises(PathError):
        NetBench.load(target, VERSION)
    assert not marker.exists() and os.lstat(target.parent).st_uid == 54321


def test_a_cache_parent_others_can_rename_in_is_refused(env, tmp_path, monkeypatch):
    """XDG_CACHE_HOME writable by others without the sticky bit: our directory could be
    renamed away and replaced after the check. With the sticky bit (as /tmp) it is fine."""
    lib, mpicc, src, target, good, planted, marker, log = env
    xdg = target.parent.parent
    xdg.chmod(0o777)
    with pytest.raises(PathError) as e:
        build.build(lib, mpicc, src)
    assert "not sticky" in str(e.value)
    xdg.chmod(0o1777)
    NetBench.load(build.build(lib, mpicc, src), VERSION)
