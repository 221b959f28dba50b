"""The storage loops (csrc/kernels/io.c, bound by core/io.py) and bench
(bench/storage.py) on small sizes in a temporary directory: the data pattern
against a Python oracle (storage_oracle.py), corruption detected, O_EXCL,
cleanup after success, error, Ctrl-C and SIGTERM, bad directories and sizes,
and the file-system and device-peak detection (machine/storage.py) on fake
sysfs trees. No timing is asserted: I/O rates on a shared VM are noise.
"""
import ctypes
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ceiling import core
from ceiling.bench import storage as st
from ceiling.bench.storage_dir import free_bytes
from ceiling.core import io as cio
from ceiling.machine import storage as mst
from ceiling.results.measure import Context, Options
from ceiling.errors import BadValueError, CoreError, PathError
from ceiling.machine.model import Machine
from storage_oracle import FILE_RAND, FILE_SEQ, SHARED_TID, base_bytes, expected_transfer, file_id, stamp

CPUS = sorted(os.sched_getaffinity(0))
N = min(2, len(CPUS))
KIB, MIB = 1 << 10, 1 << 20


def leftovers(d):
    return sorted(p.name for p in Path(d).iterdir())


def ctx_for(tmp_path, **kw):
    opts = Options(quick=True, **kw)
    opts.storage_dir = str(tmp_path)
    return Context(machine=Machine(), opts=opts, cpus=CPUS[:N])


@pytest.fixture
def small(monkeypatch):
    """A quick plan shrunk further, so that a whole bench_storage takes about a second."""
    monkeypatch.setattr(st, "QUICK_SWEEP_XFERS", (4 * KIB, 64 * KIB))
    monkeypatch.setattr(st, "QUICK_RAND_SECONDS", 0.05)
    monkeypatch.setattr(st, "QUICK_MD_FILES", 40)
    monkeypatch.setattr(st, "QUICK_RAND_FILE_BYTES", 1 * MIB)
    monkeypatch.setattr(st, "SWEEP_TRANSFERS", 8)


# -- the pattern -------------------------------------------------------------------

def test_stamp_and_file_id_match_the_c_core():
    lib = core._lib()
    lib.ceil_io_stamp.restype = ctypes.c_uint64
    lib.ceil_io_stamp.argtypes = [ctypes.c_uint64] * 3
    lib.ceil_io_file_id.restype = ctypes.c_uint64
    lib.ceil_io_file_id.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64]
    for seed, fid, off in [(0, 0, 0), (1, 2, 512), (2**64 - 1, 2**63 + 5, 2**40), (cio.SEED, 77, 4096)]:
        assert lib.ceil_io_stamp(seed, fid, off) == stamp(seed, fid, off)
    assert lib.ceil_io_file_id(3, 7, 65535, 12345) == file_id(3, 7, 65535, 12345)
    buf = ctypes.create_string_buffer(1001)
    lib.ceil_io_fill_base(ctypes.c_uint64(99), buf, ctypes.c_size_t(1001))
    assert buf.raw[:1001] == base_bytes(99, 1001)


@pytest.mark.parametrize("layout", ["fpp", "shared", "strided"])
@pytest.mark.parametrize("direct", [True, False])
def test_seq_writes_exactly_the_documented_pattern(tmp_path, layout, direct):
    xfer, bpt, seed = 8 * KIB, 32 * KIB, 4242
    try:
        raw = cio.seq_io(str(tmp_path), nthreads=N, cpus=CPUS[:N], bytes_per_thread=bpt, xfer=xfer, layout=layout,
                         direct=direct, reps=1, seed=seed, keep=True, tag="k")
    except cio.DirectRefused:
        pytest.skip("O_DIRECT refused here")
    assert raw.valid, raw.msg
    assert raw.amount == ((N * bpt, N * bpt),) and raw.nthreads == N and raw.direct == direct
    for t in range(N):
        for i in range(bpt // xfer):
            if layout == "fpp":
                path, fid, off = tmp_path / f"k.r0.t{t}", file_id(FILE_SEQ, 0, t), i * xfer
            else:
                off = t * bpt + i * xfer if layout == "shared" else (i * N + t) * xfer
                path, fid = tmp_path / "k.r0.shared", file_id(FILE_SEQ, 0, SHARED_TID)
            with open(path, "rb") as f:
                f.seek(off)
                assert f.read(xfer) == expected_transfer(seed, fid, off, xfer), (path, off)
    sizes = {p.name: p.stat().st_size for p in tmp_path.iterdir()}
    assert sizes == ({f"k.r0.t{t}": bpt for t in range(N)} if layout == "fpp" else {"k.r0.shared": N * bpt})


@pytest.mark.parametrize("layout", ["fpp", "shared", "strided"])
def test_seq_valid_and_leaves_nothing(tmp_path, layout):
    raw = cio.seq_io(str(tmp_path), nthreads=N, cpus=CPUS[:N], bytes_per_thread=256 * KIB, xfer=64 * KIB,
                     layout=layout, direct=False, reps=3, warmup=1, verify_all=True)
    assert raw.valid and raw.msg == "" and raw.bad_offset == -1
    assert len(raw.phase_s) == 3 and all(t > 0 for rep in raw.phase_s for t in rep)
    assert all(a == (N * 256 * KIB,) * 2 for a in raw.amount)
    if mst.describe_fs(str(tmp_path)).fstype in mst.MEMORY_FS:
        assert not st.cache_defeat(raw)[1]              # a memory file system cannot drop its pages
    else:
        assert st.cache_defeat(raw)[1], st.cache_defeat(raw)[0]      # fadvise after fsync emptied the cache
    assert leftovers(tmp_path) == []


def test_seq_without_eviction_reads_from_the_page_cache(tmp_path):
    """mincore sees the pages when nothing evicts them: the residency check can fail, so it means something."""
    raw = cio.seq_io(str(tmp_path), nthreads=1, bytes_per_thread=1 * MIB, xfer=64 * KIB, direct=False, evict=False)
    assert raw.resident is not None and raw.resident > 0.5
    assert not st.cache_defeat(raw)[1]


# -- corruption is detected ------------------------------------------------------------

def corrupt(path: Path, offset: int):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x5A]))
        f.flush()
        os.fsync(f.fileno())


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("offset,verify_all", [(3 * 512 + 2, False), (70 * KIB + 1000, True), (0, False)])
def test_corruption_between_write_and_read_is_detected(tmp_path, direct, offset, verify_all):
    target = tmp_path / "c.r0.t0"
    raw = None
    try:
        raw = cio.seq_io(str(tmp_path), nthreads=N, cpus=CPUS[:N], bytes_per_thread=128 * KIB, xfer=64 * KIB,
                         direct=direct, verify_all=verify_all, tag="c", between=lambda: corrupt(target, offset))
    except cio.DirectRefused:
        pytest.skip("O_DIRECT refused here")
    assert not raw.valid
    assert raw.bad_offset == offset
    assert f"offset {offset}" in raw.msg and "c.r0.t0" in raw.msg
    assert leftovers(tmp_path) == []


def test_stamp_only_check_misses_a_byte_between_stamps(tmp_path):
    """The default check reads one word per 512 B; a byte between stamps needs the full check."""
    target = tmp_path / "c.r0.t0"
    raw = cio.seq_io(str(tmp_path), nthreads=1, bytes_per_thread=64 * KIB, xfer=64 * KIB, direct=False, tag="c",
                     between=lambda: corrupt(target, 100))
    assert raw.valid


def test_bench_reports_corruption_as_invalid(tmp_path, small, monkeypatch):
    def hook(run_dir):
        files = sorted(Path(run_dir).glob("seq.fpp*.r0.t0"))
        if files:
            corrupt(files[0], 512)
    monkeypatch.setattr(st, "_BETWEEN", hook)
    out = st.bench_storage(ctx_for(tmp_path, size_bytes=N * MIB, reps=1))
    m = {x.name: x for x in out.metrics}
    assert not m["storage.seq.read.fpp"].valid
    assert "validation failed" in m["storage.seq.read.fpp"].note and "offset 512" in m["storage.seq.read.fpp"].note
    assert m["storage.md.create"].valid
    assert leftovers(tmp_path) == []


# -- random and metadata ----------------------------------------------------------------

@pytest.mark.parametrize("direct", [True, False])
def test_random_counts_ops_and_latencies(tmp_path, direct):
    try:
        raw = cio.random_io(str(tmp_path), nthreads=N, cpus=CPUS[:N], file_bytes=1 * MIB, ops=300, duration_s=0,
                            direct=direct, reps=2, lat_cap=100, verify_all=True)
    except cio.DirectRefused:
        pytest.skip("O_DIRECT refused here")
    assert raw.valid, raw.msg
    assert raw.amount == ((300 * N, 300 * N),) * 2
    assert all(len(rep[ph]) == 100 * N for rep in raw.lat_s for ph in (0, 1))   # reservoir keeps lat_cap each
    assert all(v > 0 for rep in raw.lat_s for ph in rep for v in ph)
    assert leftovers(tmp_path) == []


def test_random_file_keeps_the_pattern_after_random_writes(tmp_path):
    raw = cio.random_io(str(tmp_path), nthreads=1, file_bytes=256 * KIB, ops=500, duration_s=0, direct=False,
                        keep=True, tag="rk", seed=5)
    assert raw.valid
    data = (tmp_path / "rk.t0").read_bytes()
    fid = file_id(FILE_RAND, 0, 0)
    for off in range(0, len(data), 4 * KIB):
        assert data[off:off + 4 * KIB] == expected_transfer(5, fid, off, 4 * KIB)


@pytest.mark.parametrize("unique", [False, True])
@pytest.mark.parametrize("md_bytes", [0, 3901])
def test_metadata_phases(tmp_path, unique, md_bytes):
    raw = cio.meta_io(str(tmp_path), nthreads=N, cpus=CPUS[:N], files=50, md_bytes=md_bytes, unique_dir=unique,
                      reps=2, lat_cap=64)
    assert raw.valid, raw.msg
    assert raw.amount == ((50 * N,) * 4,) * 2
    assert all(len(rep[ph]) == 50 * N for rep in raw.lat_s for ph in range(4))
    assert leftovers(tmp_path) == []


def test_time_limited_random_phase_stops(tmp_path):
    raw = cio.random_io(str(tmp_path), nthreads=1, file_bytes=256 * KIB, duration_s=0.05, direct=False, lat_cap=16)
    assert raw.valid and all(a > 0 for a in raw.amount[0])


# -- never overwrite ---------------------------------------------------------------------

def test_existing_file_is_never_overwritten(tmp_path):
    mine = tmp_path / "x.r0.t0"
    mine.write_bytes(b"precious")
    with pytest.raises(PathError, match="already exists") as e:
        cio.seq_io(str(tmp_path), nthreads=N, cpus=CPUS[:N], bytes_per_thread=64 * KIB, xfer=64 * KIB, tag="x")
    assert "x.r0.t0" in str(e.value)
    assert mine.read_bytes() == b"precious"
    assert leftovers(tmp_path) == ["x.r0.t0"]          # the other thread's file was removed


def test_existing_directory_is_never_reused(tmp_path):
    (tmp_path / "m.r0").mkdir()
    (tmp_path / "m.r0" / "f.0.0").write_bytes(b"keep")
    with pytest.raises(PathError, match="exists"):
        cio.meta_io(str(tmp_path), nthreads=N, files=5, tag="m")
    assert (tmp_path / "m.r0" / "f.0.0").read_bytes() == b"keep"
    assert leftovers(tmp_path) == ["m.r0"]


# -- cleanup -----------------------------------------------------------------------------

def test_bench_leaves_nothing_and_names_its_metrics(tmp_path, small):
    out = st.bench_storage(ctx_for(tmp_path, size_bytes=N * MIB, reps=2))
    names = {m.name for m in out.metrics}
    for layout in ("fpp", "shared", "strided"):
        assert {f"storage.seq.write.{layout}", f"storage.seq.read.{layout}"} <= names
    assert {"storage.iops.randread", "storage.iops.randwrite", "storage.md.create", "storage.md.stat",
            "storage.md.read", "storage.md.unlink", "storage.md.create.unique"} <= names
    assert all(m.valid for m in out.metrics), [(m.name, m.note) for m in out.metrics if not m.valid]
    assert all(m.stats.n == 2 for m in out.metrics if m.name.startswith("storage.seq"))
    read = next(m for m in out.metrics if m.name == "storage.seq.read.fpp")
    assert read.unit == "MiB/s" and read.context["fs_type"] and "cache_defeat" in read.context
    assert read.context["dir"] == str(tmp_path)
    assert [s.name for s in out.series] == ["storage.seq.write.xfer", "storage.seq.read.xfer"]
    assert out.series[0].x == [4 * KIB, 64 * KIB]
    assert out.findings[0].id == "storage.fs"
    assert leftovers(tmp_path) == []


def test_a_batch_log_gets_a_line_per_phase(tmp_path, small, monkeypatch):
    """Output that is not a terminal (a batch job's log) got one line, "storage ...", for a
    bench of minutes: it now says each phase as it starts, so a log shows where a run was."""
    import io
    from ceiling.report.progress import Progress
    monkeypatch.delenv("CEILING_PROGRESS", raising=False)
    log = io.StringIO()
    ctx = ctx_for(tmp_path, size_bytes=N * MIB, reps=1)
    ctx.progress = Progress(log)
    st.bench_storage(ctx)
    lines = log.getvalue().splitlines()
    assert all(line.startswith("ceiling: storage: ") and line.endswith(" ...") for line in lines), lines
    words = " ".join(lines)
    for phase in ("sequential write and read", "by transfer size", "random 4 KiB", "metadata"):
        assert phase in words
    assert len(lines) >= 4 + ("requests in flight" in words)


def test_bench_cleans_up_after_an_injected_error_and_keeps_what_it_measured(tmp_path, small, monkeypatch):
    """A step failing part-way (the disk filling in the metadata phase): its files are
    gone, and the figures measured before travel with the error (issue 11, item 11)."""
    seen = []

    def boom(run_dir, **kw):
        seen.append(leftovers(run_dir))
        raise PathError("storage: the file system is full during the run (injected)")
    monkeypatch.setattr(st, "meta_io", boom)
    with pytest.raises(PathError, match="injected") as e:
        st.bench_storage(ctx_for(tmp_path, size_bytes=N * MIB, reps=1))
    assert seen == [[".ceiling-owner"]]                # earlier steps removed their own files
    assert leftovers(tmp_path) == []
    kept = {m.name for m in e.value.outcome.metrics}
    assert {"storage.seq.write.fpp", "storage.seq.read.strided", "storage.iops.randread"} <= kept
    assert not any(n.startswith("storage.md") for n in kept)


def test_a_file_planted_in_the_run_directory_is_kept(tmp_path, small, monkeypatch, capsys):
    """Only what ceiling created is deleted (issue 11, item 12): a file someone else put in
    the run directory mid-run stays, with the directory, and stderr says so."""
    planted = []

    def plant(run_dir, **kw):
        planted.append(Path(run_dir) / "results.dat")
        planted[0].write_bytes(b"someone's data")
        raise PathError("injected")
    monkeypatch.setattr(st, "meta_io", plant)
    with pytest.raises(PathError, match="injected"):
        st.bench_storage(ctx_for(tmp_path, size_bytes=N * MIB, reps=1))
    assert planted[0].read_bytes() == b"someone's data"
    assert leftovers(planted[0].parent) == ["results.dat"]          # ceiling's own files are gone
    err = capsys.readouterr().err
    assert f"kept {planted[0].parent}" in err and "'results.dat'" in err and err.count("\n") == 1


def test_leftovers_of_a_killed_run_are_named_and_cleaned(tmp_path, small):
    """A run killed with SIGKILL leaves its directory; the next run names it (a finding with
    the command) and --clean removes it. A live run's directory is never claimed."""
    p = _child(tmp_path, """
        from ceiling.bench.storage_dir import RunDir
        rd = RunDir(d).__enter__()
        open(os.path.join(rd.path, "seq.fpp1.r0.t0"), "wb").write(b"x" * 65536)
        print(rd.path, flush=True)
        import time; time.sleep(60)
        """)
    dead = p.stdout.readline().strip()
    live = _child(tmp_path, """
        from ceiling.bench.storage_dir import RunDir
        rd = RunDir(d).__enter__()
        print(rd.path, flush=True)
        import time; time.sleep(60)
        """)
    alive = live.stdout.readline().strip()
    try:
        p.kill()
        p.wait()
        from ceiling.bench import storage_dir
        found = storage_dir.leftovers(str(tmp_path))
        assert [lo.path for lo in found] == [dead] and found[0].bytes >= 65536 and "gone" in found[0].why
        out = st.bench_storage(ctx_for(tmp_path, size_bytes=N * MIB, reps=1))
        f = next(f for f in out.findings if f.id == "storage.leftovers")
        assert f.status == "warn" and dead in f.evidence and alive not in f.evidence and "--clean" in f.fix
        assert os.path.isdir(dead)
        ctx = ctx_for(tmp_path, size_bytes=N * MIB, reps=1)
        ctx.opts.storage_clean = True
        out = st.bench_storage(ctx)
        assert not os.path.exists(dead) and os.path.isdir(alive)
        assert not any(f.id == "storage.leftovers" for f in out.findings)
    finally:
        live.kill()
        live.wait()


def _child(tmp_path, body: str, **popen):
    # Ctrl-C's handler, even where the suite runs with SIGINT ignored (a background job of a
    # shell without job control), which Python would otherwise leave ignored in the child
    code = textwrap.dedent(f"""
        import os, signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from ceiling.bench import storage as st
        from ceiling.core import io as cio
        from ceiling.errors import PathError
        from ceiling.results.measure import Context, Options
        from ceiling.machine.model import Machine
        d = {str(tmp_path)!r}
        """) + textwrap.dedent(body)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **popen)


def test_full_file_limit_mid_run_is_a_clear_error_with_cleanup(tmp_path):
    """A write failing mid-run (EFBIG under ulimit -f, the same path as ENOSPC) removes the files."""
    p = _child(tmp_path, """
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (3 << 20, 3 << 20))
        try:
            cio.seq_io(d, nthreads=2, bytes_per_thread=8 << 20, xfer=1 << 20, direct=False)
        except PathError as e:
            print("ERR", e)
            sys.exit(4)
        """)
    outp, err = p.communicate(timeout=120)
    assert p.returncode == 4, err
    assert "file size limit" in outp and "removed" in outp and "offset 3145728" in outp
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_run_removes_the_run_directory(tmp_path, sig):
    p = _child(tmp_path, """
        opts = Options(quick=False, size_bytes=2 << 30, reps=50)
        opts.storage_dir = d
        ctx = Context(machine=Machine(), opts=opts, cpus=sorted(os.sched_getaffinity(0))[:2])
        try:
            st.bench_storage(ctx)
        except KeyboardInterrupt as e:
            print("INTERRUPTED", type(e).__name__, len(getattr(e, "outcome", st.Outcome()).metrics))
            sys.exit(130)
        print("FINISHED")
        """)
    deadline = time.time() + 60
    while time.time() < deadline:
        runs = list(tmp_path.glob("ceiling-io-*"))
        if runs and any(runs[0].iterdir()):
            break
        time.sleep(0.02)
    else:
        p.kill()
        pytest.fail("the child never started writing")
    time.sleep(0.3)
    p.send_signal(sig)
    try:
        outp, err = p.communicate(timeout=60)
    finally:
        p.kill()                                    # never left running behind a failed test
    assert p.returncode == 130, (outp, err)
    assert "INTERRUPTED Interrupted" in outp
    assert leftovers(tmp_path) == [], (outp, err, [list(x.iterdir()) for x in tmp_path.glob("ceiling-io-*")])


def test_cancel_stops_a_call_and_removes_its_files(tmp_path):
    box = {}

    def work():
        try:
            cio.seq_io(str(tmp_path), nthreads=N, bytes_per_thread=1 << 30, xfer=64 * KIB, direct=False, reps=20)
        except BaseException as e:   # noqa: B036 - the point is which exception
            box["e"] = e
    t = threading.Thread(target=work)
    t.start()
    time.sleep(0.3)
    cio.cancel(True)
    t.join(60)
    cio.cancel(False)
    assert not t.is_alive()
    assert isinstance(box.get("e"), KeyboardInterrupt)
    assert leftovers(tmp_path) == []


def test_ctrl_c_at_any_moment_of_a_call_waits_for_it_and_raises_keyboard_interrupt(tmp_path):
    """Signals rained on the main thread while it runs short calls, landing anywhere (start,
    wait, the worker's end): every call either returns or raises KeyboardInterrupt after its
    worker ended, and no descriptor leaks. A KeyboardInterrupt inside threading.Event's wait
    once turned into "release unlocked lock" (exit 1 instead of 130, in CI)."""
    p = _child(tmp_path, """
        import random, threading, time
        cio.cancel = lambda flag: None          # no C loop to stop: the calls below are Python's
        armed = [False]
        def handler(s, f):
            if armed[0]:
                armed[0] = False
                raise KeyboardInterrupt
        signal.signal(signal.SIGINT, handler)
        stop = []
        def rain():
            while not stop:
                time.sleep(random.uniform(20e-6, 300e-6))
                os.kill(os.getpid(), signal.SIGINT)
        fds = len(os.listdir("/proc/self/fd"))
        threading.Thread(target=rain, daemon=True).start()
        began, ended = [0], [0]
        def call():
            began[0] += 1
            time.sleep(random.uniform(0, 500e-6))
            ended[0] += 1
            return 0
        calls = interrupted = 0
        t0 = time.time()
        while time.time() - t0 < 2:
            try:
                armed[0] = True
                calls += 1
                cio._run_cancellable(call)
            except KeyboardInterrupt:
                interrupted += 1
            armed[0] = False
            if ended[0] != began[0]:
                print("NOT WAITED", began[0], ended[0]); sys.exit(2)
        stop.append(1)
        time.sleep(0.01)
        print("DONE", calls, interrupted, len(os.listdir("/proc/self/fd")) - fds)
        """)
    outp, err = p.communicate(timeout=60)
    assert p.returncode == 0, (outp, err)
    _, calls, interrupted, leaked = outp.split()
    assert int(interrupted) > 10 and int(calls) > int(interrupted), outp
    assert int(leaked) == 0, outp


# -- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize("make,match", [
    (lambda p: p / "missing", "does not exist"),
    (lambda p: (p / "afile").write_bytes(b"") or p / "afile", "not a directory"),
    (lambda p: Path("/proc/self"), "cannot create a directory"),
])
def test_bad_dir_is_a_path_error(tmp_path, make, match):
    d = make(tmp_path)
    ctx = ctx_for(tmp_path)
    ctx.opts.storage_dir = str(d)
    with pytest.raises(PathError, match=match) as e:
        st.bench_storage(ctx)
    assert e.value.exit_code == 4
    assert str(d) in str(e.value)


def test_read_only_dir_for_an_unprivileged_user(tmp_path):
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        ctx = ctx_for(tmp_path)
        ctx.opts.storage_dir = str(ro)
        with pytest.raises(PathError, match="cannot create a directory"):
            st.bench_storage(ctx)
    else:   # root ignores modes: the same check through a user that has none, on a dir it can reach
        import shutil
        import tempfile
        ro = tempfile.mkdtemp(prefix="ceiling-test-ro-")
        os.chmod(ro, 0o755)
        try:
            p = _child(tmp_path, f"""
                os.setgid(65534); os.setuid(65534)
                opts = Options(quick=True); opts.storage_dir = {ro!r}
                try:
                    st.bench_storage(Context(machine=Machine(), opts=opts, cpus=[0]))
                except PathError as e:
                    print("ERR", e); sys.exit(4)
                """)
            outp, err = p.communicate(timeout=60)
        finally:
            leftover = os.listdir(ro)
            shutil.rmtree(ro)
        assert p.returncode == 4, err
        assert "cannot create a directory" in outp and "Permission denied" in outp
        assert leftover == []


@pytest.mark.parametrize("size", [0, 1000, N * MIB - 1])
def test_size_below_the_minimum(tmp_path, size):
    with pytest.raises(BadValueError, match="at least 1 MiB per thread") as e:
        st.bench_storage(ctx_for(tmp_path, size_bytes=size))
    assert e.value.exit_code == 3
    assert leftovers(tmp_path) == []


def test_size_above_the_free_space(tmp_path):
    free = free_bytes(str(tmp_path))
    with pytest.raises(BadValueError, match="GiB free"):
        st.bench_storage(ctx_for(tmp_path, size_bytes=2 * free))
    assert leftovers(tmp_path) == []


def test_bad_reps(tmp_path):
    with pytest.raises(BadValueError, match="--reps"):
        st.bench_storage(ctx_for(tmp_path, size_bytes=N * MIB, reps=-1))


@pytest.mark.parametrize("kw", [dict(xfer=1000), dict(xfer=0), dict(bytes_per_thread=96 * KIB),
                                dict(direct=True, xfer=6 * KIB, bytes_per_thread=12 * KIB), dict(nthreads=0)])
def test_c_core_refuses_bad_parameters(tmp_path, kw):
    args = dict(nthreads=1, bytes_per_thread=128 * KIB, xfer=64 * KIB, direct=False)
    args.update(kw)
    with pytest.raises(CoreError, match="invalid parameter"):
        cio.seq_io(str(tmp_path), **args)
    assert leftovers(tmp_path) == []


def test_tag_with_a_slash_is_refused(tmp_path):
    with pytest.raises(CoreError, match="tag"):
        cio.meta_io(str(tmp_path), nthreads=1, files=1, tag="../x")


# -- file system and device detection ----------------------------------------------------

def test_fs_type_of_this_machine(tmp_path):
    p = subprocess.run(["df", "--output=fstype", str(tmp_path)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip("df --output unavailable")
    want = p.stdout.split()[-1]
    fs = mst.describe_fs(str(tmp_path))
    assert fs.fstype == want
    assert fs.peak.unit == "MiB/s" and fs.peak.provenance
    if not fs.peak.known:
        assert fs.peak.provenance.startswith("unknown:")


MOUNTINFO = r"""22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
40 27 259:2 / /scratch\040space rw,noatime shared:5 master:1 - xfs /dev/nvme0n1p2 rw
41 27 0:50 / /lus rw - lustre 10.0.0.1@o2ib:/fs rw,flock
"""


def test_parse_mountinfo_fields_and_escapes():
    ms = mst.parse_mountinfo(MOUNTINFO)
    assert [m.mount_point for m in ms] == ["/proc", "/", "/scratch space", "/lus"]
    x = ms[2]
    assert (x.fstype, x.source, x.major, x.minor, x.options) == ("xfs", "/dev/nvme0n1p2", 259, 2, "rw,noatime")
    assert ms[3].fstype == "lustre" and ms[3].source == "10.0.0.1@o2ib:/fs"


def make_tree(root: Path, files: dict, links: dict):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            p.mkdir(exist_ok=True)
        else:
            p.write_text(text)
    for rel, target in links.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.symlink_to(target)


NVME = "devices/pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0/nvme0n1"


@pytest.mark.parametrize("speed,width,gbs,enc", [
    ("16.0 GT/s PCIe", "4", 16 * 4 * 128 / 130 / 8, "128b/130b"),
    ("8 GT/s", "4", 8 * 4 * 128 / 130 / 8, "128b/130b"),
    ("5.0 GT/s PCIe", "2", 5 * 2 * 0.8 / 8, "8b/10b"),
    ("64.0 GT/s PCIe", "4", 64 * 4 * 242 / 256 / 8, "242B/256B"),
])
def test_nvme_peak_from_a_fake_sysfs(tmp_path, speed, width, gbs, enc):
    make_tree(tmp_path, {f"{NVME}/nvme0n1p2/partition": "2", f"{NVME}/queue/rotational": "0",
                         "class/nvme/nvme0/device/current_link_speed": speed,
                         "class/nvme/nvme0/device/current_link_width": width,
                         "class/nvme/nvme0/model": "Fake NVMe 9000"},
              {"dev/block/259:2": f"../../{NVME}/nvme0n1p2"})
    peak, info = mst.device_peak(259, 2, str(tmp_path))
    assert peak.known and peak.unit == "MiB/s"
    assert peak.value == pytest.approx(gbs * 1e9 / MIB)
    assert enc in peak.provenance and "nvme0" in peak.provenance
    assert info["kind"] == "nvme" and info["device"] == "nvme0n1" and info["model"] == "Fake NVMe 9000"
    assert info["rotational"] is False


def test_nvme_without_link_files_is_unknown(tmp_path):
    make_tree(tmp_path, {f"{NVME}/size": "1"}, {"dev/block/259:0": f"../../{NVME}"})
    peak, info = mst.device_peak(259, 0, str(tmp_path))
    assert not peak.known and "current_link_speed" in peak.provenance


ATA = "devices/pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0/block/sda"


@pytest.mark.parametrize("spd,mbs", [("6.0 Gbps", 600), ("3.0 Gbps", 300), ("1.5 Gbps", 150)])
def test_sata_peak_through_lvm_from_a_fake_sysfs(tmp_path, spd, mbs):
    make_tree(tmp_path, {f"{ATA}/sda1/partition": "1", f"{ATA}/queue/rotational": "1",
                         "class/ata_link/link3/sata_spd": spd, "devices/virtual/block/dm-0/slaves/.keep": ""},
              {"dev/block/253:0": "../../devices/virtual/block/dm-0"})
    (tmp_path / "devices/virtual/block/dm-0/slaves/.keep").unlink()
    (tmp_path / "devices/virtual/block/dm-0/slaves/sda1").symlink_to(f"../../../../../{ATA}/sda1")
    peak, info = mst.device_peak(253, 0, str(tmp_path))
    assert peak.known and peak.value == pytest.approx(mbs * 1e6 / MIB)
    assert "8b/10b" in peak.provenance and "spinning" in peak.provenance
    assert info["kind"] == "sata" and info["device"] == "sda" and info["stack"] == ["dm-0 sits on sda1"]


def test_sata_link_down_is_unknown(tmp_path):
    make_tree(tmp_path, {f"{ATA}/size": "1", "class/ata_link/link3/sata_spd": "<unknown>"},
              {"dev/block/8:0": f"../../{ATA}"})
    peak, _ = mst.device_peak(8, 0, str(tmp_path))
    assert not peak.known and "not understood" in peak.provenance


def test_virtio_and_striped_and_missing_are_unknown_with_a_reason(tmp_path):
    vd = "devices/pci0000:00/0000:00:02.0/virtio1/block/vda"
    make_tree(tmp_path, {f"{vd}/size": "1", "devices/virtual/block/md0/slaves/.k": ""},
              {"dev/block/254:0": f"../../{vd}", "dev/block/9:0": "../../devices/virtual/block/md0"})
    (tmp_path / "devices/virtual/block/md0/slaves/.k").unlink()
    for s in ("sda1", "sdb1"):
        (tmp_path / "devices/virtual/block/md0/slaves" / s).symlink_to(f"../../../../../{ATA}")
    peak, info = mst.device_peak(254, 0, str(tmp_path))
    assert not peak.known and "virtio" in peak.provenance and info["kind"] == "virtio"
    peak, _ = mst.device_peak(9, 0, str(tmp_path))
    assert not peak.known and "spans" in peak.provenance
    peak, _ = mst.device_peak(1, 99, str(tmp_path))
    assert not peak.known and "no " in peak.provenance
    peak, _ = mst.device_peak(0, 50, str(tmp_path))
    assert not peak.known and "no block device" in peak.provenance


def test_network_and_memory_file_systems_have_no_device_peak(tmp_path):
    mi = tmp_path / "mountinfo"
    real = os.path.realpath(tmp_path)
    st_dev = os.stat(tmp_path).st_dev
    for fstype, src, word in (("lustre", "mgs@o2ib:/fs", "network"), ("tmpfs", "tmpfs", "memory-backed")):
        mi.write_text(f"1 0 {os.major(st_dev)}:{os.minor(st_dev)} / {real} rw - {fstype} {src} rw\n")
        fs = mst.describe_fs(str(tmp_path), mountinfo=str(mi))
        assert fs.fstype == fstype and not fs.peak.known and word in fs.peak.provenance


# -- statistics ----------------------------------------------------------------------------

def test_latency_summary_is_numpys_percentiles_in_microseconds():
    rng = np.random.default_rng(1)
    vals = list(rng.exponential(size=1001) * 1e-4)
    got = st.latency_summary(vals)
    for q in (50, 90, 99, 99.9):
        assert got[f"p{q:g}"] == pytest.approx(np.percentile(vals, q) * 1e6, abs=1e-3)
    assert got["max"] == pytest.approx(max(vals) * 1e6, abs=1e-3) and got["samples"] == 1001
    assert st.latency_summary([]) == {}


# -- the plan and the preflight the CLI runs first -------------------------------------------

def test_preflight_checks_without_measuring(tmp_path):
    p = st.preflight(ctx_for(tmp_path, size_bytes=N * MIB))
    assert p.threads == N and p.total_bytes == N * MIB
    assert leftovers(tmp_path) == []
    bad = ctx_for(tmp_path)
    bad.opts.storage_dir = str(tmp_path / "nope")
    with pytest.raises(PathError, match="does not exist"):
        st.preflight(bad)
    with pytest.raises(BadValueError):
        st.preflight(ctx_for(tmp_path, size_bytes=10))


def test_plan_defaults():
    many = Context(machine=Machine(), opts=Options(quick=True), cpus=list(range(32)))
    p = st.plan(many)
    assert p.threads == st.DEFAULT_MAX_THREADS and p.cpus == list(range(8)) and "threads" in p.notes
    assert p.total_bytes == st.QUICK_TOTAL_BYTES and p.reps == st.QUICK_REPS
    asked = Context(machine=Machine(), opts=Options(threads=32), cpus=list(range(32)))
    p = st.plan(asked)
    assert p.threads == 32 and p.total_bytes == st.TOTAL_BYTES // 32 // MIB * MIB * 32 and p.reps == st.REPS
    assert p.bytes_per_thread % p.xfer == 0 and p.rand_file_bytes <= p.bytes_per_thread


def test_cli_full_disk_mid_run_exits_4_and_leaves_nothing(tmp_path):
    """`ceiling bench storage` end to end, a write failing part-way (ulimit -f, the ENOSPC path):
    one clear line, exit 4, the step reported as not measured, no file left behind."""
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 20, 4 << 20))
    r = subprocess.run([sys.executable, "-m", "ceiling", "bench", "storage", "--dir", str(tmp_path), "--size", "64MiB",
                        "--threads", "1", "--reps", "1", "--no-store"],
                       capture_output=True, text=True, timeout=300, preexec_fn=limit)
    assert r.returncode == 4, (r.returncode, r.stderr[-2000:])
    assert "storage: not measured" in r.stdout and "file size limit" in r.stdout
    assert "Traceback" not in r.stderr
    assert leftovers(tmp_path) == []


_ENOSPC_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
/* The disk fills when the metadata phase makes its first directory: the sequential
   and random figures are measured by then. */
int mkdir(const char *path, mode_t mode)
{
    static int (*real)(const char *, mode_t);
    if (strstr(path, "/md.")) { errno = ENOSPC; return -1; }
    if (!real) real = (int (*)(const char *, mode_t))dlsym(RTLD_NEXT, "mkdir");
    return real(path, mode);
}
"""


def test_cli_disk_full_part_way_keeps_the_figures_measured_before(tmp_path):
    """`ceiling bench storage` with the disk filling in its metadata phase (a preloaded
    shim: mkdir fails with ENOSPC): the run keeps the sequential and random figures,
    is marked partial, says what stopped it, and exits 4 (issue 11, item 11)."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler for the shim")
    src, shim = tmp_path / "enospc.c", tmp_path / "enospc.so"
    src.write_text(_ENOSPC_SHIM)
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(shim), str(src), "-ldl"], check=True)
    d = tmp_path / "d"
    d.mkdir()
    out = tmp_path / "run.json"
    env = dict(os.environ, LD_PRELOAD=str(shim))
    r = subprocess.run([sys.executable, "-m", "ceiling", "bench", "storage", "--dir", str(d), "--size", "8MiB",
                        "--threads", "1", "--reps", "1", "--quick", "--no-store", "--save-json", str(out)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 4, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr
    doc = json.loads(out.read_text())
    names = {m["name"] for m in doc["metrics"]}
    assert {"storage.seq.write.fpp", "storage.seq.read.fpp", "storage.iops.randwrite"} <= names
    assert not any(n.startswith("storage.md") for n in names)
    assert not any(n.startswith("clock.") for n in names)       # storage alone: the CPU clock is not its figure
    assert doc["partial"] and "file system is full" in doc["partial_reason"]
    assert any(f["id"] == "bench.storage" and "stopped after" in f["title"] for f in doc["findings"])
    assert leftovers(d) == []


def test_a_signal_while_the_run_directory_is_made_leaves_nothing(tmp_path, monkeypatch):
    """Ctrl-C between creating the directory and registering its removal left it behind."""
    from ceiling.bench import storage_dir
    real = storage_dir._write_owner

    def owner_then_ctrl_c(path):
        real(path)
        os.kill(os.getpid(), signal.SIGINT)
    monkeypatch.setattr(storage_dir, "_write_owner", owner_then_ctrl_c)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with storage_dir.RunDir(str(tmp_path)):
                pass
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, old)
    assert list(tmp_path.iterdir()) == []
