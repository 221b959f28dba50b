"""A model per MPI call and per named region (`ceiling scale --profile`, analysis/scaling_calls.py),
the regions a profile keeps (csrc/interpose/region.c's "region" lines, analysis/profile_regions.py),
and both in the Extra-P export (report/extrap.py): synthetic members with known laws, a C program's
nested regions under `ceiling profile`, and a real MPI study end to end."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from ceiling.analysis import scaling_calls, scaling_split
from ceiling.analysis.scaling_models import analyse, series_model
from ceiling.region import include_dir
from ceiling.report.extrap import text
from ceiling.results.model import Application, Member, Metric, Run
from ceiling.results.profile import CallTimes, Region
from ceiling.results.profile_mpi import MpiFunction
from mpiutil import needs_mpi, run_env
from test_interpose import NEEDS_LIB

P = (1, 2, 4, 8, 16, 32)


def _member(p, allreduce_s, solve_s, ranks=None, status=0):
    ranks = ranks or p
    run = Run(tool_version="t", host="h", started="2026-11-29T00:00:00Z", command=["ceiling"], run_id=f"r{p}")
    fns = [MpiFunction(fn="MPI_Allreduce", calls=100, ns=int(allreduce_s * 1e9))] if allreduce_s else []
    fns.append(MpiFunction(fn="MPI_Init", calls=ranks, ns=int(0.01 * ranks * 1e9)))
    run.application = Application(command=["app"], exit_status=status, calls=CallTimes(
        processes=ranks, mpi=fns,
        regions=[Region(name="solve step", calls=ranks, ns=int(solve_s * 1e9), processes=ranks,
                        max_ns=int(solve_s / ranks * 1e9))]))
    return Member(p, run.run_id, run)


def _members(seed, reps=3, cv=0.02):
    rng = np.random.default_rng(seed)
    out = []
    for p in P:
        for _ in range(reps):
            noise = 1 + cv * rng.standard_normal(2)
            # summed over the ranks: an Allreduce costing 0.5 ms x log2(p) per rank (and 1 ms once), a solve of
            # fixed total work
            out.append(_member(p, (1e-3 + 5e-4 * p * np.log2(p)) * noise[0], 10.0 * noise[1]))
    return out


def test_each_call_and_region_gets_its_own_model_with_the_true_lead_term():
    lead = 0
    for seed in range(10):
        got = scaling_calls.of_members(_members(seed), False, lambda t: series_model(t, seed))
        rows = {(r["kind"], r["name"]): r for r in got}
        assert set(rows) == {("mpi", "MPI_Allreduce"), ("mpi", "MPI_Init"), ("region", "solve step")}
        ar = rows[("mpi", "MPI_Allreduce")]
        assert ar["aggregate"] == "sum over processes" and [x["p"] for x in ar["points"]] == list(P)
        lead += max(ar["model"]["terms"]) == (1.0, 1)                # p·log2(p) leads, as the law says
        assert ar["predictions"][-1]["p"] == 128 and ar["predictions"][-1]["extrapolation"]
        assert rows[("region", "solve step")]["model"]["terms"] == []   # a fixed total: the constant
        assert rows[("mpi", "MPI_Init")]["model"]["terms"] == [(1.0, 0)]   # 10 ms per rank, summed: linear
    assert lead >= 8


def test_weak_scaling_takes_the_mean_per_process_and_the_longest_comes_first():
    rows = scaling_calls.of_members([_member(p, 0.002 * p, 1.0 * p) for p in (1, 2, 4)], True, series_model)
    one = _member(4, 0.008, 1.0)
    one.run.application.calls.regions[0].processes = 1                    # a region rank 0 alone runs
    assert scaling_calls.per_run(one.run, True)[("region", "solve step")] == 0.25   # over every process
    solve = [r for r in rows if r["name"] == "solve step"][0]
    assert solve["aggregate"] == "mean per process" and [x["median"] for x in solve["points"]] == [1.0, 1.0, 1.0]
    assert rows[0]["name"] == "solve step"          # 1 s per process at 4, the Allreduce 2 ms
    allreduce = [r for r in rows if r["name"] == "MPI_Allreduce"][0]
    assert [x["median"] for x in allreduce["points"]] == pytest.approx([0.002, 0.002, 0.002])


def test_a_call_missing_at_a_count_is_zero_there_and_gets_no_model():
    # no Allreduce at 1 rank (nothing to reduce with): 0 s there, not a gap, and no model through a zero
    members = [_member(1, 0, 1.0)] + [_member(p, 0.001 * p, 1.0) for p in (2, 4, 8)]
    rows = {r["name"]: r for r in scaling_calls.of_members(members, False, series_model)}
    assert rows["MPI_Allreduce"]["points"][0] == {"p": 1.0, "median": 0.0, "values": [0.0]}
    assert rows["MPI_Allreduce"]["why_no_model"] == "no time at 1: not called there"
    said = scaling_calls.lines(scaling_calls.of_members(members, False, series_model), "ranks")
    assert any(ln.startswith("MPI_Allreduce (sum over processes): no model (no time at 1: not called there); 0 s at 1")
               for ln in said), said


def test_failed_and_unprofiled_runs_are_left_out():
    members = [_member(p, 0.001 * p, 1.0) for p in (1, 2, 4)] + [_member(8, 0.5, 9.0, status=1)]
    members.append(Member(16, "x", Run(tool_version="t", host="h", started="", command=[], run_id="x")))
    rows = scaling_calls.of_members(members, False, series_model)
    assert all([x["p"] for x in r["points"]] == [1.0, 2.0, 4.0] for r in rows)
    assert len(scaling_calls.lines(rows, "ranks", shown=1)) == 2        # the longest, and "and 2 more"


def test_the_extrap_export_has_a_call_path_per_call_and_region():
    members = _members(0, reps=2)
    times = {}
    for m in members:
        times.setdefault(float(m.value), []).append(1.0 + 0.01 * len(times))
    result = analyse(times, "ranks", cpus=64)
    result["calls"] = scaling_calls.of_members(members, False, series_model)
    result["calls"].append({"kind": "mpi", "name": "MPI_Send", "aggregate": "sum over processes",
                            "points": [{"p": 2.0, "median": 1.0, "values": [1.0]}]})   # not at every count
    lines = text(result).splitlines()
    assert "REGION main->MPI_Allreduce" in lines and "REGION main->solve step" in lines
    assert "REGION main->MPI_Send" not in lines                 # Extra-P wants a DATA line for every point
    at = lines.index("REGION main->solve step")
    assert lines[at + 1] == "METRIC time_sum" and all(ln.startswith("DATA ") for ln in lines[at + 2:at + 8])
    assert lines[1].startswith("# main->NAME: each MPI call's and named region's inclusive time, time_sum")
    assert len(lines[at + 2].split()) == 3                      # DATA and the two repetitions
    assert not any("e-" in ln or "e+" in ln for ln in lines if ln.startswith("DATA"))


def test_export_names_are_unique_and_tiny_times_keep_their_digits():
    pts = [{"p": float(p), "median": 2.5e-7, "values": [2.5e-7 * p, 1.234567e-9]} for p in (1, 2, 4)]
    result = analyse({1: [1.0, 1.1], 2: [0.6, 0.61], 4: [0.4, 0.41]}, "ranks", cpus=64)
    result["calls"] = [{"kind": "region", "name": "a->b", "points": pts},
                       {"kind": "region", "name": "a-b", "points": pts},
                       {"kind": "mpi", "name": "MPI_Send", "points": pts},
                       {"kind": "region", "name": "MPI_Send", "points": pts},
                       {"kind": "region", "name": "  two   spaces ", "points": pts},
                       {"kind": "region", "name": "x->>y", "points": pts}]
    lines = text(result).splitlines()
    regions = [ln for ln in lines if ln.startswith("REGION ")]
    assert regions == ["REGION main", "REGION main->a-b", "REGION main->a-b (region)", "REGION main->MPI_Send",
                       "REGION main->MPI_Send (region)", "REGION main->two spaces", "REGION main->x-y"]
    assert "DATA 0.00000025 0.000000001234567" in lines          # every digit, no exponent


def test_a_run_with_no_time_in_a_call_gives_no_model_rather_than_zero():
    got = series_model({1: [1.0, 1.1], 2: [0.5, 0.0], 4: [0.25, 0.26]})
    assert got == {"why_no_model": "a run with no time in it at 2: the fit weighs each time by its inverse"}


def test_the_split_reads_the_load_balance_as_the_percentage_it_is():
    run = Run(tool_version="t", host="h", started="", command=[])
    run.metrics = [Metric.measured("app.time.on_cpu", [90.0], "%"), Metric.measured("app.mpi.time", [20.0], "%"),
                   Metric.measured("app.mpi.load_balance", [95.0], "%")]
    got = scaling_split.of_run(run)
    assert got["imbalance"] == pytest.approx(0.05) and got["mpi"] == pytest.approx(0.2)


REGIONS_C = r"""
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <ceiling/region.h>
int main(void)
{
    char name[32], longname[260];
    memset(longname, 'x', 250);            /* kept to 200 bytes: its end must still find its begin */
    longname[250] = 0;
    for (int k = 0; k < 3; k++) {
        ceiling_region_begin(longname);
        ceiling_region_end(longname);
    }
    #pragma omp parallel num_threads(16)   /* a team meeting a new name at once: one name, every pair */
    for (int k = 0; k < 5; k++) {
        ceiling_region_begin("team");
        ceiling_region_end("team");
    }
    ceiling_region_end("ended, never begun");
    ceiling_region_begin("around a fork");
    pid_t child = fork();
    if (child == 0) {                       /* the child has no region open: this end counts nothing */
        ceiling_region_end("around a fork");
        return 0;
    }
    waitpid(child, NULL, 0);
    ceiling_region_end("around a fork");
    for (int k = 0; k < 3; k++) {
        ceiling_region_begin("outer step");
        ceiling_region_begin("inner");
        usleep(20000);
        ceiling_region_end("inner");
        usleep(10000);
        ceiling_region_end("outer step");
    }
    for (int i = 0; i < 130; i++) {        /* past the profile's table of 128 names */
        snprintf(name, sizeof name, "r%d", i);
        ceiling_region_begin(name);
        ceiling_region_end(name);
    }
    ceiling_region_begin("never ended");
    return 0;
}
"""


@NEEDS_LIB
def test_a_profile_keeps_the_programs_regions(tmp_path):
    (tmp_path / "r.c").write_text(REGIONS_C)
    subprocess.run(["gcc", "-O1", "-fopenmp", f"-I{include_dir()}", "-o", str(tmp_path / "r"), str(tmp_path / "r.c")],
                   check=True)
    out = tmp_path / "p.json"
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json",
                        str(out), "--", str(tmp_path / "r")], capture_output=True, text=True, timeout=120,
                       env=dict(run_env(tmp_path), NO_COLOR="1"))
    assert r.returncode == 0, r.stderr
    prof = json.loads(out.read_text())["application"]["profile"]
    by = {g["name"]: g for g in prof["regions"]}
    outer, inner = by["outer step"], by["inner"]
    assert prof["regions"][0]["name"] == "outer step" and outer["calls"] == inner["calls"] == 3
    assert outer["processes"] == 1 and outer["max_ns"] == outer["ns"]
    assert inner["ns"] >= 3 * 20e6 and outer["ns"] >= inner["ns"] + 3 * 10e6     # inclusive of the nested one
    assert outer["ns"] < 3 * 30e6 * 3                                              # and not far past it
    assert by["x" * 200]["calls"] == 3 and by["team"]["calls"] == 80
    assert by["around a fork"]["calls"] == 1 and by["around a fork"]["processes"] == 1
    assert "ended, never begun" not in by
    # 136 names: the first 128 counted (the long one, team, around a fork, outer step, inner, r0..r122),
    # r123..r129 and "never ended" past them
    assert "never ended" not in by and "r122" in by and "r123" not in by and prof["regions_lost"] == 8
    assert len(prof["regions"]) == 128
    assert "Regions (ceiling_region_begin/end)" in r.stderr and "outer step: 3 calls, 0.0" in r.stderr


@needs_mpi
@NEEDS_LIB
def test_an_mpi_study_models_each_call_and_region_and_exports_them(mpi_setup, tmp_path):
    tmp, found = mpi_setup
    prog = tmp_path / "prog.py"
    prog.write_text("from mpi4py import MPI\nimport ceiling.region as region\nimport numpy as np\n"
                    "c = MPI.COMM_WORLD\na = np.ones(1)\n"
                    "for step in range(5):\n"
                    "    with region.region('exchange'):\n"
                    "        for k in range(10 * c.size):\n"
                    "            c.Allreduce(MPI.IN_PLACE, a)\n")
    launch = [a if a != "4" else "{ranks}" for a in found["argv4"]]
    assert "{ranks}" in launch, found["argv4"]
    ex, js = tmp_path / "x.txt", tmp_path / "s.json"
    r = subprocess.run([sys.executable, "-m", "ceiling", "scale", "--ranks", "1,2,3", "--repeat", "1", "--profile",
                        "--no-store", "--extrap", str(ex), "--save-json", str(js), "--", *launch, sys.executable,
                        str(prog)], capture_output=True, text=True, timeout=300,
                       env=run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(js.read_text())
    notes = doc["analysis"]["notes"]
    at = notes.index("per MPI call and region (PMNF models as Extra-P makes them, seconds):")
    calls = " ".join(notes[at + 1:])
    assert "region 'exchange' (sum over processes)" in calls and "MPI_Allreduce" in calls, notes
    # each member keeps its calls and regions, not a profile: its own page is a plain run's
    app = doc["members"][0]["run"]["application"]
    assert app["profile"] is None and app["calls"]["processes"] == doc["members"][0]["value"]
    assert app["calls"]["mpi"] and [g["name"] for g in app["calls"]["regions"]] == ["exchange"]
    lines = ex.read_text().splitlines()
    assert "REGION main->exchange" in lines and any(ln.startswith("REGION main->MPI_Allreduce") for ln in lines)
