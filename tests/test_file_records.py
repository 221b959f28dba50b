"""The interposer's per-file records (csrc/interpose/files.c) and what ceiling makes of them
(analysis/profile_files.py, the profile's terminal page and HTML section).

C programs compiled here make known accesses to known files; their records are checked to
the request and the byte: requests, bytes, random and unaligned accesses (against the
block size the record states), fsyncs, extent, opens, the API that touched each file,
and the path. No timings: ns is only checked to be there.
"""
import os
import shutil
import subprocess

import pytest

from ceiling.analysis import profile_files
from ceiling.probes.interpose_record import from_dicts, parse as read_records
from ceiling.results.model import Run, Application
from ceiling.results.profile import profile_from
from test_interpose import LIB, NEEDS_LIB, only_record, parse, run_child

CC = shutil.which("cc")

PROGRAM = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char buf[1 << 16];
#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "line %d: %s (errno %d)\n", __LINE__, #cond, errno); exit(1); } } while (0)

int main(int argc, char **argv)
{
    char a[4096], b[4096], c[4096];
    const char *mode = argv[2];
    snprintf(a, sizeof a, "%s/a.dat", argv[1]);
    snprintf(b, sizeof b, "%s/b.dat", argv[1]);
    snprintf(c, sizeof c, "%s/c.dat", argv[1]);
    if (!strcmp(mode, "mixed")) {
        /* a: POSIX, 4 x 64 KiB in order and an fsync; then stdio reads it back in 16 KiB */
        int fd = open(a, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        for (int i = 0; i < 4; i++)
            CHECK(write(fd, buf, sizeof buf) == sizeof buf);
        CHECK(fsync(fd) == 0);
        CHECK(close(fd) == 0);
        FILE *f = fopen(a, "r");
        CHECK(f);
        while (fread(buf, 1, 16384, f) == 16384) {}
        CHECK(fclose(f) == 0);
        /* b: pwrite of 100 B at 0, 7000, 6000, ..., 1000 (7 random, 7 off a 4 KiB block), pread 50 B at 8192 */
        fd = open(b, O_CREAT | O_RDWR | O_TRUNC, 0644);
        for (int i = 0; i < 8; i++)
            CHECK(pwrite(fd, buf, 100, (off_t)((i * 7) % 8) * 1000) == 100);
        CHECK(pread(fd, buf, 50, 8192) == 0);
        CHECK(pread(fd, buf, 50, 4096) == 50);
        CHECK(close(fd) == 0);
        /* c: the descriptor dup'ed, written through the copy (met without its open) */
        fd = open(c, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        int d = dup(fd);
        CHECK(write(d, buf, 10) == 10);
        CHECK(close(d) == 0 && close(fd) == 0);
    } else if (!strcmp(mode, "many")) {
        /* 100 files, each opened twice and written 3 x 10 B in turn: the per-thread cache (64 slots)
           passes files on and folds their counts */
        int fds[100];
        for (int round = 0; round < 2; round++) {
            for (int i = 0; i < 100; i++) {
                char p[4096];
                snprintf(p, sizeof p, "%s/f%03d", argv[1], i);
                fds[i] = open(p, O_CREAT | O_WRONLY | (round ? O_APPEND : O_TRUNC), 0644);
                CHECK(fds[i] >= 0);
            }
            for (int k = 0; k < 3; k++)
                for (int i = 0; i < 100; i++)
                    CHECK(write(fds[i], buf, 10) == 10);
            for (int i = 0; i < 100; i++)
                CHECK(close(fds[i]) == 0);
        }
    } else if (!strcmp(mode, "toomany")) {
        /* more distinct files than a process has records for */
        for (int i = 0; i < 600; i++) {
            char p[4096];
            snprintf(p, sizeof p, "%s/g%03d", argv[1], i);
            int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
            CHECK(fd >= 0 && write(fd, buf, 1) == 1 && close(fd) == 0);
        }
    } else if (!strcmp(mode, "stdout")) {
        /* standard output redirected to a file by the parent: met without its open */
        CHECK(write(1, buf, 4096) == 4096);
        fputs("hello\n", stdout);
    } else if (!strcmp(mode, "fork")) {
        /* the child's writes are the child's record's, not the parent's */
        int fd = open(a, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        CHECK(write(fd, buf, 100) == 100);
        pid_t pid = fork();
        if (pid == 0) {
            CHECK(write(fd, buf, 200) == 200);
            exit(0);               /* not _exit: the record is written at exit */
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        CHECK(close(fd) == 0);
    }
    return 0;
}
"""

pytestmark = NEEDS_LIB


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    if CC is None:
        pytest.skip("no cc on PATH")
    d = tmp_path_factory.mktemp("files")
    src, exe = d / "files.c", d / "files"
    src.write_text(PROGRAM)
    r = subprocess.run([CC, "-O0", "-o", str(exe), str(src)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return exe


def files_of(rec):
    lines = (rec.as_dict() if hasattr(rec, "as_dict") else rec)["lines"]["file"]
    head = [ln for ln in lines if "files" in ln]
    assert len(head) == 1, lines
    files = {os.path.basename(ln["path"]): ln for ln in lines if "dev" in ln}
    assert head[0]["files"] == len(files)
    return head[0], files


def run(program, tmp_path, mode):
    out, data = tmp_path / "rec", tmp_path / "data"
    data.mkdir(exist_ok=True)
    p = run_child([str(program), str(data), mode], out)
    assert p.returncode == 0, p.stderr
    return out, data


def test_each_file_has_its_requests_bytes_pattern_and_alignment(program, tmp_path):
    out, data = run(program, tmp_path, "mixed")
    head, files = files_of(only_record(out))
    assert head["lost"] == 0 and head["max"] > 0
    assert set(files) == {"a.dat", "b.dat", "c.dat"}
    a, b, c = files["a.dat"], files["b.dat"], files["c.dat"]
    for f in (a, b, c):
        assert f["write_ns"] > 0 and f["meta_ns"] > 0        # its opens and closes, timed
    assert a["path"] == str(data / "a.dat")
    # POSIX wrote 4 x 64 KiB in order (blocks of any size up to 64 KiB divide those offsets);
    # stdio read them back in 16 KiB freads plus the short one at the end
    assert (a["writes"], a["write_bytes"], a["syncs"], a["opens"], a["api"]) == (4, 4 << 16, 1, 2, 3)
    assert a["reads"] == 17 and a["read_bytes"] == 4 << 16 and a["random"] == 0
    assert a["extent"] == 4 << 16 and a["sync_ns"] > 0
    assert a["unaligned"] == (0 if (1 << 16) % a["blksize"] == 0 else 3)
    # b: pwrites at 0, 7000, 6000, ..., 1000, then preads at 8192 (nothing there) and 4096
    offsets = [0, 7000, 6000, 5000, 4000, 3000, 2000, 1000, 8192, 4096]
    assert (b["writes"], b["write_bytes"], b["reads"], b["read_bytes"]) == (8, 800, 2, 50)
    assert b["random"] == 9            # all but the first pwrite
    assert b["unaligned"] == sum(1 for o in offsets if o % b["blksize"])
    assert b["extent"] == 7100 and b["api"] == 1 and b["syncs"] == 0
    # c: opened once, written once through a copy of its descriptor: one record, found by its inode
    assert (c["opens"], c["writes"], c["write_bytes"]) == (1, 1, 10)


def test_counts_survive_the_per_thread_cache_passing_files_on(program, tmp_path):
    out, _ = run(program, tmp_path, "many")
    head, files = files_of(only_record(out))
    assert head["files"] == 100 and head["lost"] == 0
    for name, f in files.items():
        assert (f["opens"], f["writes"], f["write_bytes"]) == (2, 6, 60), name


def test_files_beyond_the_records_a_process_holds_are_counted_as_lost(program, tmp_path):
    out, _ = run(program, tmp_path, "toomany")
    head, files = files_of(only_record(out))
    assert head["files"] + head["lost"] == 600 and head["lost"] >= 600 - head["max"]
    assert all(f["writes"] == 1 and f["write_bytes"] == 1 for f in files.values())


def test_a_descriptor_inherited_from_the_parent_is_found_by_its_link(program, tmp_path):
    target, out, data = tmp_path / "stdout.txt", tmp_path / "rec", tmp_path / "data"
    data.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env.update(LD_PRELOAD=str(LIB), CEILING_INTERPOSE_OUT=str(out))
    with open(target, "wb") as fh:
        p = subprocess.run([str(program), str(data), "stdout"], env=env, stdout=fh, stderr=subprocess.PIPE,
                           timeout=120)
    assert p.returncode == 0, p.stderr
    head, files = files_of(only_record(out))
    f = files["stdout.txt"]
    assert f["path"] == str(target) and f["opens"] == 0
    # 4 KiB by write(2); "hello\n" through stdio's buffer
    assert (f["writes"], f["write_bytes"], f["api"]) == (2, 4096 + 6, 3)


def test_a_forked_child_counts_its_own_writes(program, tmp_path):
    out, _ = run(program, tmp_path, "fork")
    recs = parse(out.read_text())
    assert len(recs) == 2
    by = {r["process"]["forked"]: files_of(r)[1]["a.dat"] for r in recs}
    assert (by[0]["writes"], by[0]["write_bytes"], by[0]["opens"]) == (1, 100, 1)
    assert (by[1]["writes"], by[1]["write_bytes"], by[1]["opens"]) == (1, 200, 0)


# -- analysis and reports -----------------------------------------------------------------------

def _rec(pid, host="n1", **files):
    lines = [{"files": len(files), "lost": 0, "max": 512}]
    for i, (name, f) in enumerate(files.items()):
        base = {"id": i + 1, "dev": 1, "ino": 100 + i, "blksize": 4096, "api": 1, "opens": 1, "meta_ns": 0, "reads": 0,
                "read_bytes": 0, "read_ns": 0, "writes": 0, "write_bytes": 0, "write_ns": 0, "random": 0,
                "unaligned": 0, "syncs": 0, "sync_ns": 0, "extent": 0, "path": f"/scratch/{name}"}
        lines.append({**base, **f})
    return from_dicts([{"process": {"host": host, "pid": pid}, "lines": {"file": lines}}])[0]


def test_processes_of_a_node_sharing_a_file_add_up_and_the_busiest_comes_first():
    recs = [_rec(1, big={"writes": 1000, "write_bytes": 4096000, "write_ns": 2 * 10**9, "random": 900,
                         "unaligned": 10},
                 small={"reads": 10, "read_bytes": 10 << 20, "read_ns": 10**8}),
            _rec(2, big={"writes": 1000, "write_bytes": 4096000, "write_ns": 10**9, "random": 950}),
            _rec(3, host="n2", big={"writes": 5, "write_bytes": 5, "write_ns": 1})]
    s = profile_files.summarise(recs)
    assert s["count"] == 3 and s["capacity"] == 512 and s["lost"] == 0
    big = s["shown"][0]
    assert big["path"] == "/scratch/big" and big["host"] == "n1" and big["processes"] == 2
    assert (big["writes"], big["write_bytes"], big["random"]) == (2000, 8192000, 1850)
    assert big["write_s"] == pytest.approx(3.0) and big["time_s"] == pytest.approx(3.0)
    assert [f["host"] for f in s["shown"]] == ["n1", "n1", "n2"]
    got = {f.id: f for f in profile_files.findings(s, io_s=3.5)}
    # 92.5% random, written by two processes; 10 of 2000 unaligned is no finding
    assert set(got) == {"profile.file.random", "profile.file.shared"}
    assert "big" in got["profile.file.random"].title and "92% random" in got["profile.file.random"].evidence
    assert profile_files.busiest(s, 3.5).startswith("; busiest file (86% of that time): /scratch/big:")


def test_no_finding_names_a_file_that_took_little_of_the_io_time():
    s = profile_files.summarise([_rec(1, rnd={"reads": 500, "read_bytes": 500, "read_ns": 2 * 10**7, "random": 500,
                                               "unaligned": 500})])
    assert profile_files.findings(s, io_s=1.0) == []          # 2% of the I/O time
    assert {f.id for f in profile_files.findings(s, io_s=0.1)} == {"profile.file.random", "profile.file.unaligned"}
    tiny = profile_files.summarise([_rec(1, rnd={"reads": 500, "read_bytes": 500, "read_ns": 10**6, "random": 500})])
    assert profile_files.findings(tiny, io_s=0.001) == []     # all of it, but 1 ms


def test_records_without_file_lines_give_no_summary():
    assert profile_files.summarise(from_dicts([{"process": {"pid": 1}, "lines": {"posix": []}}])) == {}


def test_the_terminal_page_and_the_html_section_show_the_files():
    from ceiling.report import html_profile, terminal_profile
    s = profile_files.summarise([_rec(1, **{f"f{i}": {"writes": 10, "write_bytes": 10 << 20,
                                                       "write_ns": (i + 1) * 10**6} for i in range(8)})])
    run = Run(tool_version="t", host="n1", started="2026-11-25T00:00:00", command=["ceiling", "profile"])
    run.application = Application(command=["./app"], exit_status=0, wall_s=1.0, profile=profile_from({"files": s}))
    text = terminal_profile.render(run)
    assert "Files (5 of 8" in text and "/scratch/f7" in text and "/scratch/f2" not in text
    assert "(3 more file(s) in the HTML report and the JSON)" in text
    html = html_profile.application_section(run)
    assert "<h3>Files</h3>" in html and html.count("/scratch/f") == 8


POSITIONAL = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    char b[4096] = {0}, p[4096];
    snprintf(p, sizeof p, "%s/pos.dat", argv[1]);
    int fd = open(p, O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (pwrite(fd, b, 100, 4096) != 100 || write(fd, b, 10) != 10)    /* the write lands at 0 */
        return 1;
    if (lseek(fd, 8192, SEEK_SET) != 8192 || write(fd, b, 4096) != 4096)
        return 1;
    return close(fd);
}
"""


def test_a_write_after_a_pwrite_has_no_known_offset_until_a_seek(tmp_path):
    src, exe = tmp_path / "pos.c", tmp_path / "pos"
    src.write_text(POSITIONAL)
    r = subprocess.run([CC, "-O0", "-o", str(exe), str(src)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out, data = run(exe, tmp_path, "-")
    _, files = files_of(only_record(out))
    f = files["pos.dat"]
    # the pwrite at 4096 and the write at 8192 have known offsets; the write at the position
    # after the pwrite does not (the position did not move): not counted unaligned, nor in the extent
    assert f["writes"] == 3 and f["unaligned"] == sum(1 for o in (4096, 8192) if o % f["blksize"])
    assert f["extent"] == 8192 + 4096


MEMSTREAM = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
int main(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);      /* a stream with no descriptor: fileno fails */
    if (!m)
        return 1;
    errno = 0;
    if (fprintf(m, "x%d", 1) != 2 || errno != 0)
        return 2;
    errno = 0;
    if (fclose(m) != 0 || errno != 0)
        return 3;
    free(text);
    return 0;
}
"""


def test_a_stream_without_a_descriptor_leaves_the_callers_errno_alone(tmp_path):
    src, exe = tmp_path / "mem.c", tmp_path / "mem"
    src.write_text(MEMSTREAM)
    r = subprocess.run([CC, "-O0", "-o", str(exe), str(src)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    p = run_child([str(exe)], tmp_path / "rec")
    assert p.returncode == 0, (p.returncode, p.stderr)
    head, files = files_of(only_record(tmp_path / "rec"))
    assert files == {}                               # counted in the stdio totals, in no file's record


# -- records keyed by path (issue 26, item 4) -----------------------------------------------------

PATHS = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "line %d: %s (errno %d)\n", __LINE__, #cond, errno); exit(1); } } while (0)

static char buf[4096];

static void put(const char *path, int flags)
{
    int fd = open(path, O_CREAT | O_WRONLY | flags, 0644);
    CHECK(fd >= 0 && write(fd, buf, 10) == 10 && close(fd) == 0);
}

int main(int argc, char **argv)
{
    char p[4096], q[4096];
    const char *mode = argv[2];
    if (!strcmp(mode, "paths")) {
        /* j.dat deleted and created again 10 times, like sqlite's journal; the previous one is still
           open when the next is made, so that every one is a new inode on any file system */
        snprintf(p, sizeof p, "%s/j.dat", argv[1]);
        int old = -1;
        for (int i = 0; i < 10; i++) {
            int fd = open(p, O_CREAT | O_RDWR | O_TRUNC, 0644);
            CHECK(fd >= 0 && write(fd, buf, 100) == 100 && unlink(p) == 0);
            if (old >= 0)
                CHECK(close(old) == 0);
            old = fd;
        }
        CHECK(close(old) == 0);
        /* one inode under two names: two records */
        snprintf(p, sizeof p, "%s/one.dat", argv[1]);
        snprintf(q, sizeof q, "%s/two.dat", argv[1]);
        put(p, O_TRUNC);
        CHECK(link(p, q) == 0);
        put(q, O_APPEND);
        /* a relative path, an openat path and an unclean one: absolute and clean */
        CHECK(chdir(argv[1]) == 0);
        put("rel.dat", 0);
        int dir = open(".", O_RDONLY | O_DIRECTORY);
        int fd = openat(dir, "at.dat", O_CREAT | O_WRONLY, 0644);
        CHECK(dir >= 0 && fd >= 0 && write(fd, buf, 10) == 10 && close(fd) == 0 && close(dir) == 0);
        snprintf(p, sizeof p, "%s//.//unclean.dat", argv[1]);
        put(p, 0);
        /* a stream opened by a link's name: its record has the name as opened, as Darshan's */
        put("target.dat", 0);
        CHECK(symlink("target.dat", "link.dat") == 0);
        FILE *f = fopen("link.dat", "a");
        CHECK(f && fwrite(buf, 1, 10, f) == 10 && fclose(f) == 0);
    } else if (!strcmp(mode, "turns") || !strcmp(mode, "together")) {
        /* a parent and its child write one file: one after the other, or with both holding it open */
        int together = !strcmp(mode, "together");
        snprintf(p, sizeof p, "%s/s.dat", argv[1]);
        int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        CHECK(fd >= 0 && write(fd, buf, 10) == 10);
        if (!together)
            CHECK(close(fd) == 0);
        pid_t pid = fork();
        if (pid == 0) {
            if (together)
                CHECK(write(fd, buf, 10) == 10);
            else
                put(p, O_APPEND);
            exit(0);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        if (together)
            CHECK(write(fd, buf, 10) == 10 && close(fd) == 0);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def paths_program(tmp_path_factory):
    if CC is None:
        pytest.skip("no cc on PATH")
    d = tmp_path_factory.mktemp("paths")
    src, exe = d / "paths.c", d / "paths"
    src.write_text(PATHS)
    r = subprocess.run([CC, "-O0", "-o", str(exe), str(src)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return exe


def test_a_file_deleted_and_created_again_is_one_record_and_two_names_of_one_inode_are_two(paths_program, tmp_path):
    out, data = run(paths_program, tmp_path, "paths")
    head, files = files_of(only_record(out))
    assert set(files) == {"j.dat", "one.dat", "two.dat", "rel.dat", "at.dat", "unclean.dat", "target.dat", "link.dat"}
    j = files["j.dat"]
    assert (j["opens"], j["writes"], j["write_bytes"], j["recreated"]) == (10, 10, 1000, 9)
    assert files["one.dat"]["ino"] == files["two.dat"]["ino"] and files["two.dat"]["opens"] == 1
    for name in ("rel.dat", "at.dat", "unclean.dat", "link.dat"):
        assert files[name]["path"] == str(data / name)
    assert (files["link.dat"]["opens"], files["link.dat"]["write_bytes"], files["target.dat"]["opens"]) == (1, 10, 1)
    s = profile_files.summarise(read_records(out.read_text()))
    assert s["count"] == 8
    assert next(f for f in s["shown"] if f["path"].endswith("j.dat"))["recreated"] == 9


def _shared(paths_program, tmp_path, mode):
    out, _ = run(paths_program, tmp_path, mode)
    recs = read_records(out.read_text())
    assert len(recs) == 2
    for r in recs:
        f = files_of(r)[1]["s.dat"]
        assert 0 < f["first_open_ns"] <= f["last_close_ns"]
    s = profile_files.summarise(recs)
    (f,) = s["shown"]
    return f, s


def test_processes_taking_turns_with_a_file_do_not_share_it(paths_program, tmp_path):
    f, s = _shared(paths_program, tmp_path, "turns")
    assert (f["processes"], f["at_once"], f["writers_at_once"]) == (2, 1, 1)
    assert profile_files.findings(s, io_s=f["time_s"]) == []


def test_processes_holding_a_file_open_together_share_it(paths_program, tmp_path):
    f, s = _shared(paths_program, tmp_path, "together")
    assert (f["processes"], f["at_once"], f["writers_at_once"]) == (2, 2, 2)
    # a finding only where the file took the time: here it is all of it
    f["time_s"] = max(f["time_s"], profile_files.MIN_FILE_S)
    assert [x.id for x in profile_files.findings(s, io_s=f["time_s"])] == ["profile.file.shared"]


def test_shared_means_open_at_the_same_time_and_one_of_them_writing():
    def rec(pid, first, last, writes):
        r = _rec(pid, t={"writes": writes, "write_ns": 10**9, "first_open_ns": first, "last_close_ns": last})
        return r
    # gcc's temporary .s: cc1 writes it, as reads it, then the next cc1 writes it again: turns
    turns = profile_files.summarise([rec(1, 10, 20, 5), rec(2, 21, 30, 0), rec(3, 31, 40, 5), rec(4, 41, 50, 0)])
    (f,) = turns["shown"]
    assert (f["processes"], f["at_once"], f["writers_at_once"]) == (4, 1, 1)
    assert profile_files.findings(turns, io_s=1.0) == []
    # readers at once are not writers at once
    readers = profile_files.summarise([rec(1, 10, 20, 5), rec(2, 21, 30, 0), rec(3, 22, 30, 0)])
    assert (readers["shown"][0]["at_once"], readers["shown"][0]["writers_at_once"]) == (2, 1)
    both = profile_files.summarise([rec(1, 10, 20, 5), rec(2, 15, 30, 0)])
    assert {x.id for x in profile_files.findings(both, io_s=1.0)} == {"profile.file.shared"}


# -- synchronous opens, mappings, io_uring and AIO (issue 26, item 7) -----------------------------

OPENS = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "line %d: %s (errno %d)\n", __LINE__, #cond, errno); exit(1); } } while (0)

static char buf[1 << 20] __attribute__((aligned(4096)));

static int make(const char *dir, const char *name, int flags)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return open(p, O_CREAT | O_RDWR | O_TRUNC | flags, 0644);
}

int main(int argc, char **argv)
{
    const char *d = argv[1], *mode = argv[2];
    if (!strcmp(mode, "flags")) {
        /* 5 writes through O_DSYNC and 1 through a dup of it; 2 through O_SYNC; 3 plain */
        int ds = make(d, "dsync.dat", O_DSYNC), sy = make(d, "sync.dat", O_SYNC), pl = make(d, "plain.dat", 0);
        CHECK(ds >= 0 && sy >= 0 && pl >= 0);
        for (int i = 0; i < 5; i++)
            CHECK(write(ds, buf, 4096) == 4096);
        int cp = dup(ds);
        CHECK(cp >= 0 && write(cp, buf, 4096) == 4096 && close(cp) == 0);
        for (int i = 0; i < 2; i++)
            CHECK(write(sy, buf, 4096) == 4096);
        for (int i = 0; i < 3; i++)
            CHECK(write(pl, buf, 4096) == 4096);
        /* O_DIRECT given by fcntl, where the file system takes it (tmpfs before 6.6 does not) */
        int dr = make(d, "direct.dat", 0);
        CHECK(dr >= 0);
        if (fcntl(dr, F_SETFL, O_DIRECT) == 0 && pwrite(dr, buf, 4096, 0) == 4096)
            printf("direct\n");
        CHECK(close(ds) == 0 && close(sy) == 0 && close(pl) == 0 && close(dr) == 0);
    } else if (!strcmp(mode, "maps")) {
        /* 1 MiB mapped for reading, 8 KiB shared and writable, and an anonymous mapping */
        int r = make(d, "ro.dat", 0), w = make(d, "rw.dat", 0);
        CHECK(r >= 0 && w >= 0 && write(r, buf, sizeof buf) == sizeof buf && ftruncate(w, 8192) == 0);
        const char *m = mmap(NULL, sizeof buf, PROT_READ, MAP_PRIVATE, r, 0);
        char *n = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, w, 0);
        void *a = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(m != MAP_FAILED && n != MAP_FAILED && a != MAP_FAILED);
        n[0] = m[4096];
        CHECK(munmap((void *)m, sizeof buf) == 0 && munmap(n, 8192) == 0 && close(r) == 0 && close(w) == 0);
    } else if (!strcmp(mode, "io_uring")) {
        /* a ring set up by the raw system call (as liburing does), its rings mapped through mmap,
           then unmapped and closed: only the mapping shows it */
        struct io_uring_params p;
        memset(&p, 0, sizeof p);
        int fd = (int)syscall(SYS_io_uring_setup, 4, &p);
        if (fd < 0)
            return 77;                        /* io_uring disabled here (sysctl, seccomp) */
        size_t len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
        void *sq = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
        CHECK(sq != MAP_FAILED && munmap(sq, len) == 0 && close(fd) == 0);
    } else if (!strcmp(mode, "aio")) {
        /* a Linux AIO context by the raw system call, alive at exit: its ring is in the maps */
        aio_context_t ctx = 0;
        if (syscall(SYS_io_setup, 8, &ctx) != 0)
            return 77;
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def opens_program(tmp_path_factory):
    if CC is None:
        pytest.skip("no cc on PATH")
    d = tmp_path_factory.mktemp("opens")
    src, exe = d / "opens.c", d / "opens"
    src.write_text(OPENS)
    r = subprocess.run([CC, "-O0", "-o", str(exe), str(src)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return exe


def test_writes_through_synchronous_opens_are_counted_with_their_flags(opens_program, tmp_path):
    out, data = tmp_path / "rec", tmp_path / "data"
    data.mkdir()
    p = run_child([str(opens_program), str(data), "flags"], out)
    assert p.returncode == 0, p.stderr
    _, files = files_of(only_record(out))
    ds, sy, pl = files["dsync.dat"], files["sync.dat"], files["plain.dat"]
    assert (ds["oflags"], ds["writes"], ds["flagged_writes"]) == (1, 6, 6) and ds["flagged_write_ns"] > 0
    assert (sy["oflags"], sy["flagged_writes"]) == (2, 2)
    assert (pl["oflags"], pl["flagged_writes"], pl["flagged_write_ns"]) == (0, 0, 0)
    if b"direct" in p.stdout:
        assert (files["direct.dat"]["oflags"], files["direct.dat"]["flagged_writes"]) == (4, 1)
    s = profile_files.summarise(read_records(out.read_text()))
    assert [f["path"].rsplit("/", 1)[1] for f in s["flagged"]][:2] == ["dsync.dat", "sync.dat"]
    (f,) = [x for x in profile_files.uncounted(s, run_s=1.0) if x.id == "profile.file.sync_open"]
    assert "dsync.dat" in f.title and "O_DSYNC" in f.title and "6 synchronous writes of 4 KiB" in f.evidence


def test_mapped_files_are_counted_and_anonymous_mappings_are_not(opens_program, tmp_path):
    out, data = tmp_path / "rec", tmp_path / "data"
    data.mkdir()
    p = run_child([str(opens_program), str(data), "maps"], out)
    assert p.returncode == 0, p.stderr
    head, files = files_of(only_record(out))
    ro, rw = files["ro.dat"], files["rw.dat"]
    assert (ro["maps"], ro["map_bytes"], ro["map_prot"]) == (1, 1 << 20, 1)
    assert (rw["maps"], rw["map_bytes"], rw["map_prot"]) == (1, 8192, 1 | 2 | 4)
    assert ro["reads"] == 0 and (head["io_uring"], head["aio"]) == (0, 0)
    (f,) = profile_files.uncounted(profile_files.summarise(read_records(out.read_text())), run_s=1.0)
    assert f.id == "profile.file.mapped" and "ro.dat" in f.title and "rw.dat" not in f.title   # 8 KiB: too little
    assert "page faults, not counted as reads" in f.why


@pytest.mark.parametrize("mode", ["io_uring", "aio"])
def test_io_uring_and_linux_aio_are_said_to_be_there(opens_program, tmp_path, mode):
    out = tmp_path / "rec"
    p = run_child([str(opens_program), str(tmp_path), mode], out)
    if p.returncode == 77:
        pytest.skip(f"{mode} is not available here")
    assert p.returncode == 0, p.stderr
    head, _ = files_of(only_record(out))
    assert head[mode] == 1 and head["aio" if mode == "io_uring" else "io_uring"] == 0
    (f,) = profile_files.uncounted(profile_files.summarise(read_records(out.read_text())), run_s=1.0)
    assert f.id == "profile.file.async" and "present, not counted" in f.title


def test_synchronous_writes_are_a_warning_when_they_took_a_tenth_of_the_run():
    recs = [_rec(1, log={"writes": 1000, "write_bytes": 4096000, "write_ns": 3 * 10**9, "flagged_writes": 1000,
                         "flagged_write_ns": 3 * 10**9, "oflags": 1})]
    recs[0].process.start_ns, recs[0].process.end_ns = 10**9, 11 * 10**9
    assert profile_files.run_seconds(recs) == pytest.approx(10.0)
    s = profile_files.summarise(recs)
    (f,) = profile_files.uncounted(s, profile_files.run_seconds(recs))
    assert f.status == "warn" and "30% of the run's 10 s" in f.title and "fsync" in f.fix
    (quiet,) = profile_files.uncounted(s, 100.0)
    assert quiet.status == "ok"                       # 3% of the run: named, not a warning


def test_the_io_calls_of_every_class_are_on_both_pages():
    # copy (copy_file_range, sendfile between files) and other (pipes, terminals, sockets,
    # /dev/null) are classes of io_calls: neither page may leave them out
    from ceiling.report import html_profile, terminal_profile
    one = dict(calls=0, errors=0, bytes=0, ns=0, random=0, library_calls=0, estimated=0)
    io = {"read": dict(one, calls=3, bytes=3 << 20, ns=10**6), "write": dict(one),
          "copy": dict(one, calls=2, bytes=8 << 20, ns=2 * 10**6), "other": dict(one, calls=40, bytes=4000, ns=10**5)}
    run = Run(tool_version="t", host="n1", started="2026-11-25T00:00:00", command=["ceiling", "profile"])
    run.application = Application(command=["./app"], exit_status=0, wall_s=1.0, profile=profile_from({"io_calls": io}))
    html = html_profile.application_section(run)
    assert "<td>copy</td>" in html and "<td>other (pipes" in html and "<td>write</td>" not in html
    text = terminal_profile.render(run, width=200)
    assert "copy 2, 8.389 MB" in text and "other (not storage) 40" in text and "read 3, 3.146 MB" in text
