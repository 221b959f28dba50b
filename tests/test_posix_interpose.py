"""The interposer's POSIX module (csrc/interpose/posix.c), seen from real child processes.

A small C program, compiled here with the system cc, makes a known list of POSIX calls
(WORKLOAD below says which, and the expected counts follow from it); it runs under
LD_PRELOAD and its record is checked to the call and the byte. The program checks errno
itself, through the wrappers, and exits nonzero when it is wrong. No timings here: ns is
only checked to be there. The library is found as in test_interpose.py.
"""
import shutil
import subprocess
import sys

import pytest

from test_interpose import NEEDS_LIB, assert_silent_without_output, module_lines, only_record, run_child

pytestmark = NEEDS_LIB

CC = shutil.which("cc")

WORKLOAD = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char buf[1 << 20];

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "line %d: %s (errno %d)\n", __LINE__, #cond, errno); exit(1); } } while (0)

static void *writer(void *arg)
{
    for (int i = 0; i < 5; i++)
        CHECK(write(*(int *)arg, buf, 10) == 10);
    return NULL;
}

int main(int argc, char **argv)
{
    char path[4096], moved[4096], dir[4096], missing[4096];
    CHECK(argc == 2);
    snprintf(path, sizeof path, "%s/data", argv[1]);
    snprintf(moved, sizeof moved, "%s/moved", argv[1]);
    snprintf(dir, sizeof dir, "%s/dir", argv[1]);
    snprintf(missing, sizeof missing, "%s/missing", argv[1]);

    /* writes: 3 x 100 B, 2 x 4 KiB, 1 MiB, one after the other; a pwrite back at 0 */
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 0);
    for (int i = 0; i < 3; i++)
        CHECK(write(fd, buf, 100) == 100);
    for (int i = 0; i < 2; i++)
        CHECK(write(fd, buf, 4096) == 4096);
    CHECK(write(fd, buf, 1 << 20) == 1 << 20);
    CHECK(pwrite(fd, buf, 2048, 0) == 2048);
    CHECK(fsync(fd) == 0);
    CHECK(fdatasync(fd) == 0);
    CHECK(close(fd) == 0);

    /* reads: 2 x 4 KiB; back to 0 and 100 B; pread 10 B where that ended, then at 5000;
       to the end and a read of nothing */
    fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    CHECK(read(fd, buf, 4096) == 4096);
    CHECK(read(fd, buf, 4096) == 4096);
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    CHECK(read(fd, buf, 100) == 100);
    CHECK(pread(fd, buf, 10, 100) == 10);
    CHECK(pread(fd, buf, 10, 5000) == 10);
    CHECK(lseek(fd, 0, SEEK_END) == 300 + 8192 + (1 << 20));
    CHECK(read(fd, buf, 100) == 0);
    CHECK(close(fd) == 0);

    /* errno: a failing call's comes through, a succeeding call leaves the caller's */
    errno = 0;
    CHECK(open(missing, O_RDONLY) == -1 && errno == ENOENT);
    errno = 0;
    CHECK(read(-1, buf, 1) == -1 && errno == EBADF);
    int nul = open("/dev/null", O_WRONLY);
    CHECK(nul >= 0);
    errno = EXDEV;
    CHECK(write(nul, buf, 1) == 1 && errno == EXDEV);

    /* another thread: 5 x 10 B */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, writer, &nul) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(close(nul) == 0);

    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 300 + 8192 + (1 << 20));
    CHECK(access(path, R_OK) == 0);
    CHECK(mkdir(dir, 0755) == 0);
    CHECK(rmdir(dir) == 0);
    CHECK(rename(path, moved) == 0);
    CHECK(unlink(moved) == 0);
    return 0;
}
"""

ZERO_HIST = {b: 0 for b in ["lt1k", "1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k",
                            "1m", "2m", "4m", "8m", "16m", "32m", "ge64m"]}


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    if CC is None:
        pytest.skip("no cc on PATH")
    d = tmp_path_factory.mktemp("posix")
    src, exe = d / "workload.c", d / "workload"
    src.write_text(WORKLOAD)
    r = subprocess.run([CC, "-O0", "-pthread", "-o", str(exe), str(src)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return exe


def test_the_workload_is_counted_to_the_call_and_the_byte(workload, tmp_path):
    out, data = tmp_path / "rec", tmp_path / "data"
    data.mkdir()
    p = run_child([str(workload), str(data)], out)
    assert p.returncode == 0, p.stderr
    r = only_record(out)
    assert r["modules"]["posix"] == {"name": "posix", "version": 1, "enabled": 1}
    assert r["process"]["threads"] == 2
    got = module_lines(r, "posix")
    for c in got["class"].values():
        assert (c.pop("ns") > 0) == (c["calls"] > 0)
    assert got["class"] == {
        # 3x100 + 2x4096 + 1 MiB + pwrite 2048; the pwrite back at 0 is the one not where the
        # last write ended
        "write": {"calls": 7, "errors": 0, "bytes": 300 + 8192 + 2**20 + 2048, "random": 1},
        # 2x4096, 100 after the lseek to 0 (random), pread 10 at 100 (where that ended),
        # pread 10 at 5000 (random), 0 at the end after an lseek (random), read(-1) failing
        "read": {"calls": 7, "errors": 1, "bytes": 8192 + 100 + 20, "random": 3},
        # 4 opens (one failing), 3 closes, 2 lseeks, stat, access, mkdir, rmdir, rename, unlink
        "meta": {"calls": 15, "errors": 1},
        "sync": {"calls": 2, "errors": 0},
        # 1 B to /dev/null and 5x10 in the thread: a character device, not a file
        "other_write": {"calls": 6, "errors": 0, "bytes": 1 + 50},
        "other_read": {"calls": 0, "errors": 0, "bytes": 0},
    }
    assert got["hist"] == {
        "write": {**ZERO_HIST, "lt1k": 3, "2k": 1, "4k": 2, "1m": 1},
        "read": {**ZERO_HIST, "lt1k": 4, "4k": 2},
    }
    fns = got["fn"]
    # a glibc before 2.33 has the program call __xstat for stat
    assert fns.pop("stat", 0) + fns.pop("__xstat", 0) == 1
    assert fns == {"open": 4, "close": 3, "write": 12, "pwrite": 1, "read": 5, "pread": 2, "lseek": 2,
                   "fsync": 1, "fdatasync": 1, "access": 1, "mkdir": 1, "rmdir": 1, "rename": 1,
                   "unlink": 1}
    assert set(r["lines"]) == {"copy", "file", "null", "posix", "proc", "stdio"}
    assert r["end"]["truncated"] == 0
    # one file record (the data file; /dev/null is no file): both opens, the 7 writes, the 6
    # successful reads, both syncs; unaligned among the accesses that moved bytes (the lseek
    # says where the next read starts; the read of nothing at the end moves none)
    head, *files = r["lines"]["file"]
    assert (head["files"], head["lost"], len(files)) == (1, 0, 1)
    f = files[0]
    assert f["path"] == str(data / "data") and f["api"] == 1 and f["opens"] == 2
    assert (f["writes"], f["write_bytes"], f["reads"], f["read_bytes"]) == (7, 300 + 8192 + 2**20 + 2048, 6, 8312)
    assert (f["random"], f["syncs"], f["extent"]) == (4, 2, 300 + 8192 + 2**20)
    known = [0, 100, 200, 300, 4396, 8492, 0] + [0, 4096, 0, 100, 5000]
    assert f["unaligned"] == sum(1 for o in known if o % f["blksize"])


def test_without_an_output_path_the_wrappers_only_pass_through(workload, tmp_path):
    assert_silent_without_output(workload, tmp_path)


def test_a_python_child_writing_a_file_is_counted(tmp_path):
    """Python's own start-up reads and stats many files; only lower bounds hold."""
    out, target = tmp_path / "rec", tmp_path / "target"
    code = (f"f = open({str(target)!r}, 'wb', buffering=0)\n"
            "for _ in range(3):\n"
            "    f.write(b'x' * 1000)\n"
            "f.close()\n")
    p = run_child([sys.executable, "-c", code], out)
    assert p.returncode == 0, p.stderr
    assert target.stat().st_size == 3000
    got = module_lines(only_record(out), "posix")
    write = got["class"]["write"]
    assert write["calls"] >= 3 and write["bytes"] >= 3000
    assert got["hist"]["write"]["lt1k"] >= 3
    assert got["class"]["read"]["calls"] > 0
    assert got["class"]["meta"]["calls"] >= 2
    assert got["fn"].get("open", 0) + got["fn"].get("open64", 0) >= 1
    assert got["fn"]["close"] >= 1
