"""ceiling_work(flops, bytes): a program states its own work while it runs (C header, Fortran module,
ceiling.region.work), the interposer sums it per process (csrc/interpose/work.c), ``ceiling profile``
sums the processes and ranks and places the program on this node's roofline from the history
(analysis/app_roofline.py). Outside ceiling each call does nothing. Also ``--flops``/``--memory-bytes``/
``--work`` on the command line and their bad values (one line, the usage exit code)."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

import sample_runs
from ceiling import cli
from ceiling.results.store import Store
from mpiutil import needs_mpi, run_env
from test_interpose import LIB, NEEDS_LIB

N = 1_000_000
STEPS = 10
C_PROG = r"""
#include <stdio.h>
#include <stdlib.h>
#include <ceiling/region.h>
int main(void)
{
    const long n = %d;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    for (long i = 0; i < n; i++) { b[i] = i; c[i] = 2 * i; }
    for (int r = 0; r < %d; r++) {
        for (long i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
        ceiling_work(2.0 * n, 24.0 * n);        /* a triad: 2 flops, 3 doubles moved per element */
    }
    ceiling_work(-1.0, 8.0);                    /* refused: counted, not added */
    printf("%%g\n", a[n / 2]);
    return 0;
}
""" % (N, STEPS)
FLOPS, BYTES = 2.0 * N * STEPS, 24.0 * N * STEPS


@pytest.fixture
def history(tmp_path):
    """A history whose node is this one: the VM sample's roofs (DP 100.8 Gflop/s, triad 23.6 GB/s,
    L1/L2/L3 409/196/121 GB/s)."""
    run = sample_runs.vm_run()
    run.host = socket.gethostname()
    db = tmp_path / "history.db"
    s = Store(str(db))
    s.save(run)
    s.close()
    return db


def _c_program(tmp_path):
    from ceiling.region import include_dir
    (tmp_path / "w.c").write_text(C_PROG)
    subprocess.run(["gcc", "-O1", "-I", str(include_dir()), "-o", str(tmp_path / "w"), str(tmp_path / "w.c")],
                   check=True)
    return tmp_path / "w"


def _profile(tmp_path, history, *cmd, args=()):
    out = tmp_path / "p.json"
    code = cli.main(["profile", "--no-store", "--no-measure", "--db", str(history), "--save-json", str(out),
                     *args, "--", *map(str, cmd)])
    return code, json.loads(out.read_text())


def _roofline(doc):
    return [f for f in doc["findings"] if f["id"] == "profile.roofline"]


@NEEDS_LIB
def test_a_c_program_states_its_work_and_is_placed_on_the_nodes_roofline(tmp_path, history, capsys):
    exe = _c_program(tmp_path)
    plain = subprocess.run([str(exe)], capture_output=True, timeout=60,
                           env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    assert plain.returncode == 0 and plain.stderr == b""          # without ceiling: no symbol, no call
    code, doc = _profile(tmp_path, history, exe)
    assert code == 0
    (f,) = _roofline(doc)
    assert f["status"] == "ok" and f["title"].startswith("Roofline (stated by the program (ceiling_work)): memory-")
    d = f["data"]
    assert (d["flops"], d["bytes"]) == (FLOPS, BYTES)
    assert f"{STEPS} ceiling_work call(s) in 1 process(es); 1 refused" in f["evidence"]
    assert d["intensity"] == pytest.approx(1 / 12)
    assert d["gflops"] == pytest.approx(FLOPS / doc["application"]["wall_s"] / 1e9)
    pl = d["placement"]
    assert pl["bound"] == "stream.triad" and pl["roof_gflops"] == pytest.approx(23.6 / 12)
    assert pl["next"]["name"] == "bandwidth.l3"
    assert "1 refused" in f["evidence"] and "this node's history: stream.triad = 23.6 GB/s" in f["evidence"]
    (p,) = doc["analysis"]["roofline"]["points"]
    assert p["label"] == "application (ceiling_work)" and p["intensity"] == pytest.approx(1 / 12)
    assert "Roofline (stated by the program (ceiling_work))" in " ".join(capsys.readouterr().err.split())


@NEEDS_LIB
def test_stated_work_beside_the_programs_gives_two_points_and_e_w_p(tmp_path, history, capsys):
    exe = _c_program(tmp_path)
    code, doc = _profile(tmp_path, history, exe, args=["--flops", str(FLOPS), "--memory-bytes", "240MB", "--work",
                                                       "1e7 elements"])
    assert code == 0
    found = _roofline(doc)
    assert [f["data"]["source"] for f in found] == ["stated", "ceiling_work"]
    assert found[0]["data"]["bytes"] == 240e6 and found[0]["data"]["flops"] == FLOPS
    (e,) = [f for f in doc["findings"] if f["id"] == "profile.efficiency"]
    assert "memory: W = " in e["evidence"] and "per unit of work:" in e["evidence"] and "elements per second" in \
        e["evidence"]
    assert len(doc["analysis"]["roofline"]["points"]) == 2


@NEEDS_LIB
def test_without_work_the_profile_says_what_would_give_the_point(tmp_path, history):
    code, doc = _profile(tmp_path, history, sys.executable, "-c", "sum(range(10**6))")
    assert code == 0
    (f,) = _roofline(doc)
    assert f["status"] == "skipped" and f["title"].startswith("Roofline: no point (")
    assert "--flops N --memory-bytes N" in f["evidence"] and "ceiling_work(flops, bytes)" in f["evidence"]
    assert doc["analysis"]["roofline"] is None                 # nothing to draw


PY_PROG = ("import ceiling.region as r\nfor _ in range(4):\n    r.work(2.5e8, 1e9)\nr.work(float('nan'), 1)\n")


@NEEDS_LIB
def test_a_python_program_states_its_work_and_outside_ceiling_nothing_happens(tmp_path, history):
    e = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    plain = subprocess.run([sys.executable, "-c", PY_PROG + "assert r._lookup_work() is False\n"], env=e,
                           capture_output=True, timeout=60)
    assert plain.returncode == 0, plain.stderr
    code, doc = _profile(tmp_path, history, sys.executable, "-c", PY_PROG)
    assert code == 0
    (f,) = _roofline(doc)
    assert (f["data"]["flops"], f["data"]["bytes"], f["data"]["intensity"]) == (1e9, 4e9, 0.25)
    assert "4 ceiling_work call(s) in 1 process(es); 1 refused" in f["evidence"]


FORTRAN = """
program w
    use ceiling_region
    implicit none
    call ceiling_work(3.0d9, 1.5d9)
    call ceiling_work(1.0e9, 0.5e9)
end program w
"""


@NEEDS_LIB
@pytest.mark.skipif(shutil.which("gfortran") is None, reason="no gfortran (Debian: apt-get install gfortran)")
def test_a_fortran_program_states_its_work_in_either_real_kind(tmp_path, history):
    from ceiling.region import include_dir
    (tmp_path / "w.f90").write_text(FORTRAN)
    subprocess.run(["gfortran", "-O1", "-std=f2008", "-J", str(tmp_path), "-o", str(tmp_path / "w"),
                    str(include_dir() / "ceiling" / "ceiling_region.f90"), str(tmp_path / "w.f90")],
                   check=True, cwd=tmp_path)
    assert subprocess.run([str(tmp_path / "w")], capture_output=True, timeout=30).returncode == 0
    code, doc = _profile(tmp_path, history, tmp_path / "w")
    assert code == 0
    (f,) = _roofline(doc)
    assert (f["data"]["flops"], f["data"]["bytes"]) == (4e9, 2e9)


MPI_PROG = ("from mpi4py import MPI\nimport ceiling.region as r\nc = MPI.COMM_WORLD\n"
            "r.work(1e9 * (c.rank + 1), 5e8)\nc.Barrier()\n")


@needs_mpi
@NEEDS_LIB
@pytest.mark.parametrize("wrapped", [False, True], ids=["ceiling-mpirun", "mpirun-ceiling"])
def test_two_mpi_ranks_work_is_summed_over_the_ranks(mpi_setup, tmp_path, history, wrapped):
    tmp, found = mpi_setup
    out = tmp_path / "p.json"
    env = run_env(tmp, NO_COLOR="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    ceiling = [sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--db", str(history),
               "--save-json", str(out), "--"]
    prog = [sys.executable, "-c", MPI_PROG]
    # ceiling around mpirun (every rank's record to one ceiling), or a ceiling per rank (rank 0's gathers)
    cmd = [*found["argv2"], *ceiling, *prog] if wrapped else [*ceiling, *found["argv2"], *prog]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    (f,) = _roofline(doc)
    assert (f["data"]["flops"], f["data"]["bytes"]) == (3e9, 1e9)          # rank 0's 1e9 and rank 1's 2e9
    assert "2 ceiling_work call(s) in 2 process(es)" in f["evidence"]
    assert doc["application"]["profile"]["mpi"]["ranks"] == 2


@pytest.mark.parametrize("args, code, words", [
    (["--flops", "-1", "--memory-bytes", "8"], 3, "--flops '-1': must be larger than zero"),
    (["--flops", "lots", "--memory-bytes", "8"], 2, "--flops 'lots': not a number"),
    (["--flops", "nan", "--memory-bytes", "8"], 3, "--flops 'nan': must be larger than zero"),
    (["--flops", "1e9", "--memory-bytes", "0"], 3, "--memory-bytes '0': must be larger than zero"),
    (["--flops", "1e9", "--memory-bytes", "-5"], 3, "--memory-bytes '-5': must be positive"),
    (["--flops", "1e9", "--memory-bytes", "inf"], 2, "--memory-bytes"),
    (["--work", "records"], 2, "--work 'records': give a number above zero"),
    (["--work", "0 records"], 2, "--work '0 records'"),
    (["--work", "5 records", "--ops", "5"], 2, "give --ops or --work, not both"),
])
@pytest.mark.parametrize("verb", ["profile", "scale"])
def test_bad_work_is_one_line_and_its_code(verb, args, code, words, capsys):
    where = ["--threads", "1"] if verb == "scale" else []
    assert cli.main([verb, "--no-store", *where, *args, "--", "true"]) == code
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and words in err[0], err


def test_the_interposer_exports_ceiling_work():
    out = subprocess.run(["nm", "-D", "--defined-only", str(LIB)], capture_output=True, text=True, check=True).stdout
    assert " T ceiling_work" in out
