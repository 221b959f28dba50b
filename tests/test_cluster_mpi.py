"""Cluster mode under a real MPI launcher (verbs/cluster.py): ranks on this
machine stand in for nodes (each its own CEILING_NODE_NAME; MPMD segments give
each rank its own recorded tree or CPU). The differing node, the node a check
fails on, the slow node and the hung node must be named; two ranks on one node
are refused before anything runs. No timing is asserted."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ceiling.errors import StalledError
from machine_fixtures import fsroot
from mpiutil import needs_mpi, ranks_of, run_env

pytestmark = needs_mpi
TREE = "16em64t-4s2c2t"


def mpmd(mpi_setup, segments):
    """The launcher's MPMD form: one rank per (node name, extra argv prefix, ceiling args)."""
    _, info = mpi_setup
    argv = list(info["argv4"])
    i = argv.index("-n")
    cmd = argv[:i] + argv[i + 2:]            # the launcher and its options, without "-n 4"
    for i, (node, prefix, args) in enumerate(segments):
        if i:
            cmd.append(":")
        cmd += ["-n", "1", "env", f"CEILING_NODE_NAME={node}", *prefix, sys.executable, "-m", "ceiling", *args]
    return cmd


def launch(mpi_setup, segments, timeout=240, **env):
    tmp, _ = mpi_setup
    return subprocess.run(mpmd(mpi_setup, segments), capture_output=True, text=True, timeout=timeout,
                          env=run_env(tmp, NO_COLOR="1", **env))


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """Four recorded nodes: n3 runs another kernel, n4 has uncorrected memory errors."""
    base = fsroot(TREE, tmp_path_factory)
    out = {}
    for i in range(1, 5):
        d = tmp_path_factory.mktemp(f"n{i}") / "root"
        shutil.copytree(base, d, symlinks=True)
        (d / "proc/sys/kernel").mkdir(parents=True, exist_ok=True)
        (d / "proc/sys/kernel/osrelease").write_text("6.1.0-21-amd64\n" if i == 3 else "6.1.0-18-amd64\n")
        if i == 4:
            mc = d / "sys/devices/system/edac/mc/mc0"
            mc.mkdir(parents=True, exist_ok=True)
            (mc / "ce_count").write_text("0\n")
            (mc / "ue_count").write_text("3\n")
        out[f"n{i}"] = d
    return out


def check_segments(trees, tmp_path, *extra, store=("--no-store",)):
    out = tmp_path / "cluster.json"
    segs = []
    for i, (node, root) in enumerate(trees.items()):
        args = ["check", "--cluster", "--root", str(root), *store, *extra]
        if i == 0:
            args += ["--save-json", str(out)]
        segs.append((node, [], args))
    return segs, out


def test_the_differing_node_and_the_failing_check_are_named(mpi_setup, trees, tmp_path):
    db = tmp_path / "h.db"
    segs, out = check_segments(trees, tmp_path, store=("--db", str(db)))
    r = launch(mpi_setup, segs)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    doc = json.loads(out.read_text())
    assert [n["name"] for n in doc["nodes"]] and sorted(n["name"] for n in doc["nodes"]) == ["n1", "n2", "n3", "n4"]
    assert doc["job"]["nodes"] == 4 and doc["job"]["ranks_per_node"] == 1
    _, info = mpi_setup           # the MPI library each node's rank loaded is in its inventory
    assert all(n["environment"]["inventory"]["mpi"].startswith(f"{info['family']} {info['version']}")
               for n in doc["nodes"]), [n["environment"]["inventory"]["mpi"] for n in doc["nodes"]]
    found = {f["id"]: f for f in doc["findings"]}
    k = found["cluster.config.kernel"]
    assert k["data"]["majority"] == "6.1.0-18-amd64" and k["data"]["others"] == {"6.1.0-21-amd64": ["n3"]}
    ras = found["cluster.check.ras.edac"]
    assert ras["status"] == "fail" and list(ras["data"]["nodes"]) == ["n4"]
    text = " ".join(r.stdout.split())                 # wrapped to the terminal's width, whatever it is
    assert "Kernel differs on 1 of 4 nodes: n3" in text, r.stdout
    # every node's own run is in the history under its name, and the cluster's run says what it is
    from ceiling.results.store import Store
    with Store(str(db), readonly=True) as st:
        rows = st.list(limit=10)
        assert sorted(x.host for x in rows if x.nodes == 0) == ["n1", "n2", "n3", "n4"]
        [cl] = [x for x in rows if x.nodes]
        assert cl.verb == "check --cluster, 4 nodes" and cl.host == "n1"
        assert [x.host for x in st.list(host="n3")] == ["n3"]


def test_nhc_prints_one_line_per_failing_node_and_drains(mpi_setup, trees, tmp_path):
    segs, _ = check_segments(trees, tmp_path, "--nhc")
    r = launch(mpi_setup, segs)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith(("ERROR", "OK", "WARNING"))]
    assert lines == [next(x for x in lines if x.startswith("ERROR: ceiling: n4: Health check failed: ras.edac"))]


def test_two_ranks_on_one_node_is_a_usage_error_before_measuring(mpi_setup, trees, tmp_path):
    segs = [("same", [], ["check", "--cluster", "--root", str(trees["n1"]), "--no-store"])] * 2
    r = launch(mpi_setup, segs)
    assert r.returncode == 2, r.stdout + r.stderr
    errs = [x for x in r.stderr.splitlines() if x.startswith("ceiling:")]
    assert len(errs) == 1 and "node same has 2 ranks" in errs[0] and "ppr:1:node" in errs[0], r.stderr


def test_a_node_that_stops_is_named_and_the_rest_is_reported(mpi_setup, trees, tmp_path):
    segs, out = check_segments(dict(list(trees.items())[:3]), tmp_path, "--node-timeout", "5")
    node, prefix, args = segs[2]
    segs[2] = (node, ["CEILING_TEST_STOP_AFTER_MEASURING=1"], args)      # n3 hangs once measured
    mark = uuid.uuid4().hex
    try:
        r = launch(mpi_setup, segs, TEST_MARK=mark)
        assert r.returncode == StalledError.exit_code, r.stdout + r.stderr
        line = next((x for x in r.stderr.splitlines() if "did not report" in x), r.stdout + "|STDERR|" + r.stderr)
        assert "n3" in line and "stopped" in line and "the 2 nodes that did are analysed" in line, line
        doc = json.loads(out.read_text())
        assert doc["partial"] and sorted(n["name"] for n in doc["nodes"]) == ["n1", "n2"]
    finally:
        for pid in ranks_of(mark).values():           # a stopped rank the launcher left behind
            os.kill(pid, signal.SIGKILL)


THROTTLE = """
import os, signal, subprocess, sys, time
child = subprocess.Popen(sys.argv[1:], close_fds=False)
while child.poll() is None:
    try:
        t0 = time.monotonic()
        os.kill(child.pid, signal.SIGCONT)
        time.sleep(0.001)
        os.kill(child.pid, signal.SIGSTOP)
        # stopped twice as long as it ran, however late this wrapper woke on its loaded CPU: fixed sleeps
        # let the child run longer whenever the wrapper waited for the CPU (CI: slow at 73 % of fast)
        time.sleep(max(0.002, 2 * (time.monotonic() - t0)))
    except ProcessLookupError:
        break
code = child.wait()
sys.exit(code if code >= 0 else 128 - code)
"""


@pytest.mark.alone
def test_a_slowed_node_is_the_outlier_with_its_own_evidence(mpi_setup, tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs: one node per CPU")
    out = tmp_path / "cluster.json"
    # A co-runner on slow's CPU gives it the evidence a slow node shows (competing load), and a
    # duty cycle (SIGCONT 1 ms, SIGSTOP twice as long as it ran) slows its kernel for certain: every timed repetition
    # (tens of ms) is stretched, so best-of-N cannot pick a quiet window. The co-runner alone is not
    # enough where the VM's two CPUs are SMT siblings on the host: fast then shares its FMA units
    # and both nodes measure about half.
    # The duty cycle is kept by a wrapper that starts slow's rank as its child (its MPI environment and
    # descriptors inherited) and throttles it from its first instant: a watcher that had to find the rank
    # in /proc first came too late on a loaded host, after the quick kernel had run (seen in CI).
    hog = subprocess.Popen(["taskset", "-c", str(cpus[1]), sys.executable, "-c", "while True: pass"])
    try:
        common = ["bench", "compute", "--quick", "--cluster", "--no-store"]
        r = launch(mpi_setup, [("fast", ["taskset", "-c", str(cpus[0])], common + ["--save-json", str(out)]),
                               ("slow", ["taskset", "-c", str(cpus[1]), sys.executable, "-c", THROTTLE], common)])
    finally:
        hog.send_signal(signal.SIGKILL)
        hog.wait()
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    u = {x["metric"]: x for x in doc["analysis"]["uniformity"]}["flops.dp.node"]
    assert [o["node"] for o in u["outliers"]] == ["slow"], u
    assert u["values"]["slow"] < 0.6 * u["values"]["fast"], u      # the duty cycle held: a third of the time
    assert any("load.competing" in e for e in u["outliers"][0]["evidence"]), u["outliers"][0]
    f = next(f for f in doc["findings"] if f["id"] == "cluster.outlier.flops.dp.node")
    assert "slow" in f["title"]
    assert any(" slow " in x and "<- outlier" in x for x in r.stdout.splitlines()), r.stdout


def test_ctrl_c_while_gathering_reports_what_was_gathered(mpi_setup, trees, tmp_path):
    tmp, _ = mpi_setup
    segs, out = check_segments(dict(list(trees.items())[:3]), tmp_path, "--node-timeout", "120")
    node, prefix, args = segs[2]
    segs[2] = (node, ["CEILING_TEST_STOP_AFTER_MEASURING=1"], args)      # n3 keeps rank 0 waiting
    mark = uuid.uuid4().hex
    p = subprocess.Popen(mpmd(mpi_setup, segs), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=run_env(tmp, NO_COLOR="1", TEST_MARK=mark))
    try:
        deadline = time.time() + 90
        while time.time() < deadline and p.poll() is None:
            pids = ranks_of(mark)
            if 2 in pids and _state(pids[2]) == "T" and 0 in pids:       # n3 measured and stopped
                break
            time.sleep(0.05)
        time.sleep(1.0)                  # rank 0 has its own and n2's results, and waits for n3
        os.kill(ranks_of(mark)[0], signal.SIGINT)
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 130, stdout + stderr
        doc = json.loads(out.read_text())
        assert doc["partial"] and "while gathering: 2 of 3 nodes reported, not n3" in doc["partial_reason"]
        assert sorted(n["name"] for n in doc["nodes"]) == ["n1", "n2"]
    finally:
        p.kill()
        for pid in ranks_of(mark).values():
            os.kill(pid, signal.SIGKILL)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def test_the_pairwise_network_fills_the_matrix_with_checked_pairs(mpi_setup, trees, tmp_path):
    segs, out = check_segments(trees, tmp_path, "--pairs")
    r = launch(mpi_setup, segs)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    names = doc["job"]["node_names"]
    for word in ("latency", "bandwidth"):
        s = next(x for x in doc["series"] if x["name"] == f"cluster.pairs.{word}")
        assert s["kind"] == "matrix" and s["labels"] == names
        # 4 nodes, 3 rounds: every pair measured, from both ends; a node is no pair with itself
        assert all((v is None) == (i == j) for i, row in enumerate(s["matrix"]) for j, v in enumerate(row)), s
        m = next(x for x in doc["metrics"] if x["name"] == f"net.pairs.{word}")
        assert m["valid"] and m["context"]["pairs"] == 6 and m["value"] > 0
    # the pairs are the figures of one MPI library: the run names it, with its device
    mpi = doc["environment"]["mpi"]
    assert doc["job"]["mpi_library"] == mpi["library"] and mpi["library"].startswith(mpi["family"])
    assert mpi["transport"] and isinstance(mpi["others"], list)


@pytest.mark.parametrize("args, code, text", [
    (["check", "--cluster", "--threshold", "abc"], 2, "not a percentage"),
    (["check", "--cluster", "--threshold", "150"], 3, "below 100"),
    (["run", "--cluster", "--pair-rounds", "0", "--quick"], 3, "at least 1"),       # checked on a lone rank too
    (["bench", "network", "--cluster"], 2, "--pairs"),
])
def test_bad_cluster_options_are_one_line_before_measuring(mpi_setup, args, code, text):
    tmp, _ = mpi_setup
    r = subprocess.run([sys.executable, "-m", "ceiling", *args, "--no-store"], capture_output=True, text=True,
                       timeout=120, env=run_env(tmp))
    assert r.returncode == code, r.stdout + r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("ceiling: ") and " ..." not in x]
    assert len(lines) == 1 and text in lines[0], r.stderr


def test_waves_measure_k_nodes_at_a_time(mpi_setup, trees, tmp_path):
    db = tmp_path / "h.db"
    segs, out = check_segments(dict(list(trees.items())[:3]), tmp_path, "--wave", "1", store=("--db", str(db)))
    r = launch(mpi_setup, segs)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    assert doc["environment"]["cluster"]["wave"] == 1 and len(doc["nodes"]) == 3
    from ceiling.results.store import Store
    with Store(str(db), readonly=True) as st:
        runs = sorted((st.get(x.run_id) for x in st.list(limit=10) if x.nodes == 0), key=lambda x: x.host)
    # one node at a time: each node's run starts after the one before it finished
    assert [x.host for x in runs] == ["n1", "n2", "n3"]
    assert all(a.finished <= b.started for a, b in zip(runs, runs[1:])), [(x.started, x.finished) for x in runs]


def test_a_hung_wave_names_the_nodes_it_kept_from_starting(mpi_setup, trees, tmp_path):
    segs, out = check_segments(dict(list(trees.items())[:3]), tmp_path, "--wave", "2", "--node-timeout", "5")
    node, prefix, args = segs[1]
    segs[1] = (node, ["CEILING_TEST_STOP_AFTER_MEASURING=1"], args)      # n2 of the first wave hangs
    mark = uuid.uuid4().hex
    try:
        r = launch(mpi_setup, segs, TEST_MARK=mark)
        assert r.returncode == StalledError.exit_code, r.stdout + r.stderr
        line = next((x for x in r.stderr.splitlines() if "did not report" in x), r.stdout + "|STDERR|" + r.stderr)
        assert "n2 (" in line and "stopped" in line, line
        assert "n3 (not started: an earlier wave did not finish)" in line, line
        doc = json.loads(out.read_text())
        assert doc["partial"] and [n["name"] for n in doc["nodes"]] == ["n1"]
    finally:
        for pid in ranks_of(mark).values():
            os.kill(pid, signal.SIGKILL)


def test_a_node_that_meets_a_bug_is_named_and_the_rest_reported(mpi_setup, trees, tmp_path):
    segs, out = check_segments(dict(list(trees.items())[:3]), tmp_path)
    node, prefix, args = segs[1]
    segs[1] = (node, ["CEILING_TEST_STOP_AFTER_MEASURING=raise"], args)
    r = launch(mpi_setup, segs)
    # n2 exits 0 (a non-zero exit would have the launcher end rank 0's work); rank 0's 11 speaks for it
    assert r.returncode == StalledError.exit_code, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    assert doc["partial"] and "n2: not measured: ceiling failed on this node (RuntimeError" in doc["partial_reason"]
    assert {f["id"]: f for f in doc["findings"]}["cluster.partial"]["status"] == "warn"
    assert "RuntimeError: injected by a test" in r.stderr            # the traceback, for the bug report


def test_a_node_whose_results_cannot_be_read_is_not_measured_and_the_rest_reported(mpi_setup, trees, tmp_path):
    """Invalid JSON, a document nested past any parser and one of a newer schema, each from one
    rank: that node is "not measured" with the reason, as a node that met a bug, and the others
    are analysed and recorded (they ended the whole run with exit 5, only rank 0's run saved)."""
    db = tmp_path / "h.db"
    segs, out = check_segments(trees, tmp_path, store=("--db", str(db)))
    for i, how in ((1, "invalid"), (2, "deep"), (3, "newer")):
        node, prefix, args = segs[i]
        segs[i] = (node, [f"CEILING_TEST_SEND={how}"], args)
    r = launch(mpi_setup, segs)
    assert r.returncode == StalledError.exit_code, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    doc = json.loads(out.read_text())
    assert sorted(n["name"] for n in doc["nodes"]) == ["n1", "n2", "n3", "n4"]
    reasons = {f["data"]["nodes"][n] for f in doc["findings"] if f["id"] == "cluster.partial"
               for n in f["data"]["nodes"]}
    reason = " | ".join(sorted(reasons))
    assert len(reasons) == 3 and "not valid JSON" in reason and "nested deeper" in reason, reason
    assert "newer" in reason and all(x.startswith("not measured: its results could not be read on rank 0")
                                     for x in reasons), reason
    from ceiling.results.store import Store
    with Store(str(db), readonly=True) as st:
        assert sorted(x.host for x in st.list(limit=10) if x.nodes == 0) == ["n1", "n2", "n3", "n4"]


def test_a_rank_claiming_another_nodes_name_is_flagged_and_both_runs_are_kept(mpi_setup, trees, tmp_path):
    """n3's results claim to be n1's, and a rank without CEILING_NODE_NAME claims n9, which is not
    its host: both are named in a finding, and each node is recorded under the name its rank
    joined with (n3's results were recorded as a second n1, and n1's history held n3's run)."""
    import socket
    db = tmp_path / "h.db"
    segs, out = check_segments(trees, tmp_path, store=("--db", str(db)))
    node, prefix, args = segs[2]
    segs[2] = (node, ["CEILING_TEST_SEND=name:n1"], args)
    node, prefix, args = segs[3]
    segs[3] = (node, ["env", "-u", "CEILING_NODE_NAME", "CEILING_TEST_SEND=name:n9"], args)
    r = launch(mpi_setup, segs)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    host = socket.gethostname()
    assert sorted(n["name"] for n in doc["nodes"]) == sorted(["n1", "n2", "n3", host])
    f = {x["id"]: x for x in doc["findings"]}["cluster.node_names"]
    assert f["data"]["claimed_twice"] == {"n1": [0, 2]}, f
    assert any("rank 3" in o and "n9" in o and "not its host" in o for o in f["data"]["odd"]), f
    from ceiling.results.store import Store
    with Store(str(db), readonly=True) as st:
        assert sorted(x.host for x in st.list(limit=10) if x.nodes == 0) == sorted(["n1", "n2", "n3", host])


def test_a_node_that_dies_keeps_what_was_gathered(mpi_setup, trees, tmp_path):
    """A rank killed outright. The launchers end the job by default (Hydra with SIGKILL at
    once, Open MPI's mpirun with SIGTERM and SIGKILL milliseconds apart); what rank 0 had
    gathered is in the history, each node's run saved as it arrived. Open MPI's mpirun
    --enable-recovery lets the job go on: the deadline names the dead node, and the rest is
    analysed and reported. (MPICH has no such mode: a rank polling a dead peer is ended.)"""
    db = tmp_path / "h.db"
    segs, out = check_segments(dict(list(trees.items())[:3]), tmp_path, "--node-timeout", "5",
                               store=("--db", str(db)))
    node, prefix, args = segs[1]
    segs[1] = (node, ["CEILING_TEST_STOP_AFTER_MEASURING=kill:4"], args)   # n1 and n3 have reported by then
    _, info = mpi_setup
    ompi = info["family"] == "Open MPI"
    cmd = mpmd(mpi_setup, segs)
    if ompi:
        cmd.insert(1, "--enable-recovery")
    tmp, _ = mpi_setup
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=run_env(tmp, NO_COLOR="1"))
    from ceiling.results.store import Store
    with Store(str(db), readonly=True) as st:
        hosts = sorted(st.get(x.run_id).host for x in st.list(limit=10) if x.nodes == 0)
    assert hosts == ["n1", "n3"], hosts
    if ompi:
        doc = json.loads(out.read_text())
        assert doc["partial"] and "n2 (node n2, pid " in doc["partial_reason"] \
            and "gone: the process has exited" in doc["partial_reason"], doc["partial_reason"]
        assert sorted(n["name"] for n in doc["nodes"]) == ["n1", "n3"]
    else:
        assert r.returncode != 0 and not out.exists()
