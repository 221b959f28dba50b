"""The interposer's copy module (csrc/interpose/copy.c): copy_file_range, sendfile and splice,
whose bytes never pass through read or write, from real child processes: a small C program
whose calls say the expected counts, and cp -r (coreutils copies with copy_file_range where
the file system cannot clone)."""
import shutil
import subprocess

import pytest

from test_interpose import NEEDS_LIB, module_lines, only_record, parse, run_child

pytestmark = NEEDS_LIB

CC = shutil.which("cc")

COPY = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <unistd.h>
#define CHECK(c) do { if (!(c)) { perror(#c); exit(1); } } while (0)
int main(int argc, char **argv) {
    int in = open(argv[1], O_RDONLY), out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644), p[2];
    CHECK(in >= 0 && out >= 0 && pipe(p) == 0);
    loff_t oi = 0;
    CHECK(copy_file_range(in, &oi, out, NULL, 3000000, 0) == 3000000);     /* file to file: copy */
    CHECK(lseek(in, 0, SEEK_SET) == 0);
    CHECK(splice(in, NULL, p[1], NULL, 4096, 0) == 4096);                 /* file to pipe: read */
    CHECK(splice(p[0], NULL, out, NULL, 4096, 0) == 4096);                /* pipe to file: write */
    off_t so = 0;
    CHECK(sendfile(out, in, &so, 1000) == 1000);                          /* file to file: copy */
    CHECK(copy_file_range(-1, NULL, out, NULL, 10, 0) == -1);             /* a failing call: copy (EBADF) */
    return 0;
}
"""


def test_copy_calls_are_counted_by_what_they_move_between(tmp_path):
    if CC is None:
        pytest.skip("no cc on PATH")
    src, exe, out = tmp_path / "c.c", tmp_path / "c", tmp_path / "rec"
    src.write_text(COPY)
    subprocess.run([CC, "-O1", "-o", str(exe), str(src)], check=True, timeout=120)
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"x" * 3_000_000)
    p = run_child([str(exe), str(a), str(b)], out)
    assert p.returncode == 0, p.stderr
    r = only_record(out)
    assert r["modules"]["copy"] == {"name": "copy", "version": 1, "enabled": 1}
    got = module_lines(r, "copy")
    for c in got["class"].values():
        c.pop("ns")
    assert got["class"] == {"copy": {"calls": 3, "errors": 1, "bytes": 3_001_000},
                            "read": {"calls": 1, "errors": 0, "bytes": 4096},
                            "write": {"calls": 1, "errors": 0, "bytes": 4096},
                            "other": {"calls": 0, "errors": 0, "bytes": 0}}
    assert got["fn"] == {"copy_file_range": 2, "splice": 2, "sendfile": 1}
    files = {f["path"]: f for f in r["lines"]["file"] if "path" in f}
    assert files[str(a)]["read_bytes"] == 3_000_000 + 4096 + 1000
    assert files[str(b)]["write_bytes"] == 3_000_000 + 4096 + 1000


def test_cp_r_shows_the_bytes_it_copied(tmp_path):
    """cp -r of a directory: the file's bytes, which read and write never see."""
    from test_profile_io_truth import cp_clones
    if cp_clones(tmp_path):
        pytest.skip("cp clones files here: no bytes move")
    d = tmp_path / "src"
    d.mkdir()
    (d / "big").write_bytes(b"y" * 5_000_000)
    (d / "small").write_bytes(b"z" * 10)
    out = tmp_path / "rec"
    p = run_child(["cp", "-r", str(d), str(tmp_path / "dst")], out)
    assert p.returncode == 0, p.stderr
    (r,) = parse(out.read_text())
    copy = module_lines(r, "copy")["class"]["copy"]
    posix = module_lines(r, "posix")["class"]
    assert copy["bytes"] + posix["write"]["bytes"] == 5_000_010 and copy["errors"] == 0
