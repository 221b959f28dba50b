"""The interposer's stdio module (csrc/interpose/stdio.c), seen from real child processes.

A small C program, compiled here with the system cc, makes a known list of stdio calls
(WORKLOAD below says which, and the expected counts follow from it); it runs under
LD_PRELOAD and its record is checked to the call and the byte. The program checks errno
itself, through the wrappers, and exits nonzero when it is wrong. No timings here: ns is
only checked to be there. Built twice: -O0 -fno-builtin, so the program calls exactly the
functions it names, and -O2 -D_FORTIFY_SOURCE=2, where the compiler turns some calls into
others (fputs of a constant into fwrite) and the headers into their __*_chk forms: the
per-function counts differ, the classes' counts and bytes do not.
"""
import os
import re
import shutil
import subprocess

import pytest

from test_interpose import NEEDS_LIB, assert_silent_without_output, module_lines, only_record, parse, run_child

pytestmark = NEEDS_LIB

CC = shutil.which("cc")

WORKLOAD = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char buf[8192], line[256];

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "line %d: %s (errno %d)\n", __LINE__, #cond, errno); exit(1); } } while (0)

static void *writer(void *arg)
{
    for (int i = 0; i < 5; i++)
        CHECK(fwrite(buf, 1, 10, (FILE *)arg) == 10);
    return NULL;
}

int main(int argc, char **argv)
{
    char path[4096], missing[4096];
    CHECK(argc == 2);
    snprintf(path, sizeof path, "%s/data", argv[1]);
    snprintf(missing, sizeof missing, "%s/missing", argv[1]);
    memset(buf, 'a', sizeof buf);

    /* writes: 3 items of 100 B, 4096 x 1 B, a 10-byte fprintf, a 6-byte fputs, one fputc */
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK(fwrite(buf, 100, 3, f) == 3);
    CHECK(fwrite(buf, 1, 4096, f) == 4096);
    CHECK(fprintf(f, "%d-%s\n", 12345, "abc") == 10);
    CHECK(fputs("hello\n", f) >= 0);
    CHECK(fputc('x', f) == 'x');
    CHECK(fflush(f) == 0);
    CHECK(fclose(f) == 0);

    /* reads: 3 items of 100 B; to the end and where that is; back to the start; to the
       fprintf's line and fgets it (10 B); fgetc (1 B); fread of 100 that finds 6 before
       the end (short, not an error); fgets at the end (NULL, not an error) */
    f = fopen(path, "r");
    CHECK(f != NULL);
    CHECK(fread(buf, 100, 3, f) == 3);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    CHECK(ftell(f) == 300 + 4096 + 10 + 6 + 1);
    rewind(f);
    CHECK(fseek(f, 300 + 4096, SEEK_SET) == 0);
    CHECK(fgets(line, sizeof line, f) == line && strcmp(line, "12345-abc\n") == 0);
    CHECK(fgetc(f) == 'h');
    CHECK(fread(buf, 1, 100, f) == 6);
    CHECK(fgets(line, sizeof line, f) == NULL && feof(f));
    CHECK(fclose(f) == 0);

    /* errors: a missing file's ENOENT comes through; a write to a stream opened for
       reading fails (EBADF) and moves nothing; a succeeding call leaves the caller's errno */
    errno = 0;
    CHECK(fopen(missing, "r") == NULL && errno == ENOENT);
    f = fopen(path, "r");
    CHECK(f != NULL);
    errno = 0;
    CHECK(fwrite(buf, 1, 10, f) == 0 && errno == EBADF);
    CHECK(fclose(f) == 0);
    FILE *nul = fopen("/dev/null", "w");
    CHECK(nul != NULL);
    errno = EXDEV;
    CHECK(fwrite(buf, 1, 1, nul) == 1 && errno == EXDEV);

    /* another thread: 5 x 10 B */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, writer, nul) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(fclose(nul) == 0);
    CHECK(remove(path) == 0);
    return 0;
}
"""

# The classes' counts and bytes, for either build: library calls on the file (write, read,
# flush) and on /dev/null, which is not storage (other_write).
CLASSES = {
    # fwrite 300 and 4096, fprintf 10, fputs 6, fputc 1; the failing fwrite of 10 on a
    # read-only stream (0 B)
    "write": {"calls": 6, "errors": 1, "bytes": 300 + 4096 + 10 + 6 + 1},
    # 300, fgets 10, fgetc 1, short fread 6, fgets at the end
    "read": {"calls": 5, "errors": 0, "bytes": 300 + 10 + 1 + 6},
    # 5 fopens (one failing), 4 fcloses, 2 fseeks, ftell, rewind
    "meta": {"calls": 13, "errors": 1},
    "flush": {"calls": 1, "errors": 0},
    # fwrite 1 + 5x10 (the thread) to /dev/null
    "other_write": {"calls": 6, "errors": 0, "bytes": 1 + 50},
    "other_read": {"calls": 0, "errors": 0, "bytes": 0},
    "other_flush": {"calls": 0, "errors": 0},
}
# What those calls asked of the kernel (the stdio buffer is st_blksize, 4 KiB or more): the
# 4096-byte fwrite fills the buffer after the 300 (one write of a buffer) and the fflush sends
# the rest; the reads fill the buffer at the open and after each seek (fseek to the end reads
# the last block; rewind reads nothing; fseek to 4396 reads its block), and the fgets at the
# end meets it (a read of 0 B) - counted against strace in test_kernel_requests_* below.
KERNEL_WRITE_BYTES = 300 + 4096 + 10 + 6 + 1

BUILDS = {"exact": ["-O0", "-fno-builtin"], "fortified": ["-O2", "-D_FORTIFY_SOURCE=2"]}


@pytest.fixture(scope="module", params=sorted(BUILDS))
def workload(request, tmp_path_factory):
    if CC is None:
        pytest.skip("no cc on PATH")
    d = tmp_path_factory.mktemp("stdio")
    src, exe = d / "workload.c", d / "workload"
    src.write_text(WORKLOAD)
    r = subprocess.run([CC, *BUILDS[request.param], "-pthread", "-o", str(exe), str(src)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return request.param, exe


def test_the_workload_is_counted_to_the_call_and_the_byte(workload, tmp_path):
    build, exe = workload
    out, data = tmp_path / "rec", tmp_path / "data"
    data.mkdir()
    p = run_child([str(exe), str(data)], out)
    assert p.returncode == 0, p.stderr
    r = only_record(out)
    assert r["modules"]["stdio"] == {"name": "stdio", "version": 2, "enabled": 1}
    assert r["process"]["threads"] == 2
    got = module_lines(r, "stdio")
    kernel = {k: got["class"].pop(k) for k in ("kernel_read", "kernel_write", "pending")}
    for name, c in got["class"].items():
        ns = c.pop("ns")
        assert ns > 0 if c["calls"] else ns == 0, name
    assert got["class"] == CLASSES
    assert kernel["kernel_write"]["bytes"] == KERNEL_WRITE_BYTES and kernel["kernel_write"]["requests"] >= 2
    assert kernel["pending"] == {"requests": 0, "bytes": 0}          # every stream was closed
    fns = got["fn"]
    assert sum(fns.values()) == sum(c["calls"] for c in CLASSES.values())
    if build == "exact":
        assert fns == {"fopen": 5, "fclose": 4, "fwrite": 9, "fprintf": 1, "fputs": 1, "fputc": 1,
                       "fflush": 1, "fread": 2, "fseek": 2, "ftell": 1, "rewind": 1, "fgets": 2,
                       "fgetc": 1}
    else:
        # whatever the compiler chose, under its own name
        assert fns.get("fprintf", 0) + fns.get("__fprintf_chk", 0) == 1
        assert fns.get("fgets", 0) + fns.get("__fgets_chk", 0) == 2
        assert fns["fopen"] == 5 and fns["fclose"] == 4
    # glibc's stdio reaches the kernel through its internal aliases: the posix module
    # sees none of the stream's system calls, the program made none of its own
    posix = {f["class"]: f for f in r["lines"]["posix"] if "class" in f}
    assert all(posix[k]["calls"] == 0 for k in ("read", "write", "meta", "sync"))
    assert r["end"]["truncated"] == 0


def test_without_an_output_path_the_wrappers_only_pass_through(workload, tmp_path):
    """Its own errno checks (ENOENT from a failing fopen) pass, and nothing is written."""
    _, exe = workload
    assert_silent_without_output(exe, tmp_path)


def test_printf_to_stdout_is_counted_and_still_printed(tmp_path):
    """printf and puts go to stdout through the wrappers; the output is the program's."""
    if CC is None:
        pytest.skip("no cc on PATH")
    src, exe, out = tmp_path / "p.c", tmp_path / "p", tmp_path / "rec"
    src.write_text('#include <stdio.h>\nint main(void) { printf("%s=%d\\n", "x", 7); '
                   'puts("done"); return 0; }\n')
    r = subprocess.run([CC, "-O0", "-fno-builtin", "-o", str(exe), str(src)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    p = run_child([str(exe)], out)
    assert p.returncode == 0, p.stderr
    assert p.stdout in ("x=7\ndone\n", b"x=7\ndone\n")
    got = module_lines(only_record(out), "stdio")
    assert got["fn"] == {"printf": 1, "puts": 1}
    w = got["class"]["other_write"]            # stdout is the test's pipe: not storage
    assert (w["calls"], w["errors"], w["bytes"]) == (2, 0, 4 + 5)
    assert got["class"]["write"]["calls"] == 0 and got["class"]["kernel_write"]["requests"] == 0


def test_the_unlocked_forms_are_counted_like_the_locked_ones(tmp_path):
    """fwrite_unlocked and friends (what programs that lock a stream themselves call)."""
    if CC is None:
        pytest.skip("no cc on PATH")
    src, exe, out, data = tmp_path / "u.c", tmp_path / "u", tmp_path / "rec", tmp_path / "f"
    src.write_text(r'''
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    char buf[100], line[64];
    memset(buf, 'a', sizeof buf);
    FILE *f = fopen(argv[1], "w+");
    flockfile(f);
    for (int i = 0; i < 3; i++)
        if (fwrite_unlocked(buf, 1, 100, f) != 100) return 1;
    if (fputs_unlocked("abc\n", f) == EOF || fputc_unlocked('x', f) == EOF || fflush_unlocked(f) != 0) return 2;
    funlockfile(f);
    rewind(f);
    if (fread_unlocked(buf, 1, 100, f) != 100 || fgets_unlocked(line, sizeof line, f) == NULL) return 3;
    if (fgetc_unlocked(f) == EOF) return 4;
    fclose(f);
    return 0;
}
''')
    r = subprocess.run([CC, "-O0", "-fno-builtin", "-o", str(exe), str(src)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    p = run_child([str(exe), str(data)], out)
    assert p.returncode == 0, p.stderr
    got = module_lines(only_record(out), "stdio")
    assert got["fn"] == {"fopen": 1, "fwrite_unlocked": 3, "fputs_unlocked": 1, "fputc_unlocked": 1,
                         "fflush_unlocked": 1, "rewind": 1, "fread_unlocked": 1, "fgets_unlocked": 1,
                         "fgetc_unlocked": 1, "fclose": 1}
    w, rd = got["class"]["write"], got["class"]["read"]
    assert (w["calls"], w["errors"], w["bytes"]) == (5, 0, 300 + 4 + 1)
    assert got["class"]["kernel_write"] == {"requests": 1, "bytes": 305}      # the fflush
    # 100 B, then 63 (fgets fills its 64-byte line), then one character
    assert (rd["calls"], rd["errors"], rd["bytes"]) == (3, 0, 100 + 63 + 1)


# ---- what reached the kernel, against strace ------------------------------------

KERNEL = r"""
#include <stdio.h>
#include <string.h>
static char big[1 << 20];
int main(int argc, char **argv) {
    char b[100];
    memset(b, 'a', sizeof b);
    FILE *f = fopen(argv[1], "w");
    for (int i = 0; i < 100000; i++) fwrite(b, 1, sizeof b, f);    /* a buffer-full write now and then */
    for (int i = 0; i < 1000; i++) fflush(f);                       /* the first sends the rest, the others nothing */
    fwrite(big, 1, sizeof big, f);                                  /* around the buffer, in one request */
    fprintf(f, "hello %d\n", 5);
    fclose(f);
    for (int i = 0; i < 100000; i++) printf("line %d\n", i);        /* stdout: /dev/null, not storage */
    f = fopen(argv[1], "r");
    while (fread(b, 1, sizeof b, f) == sizeof b) ;                  /* to the end, and the read that finds it */
    fclose(f);
    f = fopen(argv[1], "r");
    fread(big, 1, 10000, f);                                        /* part of a buffer and more: two requests */
    /* as sort reads: whole buffers, the rest, the end */
    while (fread(big, 1, sizeof big, f) == sizeof big) ;
    fclose(f);
    f = fopen(argv[1], "r");
    /* as ld reads an archive: seek, read a header, seek on; a seek off the buffer reads a whole
       buffer from the block it lands in (nothing when it lands on a block's start), one inside
       it reads nothing, and a refill after a seek leaves the buffer's end where it was */
    for (long i = 0; i < 2000; i++) {
        fseek(f, (i * 7919 + (i % 5 == 0 ? 0 : 300)) % 9000000 / (i % 7 == 0 ? 4096 : 1)
              * (i % 7 == 0 ? 4096 : 1), SEEK_SET);
        fread(b, 1, i % 3 == 0 ? sizeof b : 60, f);
        if (i % 11 == 0) fread(big, 1, 5000, f);
    }
    /* the end, as ld looks at it: a seek to the end of a short last block reads that block
       again, and leaves every pointer of the stream as it was */
    for (int i = 0; i < 3; i++) {
        fseek(f, -100, SEEK_END);
        fread(b, 1, 100, f);
        fseek(f, 0, SEEK_END);
        fseek(f, 0, SEEK_END);
    }
    fclose(f);
    f = fopen(argv[2], "w");
    fprintf(f, "left open\n");                                      /* glibc's exit writes it */
    return 0;
}
"""


def _strace_or_skip():
    strace = shutil.which("strace")
    if strace is None or CC is None:
        pytest.skip("needs strace and cc")
    if subprocess.run([strace, "-f", "-o", "/dev/null", "true"], capture_output=True).returncode != 0:
        pytest.skip("strace cannot trace here (ptrace refused)")
    return strace


def _traced(strace, argv, paths, tmp_path):
    """{(syscall, path): [calls, bytes]} of read and write on the given paths, from strace -y."""
    log = tmp_path / "strace.txt"
    with open(os.devnull, "wb") as null:
        subprocess.run([strace, "-f", "-y", "-e", "trace=read,write", "-o", str(log), *argv], stdout=null, check=True,
                       timeout=120)
    out = {}
    for ln in log.read_text().splitlines():
        m = re.search(r"\b(read|write)\(\d+<([^>]*)>.*= (\d+)$", ln)
        if m and m.group(2) in paths:
            c = out.setdefault((m.group(1), m.group(2)), [0, 0])
            c[0] += 1
            c[1] += int(m.group(3))
    return out


def test_kernel_requests_of_streams_on_files_match_strace(tmp_path):
    """The estimate from the buffers is the count strace sees on the files, to the request and the
    byte: writes of a full buffer, a flush of the rest, empty flushes that send nothing, a
    write around the buffer, the flush at fclose and the one glibc's exit makes; reads of a
    buffer each and the one at the end. printf to /dev/null is a library call of other_write
    and no request to storage."""
    strace = _strace_or_skip()
    src, exe = tmp_path / "k.c", tmp_path / "k"
    src.write_text(KERNEL)
    subprocess.run([CC, "-O1", "-o", str(exe), str(src)], check=True, timeout=120)
    data, left = str(tmp_path / "data"), str(tmp_path / "left")
    out = tmp_path / "rec"
    p = run_child(["sh", "-c", 'exec "$0" "$@" > /dev/null', str(exe), data, left], out)
    assert p.returncode == 0, p.stderr
    # the shell counted its redirect's open before its exec: that image's record comes first
    recs = [r for r in parse(out.read_text()) if r["process"]["reason"] != "exec"]
    assert len(recs) == 1, recs
    got = module_lines(recs[0], "stdio")["class"]
    seen = _traced(strace, [str(exe), data, left], {data, left}, tmp_path)
    writes = [sum(seen.get(("write", p), [0, 0])[i] for p in (data, left)) for i in (0, 1)]
    assert [got["kernel_write"]["requests"] + got["pending"]["requests"],
            got["kernel_write"]["bytes"] + got["pending"]["bytes"]] == writes
    assert got["pending"] == {"requests": 1, "bytes": 10}
    assert [got["kernel_read"]["requests"], got["kernel_read"]["bytes"]] == seen[("read", data)]
    assert got["write"]["calls"] == 100000 + 1 + 1 + 1 and got["flush"]["calls"] == 1000
    assert got["other_write"]["calls"] == 100000 and got["other_write"]["bytes"] == sum(
        len(f"line {i}\n") for i in range(100000))
