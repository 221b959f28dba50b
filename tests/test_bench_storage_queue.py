"""Requests in flight (csrc/kernels/io_queue.c through core/io.random_io(depth=...),
bench/storage_queue.py): operation counts, the data written and read through the
queue against the Python oracle, a spoiled block found, the refusals (buffered, no
AIO) as skips with their reason, and the bench's metrics. No timing is asserted."""
import os

import pytest

from ceiling.bench import storage as st
from ceiling.bench import storage_queue as sq
from ceiling.core import io as cio
from ceiling.errors import CoreError
from storage_oracle import FILE_RAND, expected_transfer, file_id

from test_bench_storage import CPUS, KIB, MIB, N, ctx_for, leftovers, small  # noqa: F401 (a fixture)


def queued(tmp_path, **kw):
    try:
        return cio.random_io(str(tmp_path), direct=True, **kw)
    except cio.DirectRefused:
        pytest.skip("O_DIRECT refused here: requests cannot be queued")


@pytest.mark.parametrize("in_order", [False, True])
def test_a_queue_counts_every_operation_and_checks_every_read(tmp_path, in_order):
    raw = queued(tmp_path, nthreads=N, cpus=CPUS[:N], file_bytes=1 * MIB, ops=300, duration_s=0, reps=2,
                 lat_cap=100, verify_all=True, depth=8, in_order=in_order)
    assert raw.valid, raw.msg
    assert raw.direct
    assert raw.amount == ((300 * N, 300 * N),) * 2          # the queue drains: no operation lost or added
    assert all(len(rep[ph]) == 100 * N for rep in raw.lat_s for ph in (0, 1))
    assert all(v > 0 for rep in raw.lat_s for ph in rep for v in ph)
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("depth", [1, 16])
def test_writes_through_the_queue_leave_the_pattern(tmp_path, depth):
    raw = queued(tmp_path, nthreads=1, file_bytes=512 * KIB, xfer=64 * KIB, ops=40, duration_s=0, keep=True,
                 tag="qk", seed=9, depth=depth, in_order=True)
    assert raw.valid, raw.msg
    data = (tmp_path / "qk.t0").read_bytes()
    fid = file_id(FILE_RAND, 0, 0)
    for off in range(0, len(data), 64 * KIB):
        assert data[off:off + 64 * KIB] == expected_transfer(9, fid, off, 64 * KIB)


@pytest.mark.parametrize("depth", [1, 8])
def test_a_spoiled_block_is_found_by_reads_in_flight(tmp_path, depth):
    def spoil():
        f = tmp_path / "qs.t0"
        with open(f, "r+b") as fh:
            fh.seek(5 * 4 * KIB + 100)
            fh.write(b"\xff\x00\xff")
            fh.flush()
            os.fsync(fh.fileno())

    # in order, one pass over the 64 blocks: block 5 is read for sure
    raw = queued(tmp_path, nthreads=1, file_bytes=256 * KIB, ops=64, duration_s=0, tag="qs", depth=depth,
                 in_order=True, verify_all=True, between=spoil)
    assert not raw.valid
    assert raw.bad_offset == 5 * 4 * KIB + 100, raw.msg
    assert leftovers(tmp_path) == []


def test_a_queue_without_o_direct_is_refused():
    with pytest.raises(CoreError, match="only with O_DIRECT"):
        cio.random_io("/tmp", nthreads=1, file_bytes=64 * KIB, ops=1, duration_s=0, direct=False, depth=4)


def test_the_bench_reports_queued_figures_with_their_depth(tmp_path, small):
    out = st.bench_storage(ctx_for(tmp_path, size_bytes=4 * MIB))
    names = {m.name: m for m in out.metrics}
    if "storage.queue.read" not in names:
        skip = next(f for f in out.findings if f.id == "storage.queue")
        pytest.skip(f"no queue here: {skip.evidence}")
    for name, unit in (("storage.queue.read", "MiB/s"), ("storage.queue.write", "MiB/s"),
                       ("storage.queue.randread", "IOPS"), ("storage.queue.randwrite", "IOPS")):
        m = names[name]
        assert m.valid and m.value > 0 and m.unit == unit, (name, m.note)
        assert m.context["depth_per_thread"] == sq.QUEUE_DEPTH
        assert m.context["in_flight"] == sq.QUEUE_DEPTH * m.context["threads"]
        assert "libaio" in m.context["engine"]
    assert names["storage.queue.read"].context["xfer_bytes"] == sq.SEQ_XFER
    assert names["storage.queue.randread"].context["xfer_bytes"] == 4 * KIB
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("refusal", ["buffered", "no aio"])
def test_no_queue_is_a_skip_with_its_reason(tmp_path, small, monkeypatch, refusal):
    if refusal == "buffered":
        real = cio.seq_io

        def no_direct(*a, **kw):
            if kw.get("direct"):
                raise cio.DirectRefused("open: O_DIRECT refused by the file system (Invalid argument)")
            return real(*a, **kw)
        monkeypatch.setattr(st, "seq_io", no_direct)
        monkeypatch.setattr(st, "random_io", lambda *a, **kw: cio.random_io(*a, **{**kw, "direct": False}))
    else:
        def no_aio(*a, **kw):
            raise cio.QueueRefused("io_setup(16): Function not implemented (Linux AIO is not available here)")
        monkeypatch.setattr(sq, "random_io", no_aio)
    out = st.bench_storage(ctx_for(tmp_path, size_bytes=4 * MIB))
    assert not [m for m in out.metrics if m.name.startswith("storage.queue.")]
    [f] = [f for f in out.findings if f.id == "storage.queue"]
    assert f.status == "skipped"
    assert ("O_DIRECT" in f.evidence) if refusal == "buffered" else ("Linux AIO" in f.evidence)
    assert [m for m in out.metrics if m.name == "storage.iops.randread"]       # the rest measured
    assert leftovers(tmp_path) == []
