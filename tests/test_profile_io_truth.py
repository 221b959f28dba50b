"""What `ceiling profile` says about I/O is what reached the kernel and the device (issue 26):
stdio calls are library calls, and their requests are those their buffers sent; streams on
/dev/null, pipes and terminals are not storage; copy_file_range moves bytes read and write never
see; and only device traffic (read_bytes, write_bytes) is held against the storage's ceiling,
where I/O took a real share of the time. Real programs under `ceiling profile` where a user
meets them; the comparisons with the node's ceilings as pure functions."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from ceiling.analysis.profile import io_calls
from ceiling.probes.interpose_record import from_dicts
from ceiling.analysis.profile_ceilings import compare
from test_profile import SH, assert_interposed, profile

CC = shutil.which("cc") or shutil.which("gcc")


def _io(doc):
    assert_interposed(doc)
    return doc["application"]["profile"]["io_calls"]


def test_fprintf_to_dev_null_is_no_storage_io(tmp_path):
    """100,000 fprintf to a stdout the shell sent to /dev/null: no write request to storage, no
    small-write finding; the calls are counted, as library calls on something that is not storage."""
    if not CC:
        pytest.skip("no C compiler")
    src, exe = tmp_path / "p.c", tmp_path / "p"
    src.write_text('#include <stdio.h>\nint main(void) { for (int i = 0; i < 100000; i++) '
                   'fprintf(stdout, "row %d\\n", i); return 0; }\n')
    subprocess.run([CC, "-O1", "-o", str(exe), str(src)], check=True, timeout=120)
    r, doc = profile(tmp_path, SH, "-c", f"exec {exe} > /dev/null", opts=["--no-measure"])
    assert r.returncode == 0, r.stderr
    io = _io(doc)
    assert io.get("write", {}).get("calls", 0) == 0 and io.get("write", {}).get("library_calls", 0) == 0
    assert io["other"]["library_calls"] == 100000
    ids = {f["id"] for f in doc["findings"]}
    assert not {"profile.io", "profile.io.small_writes", "profile.ceiling.io_write"} & ids


def test_sqlite_flushes_of_its_output_are_not_writes(tmp_path):
    """sqlite3's shell flushes stdout after every statement: 3,000 inserts, 3,000 fflush of an
    empty stdout on /dev/null, which were 3,000 storage writes."""
    sqlite = shutil.which("sqlite3")
    if not sqlite:
        pytest.skip("no sqlite3")
    sql = tmp_path / "in.sql"
    sql.write_text("PRAGMA synchronous=OFF;\ncreate table t(a integer, b text);\n"
                   + "".join(f"insert into t values({i}, 'row {i}');\n" for i in range(3000)))
    r, doc = profile(tmp_path, SH, "-c", f"exec {sqlite} {tmp_path / 'db'} < {sql} > /dev/null",
                     opts=["--no-measure"])
    assert r.returncode == 0, r.stderr
    io = _io(doc)
    assert io["other"]["library_calls"] >= 3000          # the flushes, of a stream that is not storage
    assert io["write"]["library_calls"] == 0 and io["write"]["estimated"] == 0
    # its writes are its own pwrite/write calls to the database and journal, each one request
    assert io["write"]["calls"] >= 3000 and io["write"]["bytes"] >= 3000 * 512


def cp_clones(tmp_path):
    """cp on a file system that clones (btrfs, XFS) moves no bytes at all."""
    (tmp_path / "c1").write_bytes(b"c")
    return subprocess.run(["cp", "--reflink=always", str(tmp_path / "c1"), str(tmp_path / "c2")],
                          capture_output=True).returncode == 0


def test_cp_r_shows_the_bytes_it_copied(tmp_path):
    """cp -r moves a file's bytes with copy_file_range (coreutils 9), or read and write: either way
    they are in the profile, where they were 0 B."""
    if cp_clones(tmp_path):
        pytest.skip("cp clones files here: no bytes move")
    d = tmp_path / "src"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "big").write_bytes(b"y" * 20_000_000)
    r, doc = profile(tmp_path, "cp", "-r", str(d), str(tmp_path / "dst"), opts=["--no-measure"])
    assert r.returncode == 0, r.stderr
    io = _io(doc)
    copied = io.get("copy", {}).get("bytes", 0)
    assert copied + io["write"]["bytes"] == 20_000_000
    if copied:
        m = {x["name"]: x for x in doc["metrics"]}
        assert m["app.io.copy.time"]["context"]["bytes"] == 20_000_000


# ---- io_calls from records ----------------------------------------------------------

def _rec(reason, stdio, posix=()):
    lines = {"stdio": list(stdio), "posix": list(posix)}
    return from_dicts([{"process": {"pid": 1, "reason": reason}, "lines": lines}])[0]


def test_stdio_library_calls_and_kernel_requests_are_kept_apart():
    stdio = [{"class": "write", "calls": 621386, "errors": 0, "bytes": 9_000_000, "ns": 10**9},
             {"class": "flush", "calls": 20004, "errors": 0, "ns": 10**7},
             {"class": "other_write", "calls": 5, "errors": 0, "bytes": 50, "ns": 10},
             {"class": "kernel_write", "requests": 2200, "bytes": 9_000_000},
             {"class": "pending", "requests": 1, "bytes": 10}]
    posix = [{"class": "write", "calls": 3, "errors": 0, "bytes": 3 << 20, "ns": 5, "random": 0}]
    io = io_calls([_rec("exit", stdio, posix)])
    w = io["write"]
    assert (w["calls"], w["bytes"], w["library_calls"], w["estimated"]) == (
        3 + 2200 + 1, (3 << 20) + 9_000_000 + 10, 621386 + 20004, 2201)
    assert w["ns"] == 5 + 10**9 + 10**7
    assert io["other"]["library_calls"] == 5
    # a record written at a fatal signal: the buffers pending then were never written
    assert io_calls([_rec("signal", stdio, posix)])["write"]["calls"] == 3 + 2200


# ---- page cache and device against the storage's ceiling ----------------------------

ROWS = {"storage.seq.read.": [("storage.seq.read.fpp", 1000.0, "MB/s", "2026-11-20T10:00:00", "r" * 16)],
        "storage.seq.write.": [("storage.seq.write.fpp", 1000.0, "MB/s", "2026-11-20T10:00:00", "r" * 16)]}


def _bd(device, thread_s, read_bytes=500_000_000, secs=0.5):
    return {"io_calls": {"read": {"calls": 4000, "bytes": read_bytes, "ns": int(secs * 1e9)}},
            "io_totals": {"rchar": read_bytes, "read_bytes": device}, "thread_seconds": thread_s}


def test_reads_the_page_cache_served_are_not_at_the_storage_ceiling():
    """sort of a cached file: 500 MB read at 1000 MB/s through its calls, 0 B from the device."""
    cmp, findings = compare(_bd(0, 1.0), lambda p: ROWS.get(p, []))
    (c,) = cmp
    assert c["ceiling"] is None and "page cache served" in c["why"] and c["page_cache_bytes"] == 500_000_000
    assert findings == []


def test_device_reads_of_a_program_on_a_cpu_are_no_ceiling_finding():
    """gzip: the reads reached the device at the storage's pace, inside calls that took 5% of a
    life spent on a CPU: the storage is not what limits it."""
    cmp, findings = compare(_bd(500_000_000, 10.0), lambda p: ROWS.get(p, []))
    assert cmp[0]["share"] == pytest.approx(1.0) and cmp[0]["io_share"] == pytest.approx(0.05)
    assert findings == []


def test_device_reads_at_the_ceiling_where_io_is_the_time_are_said_so():
    cmp, (f,) = compare(_bd(400_000_000, 1.0), lambda p: ROWS.get(p, []))
    assert cmp[0]["program"] == pytest.approx(800.0) and cmp[0]["page_cache_bytes"] == 100_000_000
    assert f.id == "profile.ceiling.io_read" and f.status == "ok" and "80%" in f.title


def test_the_file_table_and_evidence_give_library_calls_and_kernel_requests_apart():
    """cc1 writes its .s file in 13,959 fputs/putc calls, which its stream's buffer sends in 7
    requests of ~3.6 KiB; as reads the assembler took it in 2: the table's requests and their size
    are the kernel's (before: 13,960 "requests" of 0.0036 KiB)."""
    from ceiling.analysis.profile_files import describe
    from ceiling.report.terminal_profile import FILE_HEADS, file_cells
    from ceiling.results.profile_run import FileRecord
    f = dict(path="/w/f0.s", reads=1, read_bytes=25991, writes=13959, write_bytes=25991, kernel_reads=2,
             kernel_read_bytes=25991, kernel_writes=7, kernel_write_bytes=25991, processes=2, time_s=0.001)
    cells = dict(zip(FILE_HEADS, file_cells(FileRecord(**f))))
    assert (cells["calls"], cells["requests"], cells["KiB/req"]) == ("13960", "9", f"{2 * 25991 / 9 / 1024:.3g}")
    older = FileRecord(path="/w/x", reads=4, read_bytes=4 << 12)       # an older interposer's: its calls only
    assert dict(zip(FILE_HEADS, file_cells(older)))["requests"] == "4"
    said = describe({**f, "opens": 2, "meta_s": 0.0, "read_s": 0.0, "write_s": 0.001, "syncs": 0, "random": 0,
                     "unaligned": 0, "blksize": 4096, "at_once": 1, "api": ["stdio"]})
    assert "0.02599 MB written in 13959 calls, 7 requests of 3.63 KiB to the kernel" in said, said
    assert "0.02599 MB read in 1 call, 2 requests of 12.7 KiB to the kernel" in said, said
