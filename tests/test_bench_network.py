"""`ceiling bench network`: placement planning (cluster/placement.py), summaries
(results/curves.py) and link peaks (machine/network.py) as pure functions, then
the real thing: 2 and 4 MPI ranks on this machine, started with the launcher
that matches the MPI library mpi4py loads.

The MPI tests skip when mpi4py is not installed; with mpi4py present, a
missing compiler wrapper or launcher fails them (CI installs the mpi extra).
Each MPI run is small (quick sizes up to 64 KiB, 2 blocks, 50 repetitions):
a few seconds even with 4 ranks on 2 CPUs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ceiling.bench import network as net
from ceiling.cluster import placement
from ceiling.machine.network import link_peak
from ceiling.results import curves

REPO = Path(__file__).resolve().parents[1]
from mpiutil import FakeMPI, needs_mpi
from mpiutil import measuring as _measuring, ranks_of as _ranks_of, run_env as _env


# -- sizes and repetitions: IMB's and OSU's rules --------------------------------

def test_imb_repetitions_and_warmup():
    assert net.imb_reps(0) == 1000
    assert net.imb_reps(1) == 1000
    assert net.imb_reps(64 * 1024) == 640            # 40 MiB / 64 KiB
    assert net.imb_reps(4 << 20) == 10
    assert net.imb_reps(1 << 30) == 1
    assert net.imb_warmup(1000) == 100
    assert net.imb_warmup(40) == 10                   # at least min(10, reps)
    assert net.imb_warmup(3) == 3


def test_sizes():
    full = net.pingpong_sizes(4 << 20, quick=False)
    assert full[:4] == [0, 1, 2, 4] and full[-1] == 4 << 20 and len(full) == 24
    quick = net.pingpong_sizes(64 * 1024, quick=True)
    assert quick == [0, 1, 4, 16, 64, 256, 1024, 4096, 16384, 65536]
    assert net.pingpong_sizes(1000, quick=False)[-1] == 1000          # the user's largest size is kept
    assert net.stream_sizes(4 << 20, quick=True) == [1, 8, 64, 512, 4096, 32768, 262144, 2097152, 4 << 20]
    assert net.coll_sizes(64 * 1024, quick=True) == [8, 4096, 65536]
    assert net.rank_counts(8, quick=False) == [2, 4, 8] and net.rank_counts(6, quick=False) == [2, 4, 6]
    assert net.size_label(8) == "8B" and net.size_label(4096) == "4KiB" and net.size_label(1 << 20) == "1MiB"


def test_osu_loops_are_capped():
    assert net.osu_iters(8) == (100, 10)
    loops, warm = net.osu_iters(4 << 20)
    assert loops == 1 and warm == 1                   # 64 x 4 MiB already exceeds the 64 MiB cap


# -- placements ------------------------------------------------------------------

def topo(sockets, l3_per_socket, cores_per_l3, smt=1, host="h", l3_known=True):
    cpus, cid, core = {}, 0, 0
    for s in range(sockets):
        for l in range(l3_per_socket):
            for _ in range(cores_per_l3):
                for t in range(smt):
                    cpus[cid] = (s, core, (s * l3_per_socket + l) if l3_known else None, t)
                    cid += 1
                core += 1
    return {"cpus": cpus, "sockets": sockets, "l3_known": l3_known, "host": host}


def facts(nodes_cpus):
    """[(node, cpus), ...] in rank order."""
    return [{"rank": r, "node": n, "host": n, "cpus": list(c)} for r, (n, c) in enumerate(nodes_cpus)]


def test_two_sockets_two_l3s_each_gives_every_on_node_placement():
    t = topo(2, 2, 2)                                  # CPUs 0-3 socket 0 (L3 0: 0,1; L3 1: 2,3), 4-7 socket 1
    allc = list(range(8))
    placements, missing = placement.plan_placements(facts([("a", allc), ("a", allc)]), {"a": t})
    got = {p.label: p for p in placements}
    assert set(got) == {"same_l3", "same_socket", "cross_socket"}
    assert missing == {"cross_node": "all 2 ranks run on one node (a)"}
    c = t["cpus"]
    a, b = got["same_l3"].cpus
    assert c[a][2] == c[b][2] and c[a][1] != c[b][1]
    a, b = got["same_socket"].cpus
    assert c[a][0] == c[b][0] and c[a][2] != c[b][2]
    a, b = got["cross_socket"].cpus
    assert c[a][0] != c[b][0]


def test_smt_siblings_are_never_a_pair():
    t = topo(1, 1, 1, smt=2)                           # one core, two threads
    placements, missing = placement.plan_placements(facts([("a", [0, 1]), ("a", [0, 1])]), {"a": t})
    assert placements == []
    assert "same_l3" in missing and "cross_socket" in missing


def test_bound_ranks_are_paired_by_their_own_cpus():
    t = topo(2, 1, 2)                                  # socket 0: CPUs 0,1; socket 1: CPUs 2,3
    f = facts([("a", [0]), ("a", [2]), ("a", [1])])    # as srun --cpu-bind would leave them
    placements, missing = placement.plan_placements(f, {"a": t})
    got = {p.label: p for p in placements}
    assert got["cross_socket"].ranks == (0, 1) and got["cross_socket"].cpus == (0, 2)
    assert got["same_l3"].ranks == (0, 2) and got["same_l3"].cpus == (0, 1)
    assert missing["same_socket"] == "each socket has one L3 instance shared by all its cores"


def test_one_rank_per_node_gives_cross_node_only_with_reasons():
    t = {"a": topo(2, 1, 4, host="a"), "b": topo(2, 1, 4, host="b")}
    placements, missing = placement.plan_placements(facts([("a", range(8)), ("b", range(8))]), t)
    assert [p.label for p in placements] == ["cross_node"]
    assert placements[0].note == "" and placements[0].ranks == (0, 1)
    assert "every node has one rank" in missing["same_l3"]


def test_fake_nodes_on_one_host_are_said_to_cross_no_link_and_use_two_cpus():
    t = {"n0": topo(1, 1, 2, host="vm"), "n1": topo(1, 1, 2, host="vm")}
    placements, _ = placement.plan_placements(facts([("n0", [0, 1]), ("n1", [0, 1])]), t)
    (p,) = placements
    assert p.label == "cross_node" and "one host" in p.note and p.cpus == (0, 1)


def test_unknown_l3_is_said():
    t = topo(1, 1, 4, l3_known=False)
    placements, missing = placement.plan_placements(facts([("a", range(4)), ("a", range(4))]), {"a": t})
    assert [p.label for p in placements] == ["same_socket"]
    assert "L3 instances unknown" in placements[0].note
    assert "unknown" in missing["same_l3"]


def test_collective_order_and_pinning():
    f = facts([("a", [0, 1]), ("a", [0, 1]), ("b", [0, 1]), ("b", [0, 1]), ("a", [0, 1])])
    assert placement.coll_order(f) == [0, 2, 1, 3, 4]
    t = {"a": topo(1, 1, 2, host="a"), "b": topo(1, 1, 2, host="b")}
    pins, notes = placement.coll_pinning(f, t)
    assert pins[0] != pins[1] and pins[2] != pins[3]
    assert pins[4] is None and "rank 4" in notes[0]


# -- summaries -------------------------------------------------------------------

def curve(points):
    c = curves.Curve()
    for s, vals in points:
        c.sizes.append(s)
        c.per_block[s] = vals
    return c


def test_plateau_n_half_and_drop():
    c = curve([(1, [1, 1]), (64, [40, 44]), (1024, [104, 106]), (4096, [200, 210]), (65536, [150, 160])])
    size, med = curves.plateau(c)
    assert size == 4096 and med == 205
    assert curves.n_half(c, med) == 1024               # median 105 >= 205 / 2
    drop = curves.large_drop(c, med)
    assert drop == pytest.approx(155 / 205)
    flat = curve([(1, [1]), (4096, [200]), (65536, [195])])
    assert curves.large_drop(flat, 200) is None       # within 10 %


def test_n_half_is_the_smallest_size_at_half():
    c = curve([(1, [10]), (2, [49]), (4, [50]), (8, [100])])
    assert curves.n_half(c, 100) == 4


def test_latency_is_the_mean_of_the_small_sizes_per_block():
    c = curve([(0, [1.0, 2.0]), (1, [1.0, 2.0]), (2, [1.0, 2.0]), (4, [1.0, 2.0]), (8, [3.0, 4.0]), (16, [9, 9])])
    vals, sizes = curves.latency_values(c)
    assert sizes == [0, 1, 2, 4, 8] and vals == pytest.approx([1.4, 2.4])


# -- link peak from a recorded /sys ------------------------------------------------

def write(root: Path, rel: str, text: str):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n")


def test_link_peak_infiniband(tmp_path):
    write(tmp_path, "sys/class/infiniband/mlx5_0/ports/1/rate", "100 Gb/sec (4X EDR)")
    write(tmp_path, "sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE")
    p = link_peak(str(tmp_path), env={})
    assert p.value == pytest.approx(12500.0) and "mlx5_0:1" in p.provenance


def test_link_peak_qdr_deducts_line_encoding_and_different_ports_are_unknown(tmp_path):
    write(tmp_path, "sys/class/infiniband/mlx4_0/ports/1/rate", "40 Gb/sec (4X QDR)")
    write(tmp_path, "sys/class/infiniband/mlx4_0/ports/1/state", "4: ACTIVE")
    assert link_peak(str(tmp_path), env={}).value == pytest.approx(4000.0)
    write(tmp_path, "sys/class/infiniband/mlx5_1/ports/1/rate", "200 Gb/sec (4X HDR)")
    write(tmp_path, "sys/class/infiniband/mlx5_1/ports/1/state", "4: ACTIVE")
    p = link_peak(str(tmp_path), env={})
    assert p.value is None and "different rates" in p.provenance
    p = link_peak(str(tmp_path), env={"UCX_NET_DEVICES": "mlx5_1:1"})
    assert p.value == pytest.approx(25000.0)


def test_link_peak_ethernet_and_virtual_nics(tmp_path):
    write(tmp_path, "sys/class/net/lo/speed", "-1")
    write(tmp_path, "sys/class/net/eth0/operstate", "up")
    write(tmp_path, "sys/class/net/eth0/speed", "-1")
    (tmp_path / "sys/class/net/eth0/device").mkdir()
    p = link_peak(str(tmp_path), env={})
    assert p.value is None and "report no speed" in p.provenance
    write(tmp_path, "sys/class/net/eth0/speed", "25000")
    p = link_peak(str(tmp_path), env={})
    assert p.value == pytest.approx(3125.0) and "eth0" in p.provenance
    assert link_peak(str(tmp_path / "nothing"), env={}).value is None


# -- the real thing: MPI ranks on this machine ---------------------------------------

DRIVER = textwrap.dedent("""
    import json, os, sys
    from ceiling.cluster.comm import world
    rank = world().Get_rank()
    nodes = os.environ.get("TEST_NODES")
    if nodes:
        os.environ["CEILING_NODE_NAME"] = nodes.split(",")[rank]
    from ceiling import machine
    from ceiling.bench import network
    from ceiling.results.measure import Context, Options
    from ceiling.results.model import Run
    network.MSGSPERSAMPLE = 50
    network.BW_LOOP_SMALL = network.BW_LOOP_LARGE = 4
    network.CORRUPT_FOR_TESTS = bool(os.environ.get("TEST_CORRUPT"))
    network.STALE_FOR_TESTS = bool(os.environ.get("TEST_STALE"))
    m = machine.detect("/", measure=False)
    out = network.bench_network(Context(m, Options(quick=True, reps=2, size_bytes=65536), list(m.affinity)))
    if rank == 0:
        run = Run(tool_version="t", host="h", started="", command=[], metrics=out.metrics,
                  series=out.series, findings=out.findings)
        with open(sys.argv[1], "w") as f:
            json.dump(run.to_dict(), f)
    elif out.metrics or out.series or out.findings:
        sys.exit("rank %d returned results" % rank)
""")

def launch(mpi_setup, n, name, **env):
    tmp, info = mpi_setup
    (tmp / "driver.py").write_text(DRIVER)
    out = tmp / f"{name}.json"
    argv = info["argv4"] if n > 2 else info["argv2"]
    argv = argv[:2] + [str(n)] + argv[3:]
    r = subprocess.run([*argv, sys.executable, str(tmp / "driver.py"), str(out)], capture_output=True, text=True,
                       env=_env(tmp, **env), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(out.read_text())


def metrics(run):
    return {m["name"]: m for m in run["metrics"]}


@needs_mpi
def test_compiler_and_launcher_match_the_library_mpi4py_loaded(mpi_setup):
    _, info = mpi_setup
    assert info["cc_family"] == info["family"]
    assert info["cc_version"].split(".")[:2] == info["version"].split(".")[:2]
    expected = "Open MPI" if info["family"] == "Open MPI" else ("Hydra", "Intel MPI")
    assert info["launcher_family"] in expected


@needs_mpi
def test_two_ranks_measure_what_this_machine_offers(mpi_setup):
    from ceiling import machine
    run = launch(mpi_setup, 2, "two")
    ms = metrics(run)
    m = machine.detect("/", measure=False)
    allowed = sorted(m.affinity)
    want, missing = placement.plan_placements(facts([("x", allowed), ("x", allowed)]),
                                              {"x": placement.topology_of(m)})
    if not want:
        pytest.skip(f"this machine offers no pair of CPUs on distinct cores: {missing}")
    assert {f"net.pingpong.latency.{p.label}" for p in want} <= set(ms)
    for p in want:
        for kind in ("pingpong.latency", "pingpong.bandwidth", "bw", "bibw", "msgrate"):
            mt = ms[f"net.{kind}.{p.label}"]
            assert mt["valid"], mt["note"]
            assert mt["value"] > 0 and mt["stats"]["n"] == 2
            assert mt["context"]["pair_cpus"] == list(p.cpus)
        assert ms[f"net.pingpong.latency.{p.label}"]["unit"] == "µs"
        assert ms[f"net.pingpong.bandwidth.{p.label}"]["context"]["plateau_size_bytes"] > 0
    any_metric = next(iter(ms.values()))["context"]
    assert any_metric["mpi_thread_level"] == "funneled"     # not mpi4py's MPI_THREAD_MULTIPLE: see cluster/comm.py
    assert any_metric["ranks"] == 2 and any_metric["mpi_library"]
    skipped = {f["id"] for f in run["findings"] if f["status"] == "skipped"}
    assert skipped == {f"net.placement.{lb}" for lb in missing}
    assert "net.placement.cross_node" in skipped
    for name in ("net.barrier", "net.bcast.8B", "net.allreduce.8B", "net.allreduce.64KiB", "net.alltoall.4KiB"):
        assert ms[name]["valid"] and ms[name]["context"]["k_ranks"] == 2, name
        c = ms[name]["context"]
        assert c["t_min_us"] <= ms[name]["value"] <= c["t_max_us"] * 1.000001
    series = {s["name"] for s in run["series"]}
    assert {"net.allreduce.k2", "net.barrier.ranks"} <= series
    assert any(s.startswith("net.pingpong.latency.") for s in series)


@needs_mpi
def test_four_ranks_on_two_named_nodes_measure_across_nodes(mpi_setup):
    run = launch(mpi_setup, 4, "four", TEST_NODES="n0,n0,n1,n1")
    ms = metrics(run)
    lat = ms["net.pingpong.latency.cross_node"]
    assert lat["valid"] and lat["context"]["pair_nodes"] == ["n0", "n1"] and lat["context"]["pair_ranks"] == [0, 2]
    assert "one host" in lat["context"]["placement_note"]
    bw = ms["net.pingpong.bandwidth.cross_node"]
    assert bw["peak"]["value"] is None and "no network link" in bw["peak"]["provenance"]
    assert bw["efficiency"] is None
    for name in ("net.barrier", "net.bcast.8B", "net.allreduce.8B", "net.alltoall.64KiB"):
        assert ms[name]["valid"] and ms[name]["context"]["k_ranks"] == 4 and ms[name]["context"]["k_nodes"] == 2
    assert ms["net.barrier"]["context"]["rank_order"] == [0, 2, 1, 3]
    assert lat["context"]["ranks_per_node"] == {"n0": 2, "n1": 2}


@needs_mpi
def test_a_corrupted_message_makes_the_results_invalid(mpi_setup):
    run = launch(mpi_setup, 2, "corrupt", TEST_CORRUPT="1")
    ms = metrics(run)
    assert ms, "nothing measured"
    for name, m in ms.items():
        if name == "net.barrier":                      # carries no data
            assert m["valid"]
            continue
        assert not m["valid"], name
        assert "wrong" in m["note"], m["note"]


@needs_mpi
def test_a_timed_block_that_delivers_nothing_new_makes_ping_pong_invalid(mpi_setup):
    # the buffers are not rewritten between blocks (as IMB); each block's own stamp on the
    # message's ends is what shows that it delivered
    run = launch(mpi_setup, 2, "stale", TEST_STALE="1")
    ms = metrics(run)
    lat = [m for n, m in ms.items() if n.startswith("net.pingpong.latency.")]
    assert lat, sorted(ms)
    for m in lat:
        assert not m["valid"] and "(block 0)" in m["note"], m["note"]
    for n, m in ms.items():
        if n.startswith(("net.bw.", "net.bibw.", "net.allreduce", "net.barrier")):
            assert m["valid"], (n, m["note"])


@needs_mpi
def test_the_timing_loops_are_built_once_into_the_cache(mpi_setup):
    tmp, _ = mpi_setup
    cache = tmp / "cache" / "ceiling"
    launch(mpi_setup, 2, "again")
    built = sorted(cache.glob("mpi-*.so"))
    assert len(built) == 1, built
    assert not list(cache.glob("*.tmp"))
    before = built[0].stat().st_mtime_ns
    launch(mpi_setup, 2, "again2")
    assert built[0].stat().st_mtime_ns == before


ERRORS = textwrap.dedent("""
    import sys
    if "--hide-mpi4py" in sys.argv:
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "mpi4py" or name.startswith("mpi4py."):
                    raise ImportError("No module named 'mpi4py' (hidden by the test)")
        sys.meta_path.insert(0, Block())
    from ceiling.bench import network
    from ceiling.errors import CeilingError
    try:
        network.preflight()
    except CeilingError as e:
        print(f"ceiling: {e}")
        sys.exit(e.exit_code)
    print("no error")
""")


@needs_mpi
@pytest.mark.parametrize("how", ["singleton", "launcher"])
def test_one_rank_is_one_clear_line(mpi_setup, how):
    tmp, info = mpi_setup
    argv = [sys.executable, "-c", ERRORS]
    if how == "launcher":
        argv = info["argv2"][:2] + ["1"] + argv
    r = subprocess.run(argv, capture_output=True, text=True, env=_env(tmp), timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout.strip() == ("ceiling: ceiling bench network needs at least 2 MPI ranks: "
                                "mpirun -n 2 ceiling bench network")


def test_without_mpi4py_is_one_clear_line(tmp_path):
    r = subprocess.run([sys.executable, "-c", ERRORS, "--hide-mpi4py"], capture_output=True, text=True,
                       env=_env(tmp_path), timeout=60)
    assert r.returncode == 10, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ceiling: MPI is not available (No module named 'mpi4py'")
    assert "pip install mpi4py mpich" in lines[0]


@needs_mpi
def test_sigterm_to_one_rank_stops_every_rank_together(mpi_setup, tmp_path):
    """A scheduler's SIGTERM (scancel, a time limit) reaching one rank first: no rank may leave
    a collective the others wait in; all stop at the same agreement point, rank 0 keeps what
    was measured, exit 143."""
    import os
    import signal
    import time
    import uuid
    tmp, info = mpi_setup
    mark = uuid.uuid4().hex
    out = tmp_path / "partial.json"
    p = subprocess.Popen([*info["argv2"], sys.executable, "-m", "ceiling", "bench", "network", "--no-store",
                          "--save-json", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=_env(tmp, TEST_MARK=mark))
    try:
        deadline, pid = time.time() + 60, None
        while time.time() < deadline and pid is None:
            r1 = _ranks_of(mark).get(1)
            if r1 is not None and _measuring(r1):
                pid = r1
            time.sleep(0.05)
        assert pid is not None, "rank 1 never loaded the timing loops"
        os.kill(pid, signal.SIGTERM)
        stdout, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 143, stdout + stderr
    assert "Traceback" not in stderr, stderr
    doc = json.loads(out.read_text())
    assert doc["partial"] and doc["partial_reason"].startswith("terminated (SIGTERM)"), doc["partial_reason"]
    assert "PARTIAL RUN: terminated (SIGTERM)" in stdout


def test_a_launcher_of_another_mpi_is_named_before_mpi_starts():
    from ceiling.cluster.library import launcher_mismatch
    mpich, ompi = FakeMPI("MPICH", (5, 0, 2)), FakeMPI("Open MPI", (4, 1, 4))
    line = launcher_mismatch(mpich, {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0"})
    assert line.startswith("this process was started by mpirun (Open MPI), but mpi4py loaded MPICH 5.0.2")
    assert "launch with " in line
    assert launcher_mismatch(ompi, {"PMI_FD": "5", "PMI_RANK": "0", "MPI_LOCALNRANKS": "2"}).startswith(
        "this process was started by mpiexec (Hydra, PMI)")
    assert launcher_mismatch(mpich, {"PMI_FD": "5"}) is None
    assert launcher_mismatch(ompi, {"OMPI_COMM_WORLD_SIZE": "2"}) is None
    assert launcher_mismatch(mpich, {"SLURM_PROCID": "0", "PMIX_RANK": "0"}) is None    # srun: cannot tell
    assert launcher_mismatch(mpich, {}) is None


def _foreign_launcher(family):
    """A launcher of the other MPI family on this machine, or None."""
    import shutil
    from ceiling.cluster.library import launcher_identity
    here = Path(__file__).resolve().parents[1]
    for cand in (shutil.which("mpirun"), "/usr/bin/mpirun", str(here / ".venv" / "bin" / "mpiexec")):
        if cand and Path(cand).is_file():
            fam, _ = launcher_identity(cand)
            if fam and (fam == "Open MPI") != (family == "Open MPI"):
                return cand, fam
    return None


@needs_mpi
def test_the_launcher_of_another_mpi_is_one_line_and_exit_10(mpi_setup, tmp_path):
    tmp, info = mpi_setup
    found = _foreign_launcher(info["family"])
    if found is None:
        pytest.skip("no launcher of another MPI family on this machine")
    path, fam = found
    argv = [path, "-n", "2"] + (["--allow-run-as-root"] if fam == "Open MPI" and os.geteuid() == 0 else [])
    env = _env(tmp)
    for k in [k for k in env if k.startswith(("PMI_", "OMPI_", "PMIX_", "HYDI_", "MPI_LOCAL"))]:
        del env[k]
    r = subprocess.run([*argv, sys.executable, "-m", "ceiling", "bench", "network", "--no-store"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 10, r.stdout + r.stderr
    ours = [x for x in (r.stdout + r.stderr).splitlines() if x.startswith("ceiling:")]
    assert len(ours) == 1 and f"but mpi4py loaded {info['family']}" in ours[0], r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "Fatal error" not in r.stdout + r.stderr


@needs_mpi
def test_the_run_names_the_mpi_library_device_and_job(mpi_setup, tmp_path):
    # What a user pastes into a ticket must say which MPI the figures are of: the job, the
    # library with its device (MPICH names it), the transport as far as it can be known.
    tmp, info = mpi_setup
    r = subprocess.run([*info["argv2"], sys.executable, "-m", "ceiling", "bench", "network", "--quick",
                        "--size", "4KiB", "--reps", "2", "--no-store", "--json"],
                       capture_output=True, text=True, env=_env(tmp), timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(r.stdout)
    mpi, job = doc["environment"]["mpi"], doc["job"]
    assert mpi["family"] == info["family"] and mpi["version"] == info["version"]
    assert job["mpi_library"] == mpi["library"] and job["ranks"] == 2 and job["nodes"] == 1
    assert mpi["library"].startswith(f"{info['family']} {info['version']}")
    if info["family"] == "MPICH":
        assert mpi["device"].startswith("ch") and f"device {mpi['device']}" in mpi["library"]
    assert mpi["transport"] and isinstance(mpi["others"], list)
    lat = [m for m in doc["metrics"] if m["name"].startswith("net.pingpong.latency.")]
    assert lat and all(m["context"]["mpi_library"] == mpi["library"] and m["context"]["mpi_device"]
                       and m["context"]["mpi_transport"] == mpi["transport"] for m in lat)
    head = [x for x in r.stderr.splitlines() if x.strip().startswith("MPI ")]
    assert head and mpi["library"] in head[0]
    assert f"MPI figures measured with {mpi['library']}" in " ".join(r.stderr.split())
