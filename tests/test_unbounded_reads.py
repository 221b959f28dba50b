"""Files that never end or never answer: a FIFO or /dev/zero in a recorded tree or as
the config, and a file too large to be the kernel's, are refused at once, never read
into memory or waited on (issue 11, item 6: the reading part)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from ceiling import sysfs
from machine_fixtures import fsroot


def _ceiling(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "NO_COLOR": "1"})


def test_fifo_device_and_huge_files_are_none(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    os.symlink("/dev/zero", tmp_path / "zero")
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(sysfs.MAX_FILE_BYTES + 1)      # sparse: costs no disk
    (tmp_path / "ok").write_bytes(b"42\n")
    r = sysfs.Root(tmp_path)
    assert r.raw("fifo") is None and r.raw("zero") is None and r.raw("big") is None
    assert r.read_int("ok") == 42
    with pytest.raises(sysfs.NotReadable, match="not a regular file"):
        sysfs.read_file(tmp_path / "fifo", why=True)


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_recorded_tree_with_an_endless_file_is_checked_quickly(kind, tmp_path, tmp_path_factory):
    root = tmp_path / "tree"
    shutil.copytree(fsroot("16em64t-4s2c2t", tmp_path_factory, full=True), root, symlinks=True)
    for rel in ("proc/meminfo", "proc/cpuinfo"):
        path = root / rel
        if path.exists() or path.is_symlink():
            path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        else:
            os.symlink("/dev/zero", path)
    r = _ceiling("machine", "--root", str(root), "--no-measure")
    assert r.returncode == 0, r.stderr
    r = _ceiling("check", "--root", str(root), "--only", "mem")
    assert r.returncode == 0 and "Traceback" not in r.stderr


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_an_endless_config_is_one_line(target, tmp_path):
    if target == "fifo":
        target = str(tmp_path / "cfg.toml")
        os.mkfifo(target)
    r = _ceiling("--config", target, "machine", "--no-measure", timeout=30)
    assert r.returncode == 6
    assert r.stderr.strip().count("\n") == 0 and "not a regular file" in r.stderr
