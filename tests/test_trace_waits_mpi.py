"""MPI wait states and phases found end to end (issue 29): small mpi4py programs, each with one planted
wait, run under `ceiling trace` (express: `ceiling trace -- mpirun ...`, and wrapped: `mpirun ...
ceiling trace -- ...`), and the run's findings read back from its JSON. Each is found with its window
inside what the program planted (it prints that span on CLOCK_MONOTONIC, the trace's clock, whose
origin the run keeps as trace.recorded's t0_monotonic_ns), a time lost that fits the sleep planted, and no other
wait or phase finding; a clean program raises none. tests/test_trace_waits.py checks the definitions
on synthetic events.

Planted with sleeps of 0.3 s (the waits are unambiguous on a loaded 2-CPU host, where a rank's wake-up
may lag some ms): a late sender (rank 0 sleeps, then MPI_Send; rank 1 waits in MPI_Recv, or in the
MPI_Wait of an MPI_Irecv), a late receiver (rank 0 MPI_Ssend at once; rank 1 sleeps, then
receives), a wait at a barrier (rank 1 sleeps before it, the others wait), an imbalanced phase (six
barriers, five phases of 0.2 s each on every rank, rank 1 computing 0.3 s more in the third), and a
clean program (the same five phases, balanced, and a message sent as soon as it is received).
The waiting ranks yield their CPU (MPICH's
and Open MPI's settings) so that the sleeping rank's wake-up is not the pollers' victim."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpiutil import needs_mpi, run_env
from test_interpose import NEEDS_LIB

pytestmark = [needs_mpi, NEEDS_LIB, pytest.mark.serial]     # each run's windows are real seconds
SLEEP = 0.3
PHASE = 0.2            # s: each phase of the imbalanced and the clean programs (a 5% floor of their run: 65 ms)
SLACK = 0.02           # s: a wait's window against the program's own clock (enter/leave of the calls around it)

PROGRAM = r'''
import os, sys, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
mode = sys.argv[1]
buf = bytearray(1024)
SLEEP = float(sys.argv[2])
PHASE = float(sys.argv[3])

def say(*v):
    os.write(1, (" ".join(map(str, v)) + "\n").encode())     # one write: the ranks share the launcher's stdout

if mode == "late_sender":
    if rank == 0:
        time.sleep(SLEEP)
        comm.Send([buf, MPI.BYTE], dest=1, tag=7)
    elif rank == 1:
        a = time.monotonic_ns()
        comm.Recv([buf, MPI.BYTE], source=0, tag=7)
        say("phase", a, time.monotonic_ns())
elif mode == "late_sender_wait":
    if rank == 0:
        time.sleep(SLEEP)
        comm.Send([buf, MPI.BYTE], dest=1, tag=9)
    elif rank == 1:
        req = comm.Irecv([buf, MPI.BYTE], source=0, tag=9)
        a = time.monotonic_ns()
        req.Wait()
        say("phase", a, time.monotonic_ns())
elif mode == "late_receiver":
    if rank == 0:
        a = time.monotonic_ns()
        comm.Ssend([buf, MPI.BYTE], dest=1, tag=3)
        say("phase", a, time.monotonic_ns())
    elif rank == 1:
        time.sleep(SLEEP)
        comm.Recv([buf, MPI.BYTE], source=0, tag=3)
elif mode == "barrier":
    if rank == 1:
        time.sleep(SLEEP)
    a = time.monotonic_ns()
    comm.Barrier()
    if rank != 1:
        say("waited", rank, a, time.monotonic_ns())
elif mode in ("imbalance", "clean"):
    comm.Barrier()
    for k in range(5):
        a = time.monotonic_ns()
        time.sleep(PHASE + (SLEEP if mode == "imbalance" and k == 2 and rank == 1 else 0))
        if mode == "imbalance" and k == 2 and rank == 1:
            say("phase", a, time.monotonic_ns())
        comm.Barrier()
    if mode == "clean" and comm.Get_size() >= 2:
        if rank == 0:
            comm.Send([buf, MPI.BYTE], dest=1, tag=1)
        elif rank == 1:
            comm.Recv([buf, MPI.BYTE], source=0, tag=1)
'''

WAITS = ("trace.mpi.",)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    d = tmp_path_factory.mktemp("waits")
    (d / "waits.py").write_text(PROGRAM)
    return str(d / "waits.py")


def trace(mpi_setup, tmp_path: Path, program: str, mode: str, nranks: int, how: str):
    """`ceiling trace` of the program under the launcher, express or wrapped: (its JSON, what the program
    printed as {key: [numbers]}, t0 ns)."""
    tmp, found = mpi_setup
    out, pf = tmp_path / "t.json", tmp_path / "t.pftrace"
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                  MPIR_CVAR_POLLS_BEFORE_YIELD="1", MPIR_CVAR_ENABLE_HEAVY_YIELD="1", OMPI_MCA_mpi_yield_when_idle="1")
    env.pop("PYTHONFAULTHANDLER", None)
    launch = found["argv2"] if nranks == 2 else found["argv4"]
    ceiling = [sys.executable, "-m", "ceiling", "trace", "--no-store", "--no-measure", "--save-json", str(out),
               "--trace", str(pf), "--"]
    app = [sys.executable, program, mode, str(SLEEP), str(PHASE)]
    cmd = [*ceiling, *launch, *app] if how == "express" else [*launch, *ceiling, *app]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stderr
    printed = {}
    for line in r.stdout.splitlines():
        key, *vals = line.split()
        if key in ("phase", "waited"):
            printed.setdefault(key, []).append([int(v) for v in vals])
    doc = json.loads(out.read_text())
    (rec,) = [f for f in doc["findings"] if f["id"] == "trace.recorded"]
    return doc, printed, rec["data"]["t0_monotonic_ns"]            # CLOCK_MONOTONIC at the trace's start


def waits(doc):
    return [f for f in doc["findings"] if f["id"].startswith(WAITS)]


def only(doc, expected):
    found = waits(doc)
    assert [f["id"] for f in found] == [expected], [(f["id"], f["title"], f["data"]) for f in found]
    return found[0]


def planted(printed, t0):
    (a, b), = printed["phase"]
    return (a - t0) / 1e9, (b - t0) / 1e9


def inside(f, lo, hi):
    d = f["data"]
    assert lo - SLACK <= d["start_s"] <= d["end_s"] <= hi + SLACK, (d, lo, hi)


HOW = ["express", "wrapped"]


def planted_wait(mpi_setup, program, tmp_path, mode, nranks, how, expected):
    """The one wait finding of a planted program, inside what it planted and losing about that: its only site."""
    doc, printed, t0 = trace(mpi_setup, tmp_path, program, mode, nranks, how)
    f = only(doc, expected)
    lo, hi = planted(printed, t0)
    inside(f, lo, hi)
    d = f["data"]
    # the call's own time, less its end after the partner came (the sleeping rank's sleep began before the
    # other reached its call by the ranks' start-up skew: tens of ms with 4 ranks on 2 CPUs)
    assert hi - lo >= 0.5 * SLEEP and 0.9 * (hi - lo) <= d["time_lost_s"] <= hi - lo + SLACK, (d, hi - lo)
    (site,) = d["sites"]
    return site


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("mode, nranks, call", [("late_sender", 2, "MPI_Recv"), ("late_sender", 4, "MPI_Recv"),
                                               ("late_sender_wait", 2, "MPI_Wait")])
def test_a_late_sender(mpi_setup, program, tmp_path, mode, nranks, call, how):
    # in a blocking receive, or in the MPI_Wait of an MPI_Irecv (the interposer ties the wait to its receive)
    site = planted_wait(mpi_setup, program, tmp_path, mode, nranks, how, "trace.mpi.late_sender")
    assert (site["rank"], site["call"], site["peer"], site["comm"]) == (1, call, 0, "MPI_COMM_WORLD")


@pytest.mark.parametrize("how", HOW)
def test_a_late_receiver_of_a_synchronous_send(mpi_setup, program, tmp_path, how):
    site = planted_wait(mpi_setup, program, tmp_path, "late_receiver", 2, how, "trace.mpi.late_receiver")
    assert (site["rank"], site["call"], site["peer"]) == (0, "MPI_Ssend", 1)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("nranks", [2, 4])
def test_a_wait_at_a_barrier(mpi_setup, program, tmp_path, nranks, how):
    doc, printed, t0 = trace(mpi_setup, tmp_path, program, "barrier", nranks, how)
    f = only(doc, "trace.mpi.barrier")
    lo, hi = min(a for _, a, _ in printed["waited"]), max(b for _, _, b in printed["waited"])
    lo, hi = (lo - t0) / 1e9, (hi - t0) / 1e9
    d = f["data"]
    # the waiting ranks' barriers, from the first's enter to the last's leave
    assert lo - SLACK <= d["start_s"] and d["end_s"] <= hi + SLACK, (d, lo, hi)
    assert sorted(s["rank"] for s in d["sites"]) == [r for r in range(nranks) if r != 1], d
    # each waiting rank's own barrier time (printed by it: the ranks reach it with some start-up skew)
    waited = sum(b - a for _, a, b in printed["waited"]) / 1e9
    assert len(printed["waited"]) == nranks - 1 and waited >= 0.5 * SLEEP * (nranks - 1), printed
    assert 0.9 * waited <= d["time_lost_s"] <= waited + SLACK * (nranks - 1), (d, waited)


@pytest.mark.parametrize("how", HOW)
def test_imbalance_in_one_phase_of_five(mpi_setup, program, tmp_path, how):
    doc, printed, t0 = trace(mpi_setup, tmp_path, program, "imbalance", 2, how)
    f = only(doc, "trace.mpi.phase_imbalance")
    lo, hi = planted(printed, t0)
    d = f["data"]
    assert d["worst"] == "between MPI_Barrier #3 and MPI_Barrier #4 on MPI_COMM_WORLD", d
    assert [p["phase"] for p in d["phases"]] == [d["worst"]], d
    (p,) = d["phases"]
    assert p["slowest_rank"] == 1 and p["imbalance"] > 1.3, p          # (0.5 s / 0.35 s: 1.43)
    inside(f, lo, hi)
    assert 0.9 * SLEEP <= d["time_lost_s"] <= hi - lo + SLACK, (d, hi - lo)


@pytest.mark.parametrize("how", HOW)
def test_a_clean_program_raises_no_wait_finding(mpi_setup, program, tmp_path, how):
    doc, printed, t0 = trace(mpi_setup, tmp_path, program, "clean", 2, how)
    assert waits(doc) == [], [(f["id"], f["title"], f["evidence"]) for f in waits(doc)]
    (rec,) = [f for f in doc["findings"] if f["id"] == "trace.recorded"]
    assert rec["data"]["events"] > 0

