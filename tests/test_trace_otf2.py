"""`ceiling trace --format otf2` (issue 29): the OTF2 archive, written by OTF2's own library
(csrc/trace/otf2*.c against libotf2, report/exporters/otf2.py), read back by Debian's otf2-print
(tests/otf2_read.py), its record counts against the run's own: a small I/O program, a 2-rank MPI
program (mpi4py's MPICH) with messages and collectives, the writer on made-up events (nesting,
communicators, a rank without events, counters, memory held), the writer's declarations of libotf2
against OTF2's headers, and what is refused before the program runs."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ceiling.core import otf2lib
from ceiling.errors import Otf2UnavailableError
from ceiling.probes.interpose_names import names
from ceiling.report.exporters.otf2 import write_otf2
from ceiling.results import events as E
from otf2_read import check_nesting, needs_otf2_print, read

REPO = Path(__file__).resolve().parents[1]
CC = shutil.which("cc") or shutil.which("gcc")
CALL = {c.fn: c.id for c in names().calls}
HEADERS = Path("/usr/include/otf2/otf2.h")

# ---- the writer's declarations of libotf2 against OTF2's own headers ----

ABI_CHECK = r"""
#include <stddef.h>
#include <otf2/otf2.h>
#define O2_CHECK_AGAINST_OTF2
#include "otf2_abi.h"
#define F(r, n, a) _Static_assert(__builtin_types_compatible_p(__typeof__(&n), r (*) a), #n);
O2_FUNCS(F)
#define C(n, v) _Static_assert((long long)O2_##n == (long long)OTF2_##n, #n);
O2_CONSTS(C)
_Static_assert(O2_UNDEFINED_UINT8 == OTF2_UNDEFINED_UINT8, "u8");
_Static_assert(O2_UNDEFINED_UINT32 == OTF2_UNDEFINED_UINT32, "u32");
_Static_assert(O2_UNDEFINED_UINT64 == OTF2_UNDEFINED_UINT64, "u64");
_Static_assert(__builtin_types_compatible_p(o2_pre_flush, OTF2_PreFlushCallback), "pre flush");
_Static_assert(__builtin_types_compatible_p(o2_post_flush, OTF2_PostFlushCallback), "post flush");
_Static_assert(__builtin_types_compatible_p(o2_error_callback, OTF2_ErrorCallback), "error callback");
_Static_assert(__builtin_types_compatible_p(o2_allocate, OTF2_MemoryAllocate), "allocate");
_Static_assert(__builtin_types_compatible_p(o2_free_all, OTF2_MemoryFreeAll), "free all");
/* the layouts otf2_abi.h repeats */
_Static_assert(sizeof(OTF2_MetricValue) == 8, "metric value");
_Static_assert(offsetof(OTF2_FlushCallbacks, otf2_post_flush) == sizeof(void *), "flush callbacks");
_Static_assert(offsetof(OTF2_MemoryCallbacks, otf2_free_all) == sizeof(void *), "memory callbacks");
"""


@pytest.mark.skipif(not HEADERS.exists() or CC is None,
                    reason="OTF2's headers are not installed (apt-get install libotf2-trace-dev; .ci/run does)")
def test_the_writers_declarations_of_libotf2_are_otf2s_own(tmp_path):
    src = tmp_path / "abi.c"
    src.write_text(ABI_CHECK)
    r = subprocess.run([CC, "-std=gnu11", "-fsyntax-only", "-I", str(REPO / "csrc" / "trace"), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # the check tells a wrong declaration: Enter's region as a 64-bit value
    src.write_text(ABI_CHECK + "_Static_assert(__builtin_types_compatible_p(__typeof__(&OTF2_EvtWriter_Enter), "
                               "o2_err (*)(o2_evt_writer *, o2_attrs *, uint64_t, uint64_t)), \"wrong\");\n")
    r = subprocess.run([CC, "-std=gnu11", "-fsyntax-only", "-I", str(REPO / "csrc" / "trace"), str(src)],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "wrong" in r.stderr


# ---- what is refused before the program runs ----

def _trace(tmp_path, *cmd, opts=(), env=None, timeout=180):
    out = tmp_path / "t.json"
    r = subprocess.run([sys.executable, "-m", "ceiling", "trace", "--no-store", "--no-measure", "--save-json", str(out),
                        *opts, "--", *cmd], capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, NO_COLOR="1", **(env or {})))
    doc = json.loads(out.read_text()) if out.exists() else None
    rec = [f for f in doc["findings"] if f["id"] == "trace.recorded"][0] if doc else None
    return r, doc, rec


@pytest.mark.parametrize("opts, env, code, words", [
    (["--format", "otf3"], {}, 2, "--format 'otf3': otf3: not a trace format"),
    (["--format", ","], {}, 2, "nothing: not a trace format"),
    (["--format", "otf2"], {"CEILING_OTF2_LIB": "/nonexistent/libotf2.so"}, 17, "is not OTF2 3.x's library"),
    (["--format", "perfetto,otf2"], {"CEILING_OTF2_LIB": "libc.so.6"}, 17, "libc.so.6 has no OTF2_"),
])
def test_a_bad_format_or_no_libotf2_is_one_line_and_its_code_before_the_program_runs(tmp_path, opts, env, code,
                                                                                        words):
    mark = tmp_path / "ran"
    r, doc, _ = _trace(tmp_path, "sh", "-c", f"touch {mark}", opts=[*opts, "--trace", str(tmp_path / "t")], env=env)
    assert r.returncode == code and words in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not mark.exists() and doc is None
    assert not list(tmp_path.glob("t*"))


def test_without_libotf2_anywhere_the_line_says_how_to_install_it(monkeypatch):
    monkeypatch.delenv(otf2lib.ENV, raising=False)
    monkeypatch.setattr(otf2lib, "_package_lib", lambda: None)
    monkeypatch.setattr(otf2lib.ctypes.util, "find_library", lambda name: None)
    with pytest.raises(Otf2UnavailableError) as e:
        otf2lib.library()
    assert "pip install otf2" in str(e.value) and "libopen-trace-format2" in str(e.value)
    assert e.value.exit_code == 17


def test_an_existing_archive_is_not_overwritten(tmp_path):
    (tmp_path / "t-otf2").mkdir()
    r, _, _ = _trace(tmp_path, "true", opts=["--format", "perfetto,otf2", "--trace", str(tmp_path / "t.pftrace")])
    assert r.returncode == 4 and "the OTF2 archive" in r.stderr and "does not overwrite" in r.stderr
    assert not (tmp_path / "t.pftrace").exists()


# ---- a small I/O program ----

IO_PROGRAM = r"""
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    char buf[3000];
    memset(buf, 'x', sizeof buf);
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    for (int i = 0; i < 7; i++)
        if (write(fd, buf, 3000) != 3000)
            return 1;
    for (int i = 0; i < 5; i++)
        if (pread(fd, buf, 1000, 1000 * i) != 1000)
            return 1;
    fsync(fd);
    close(fd);
    usleep(300000);
    return 0;
}
"""


@pytest.fixture(scope="module")
def io_program(tmp_path_factory):
    d = tmp_path_factory.mktemp("io")
    (d / "io.c").write_text(IO_PROGRAM)
    r = subprocess.run([CC, "-O1", "-o", str(d / "io"), str(d / "io.c")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return d / "io"


@needs_otf2_print
def test_an_io_program_gives_an_archive_otf2_print_reads_with_the_runs_counts(io_program, tmp_path):
    perfetto_read = pytest.importorskip("perfetto_read", reason="needs the perfetto package (test extras)")
    data = tmp_path / "data"
    r, doc, rec = _trace(tmp_path, str(io_program), str(data),
                         opts=["--format", "perfetto,otf2", "--trace", str(tmp_path / "t.pftrace"),
                               "--interval", "0.05"])
    assert r.returncode == 0, r.stderr
    anchor = tmp_path / "t-otf2" / "traces.otf2"
    assert rec["status"] == "ok" and rec["data"]["formats"] == ["perfetto", "otf2"], rec
    o = rec["data"]["otf2"]
    assert o["path"] == str(anchor) and o["bytes"] == sum(f.stat().st_size for f in anchor.parent.rglob("*")
                                                          if f.is_file())
    assert str(anchor) in rec["title"] and "OTF2 archive" in rec["evidence"] and "OTF2 archive" in rec["why"]
    a = read(anchor)
    check_nesting(a)
    # every record the writer counted, and every call the Perfetto file has, as many times
    assert a.count("ENTER") == a.count("LEAVE") == o["enters"] and len(a.events) == o["records"]
    pf = perfetto_read.read(tmp_path / "t.pftrace")
    assert a.enters() == Counter(s.name for s in pf.slices if s.cat != "instant")
    # the program's file: its 7 writes of 3000 bytes, 5 reads of 1000 and the fsync, as the profile counts them
    (f,) = [f for f in doc["application"]["profile"]["files"]["shown"] if f["path"] == str(data)]
    done = [e for e in a.events if e.kind == "IO_OPERATION_COMPLETE" and e.get("Handle") == str(data)]
    begun = {(e.location, e.number("Matching Id")): e.get("Mode") for e in a.events
             if e.kind == "IO_OPERATION_BEGIN" and e.get("Handle") == str(data)}
    mode = [begun[(e.location, e.number("Matching Id"))] for e in done]
    moved = {m: sum(e.number("Bytes Result") for e, x in zip(done, mode) if x == m) for m in ("READ", "WRITE")}
    assert mode.count("WRITE") == f["writes"] == 7 and moved["WRITE"] == f["write_bytes"] == 21000
    assert mode.count("READ") == f["reads"] == 5 and moved["READ"] == f["read_bytes"] == 5000
    assert mode.count("FLUSH") == f["syncs"] == 1
    enters = a.enters()
    assert enters["write"] >= 7 and enters["pread64"] + enters["pread"] == 5 and enters["fsync"] == 1
    # definitions: the process, its thread, POSIX I/O, the file's handle, the node's counters as metrics
    assert [v for v in a.defs["IO_PARADIGM"].values() if 'Identification: "POSIX"' in v]
    assert any(f'Name: "{data}"' in v and '"POSIX I/O"' in v for v in a.defs["IO_HANDLE"].values())
    assert len(a.defs["LOCATION_GROUP"]) == rec["data"]["processes"]
    assert a.count("METRIC") == o["metrics"] > 0 and a.defs["METRIC_INSTANCE"] and a.defs["METRIC_CLASS"]
    assert len(a.defs["SYSTEM_TREE_NODE"]) == 2          # the machine and this node
    assert "Creator                        ceiling" in a.anchor


@needs_otf2_print
def test_otf2_alone_writes_the_archive_where_trace_says(io_program, tmp_path):
    r, doc, rec = _trace(tmp_path, str(io_program), str(tmp_path / "data"),
                         opts=["--format", "otf2", "--trace", str(tmp_path / "arch")])
    assert r.returncode == 0, r.stderr
    assert rec["data"]["formats"] == ["otf2"] and rec["data"]["path"] == str(tmp_path / "arch" / "traces.otf2")
    assert not list(tmp_path.glob("*.pftrace"))
    a = read(tmp_path / "arch" / "traces.otf2")
    check_nesting(a)
    assert a.enters()["fsync"] == 1


# ---- a 2-rank MPI program ----

MPI_PROGRAM = r"""
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    int rank;
    char buf[1000] = {0}, name[4096];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 3; i++) {
        if (rank == 0) {
            MPI_Send(buf, 1000, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
            MPI_Recv(buf, 1000, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, 1000, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 500, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
        }
    }
    double x = rank, y;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Bcast(buf, 100, MPI_BYTE, 1, MPI_COMM_WORLD);
    snprintf(name, sizeof name, "%s-%d", argv[1], rank);
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (int i = 0; i <= rank; i++)
        if (write(fd, buf, 100) != 100)
            return 1;
    close(fd);
    MPI_Barrier(MPI_COMM_WORLD);
    /* a communicator of both ranks in reverse order: world 1 is its rank 0 */
    MPI_Comm sub;
    int s;
    MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &sub);
    MPI_Comm_rank(sub, &s);
    if (s == 0)
        MPI_Send(buf, 200, MPI_BYTE, 1, 21, sub);
    else
        MPI_Recv(buf, 200, MPI_BYTE, 0, 21, sub, MPI_STATUS_IGNORE);
    MPI_Bcast(buf, 10, MPI_BYTE, 0, sub);
    MPI_Comm_free(&sub);
    MPI_Finalize();
    return 0;
}
"""


def _partner(e, key: str) -> int:
    """The location otf2-print names for a message's partner or a collective's root: 'Receiver: 1 ("main" <0>)'."""
    import re
    return int(re.search(rf'{key}: \d+ \("[^"]*" <(\d+)>\)', e.attrs).group(1))


@needs_otf2_print
def test_a_2_rank_mpi_program_gives_each_message_its_send_and_receive_and_each_collective_its_records(
        mpi_setup, tmp_path):
    from mpiutil import build_mpi, run_env
    tmp, found = mpi_setup
    exe = build_mpi(found, tmp, tmp_path, "mp", MPI_PROGRAM)
    out = tmp_path / "t.json"
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run([sys.executable, "-m", "ceiling", "trace", "--no-store", "--no-measure", "--save-json", str(out),
                        "--format", "otf2", "--trace", str(tmp_path / "arch"), "--", *found["argv2"], str(exe),
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    (rec,) = [f for f in doc["findings"] if f["id"] == "trace.recorded"]
    a = read(tmp_path / "arch" / "traces.otf2")
    check_nesting(a)
    # the ranks: location groups 0 and 1 (Score-P's numbering), the world's locations, MPI_COMM_WORLD
    groups = a.defs["LOCATION_GROUP"]
    assert groups[0].startswith('Name: "rank 0') and groups[1].startswith('Name: "rank 1')
    assert len([v for v in a.defs["COMM"].values() if v.startswith('Name: "MPI_COMM_WORLD"')]) == 1
    (locs,) = [v for v in a.defs["GROUP"].values() if "Type: COMM_LOCATIONS" in v]
    assert "2 Members" in locs
    rank_of = {loc: a.location_group(loc) for loc in a.defs["LOCATION"] if a.location_group(loc) in (0, 1)}
    # seven messages: each send's (from, to, tag, bytes) is a receive's, ranks named in their communicator
    # (world ranks on MPI_COMM_WORLD; on the reversed one, world 1 is rank 0) and their locations the ranks'
    sends = [e for e in a.events if e.kind == "MPI_SEND"]
    recvs = [e for e in a.events if e.kind == "MPI_RECV"]
    sent = Counter((rank_of[e.location], rank_of[_partner(e, "Receiver")], e.number("Tag"), e.number("Length"),
                    e.get("Communicator")) for e in sends)
    got = Counter((rank_of[_partner(e, "Sender")], rank_of[e.location], e.number("Tag"), e.number("Length"),
                   e.get("Communicator")) for e in recvs)
    (sub,) = [v.split('"')[1] for v in a.defs["COMM"].values() if not v.startswith('Name: "MPI_COMM_WORLD"')]
    assert sent == got == Counter({(0, 1, 7, 1000, "MPI_COMM_WORLD"): 3, (1, 0, 8, 500, "MPI_COMM_WORLD"): 3,
                                   (1, 0, 21, 200, sub): 1})
    assert {e.number("Receiver") for e in sends if e.get("Communicator") == sub} == {1}
    (members,) = [v for v in a.defs["GROUP"].values() if v.startswith(f'Name: "{sub}"')]
    assert '2 Members: 1 ("main" <1>), 0 ("main" <0>)' in members
    fns = {f["fn"]: f for f in doc["application"]["profile"]["mpi"]["functions"]}
    assert len(sends) == fns["MPI_Send"]["calls"] and sum(e.number("Length") for e in sends) == fns["MPI_Send"]["bytes"]
    assert len(recvs) == fns["MPI_Recv"]["calls"] and sum(e.number("Length") for e in recvs) == fns["MPI_Recv"]["bytes"]
    # every MPI call the profile counts in the trace's time (MPI_Finalize's own event is not recorded)
    enters = a.enters()
    for fn in ("MPI_Init", "MPI_Send", "MPI_Recv", "MPI_Allreduce", "MPI_Bcast", "MPI_Barrier"):
        assert enters[fn] == fns[fn]["calls"] == {"MPI_Send": 7, "MPI_Recv": 7, "MPI_Bcast": 4}.get(fn, 2), fn
    # the collectives: a begin and an end each, on both ranks, with their operation, communicator and root
    # (the root a rank of its communicator: world 1 both times)
    ends = [e for e in a.events if e.kind == "MPI_COLLECTIVE_END"]
    assert a.count("MPI_COLLECTIVE_BEGIN") == len(ends) == 8
    assert Counter((e.get("Operation"), e.get("Communicator"), rank_of[e.location]) for e in ends) == Counter(
        {(op, c, r): 1 for op, c in (("ALLREDUCE", "MPI_COMM_WORLD"), ("BCAST", "MPI_COMM_WORLD"),
                                     ("BARRIER", "MPI_COMM_WORLD"), ("BCAST", sub)) for r in (0, 1)})
    bcast = [e for e in ends if e.get("Operation") == "BCAST"]
    assert {(e.get("Communicator"), e.get("Root")) for e in bcast} == {("MPI_COMM_WORLD", "1"), (sub, "0")}
    assert {rank_of[_partner(e, "Root")] for e in bcast} == {1}
    assert {e.get("Root") for e in ends if e.get("Operation") != "BCAST"} == {"NONE"}
    assert {(e.get("Communicator"), e.number("Sent")) for e in bcast} == {("MPI_COMM_WORLD", 100), (sub, 10)}
    # the regions: MPI's paradigm and roles
    descr = [v for v in a.defs["REGION"].values() if v.startswith('Name: "MPI_Send"')][0]
    assert "Role: POINT2POINT" in descr and "Paradigm: MPI" in descr
    assert "Role: BARRIER" in [v for v in a.defs["REGION"].values() if v.startswith('Name: "MPI_Barrier"')][0]
    # each rank's writes on its own file's handle
    for rank in (0, 1):
        path = f"{tmp_path / 'out'}-{rank}"
        done = [e for e in a.events if e.kind == "IO_OPERATION_COMPLETE" and e.get("Handle") == path]
        assert len(done) == rank + 1 and {rank_of.get(e.location) for e in done} == {rank}
    o = rec["data"]["otf2"]
    assert (o["sends"], o["recvs"], o["collectives"], o["unpaired"]) == (7, 7, 8, 0)


@needs_otf2_print
def test_each_ranks_own_ceiling_gives_rank_0s_archive_with_every_ranks_records(mpi_setup, tmp_path):
    """`mpiexec -n 2 ceiling trace --format otf2 -- ./app`: the ranks' event files and communicators' members
    go to rank 0 at MPI_Finalize (csrc/interpose/mpi_trace.c), whose ceiling alone writes the archive."""
    from mpiutil import build_mpi, run_env
    tmp, found = mpi_setup
    exe = build_mpi(found, tmp, tmp_path, "mp", MPI_PROGRAM)
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("PYTHONFAULTHANDLER", None)
    r = subprocess.run([*found["argv2"], sys.executable, "-m", "ceiling", "trace", "--no-store", "--no-measure",
                        "--format", "otf2", "--trace", str(tmp_path / "arch"), "--save-json", str(tmp_path / "t.json"),
                        "--", str(exe), str(tmp_path / "out")], capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stderr
    a = read(tmp_path / "arch" / "traces.otf2")
    check_nesting(a)
    rank_of = {loc: a.location_group(loc) for loc in a.defs["LOCATION"] if a.location_group(loc) in (0, 1)}
    sends = [e for e in a.events if e.kind == "MPI_SEND"]
    assert Counter(rank_of[e.location] for e in sends) == Counter({0: 3, 1: 4})
    assert a.count("MPI_RECV") == 7 and a.count("MPI_COLLECTIVE_END") == 8
    (sub,) = [v.split('"')[1] for v in a.defs["COMM"].values() if not v.startswith('Name: "MPI_COMM_WORLD"')]
    (members,) = [v for v in a.defs["GROUP"].values() if v.startswith(f'Name: "{sub}"')]
    assert '2 Members: 1 ("main" <1>), 0 ("main" <0>)' in members


def test_the_communicators_members_are_read_from_the_recordings_comms_lines(tmp_path):
    from ceiling.probes.interpose_events import comm_members
    (tmp_path / "trace-10-5.comms").write_text("7 2 1 0\n9 3 0 1 2\n11 2 0 1\n13 3 0 1\n")
    (tmp_path / "trace-12-6-r1.comms").write_text("7 2 1 0\n11 2 1 0\nnot a line\n")
    # 7 agrees in both files; 11 differs (two communicators, one id): left out; 13 cut short: left out
    assert comm_members(str(tmp_path)) == {7: [1, 0], 9: [0, 1, 2]}


# ---- the writer on made-up events ----

def _events(rows, **kw):
    return E.Events.from_rows(rows, t0_ns=10**12, t0_unix_ns=1_700_000_000 * 10**9, calls=names().calls, **kw)


@needs_otf2_print
def test_rows_nest_a_region_enclosing_its_first_call_and_a_call_past_its_region_is_cut(tmp_path):
    rows = [
        # a call and the region that starts with it (the region recorded after: it ends later)
        dict(ts=100, dur=10, pid=7, tid=7, rank=-1, kind=E.IO_WRITE, call=CALL["write"], file=0, nbytes=64),
        dict(ts=100, dur=500, pid=7, tid=7, rank=-1, kind=E.REGION, call=0),
        # a call that outlives the region: cut at its end
        dict(ts=550, dur=200, pid=7, tid=7, rank=-1, kind=E.IO_READ, call=CALL["read"], file=0, nbytes=8),
        dict(ts=900, dur=-1, pid=7, tid=7, rank=-1, kind=E.INSTANT, call=E.INSTANT_PROCESS_END),
    ]
    ev = _events(rows, files=["/data/f"], regions=["solve"],
                 processes={7: E.Process(7, 1, "node01", exe="/bin/app")})
    s = write_otf2(tmp_path / "a", ev, meta={"host": "node01"})
    assert (s.enters, s.clipped, s.instants, s.io_ops, s.io_bytes) == (3, 1, 1, 2, 72)
    a = read(s.path)
    check_nesting(a)
    order = [(e.kind, e.get("Region") or e.get("Handle"), e.ts - 10**12) for e in a.events]
    assert order == [("ENTER", "solve", 100), ("ENTER", "write", 100), ("IO_OPERATION_BEGIN", "/data/f", 100),
                     ("IO_OPERATION_COMPLETE", "/data/f", 110), ("LEAVE", "write", 110), ("ENTER", "read", 550),
                     ("IO_OPERATION_BEGIN", "/data/f", 550), ("IO_OPERATION_COMPLETE", "/data/f", 600),
                     ("LEAVE", "read", 600), ("LEAVE", "solve", 600)]
    solve = [v for v in a.defs["REGION"].values() if v.startswith('Name: "solve"')][0]
    assert "Paradigm: USER" in solve and "Role: FUNCTION" in solve
    assert "Offset: 1000000000100" in a.clock and "Length: 500" in a.clock and "2023-11-14" in a.clock
    assert "calls cut to nest in their enclosing call: 1" in a.anchor


@needs_otf2_print
def test_messages_name_ranks_of_their_communicator_and_a_rank_without_events_still_has_a_location(tmp_path):
    send, recv = CALL["MPI_Send"], CALL["MPI_Recv"]
    mpi = dict(kind=E.MPI_P2P, tid=0)
    rows = [
        # on MPI_COMM_WORLD (comm 0): world rank 2 -> 0
        dict(ts=10, dur=5, pid=12, rank=2, call=send, peer=0, tag=3, comm=0, nbytes=80, **mpi),
        dict(ts=11, dur=9, pid=10, rank=0, call=recv, peer=2, tag=3, comm=0, nbytes=80, **mpi),
        # on a communicator of world ranks [2, 0]: world 0 is its rank 1, world 2 its rank 0
        dict(ts=30, dur=5, pid=10, rank=0, call=send, peer=2, tag=4, comm=1, nbytes=16, **mpi),
        dict(ts=31, dur=9, pid=12, rank=2, call=recv, peer=0, tag=4, comm=1, nbytes=16, **mpi),
        # a partner unknown, a communicator unknown: Enter/Leave only
        dict(ts=50, dur=5, pid=10, rank=0, call=send, peer=-1, tag=4, comm=0, nbytes=16, **mpi),
        dict(ts=60, dur=5, pid=10, rank=0, call=send, peer=2, tag=4, comm=-1, nbytes=16, **mpi),
    ]
    for r in rows:
        r["tid"] = r["pid"]
    ev = _events(rows, comms=[E.Comm("MPI_COMM_WORLD"), E.Comm("split 1", [2, 0])],
                 processes={p: E.Process(p, 1, "node01", rank=p - 10) for p in (10, 12)})
    s = write_otf2(tmp_path / "a", ev, ranks=3)
    assert (s.sends, s.recvs, s.unpaired) == (2, 2, 2)
    a = read(s.path)
    check_nesting(a)
    msgs = [(e.kind, a.location_group(e.location), e.get("Receiver") or e.get("Sender"), e.get("Communicator"))
            for e in a.events if e.kind.startswith("MPI_")]
    assert msgs == [("MPI_SEND", 2, "0", "MPI_COMM_WORLD"), ("MPI_RECV", 0, "2", "MPI_COMM_WORLD"),
                    ("MPI_SEND", 0, "0", "split 1"), ("MPI_RECV", 2, "1", "split 1")]
    # rank 1 recorded nothing: its group and an empty location, so that the world's locations name three
    assert a.defs["LOCATION_GROUP"][1].startswith('Name: "rank 1 (no events recorded)"')
    (locs,) = [v for v in a.defs["GROUP"].values() if "Type: COMM_LOCATIONS" in v]
    assert "3 Members" in locs and "# Events: 0" in a.defs["LOCATION"][1]
    (split,) = [v for v in a.defs["GROUP"].values() if v.startswith('Name: "split 1"')]
    assert '2 Members: 2 ("main" <2>), 0 ("main" <0>)' in split


@needs_otf2_print
def test_counter_tracks_become_metrics_of_their_process_and_node(tmp_path):
    rows = [dict(ts=0, dur=1000, pid=7, tid=7, rank=-1, kind=E.IO_WRITE, call=CALL["write"], file=-1, nbytes=5)]
    ev = _events(rows, processes={7: E.Process(7, 1, "node01")})
    counters = E.Counters([
        E.Track("cpu", "share", "process", np.array([0, 400, 800]), np.array([0.5, 1.0, 0.25]), pid=7),
        E.Track("disk sda write bytes/s", "B/s", "node", np.array([200, 600]), np.array([1e6, 2e6]), device="sda")])
    s = write_otf2(tmp_path / "a", ev, counters, meta={"host": "node01"})
    assert s.metrics == 5 and s.io_ops == 0          # a write on no known file: Enter/Leave only
    a = read(s.path)
    check_nesting(a)
    metrics = [(e.ts - 10**12, e.get("Metric")) for e in a.events if e.kind == "METRIC"]
    assert [t for t, _ in metrics] == [0, 200, 400, 600, 800]
    inst = a.defs["METRIC_INSTANCE"]
    assert any("Scope: LOCATION_GROUP" in v for v in inst.values()) and any("SYSTEM_TREE_NODE" in v
                                                                            for v in inst.values())
    assert any('Unit: "B/s"' in v for v in a.defs["METRIC_MEMBER"].values())


@needs_otf2_print
def test_memory_is_bounded_by_libotf2s_chunks_whatever_the_number_of_events(tmp_path):
    n = 1_000_000
    ts = np.arange(n, dtype=np.int64) * 1000
    cols = {k: np.full(n, -1 if np.issubdtype(d, np.signedinteger) else 0, d) for k, d in E.COLUMNS.items()}
    cols.update(ts=ts, dur=np.full(n, 500, np.int64), pid=np.full(n, 7, np.int32),
                tid=np.where(np.arange(n) % 2 == 0, 7, 8).astype(np.int32), kind=np.full(n, E.IO_WRITE, np.uint8),
                call=np.full(n, CALL["pwrite"], np.uint16), file=np.zeros(n, np.int32), nbytes=np.full(n, 4096))
    ev = E.Events(10**12, 0, cols, names().calls, ["/data/f"], processes={7: E.Process(7, 1, "node01")})
    chunks = [ev.select(np.arange(n) // (n // 4) == k) for k in range(4)]      # a stream of 4 chunks
    s = write_otf2(tmp_path / "a", chunks)
    assert s.enters == s.io_ops == n and s.io_bytes == 4096 * n
    # two threads' buffers of 4 chunks of 256 KiB at most, then the definitions' (4 MiB, at the end),
    # against an archive of about 40 MB
    assert s.buffer_peak <= 2 * 4 * (256 << 10) + (4 << 20) and s.bytes > 10 * s.buffer_peak, s
    assert s.bytes / n <= 128


def test_rows_back_in_time_are_refused_and_leave_no_archive(tmp_path):
    rows = [dict(ts=100, dur=1, pid=7, tid=7, kind=E.IO_WRITE, call=CALL["write"]),
            dict(ts=50, dur=1, pid=7, tid=7, kind=E.IO_WRITE, call=CALL["write"])]
    first = _events(rows[:1])
    later = _events(rows[1:])
    with pytest.raises(ValueError):
        write_otf2(tmp_path / "a", [first, later])
    assert not list(tmp_path.iterdir())
    (tmp_path / "b").mkdir()
    with pytest.raises(FileExistsError):
        write_otf2(tmp_path / "b", first)
