"""`mpiexec -n 2 ceiling trace -- ./app` (issue 28): each rank's own ceiling records its rank, the
interposer sends every rank's event files to rank 0's at MPI_Finalize (csrc/interpose/mpi_trace.c), and
rank 0's ceiling alone writes the one Perfetto trace and reports. A real 2-rank ping-pong with a few
writes, built with the mpicc of mpi4py's library and launched by its launcher."""
import json
import subprocess
import sys

import pytest

from mpiutil import build_mpi, needs_mpi, run_env
from test_interpose import NEEDS_LIB
from test_trace_record_mpi import PINGPONG_LOOP

pytestmark = [needs_mpi, NEEDS_LIB]

PINGPONG = r"""
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    int rank;
    char buf[1000] = {0}, name[4096];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    snprintf(name, sizeof name, "%s/out-%d", argv[1], rank);
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    for (int i = 0; i < atoi(argv[2]); i++)
        if (write(fd, buf, 100) != 100)
            return 1;
    close(fd);
""" + PINGPONG_LOOP


@pytest.fixture(scope="module")
def pp(mpi_setup, tmp_path_factory):
    tmp, found = mpi_setup
    d = tmp_path_factory.mktemp("wrapped")
    return build_mpi(found, tmp, d, "pp", PINGPONG), found, tmp


def wrapped(pp, tmp_path, *opts, writes=3):
    exe, found, tmp = pp
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("PYTHONFAULTHANDLER", None)
    return subprocess.run([*found["argv2"], sys.executable, "-m", "ceiling", "trace", "--no-store", "--no-measure",
                           *opts, "--", str(exe), str(tmp_path), str(writes)], capture_output=True, text=True,
                          timeout=240, env=env)


def recorded(path):
    doc = json.loads(path.read_text())
    (rec,) = [f for f in doc["findings"] if f["id"] == "trace.recorded"]
    return doc, rec


def test_each_ranks_own_ceiling_gives_one_trace_with_both_ranks_lanes_and_the_messages_arrows(pp, tmp_path):
    out, pf = tmp_path / "t.json", tmp_path / "t.pftrace"
    r = wrapped(pp, tmp_path, "--save-json", str(out), "--trace", str(pf))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("Where the time went") == 1, r.stderr          # rank 0's report only
    doc, rec = recorded(out)
    assert rec["status"] == "ok" and "6 MPI messages" in rec["evidence"], rec["evidence"]
    assert [k for k in rec["data"]["timeline"]["lanes"] if k >= 0] == [0, 1]
    assert rec["data"]["ranks"] == {"received": [1], "missing": [], "unwritten_bytes": 0, "size": 2}
    assert "rank 0 received the event files of 1 of the 1 other rank(s)" in rec["evidence"]
    assert "recorded after their MPI_Finalize" in rec["evidence"] and "nothing dropped" in rec["evidence"]
    # both ranks measured their clocks against rank 0's at MPI_Init and MPI_Finalize (mpi_clock.c); on one
    # machine the offsets, truly 0, lie within their stated error, and the page says one clock
    clocks = rec["data"]["clocks"]
    assert clocks["nodes"] == 1 and clocks["measured_ranks"] == [0, 1], clocks
    assert clocks["one_clock_checks"] == 2 and clocks["one_clock_outside_error"] == 0, clocks
    assert set(clocks["sync_cost_ns"]) == {"MPI_Init", "MPI_Finalize"}
    assert ("Clocks: one clock (every process on one node); the 2 measurement(s) of ranks on rank 0's node (offset "
            "truly 0) gave at most ") in rec["evidence"], rec["evidence"]
    # rank 1's ceiling says what it recorded after MPI_Finalize (at least that call's end): not in the trace
    late = [x for x in r.stderr.splitlines() if x.startswith("ceiling: rank 1: ")]
    assert len(late) == 1 and "recorded after its MPI_Finalize" in late[0], r.stderr
    assert int(late[0].split()[3]) >= 1
    perfetto_read = pytest.importorskip("perfetto_read", reason="needs the perfetto package")   # the file's checks
    tr = perfetto_read.read(pf)
    perfetto_read.check_nesting(tr)
    names = {d.process.process_name for d in tr.tracks.values() if d.HasField("process")}
    assert {n.split(" (")[0] for n in names} == {"rank 0", "rank 1"}, names
    started = {f for s in tr.slices for f in s.flows}
    ended = {f for s in tr.slices for f in s.ends_flows}
    assert len(started) == 6 and started == ended
    writes = [str(s.args.get("file")) for s in tr.slices if s.name == "write"]
    for rank in (0, 1):                                                  # rank 1's through the gather
        assert sum(w == str(tmp_path / f"out-{rank}") for w in writes) == 3, writes
    assert not list(tmp_path.glob("*.pftrace"))[1:]                      # one trace, rank 0's


def test_a_max_size_too_small_for_the_ranks_events_says_the_drops_and_each_ranks_share(pp, tmp_path):
    out, pf = tmp_path / "t.json", tmp_path / "t.pftrace"
    r = wrapped(pp, tmp_path, "--max-size", "64KiB", "--save-json", str(out), "--trace", str(pf), writes=3000)
    assert r.returncode == 0, r.stderr
    doc, rec = recorded(out)
    # 2 x 3000 writes of 48 bytes each cannot fit in 64 KiB: every rank's drops reach rank 0's trace
    assert rec["data"]["dropped"] > 6000 - 65536 // 48, rec["data"]
    assert f"{rec['data']['dropped']:,} events dropped by the limits" in rec["evidence"]
    assert "--max-size was shared out: 32,768 bytes of events per rank, 2 ranks" in rec["evidence"]
    assert rec["data"]["ranks"]["received"] == [1]


def test_a_bad_option_under_mpiexec_is_one_line_from_one_rank_and_its_exit_status(pp, tmp_path):
    r = wrapped(pp, tmp_path, "--window", "5")
    assert r.returncode == 2, r.stderr
    # ceiling's own lines (Open MPI's mpiexec adds its banner about a rank's non-zero exit)
    assert [x for x in r.stderr.splitlines() if x.startswith("ceiling")] == [
        "ceiling: --window '5': not START:END (seconds after the program started)"], r.stderr
    bad = tmp_path / "missing" / "t.pftrace"
    r = wrapped(pp, tmp_path, "--trace", str(bad))
    assert r.returncode == 4, r.stderr
    said = [x for x in r.stderr.splitlines() if "--trace" in x]
    assert said == [f"ceiling: --trace {bad}: directory {bad.parent} does not exist"], r.stderr
    assert "Where the time went" not in r.stderr
    # refused by the command line's parser, or before any program starts: the same on every rank
    for opt, code, line in [("--bogus", 2, "ceiling: unrecognized arguments: --bogus (see 'ceiling --help')"),
                            ("--json", 2, "ceiling: trace: --json would print the run's JSON into the program's own "
                                          "standard output; write it to a file with --save-json FILE.json")]:
        r = wrapped(pp, tmp_path, opt)
        assert r.returncode == code, r.stderr
        assert [x for x in r.stderr.splitlines() if x.startswith("ceiling")] == [line], r.stderr
