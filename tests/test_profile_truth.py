"""ceiling profile's counts, totals and verdicts against references that need no peer
tool (issue 26): our own C program making a known number of calls of known sizes, dd
with known sizes (alone and under a shell), a program reading its own peak resident
memory from the kernel (VmHWM), a child that ends in _exit, stdio to /dev/null, a copy
by copy_file_range, a file deleted and made again. The same figures beside strace,
Darshan and GNU time on real programs are benchmarks/profile_vs_peers.py's.

Tests marked xfail(strict) wait for a fix made in another branch: when it lands they
pass, strict turns that into a failure, and the mark is removed."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ceiling.probes.exec_reads import exec_reads

CC = shutil.which("cc") or shutil.which("gcc")
SQLITE3 = shutil.which("sqlite3")

SOURCE = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 16];     /* 64 KiB */

int main(int argc, char **argv)
{
    const char *mode = argv[1];
    if (!strcmp(mode, "known")) {          /* 24 writes of 4096 B, 1 fsync, 16 reads of 4096 B, 4 of 1000 B */
        int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0600);
        for (int i = 0; i < 16; i++)
            if (write(fd, buf, 4096) != 4096) return 1;
        for (int i = 0; i < 8; i++)
            if (pwrite(fd, buf, 4096, (off_t)i * 8192) != 4096) return 1;
        if (fsync(fd) || lseek(fd, 0, SEEK_SET)) return 1;
        for (int i = 0; i < 16; i++)
            if (read(fd, buf, 4096) != 4096) return 1;
        for (int i = 0; i < 4; i++)
            if (pread(fd, buf, 1000, 0) != 1000) return 1;
        return close(fd) != 0;
    }
    if (!strcmp(mode, "rss")) {            /* touch MIB MiB, then print the kernel's VmHWM in kB */
        size_t n = (size_t)atol(argv[2]) << 20;
        char *p = malloc(n);
        memset(p, 1, n);
        FILE *f = fopen("/proc/self/status", "r");
        char line[256];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "VmHWM:", 6)) printf("%ld\n", atol(line + 6));
        return p[n / 2] != 1;
    }
    if (!strcmp(mode, "forkexit")) {       /* a child writes 10 x 512 B and ends in _exit */
        pid_t pid = fork();
        if (pid == 0) {
            int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
            for (int i = 0; i < 10; i++)
                if (write(fd, buf, 512) != 512) _exit(1);
            _exit(0);
        }
        int st;
        return waitpid(pid, &st, 0) != pid || st != 0;
    }
    if (!strcmp(mode, "stdio")) {          /* N lines through stdio */
        for (long i = 0; i < atol(argv[2]); i++)
            printf("line %ld of a program printing to whatever stdout is\n", i);
        return 0;
    }
    if (!strcmp(mode, "copy")) {           /* SRC to DST by copy_file_range alone */
        int in = open(argv[2], O_RDONLY), out = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ssize_t got;
        while ((got = copy_file_range(in, NULL, out, NULL, 1 << 20, 0)) > 0)
            ;
        return got < 0 || close(in) || close(out);
    }
    if (!strcmp(mode, "remake")) {         /* N times: create FILE, write 100 B, close, rename it away */
        char to[4096];
        for (long i = 0; i < atol(argv[3]); i++) {
            int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
            snprintf(to, sizeof to, "%s.%ld", argv[2], i);   /* the next FILE is a new inode */
            if (write(fd, buf, 100) != 100 || close(fd) || rename(argv[2], to)) return 1;
        }
        return 0;
    }
    if (!strcmp(mode, "late") || !strcmp(mode, "early")) {  /* 4 MiB written and read back, */
        if (!strcmp(mode, "late"))                             /* after 0.3 s asleep or before */
            usleep(300000);
        int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0600);
        for (int i = 0; i < 16; i++)
            if (write(fd, buf, sizeof buf) != sizeof buf) return 1;
        for (int i = 0; i < 48; i++)
            if (pwrite(fd, buf, sizeof buf, (off_t)(16 + i) * sizeof buf) != sizeof buf) return 1;
        for (int i = 0; i < 64; i++)
            if (pread(fd, buf, sizeof buf, (off_t)i * sizeof buf) != sizeof buf) return 1;
        if (!strcmp(mode, "early"))
            usleep(300000);
        return close(fd) != 0;
    }
    if (!strcmp(mode, "opens")) {          /* N files made in DIR, 1 B each: a full table of file records */
        char p[4096];                      /* (names of 128 characters: a long record) */
        for (long i = 0; i < atol(argv[3]); i++) {
            snprintf(p, sizeof p, "%s/%0128ld", argv[2], i);
            int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd < 0 || write(fd, buf, 1) != 1 || close(fd)) return 1;
        }
        return 0;
    }
    if (!strcmp(mode, "gc") || !strcmp(mode, "repack")) {
        /* git gc's shape: gc starts repack; repack sleeps, starts a child that ends at once (shorter than
           the sampler's interval), waits for it, then writes DIR/refs.lock through stdio (10 lines) and
           renames it to DIR/refs, and ends: a process on a CPU a sliver of its life whose child the sampler
           most often saw alive at one sample, with the next one after both had ended (a launcher, it judges) */
        extern char **environ;
        pid_t pid;
        int st;
        char *args[] = {argv[0], !strcmp(mode, "gc") ? "repack" : "leaf", argv[2], NULL};
        if (!strcmp(mode, "repack")) {
            struct timespec ts = {0, 350000000};
            nanosleep(&ts, NULL);
        }
        if (posix_spawn(&pid, argv[0], NULL, NULL, args, environ) != 0 || waitpid(pid, &st, 0) != pid || st)
            return 1;
        if (!strcmp(mode, "repack")) {
            char lock[4096], final[4096];
            snprintf(lock, sizeof lock, "%s/refs.lock", argv[2]);
            snprintf(final, sizeof final, "%s/refs", argv[2]);
            FILE *f = fopen(lock, "w");
            for (int i = 0; i < 10; i++)
                fputs("0123456789abcdef0123456789abcdef01234567 refs/heads/x\n", f);
            if (fclose(f) != 0 || rename(lock, final) != 0)
                return 1;
        }
        return 0;
    }
    if (!strcmp(mode, "leaf")) {           /* 90 ms asleep: most often seen by one sample of 0.1 s, never two */
        struct timespec ts = {0, 90000000};
        nanosleep(&ts, NULL);
        _exit(0);
    }
    if (!strcmp(mode, "spin")) {           /* on a CPU for SECONDS */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        volatile unsigned long n = 0;
        do {
            for (int i = 0; i < 1000000; i++) n++;
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) * 1e-9 < atof(argv[2]));
        return 0;
    }
    return 2;
}
"""


@pytest.fixture(scope="module")
def prog(tmp_path_factory) -> str:
    assert CC, "a C compiler (cc) is needed to build the test program"
    d = tmp_path_factory.mktemp("truth")
    (d / "truth.c").write_text(SOURCE)
    subprocess.run([CC, "-O1", "-o", str(d / "truth"), str(d / "truth.c")], check=True)
    return str(d / "truth")


def profile(tmp_path: Path, *cmd: str, stdout=subprocess.PIPE):
    out = tmp_path / "p.json"
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json",
                        str(out), "--", *cmd], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120,
                       env=dict(os.environ, NO_COLOR="1"))
    assert r.returncode == 0, r.stderr
    return r, json.loads(out.read_text())


def records(doc: dict, path: Path) -> list:
    """ceiling's per-file records of a path (more than one where it keys them by inode and the
    path named several files over the run)."""
    return [f for f in (doc["application"]["profile"]["files"] or {}).get("shown", []) if f["path"] == str(path)]


def record(doc: dict, path: Path) -> dict:
    """The path's counts, summed over its records."""
    recs = records(doc, path)
    return {k: sum(r[k] for r in recs) for k in recs[0] if isinstance(recs[0][k], int)} if recs else {}


def metric(doc: dict, name: str) -> float:
    return next(m["value"] for m in doc["metrics"] if m["name"] == name)


def test_a_programs_calls_and_bytes_on_its_file_are_counted_exactly(tmp_path, prog):
    f = tmp_path / "known.dat"
    _, doc = profile(tmp_path, prog, "known", str(f))
    rec = record(doc, f)
    got = {k: rec.get(k) for k in ("opens", "writes", "write_bytes", "reads", "read_bytes", "syncs")}
    assert got == {"opens": 1, "writes": 24, "write_bytes": 24 * 4096, "reads": 20,
                   "read_bytes": 16 * 4096 + 4 * 1000, "syncs": 1}
    io = doc["application"]["profile"]["io_calls"]
    assert io["sync"]["calls"] == 1
    assert io["read"]["calls"] == 20 and io["read"]["bytes"] == 16 * 4096 + 4 * 1000


def test_dd_under_a_shell_counts_each_call_once(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _, doc = profile(tmp_path, "sh", "-c", f"dd if=/dev/zero of={a} bs=64k count=16 status=none; "
                                           f"dd if={a} of={b} bs=32k status=none")
    ra, rb = record(doc, a), record(doc, b)
    assert (ra["writes"], ra["write_bytes"], ra["reads"], ra["read_bytes"]) == (16, 1 << 20, 33, 1 << 20)
    assert (rb["writes"], rb["write_bytes"]) == (32, 1 << 20)


@pytest.mark.parametrize("shell", [False, True], ids=["alone", "under sh -c"])
def test_proc_totals_are_the_bytes_moved_within_2_percent(tmp_path, prog, shell):
    # alone: 4 MiB written and read back just before the program exits, after the sampler's
    # first readings, so that only totals taken at its exit have them (four runs: a reading
    # may fall between the last call and the exit by chance); under a shell: the same before
    # a pause, then the shell pauses too, after it has reaped the program (the kernel then adds
    # the child's I/O to the shell's own: counted twice if both are summed). Plus what the
    # loader reads at start (a few KiB: inside the 2 %).
    out = tmp_path / "out"
    cmd = ["sh", "-c", f"{prog} early {out}; sleep 0.3"] if shell else [prog, "late", str(out)]
    for _ in range(1 if shell else 4):
        _, doc = profile(tmp_path, *cmd)
        assert metric(doc, "app.io.write") * 1e6 == pytest.approx(4 << 20, rel=0.02)
        assert metric(doc, "app.io.read") * 1e6 == pytest.approx(4 << 20, rel=0.02)


@pytest.mark.parametrize("mib", [
    2, 64])
def test_peak_rss_is_the_kernels_figure_for_the_program(tmp_path, prog, mib):
    r, doc = profile(tmp_path, prog, "rss", str(mib))
    hwm_mib = int(r.stdout.split()[0]) / 1024          # the program's own VmHWM
    assert abs(metric(doc, "app.rss.peak") - hwm_mib) <= max(0.10 * hwm_mib, 1.0)


def test_a_child_that_ends_in__exit_is_counted(tmp_path, prog):
    f = tmp_path / "child.dat"
    _, doc = profile(tmp_path, prog, "forkexit", str(f))
    rec = record(doc, f)
    assert (rec.get("writes"), rec.get("write_bytes")) == (10, 5120)


def test_a_child_that_mostly_waited_for_its_own_children_keeps_its_file_calls(tmp_path, prog):
    # git gc's git repack: the sampler judges it a launcher (on a CPU a sliver of its life, its child seen
    # alive at one sample and gone, with it, by the next), which left its records out: its files, as
    # git's info/refs, were missing. (Not judged so when no sample falls in the child's 90 ms: it passes
    # then without the fix too.)
    _, doc = profile(tmp_path, prog, "gc", str(tmp_path))
    rec = record(doc, tmp_path / "refs.lock")
    assert (rec.get("opens"), rec.get("writes"), rec.get("write_bytes")) == (1, 10, 10 * 54)
    assert (rec.get("kernel_writes"), rec.get("kernel_write_bytes")) == (1, 10 * 54)


def test_stdio_to_dev_null_is_no_storage_io(tmp_path, prog):
    _, doc = profile(tmp_path, prog, "stdio", "300000", stdout=subprocess.DEVNULL)
    storage = [f["id"] for f in doc["findings"] if f["id"].startswith(("profile.io", "profile.ceiling.io"))]
    assert storage == [] and "io" not in [b["bound"] for b in doc["analysis"]["bounds"]]


def test_bytes_copied_by_copy_file_range_are_read_and_written(tmp_path, prog):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(os.urandom(3 << 20))
    _, doc = profile(tmp_path, prog, "copy", str(src), str(dst))
    assert dst.read_bytes() == src.read_bytes()
    assert record(doc, src).get("read_bytes") == 3 << 20
    assert record(doc, dst).get("write_bytes") == 3 << 20


def test_a_file_deleted_and_made_again_is_one_record_by_its_path(tmp_path, prog):
    # sqlite's rollback journal is made again at every transaction; Darshan keeps one record per path
    f = tmp_path / "journal"
    _, doc = profile(tmp_path, prog, "remake", str(f), "200")
    assert [(r["opens"], r["writes"], r["write_bytes"]) for r in records(doc, f)] == [(200, 200, 20000)]


@pytest.mark.skipif(not SQLITE3, reason="sqlite3 is not installed (apt-get install sqlite3)")
def test_sqlites_journal_is_opened_once_per_transaction(tmp_path):
    # journal_mode=DELETE (sqlite's default): every autocommit statement creates the
    # rollback journal, writes it, syncs it and deletes it; Darshan's record of the path
    # has as many opens (benchmarks/profile_vs_peers.py: 301 for a table and 300 rows)
    script = tmp_path / "s.sql"
    script.write_text("CREATE TABLE t(i INTEGER PRIMARY KEY, s TEXT);\n"
                      + "".join(f"INSERT INTO t(s) VALUES('row {i}');\n" for i in range(40)))
    db = tmp_path / "t.db"
    out = tmp_path / "p.json"
    with open(script) as stdin:
        r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json",
                            str(out), "--", SQLITE3, str(db)], stdin=stdin, capture_output=True, text=True,
                           timeout=120)
    assert r.returncode == 0, r.stderr
    assert record(json.loads(out.read_text()), Path(f"{db}-journal")).get("opens") == 41


def test_a_two_process_program_beside_competing_load_is_not_called_oversubscribed(tmp_path, prog):
    # one co-runner per CPU outside the program's tree: the program's 2 processes wait for a
    # CPU because of them, not because it asks for more CPUs than it has
    busy = [subprocess.Popen([prog, "spin", "30"]) for _ in os.sched_getaffinity(0)]
    try:
        _, doc = profile(tmp_path, "sh", "-c", f"{prog} spin 2 & {prog} spin 2; wait")
    finally:
        for p in busy:
            p.kill()
            p.wait()
    bounds = doc["analysis"]["bounds"]
    said = " ".join([b["evidence"] for b in bounds] + [f["title"] + " " + f["evidence"] for f in doc["findings"]])
    assert "oversubscribed" not in [b["bound"] for b in bounds]
    assert "competing" in said.lower() or "other process" in said.lower()


def test_the_interposers_own_reads_and_records_are_not_the_programs_io(tmp_path, prog):
    # a program that moves 100 B: the interposer's /proc/self reads and its record (KiB) were in
    # its totals, two or three times what it moved, and then the loader's read of the interposer's
    # ELF header (832 B on x86-64, measured per build); now all are taken off: the same bytes with
    # and without it, exactly
    def totals(*opts):
        out = tmp_path / "p.json"
        r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", *opts,
                            "--save-json", str(out), "--", prog, "remake", str(tmp_path / "f"), "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                           env=dict(os.environ, NO_COLOR="1"))
        assert r.returncode == 0, r.stderr
        doc = json.loads(out.read_text())
        return doc, metric(doc, "app.io.read") * 1e6, metric(doc, "app.io.write") * 1e6
    doc, read, wrote = totals()
    assert doc["application"]["profile"]["interposer"]["used"], doc["application"]["profile"]["interposer"]
    _, plain_read, plain_wrote = totals("--no-interpose")
    assert wrote == pytest.approx(plain_wrote, abs=8) and plain_wrote == pytest.approx(100, abs=8)
    own = doc["application"]["profile"]["launch"]["interposer_io"]
    assert own["read_bytes"] > 0 and own["written_bytes"] > 0
    loader = own["loader"]
    assert loader["images"] == 1 and loader["per_image_bytes"] > 0, loader
    assert loader["read_bytes"] == loader["per_image_bytes"] and "ceiling-launch" in loader["how"]
    # and what the kernel read to execute the program (its ELF headers and its loader's), which is
    # no system call: taken off too, so that the totals are the system calls' bytes; the
    # --no-interpose run knows no images and keeps them
    execs = own["exec"]
    assert execs == {"images": 1, "read_calls": 5, "read_bytes": exec_reads(prog)["rchar"], "how": execs["how"]}
    assert round(read) + execs["read_bytes"] == round(plain_read), (read, execs, plain_read)


def test_a_forked_childs_reads_are_the_programs_without_a_loader_to_take_off(tmp_path, prog):
    # a child of fork (no exec) writes a record of its own, but the loader never ran in it: the
    # loader's reads are taken off once per loaded image, so the totals still equal the plain run's
    def read(*opts):
        out = tmp_path / "p.json"
        r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", *opts,
                            "--save-json", str(out), "--", prog, "forkexit", str(tmp_path / "f")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                           env=dict(os.environ, NO_COLOR="1"))
        assert r.returncode == 0, r.stderr
        doc = json.loads(out.read_text())
        return doc, metric(doc, "app.io.read") * 1e6
    doc, profiled = read()
    assert doc["application"]["profile"]["interposer"]["used"], doc["application"]["profile"]["interposer"]
    own = doc["application"]["profile"]["launch"]["interposer_io"]
    assert own["loader"]["images"] == 1 and own["exec"]["images"] == 1     # one exec, the child's none
    _, plain = read("--no-interpose")
    assert round(profiled) + own["exec"]["read_bytes"] == round(plain), (profiled, own, plain)


def test_the_profiled_peak_rss_is_within_1_mib_of_the_plain_run(tmp_path, prog):
    # 600 files made: the interposer's table of file records is full (512) and its record at exit
    # is 250 KiB of text. Its report's scratch (MPI peers, per-file sums: 200 KiB, written even in a
    # program that never called MPI) and the whole record rendered at once put the program's peak
    # 1.0-1.1 MiB above its own here; the goal (issue 26) is 10 % or 1 MiB of GNU time's figure, which is
    # the --no-interpose run's (both are wait4's ru_maxrss of the program, forked from ceiling-launch)
    def peak(*opts):
        d = tmp_path / ("files" + "".join(opts))
        d.mkdir()
        out = tmp_path / "p.json"
        r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", *opts,
                            "--save-json", str(out), "--", prog, "opens", str(d), "600"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                           env=dict(os.environ, NO_COLOR="1"))
        assert r.returncode == 0, r.stderr
        doc = json.loads(out.read_text())
        return doc, metric(doc, "app.rss.peak")
    doc, profiled = peak()
    assert doc["application"]["profile"]["interposer"]["used"], doc["application"]["profile"]["interposer"]
    files = doc["application"]["profile"].get("files", {})
    assert files["lost"] > 0, files                # 600 files, 512 records: the table is full
    _, plain = peak("--no-interpose")
    assert 0 <= profiled - plain < 1.0, (profiled, plain)
