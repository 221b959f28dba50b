"""`mpirun -n N ceiling bench storage`: several MPI processes make each storage
measurement together (bench/storage_mpi.py). The helpers are pure functions;
the rest runs real ranks on this machine with the launcher that matches the
MPI library mpi4py loads, CEILING_NODE_NAME standing in for nodes. Sizes are
small (a few MiB per rank, one repetition, 50 metadata files per rank).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ceiling.bench import storage_mpi as sm
from ceiling.cluster.launch import launched_rank, launched_size
from ceiling.cluster.placement import bound_cpus

from mpiutil import needs_mpi
from mpiutil import run_env as _env
MIB = 1 << 20


# -- pure helpers ------------------------------------------------------------------

def test_launched_size_from_each_launchers_environment():
    assert launched_size({}) == 1
    assert launched_size({"OMPI_COMM_WORLD_SIZE": "4"}) == 4
    assert launched_size({"PMI_SIZE": "2"}) == 2
    assert launched_size({"PMI_SIZE": "1"}) == 1                 # mpirun -n 1: a process alone
    assert launched_size({"MPI_LOCALNRANKS": "2"}) == 1          # Hydra's count on this node, not the world
    assert launched_size({"SLURM_PROCID": "0", "SLURM_STEP_ID": "3", "SLURM_STEP_NUM_TASKS": "8"}) == 8
    assert launched_size({"SLURM_PROCID": "0", "SLURM_NTASKS": "8"}) == 1   # sbatch's shell, not srun
    # srun --mpi=pmix: PMIx leaves a rank and no size; Slurm's step says how many
    assert launched_size({"PMIX_RANK": "1", "SLURM_PROCID": "1", "SLURM_STEP_ID": "0",
                          "SLURM_STEP_NUM_TASKS": "2"}) == 2
    assert launched_size({"PMIX_RANK": "1"}) == 0                   # launched, size unknown: ask MPI


def test_launched_rank():
    assert launched_rank({}) == 0
    assert launched_rank({"PMI_RANK": "3", "PMI_SIZE": "4"}) == 3
    assert launched_rank({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}) == 1
    assert launched_rank({"SLURM_PROCID": "5", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "8"}) == 5
    assert launched_rank({"SLURM_PROCID": "5"}) == 0                 # a batch script, not a task
    assert launched_rank({"PMIX_RANK": "3"}) == 3


def test_task_reordering_reads_the_next_nodes_data():
    nodes = ["a", "a", "b", "b", "c"]
    got = [sm._reorder([0, 1, 2, 3, 4], nodes, r)[0] for r in range(5)]
    assert got == [2, 3, 4, 3, 0]        # rank 3 has no partner on node c: its own data
    target, how = sm._reorder([0, 1], ["a", "a"], 1)
    assert target == 1 and how.startswith("none: one node")
    assert "IOR -C" in sm._reorder([0, 2], nodes, 0)[1]


def test_ranks_are_pinned_only_inside_disjoint_cpu_sets():
    facts = [{"node": "a", "cpus": [0, 1]}, {"node": "a", "cpus": [2, 3]}, {"node": "b", "cpus": [0, 1]}]
    cpus, why = bound_cpus(facts, 1, 2)
    assert cpus == [2, 3] and "pinned inside the CPUs the launcher bound it to" in why
    assert bound_cpus(facts, 2, 1)[0] == [0]                     # the same CPUs on another node: fine
    cpus, why = bound_cpus(facts, 0, 3)
    assert cpus is None and "3 threads per rank on 2 CPUs" in why
    shared = [{"node": "a", "cpus": [0, 1]}, {"node": "a", "cpus": [0, 1]}]
    cpus, why = bound_cpus(shared, 0, 1)
    assert cpus is None and "share CPUs" in why


def test_rank_facts_name_each_nodes_first_rank_and_this_hosts_processes():
    from ceiling.cluster.gather import Ranks
    facts = [{"rank": r, "node": n, "host": h, "pid": 100 + r, "cpus": [r]}
             for r, (n, h) in enumerate([("n0", "h"), ("n1", "h"), ("n0", "h"), ("n2", "g")])]
    got = [(Ranks(r, facts).local_rank, Ranks(r, facts).leader) for r in range(4)]
    assert got == [(0, True), (0, True), (1, False), (0, True)]
    assert Ranks(2, facts).nodes == ["n0", "n1", "n0", "n2"] and Ranks(2, facts).node == "n0"
    # stand-in nodes share their host's processes; another host's are not counted
    assert Ranks(1, facts).pids_on_this_host() == [100, 101, 102]
    assert Ranks(3, facts).pids_on_this_host() == [103]


# -- real ranks ------------------------------------------------------------------------

DRIVER = textwrap.dedent("""
    import json, os, sys
    rank = int(os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or 0)
    nodes = os.environ.get("TEST_NODES")
    if nodes:
        os.environ["CEILING_NODE_NAME"] = nodes.split(",")[rank]
    from ceiling import machine
    from ceiling.bench import storage, storage_mpi
    from ceiling.results.measure import Context, Options
    from ceiling.results.model import Run
    storage.QUICK_RAND_SECONDS = 0.2
    storage.QUICK_MD_FILES = 50
    storage.QUICK_SWEEP_XFERS = (64 * 1024,)
    hide = os.environ.get("TEST_HIDE_NODE")
    if hide and os.environ.get("CEILING_NODE_NAME") == hide:       # as if its --dir were node-local
        storage_mpi._visible = lambda path, token: False
    if os.environ.get("TEST_CORRUPT_RANK") == str(rank):
        def corrupt(run_dir):
            for name in sorted(os.listdir(run_dir)):
                if name.startswith("seq.fpp") and name.endswith(".t%d" % rank):
                    with open(os.path.join(run_dir, name), "r+b") as f:
                        f.seek(4096)
                        b = f.read(1)
                        f.seek(4096)
                        f.write(bytes([b[0] ^ 0x5A]))
        storage._BETWEEN = corrupt
    m = machine.detect("/", measure=False)
    opts = Options(quick=True, reps=1, size_bytes=int(os.environ.get("TEST_SIZE", str(8 << 20))))
    opts.storage_dir = sys.argv[2]
    ctx = Context(m, opts, sorted(m.affinity))
    with storage_mpi.prepare_parallel(ctx) as ready:
        out = storage.bench_storage(ctx, parallel=ready)
    run = Run(tool_version="t", host="h", started="", command=[], metrics=out.metrics, series=out.series,
              findings=out.findings)
    with open(sys.argv[1] + ".%d" % rank, "w") as f:
        json.dump(run.to_dict(), f)
""")


def launch(mpi_setup, n, name, tmp_path, **env):
    tmp, info = mpi_setup
    (tmp / "storage_driver.py").write_text(DRIVER)
    out = tmp / f"storage-{name}.json"
    argv = info["argv4"] if n > 2 else info["argv2"]
    argv = argv[:2] + [str(n)] + argv[3:]
    r = subprocess.run([*argv, sys.executable, str(tmp / "storage_driver.py"), str(out), str(tmp_path)],
                       capture_output=True, text=True, env=_env(tmp, **env), timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    runs = [json.loads(Path(f"{out}.{k}").read_text()) for k in range(n)]
    return runs


def metrics(run):
    return {m["name"]: m for m in run["metrics"]}


def leftovers(d: Path):
    return sorted(p.name for p in d.iterdir())


@needs_mpi
def test_two_ranks_measure_together_and_agree(mpi_setup, tmp_path):
    runs = launch(mpi_setup, 2, "two", tmp_path)
    ms = metrics(runs[0])
    for name in ("storage.seq.write.fpp", "storage.seq.read.fpp", "storage.seq.read.shared",
                 "storage.seq.read.strided", "storage.iops.randread", "storage.md.create", "storage.md.unlink.unique"):
        m = ms[name]
        assert m["valid"], (name, m["note"])
        assert m["value"] > 0
        c = m["context"]
        assert c["processes"] == 2 and c["threads"] == 2 and c["threads_per_process"] == 1, name
        assert c["run_directory"] == "one shared by all ranks"
        assert c["task_reordering"].startswith("none: one node")
    # the node's data is shared by its ranks: 8 MiB per node, 4 MiB per rank
    assert ms["storage.seq.write.fpp"]["context"]["bytes_per_thread"] == 4 * MIB
    assert ms["storage.seq.write.fpp"]["context"]["total_bytes"] == 8 * MIB
    # every rank returns the same figures, but the latency percentiles (rank 0 pools every rank's samples)
    others = metrics(runs[1])
    same = [n for n in ms if not n.startswith("storage.lat.")]
    assert same and all(others[n]["values"] == ms[n]["values"] for n in same)
    assert ms["storage.iops.randread"]["context"]["latency_us"]["samples"] > \
        others["storage.iops.randread"]["context"]["latency_us"]["samples"]
    assert leftovers(tmp_path) == []


@needs_mpi
def test_ranks_on_two_nodes_read_each_others_data(mpi_setup, tmp_path):
    """Rank 0 (node n0) damages the file it wrote; rank 1 (node n1) reads that file back (IOR -C)
    and finds the damage: the read is invalid, and the message names the reader and the file."""
    runs = launch(mpi_setup, 2, "reorder", tmp_path, TEST_NODES="n0,n1", TEST_CORRUPT_RANK="0")
    ms = metrics(runs[0])
    c = ms["storage.seq.read.fpp"]["context"]
    assert c["nodes"] == 2 and "IOR -C" in c["task_reordering"]
    bad = ms["storage.seq.read.fpp"]
    assert not bad["valid"]
    assert "rank 1 (n1)" in bad["note"] and ".t0" in bad["note"] and "offset 4096" in bad["note"]
    assert ms["storage.seq.read.shared"]["valid"] and ms["storage.md.read"]["valid"]
    assert leftovers(tmp_path) == []


@needs_mpi
def test_ranks_that_cannot_see_rank_0s_directory_use_one_per_node(mpi_setup, tmp_path):
    runs = launch(mpi_setup, 4, "groups", tmp_path, TEST_NODES="n0,n0,n1,n1", TEST_HIDE_NODE="n1")
    ms = metrics(runs[0])
    for name in ("storage.seq.read.fpp", "storage.seq.read.shared", "storage.md.stat", "storage.iops.randwrite"):
        assert ms[name]["valid"], (name, ms[name]["note"])
        assert ms[name]["context"]["processes"] == 4
        assert ms[name]["context"]["run_directory"].startswith("2 directories")
        # in each directory the ranks are on one node: nobody reads another node's data
        assert ms[name]["context"]["task_reordering"].startswith("none: one node")
        dirs = ms[name]["context"]["directories"]
        assert [d["nodes"] for d in dirs] == [["n0"], ["n1"]] and dirs[0]["dir"] == dirs[1]["dir"] == str(tmp_path)
    [fs] = [f for f in runs[0]["findings"] if f["id"] == "storage.fs"]
    assert fs["title"] == "storage: 2 directories, one per group of nodes" and "nodes n1" in fs["evidence"]
    assert leftovers(tmp_path) == []


def _fs(src, peak, dev="nvme0n1"):
    from ceiling.machine.storage import FileSystem, Mount
    from ceiling.results.model import Peak
    m = Mount(mount_point="/scratch", fstype="xfs", source=src, major=259, minor=0, super_options="")
    return FileSystem("/scratch", m, Peak(peak, "MiB/s", f"{dev} PCIe link" if peak else "unknown: no link"))


def test_node_local_directories_add_up_their_devices_peaks():
    from ceiling.machine.storage import combine_fs
    one = _fs("/dev/nvme0n1", 3000.0)
    assert combine_fs([("h0", ["n0"], one)]) is one
    both = combine_fs([("h0", ["n0"], one), ("h1", ["n1"], _fs("/dev/nvme0n1", 2000.0))])
    assert both.peak.value == 5000.0 and "sum of 2 devices' peaks" in both.peak.provenance
    assert [g["host"] for g in both.groups] == ["h0", "h1"] and both.context()["directories"][1]["peak_mibs"] == 2000.0
    # two groups on one host writing to one device: counted once (CEILING_NODE_NAME stand-ins)
    same = combine_fs([("h0", ["n0"], one), ("h0", ["n1"], _fs("/dev/nvme0n1", 3000.0))])
    assert same.peak.value == 3000.0
    # one unknown makes the aggregate unknown, naming where
    unk = combine_fs([("h0", ["n0"], one), ("h1", ["n1"], _fs("/dev/sdb", None))])
    assert unk.peak.value is None and "/dev/sdb on h1" in unk.peak.provenance


def _cli(mpi_setup, n, args, pre=(), **env):
    tmp, info = mpi_setup
    argv = info["argv2"][:2] + [str(n)] + info["argv2"][3:]
    return subprocess.run([*argv, *pre, sys.executable, "-m", "ceiling", "bench", "storage", "--no-store", *args],
                          capture_output=True, text=True, env=_env(tmp, **env), timeout=180)


@needs_mpi
def test_the_cli_reports_once_from_rank_0(mpi_setup, tmp_path):
    r = _cli(mpi_setup, 2, ["--dir", str(tmp_path), "--quick", "--reps", "1", "--size", "8MiB", "--json"])
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)                           # one JSON document: rank 1 printed nothing
    ms = {m["name"]: m for m in doc["metrics"]}
    assert ms["storage.seq.read.fpp"]["context"]["processes"] == 2
    assert leftovers(tmp_path) == []


@needs_mpi
@pytest.mark.parametrize("case", ["missing", "size"])
def test_bad_input_is_one_line_from_one_rank(mpi_setup, tmp_path, case):
    args = {"missing": ["--dir", str(tmp_path / "nope")],
            "size": ["--dir", str(tmp_path), "--size", "1000TiB"]}[case]
    r = _cli(mpi_setup, 2, args)
    want = {"missing": (4, "does not exist"), "size": (3, "GiB free, the storage bench needs")}[case]
    assert r.returncode == want[0], r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ceiling:")]
    assert len(lines) == 1 and want[1] in lines[0], r.stderr
    assert leftovers(tmp_path) == []


@needs_mpi
def test_a_full_disk_on_one_rank_stops_every_rank(mpi_setup, tmp_path):
    """Rank 1 alone hits its file size limit (ulimit -f, the ENOSPC path): every rank stops at the
    same point, rank 0 says which rank failed and why, exit 4, and no file is left."""
    tmp, info = mpi_setup
    launcher = info["argv2"][0]
    cmd = [sys.executable, "-m", "ceiling", "bench", "storage", "--no-store", "--dir", str(tmp_path), "--quick",
           "--reps", "1", "--size", "64MiB"]
    limited = ["bash", "-c", 'ulimit -f 8192 && exec "$@"', "bash", *cmd]      # 4 MiB (512-byte blocks)
    argv = [launcher, "-n", "1", *cmd, ":", "-n", "1", *limited]
    r = subprocess.run(argv, capture_output=True, text=True, env=_env(tmp), timeout=180)
    assert r.returncode == 4, r.stdout + r.stderr
    # as alone: the report (rank 0's, once) says the step was not measured, and why
    assert r.stdout.count("storage: not measured") == 1, r.stdout
    assert "rank 1 (" in r.stdout and "file size limit" in r.stdout, r.stdout
    assert "Traceback" not in r.stderr
    assert leftovers(tmp_path) == []


@needs_mpi
def test_ctrl_c_stops_every_rank_and_removes_the_files(mpi_setup, tmp_path):
    tmp, info = mpi_setup
    argv = info["argv2"][:2] + ["2"] + info["argv2"][3:]
    out = tmp_path / "out"
    out.mkdir()
    # Open MPI's mpirun SIGKILLs the ranks 1 s after its SIGTERM (odls_base_sigkill_timeout), and
    # waits that long whether they ended or not. A stop that lands in the fsync of a rank's
    # buffered writes cannot be cut short and took longer than 1 s on this VM's disk in about
    # half the runs with 512 MiB a rank (no partial report at all); a site that wants partial
    # results sets more. This test writes 128 MiB a rank and sets 4 s.
    env = {**_env(tmp), "OMPI_MCA_odls_base_sigkill_timeout": "4"}
    p = subprocess.Popen([*argv, sys.executable, "-m", "ceiling", "bench", "storage", "--no-store", "--dir",
                          str(out), "--size", "256MiB", "--reps", "50", "--save-json", str(tmp_path / "partial.json")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and not any(x.name.startswith("ceiling-io-") for x in out.iterdir()):
        time.sleep(0.05)
    time.sleep(1.0)                                     # inside the first measurement
    os.killpg(p.pid, signal.SIGINT)                     # as a terminal's Ctrl-C reaches the whole job
    stdout, stderr = p.communicate(timeout=120)
    # MPICH's mpiexec passes SIGINT on to the ranks and their exit code (130) back. Open MPI's
    # mpirun aborts the job on SIGINT: SIGTERM to the ranks, SIGKILL a second later, exit 1
    # whatever they return; the ranks stop on the SIGTERM within that second.
    ompi = info["launcher_family"] == "Open MPI"
    assert p.returncode == (1 if ompi else 130), stdout + stderr
    why = "terminated (SIGTERM)" if ompi else "interrupted (Ctrl-C)"
    assert f"PARTIAL RUN: {why}" in stdout, stdout + stderr
    assert leftovers(out) == []
    doc = json.loads((tmp_path / "partial.json").read_text())
    assert doc["partial"] and doc["partial_reason"].startswith(why), doc["partial_reason"]
