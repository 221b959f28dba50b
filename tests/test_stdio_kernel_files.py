"""What a file's stdio streams asked of the kernel, in its per-file record (csrc/interpose/files.c,
stdio.c; analysis/profile_files.py's kernel_reads, kernel_read_bytes, kernel_writes,
kernel_write_bytes): the requests strace counts on the file, beside the library calls the
record's reads and writes count (Darshan's).

A C program does what `git gc` and fio do (issue 26), deterministically: reads a config file
three times with getc_unlocked, which glibc's headers inline (only the refills of an empty
buffer are calls: __uflow); writes a lock file through fdopen with 25 fputs and an fprintf and
renames it to its final name; starts a child with posix_spawn that writes its own lock file
and ends in _exit, leaving bytes in a stream's buffer (lost: glibc never writes them); and
leaves 7,000 bytes fwritten to a stream it never closes (glibc's exit writes the last
buffer after the interposer's record: one request, counted in the file's record). The
figures are known by construction and, where strace is installed, checked against it.
"""
import os
import re
import shutil
import subprocess

import pytest

from ceiling.analysis import profile_files
from ceiling.probes.interpose_record import parse
from test_interpose import NEEDS_LIB, run_child

CC = shutil.which("cc")
STRACE = shutil.which("strace")
pytestmark = NEEDS_LIB

LINE = len("0123456789abcdef0123456789abcdef01234567 refs/heads/x\n")   # the program's fputs
CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"   # < one buffer

PROGRAM = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "line %d: %s (errno %d)\n", __LINE__, #cond, errno); exit(1); } } while (0)

/* git's lockfile: create NAME.lock exclusively, write it through stdio, rename it to NAME */
static void locked_write(const char *dir, const char *name, int lines)
{
    char lock[4096], final[4096];
    snprintf(lock, sizeof lock, "%s/%s.lock", dir, name);
    snprintf(final, sizeof final, "%s/%s", dir, name);
    int fd = open(lock, O_CREAT | O_EXCL | O_WRONLY, 0644);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    CHECK(f);
    for (int i = 0; i < lines; i++)
        CHECK(fputs("0123456789abcdef0123456789abcdef01234567 refs/heads/x\n", f) != EOF);
    CHECK(fprintf(f, "# %d lines\n", lines) > 0);
    CHECK(fclose(f) == 0);
    CHECK(rename(lock, final) == 0);
}

int main(int argc, char **argv)
{
    const char *dir = argv[1];
    char path[4096];
    if (argc > 2 && !strcmp(argv[2], "child")) {
        locked_write(dir, "child-refs", 3);
        /* bytes left in a buffer at _exit are never written */
        snprintf(path, sizeof path, "%s/child.log", dir);
        FILE *f = fopen(path, "w");
        CHECK(f);
        CHECK(fputs("never written\n", f) != EOF);
        _exit(0);
    }
    /* the config, three times, a character at a time through the inlined getc_unlocked */
    snprintf(path, sizeof path, "%s/config", dir);
    long n = 0;
    for (int k = 0; k < 3; k++) {
        FILE *f = fopen(path, "r");
        CHECK(f);
        flockfile(f);
        while (getc_unlocked(f) != EOF)
            n++;
        funlockfile(f);
        CHECK(fclose(f) == 0);
    }
    locked_write(dir, "packed-refs", 25);
    pid_t pid;
    char *args[] = {argv[0], (char *)dir, "child", NULL};
    CHECK(posix_spawn(&pid, argv[0], NULL, NULL, args, environ) == 0);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* fio's --output: one fwrite, the stream left for glibc's exit to flush */
    static char json[7000];
    memset(json, 'j', sizeof json);
    snprintf(path, sizeof path, "%s/out.json", dir);
    FILE *out = fopen(path, "w");
    CHECK(out);
    CHECK(fwrite(json, 1, sizeof json, out) == sizeof json);
    printf("%ld\n", n);
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    if CC is None:
        pytest.skip("no cc on PATH")
    d = tmp_path_factory.mktemp("stdio_kernel")
    src, exe = d / "gitlike.c", d / "gitlike"
    src.write_text(PROGRAM)
    # -O2: glibc's headers make getc_unlocked a macro that calls __uflow only on an empty buffer
    r = subprocess.run([CC, "-O2", "-o", str(exe), str(src)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return exe


def run(program, tmp_path, strace=None):
    data, out = tmp_path / "data", tmp_path / "rec"
    data.mkdir()
    (data / "config").write_text(CONFIG)
    argv = [str(program), str(data)]
    if strace:
        argv = [strace, "-f", "-qq", "-y", "-s", "0", "-e", "trace=read,write", "-o", str(tmp_path / "st")] + argv
    p = run_child(argv, out)
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().strip() == str(3 * len(CONFIG))
    files = profile_files.summarise(parse(out.read_text()))
    return data, {os.path.basename(f["path"]): f for f in files["shown"] if f["path"].startswith(f"{data}/")}


def test_inlined_character_reads_and_buffered_writes_count_what_reached_the_kernel(program, tmp_path):
    data, f = run(program, tmp_path)
    size = len(CONFIG)
    # each open: one refill with the whole file, one at its end (0 bytes): what strace shows
    assert (f["config"]["opens"], f["config"]["reads"], f["config"]["read_bytes"]) == (3, 6, 3 * size)
    assert (f["config"]["kernel_reads"], f["config"]["kernel_read_bytes"]) == (6, 3 * size)
    # the lock file: 26 library calls (Darshan's count), one write of the buffer at fclose
    lock = f["packed-refs.lock"]
    body = 25 * LINE + len("# 25 lines\n")
    assert (lock["writes"], lock["write_bytes"]) == (26, body)
    assert (lock["kernel_writes"], lock["kernel_write_bytes"]) == (1, body)
    child = f["child-refs.lock"]
    assert (child["writes"], child["kernel_writes"], child["kernel_write_bytes"]) == (4, 1, 3 * LINE + 10)
    # _exit: the buffer is lost, nothing reached the kernel
    assert (f["child.log"]["writes"], f["child.log"]["kernel_writes"], f["child.log"]["kernel_write_bytes"]) \
        == (1, 0, 0)
    # 7,000 B: a whole buffer written at once, the rest by glibc's exit after the record
    assert (f["out.json"]["writes"], f["out.json"]["write_bytes"]) == (1, 7000)
    assert (f["out.json"]["kernel_writes"], f["out.json"]["kernel_write_bytes"]) == (2, 7000)
    assert (data / "out.json").stat().st_size == 7000 and not (data / "child.log").stat().st_size


@pytest.mark.skipif(STRACE is None, reason="strace not installed")
def test_the_kernel_figures_are_straces(program, tmp_path):
    data, f = run(program, tmp_path, STRACE)
    seen = {}
    for line in (tmp_path / "st").read_text().splitlines():
        m = re.match(r"^(?:\d+\s+)?(read|write)\((\d+)<([^>]*)>.*\)\s+=\s+(\d+)$", line)
        if m and m.group(3).startswith(str(data) + "/"):
            s = seen.setdefault(os.path.basename(m.group(3)), [0, 0, 0, 0])
            k = 0 if m.group(1) == "read" else 2
            s[k] += 1
            s[k + 1] += int(m.group(4))
    assert seen, "strace saw no call on the data files"
    ours = {name: [r["kernel_reads"], r["kernel_read_bytes"], r["kernel_writes"], r["kernel_write_bytes"]]
            for name, r in f.items() if name in seen or r["kernel_reads"] or r["kernel_writes"]}
    assert ours == seen


# cc1 -E writes its .i files a character at a time with putc_unlocked, which glibc's headers inline
# when optimizing: the byte goes into the buffer with no call; only a full (or not yet made) buffer
# calls __overflow, which writes it out. Three streams: fully buffered, line-buffered, unbuffered.
PUTC = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    const long n = atol(argv[2]);
    char path[4096];
    const int modes[3] = {_IOFBF, _IOLBF, _IONBF};
    const char *names[3] = {"full", "line", "none"};
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/%s", argv[1], names[k]);
        FILE *f = fopen(path, "w");
        if (!f || setvbuf(f, NULL, modes[k], 4096))
            return 1;
        for (long i = 0; i < (k == 0 ? n : 300); i++)
            putc_unlocked(i % 61 == 60 ? '\n' : 'a' + (int)(i % 26), f);
        if (k < 2 && fclose(f))
            return 1;
    }
    return 0;          /* "none" is left open: nothing pending in an unbuffered stream */
}
"""


@pytest.mark.skipif(CC is None, reason="no cc on PATH")
def test_inlined_putc_unlocked_bytes_reach_the_files_kernel_figures(tmp_path):
    src, exe = tmp_path / "putc.c", tmp_path / "putc"
    src.write_text(PUTC)
    r = subprocess.run([CC, "-O2", "-o", str(exe), str(src)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    data, out = tmp_path / "data", tmp_path / "rec"
    data.mkdir()
    n = 3 * 4096 + 1000
    argv = [str(exe), str(data), str(n)]
    if STRACE:
        argv = [STRACE, "-f", "-qq", "-y", "-s", "0", "-e", "trace=write", "-o", str(tmp_path / "st")] + argv
    p = run_child(argv, out)
    assert p.returncode == 0, p.stderr
    files = {os.path.basename(f["path"]): f for f in profile_files.summarise(parse(out.read_text()))["shown"]
             if f["path"].startswith(f"{data}/")}
    assert [(data / k).stat().st_size for k in ("full", "line", "none")] == [n, 300, 300]
    # every byte the program wrote, in the requests that sent it: 3 whole buffers, the rest at fclose
    full = files["full"]
    assert (full["kernel_writes"], full["kernel_write_bytes"]) == (4, n)
    # a line-buffered stream writes at each newline (4 of them in 300 characters) and fclose the rest
    assert (files["line"]["kernel_writes"], files["line"]["kernel_write_bytes"]) == (5, 300)
    # unbuffered: each character is one write
    assert (files["none"]["kernel_writes"], files["none"]["kernel_write_bytes"]) == (300, 300)
    if STRACE:
        seen = {}
        for line in (tmp_path / "st").read_text().splitlines():
            m = re.match(r"^(?:\d+\s+)?write\((\d+)<([^>]*)>.*\)\s+=\s+(\d+)$", line)
            if m and m.group(2).startswith(str(data) + "/"):
                s = seen.setdefault(os.path.basename(m.group(2)), [0, 0])
                s[0] += 1
                s[1] += int(m.group(3))
        assert {k: [f["kernel_writes"], f["kernel_write_bytes"]] for k, f in files.items()} == seen
