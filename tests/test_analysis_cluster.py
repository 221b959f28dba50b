"""The analysis of a cluster run (analysis/cluster.py) on digests made up here:
medians, spread, robust z, outliers by threshold with their own findings as
evidence, the configuration diff (majority and odd nodes), checks failing on
some nodes, and a digest's round trip. No MPI, no timing."""
import pytest

from ceiling.analysis.cluster import Cluster, NodeDigest, digest, ranked, summary_line, threshold_of
from ceiling.results.model import HIGHER, LOWER, Finding, Metric, Peak, Run


def node(name, dgemm=100.0, lat=100.0, kernel="6.1.0-18", problems=(), peak=120.0):
    return NodeDigest(name, {"dgemm.node": {"value": dgemm, "unit": "Gflop/s", "better": HIGHER,
                                            "peak": [peak, "Gflop/s", "2 sockets x ..."]},
                             "latency.dram": {"value": lat, "unit": "ns", "better": LOWER, "peak": None}},
                      list(problems), {"kernel": kernel, "governor": "performance"})


def cluster_of(*digests, threshold=None):
    c = Cluster(threshold)
    for d in digests:
        c.add(d)
    return c


def test_uniformity_median_spread_and_ranks():
    c = cluster_of(node("n1", 100), node("n2", 98), node("n3", 102), node("n4", 80), node("n5", 101))
    u = {x.metric: x for x in c.uniformity()}["dgemm.node"]
    assert u.median == 100 and u.min == 80 and u.max == 102
    assert u.spread == pytest.approx(0.22)
    assert u.mad == 2.0                         # deviations 0, 2, 2, 20, 1: their median
    assert [n for n, _ in ranked(u)] == ["n3", "n5", "n1", "n2", "n4"]
    assert "min 80 (n4)" in summary_line(u) and "max 102 (n3)" in summary_line(u)


def test_a_slow_node_is_an_outlier_with_its_own_findings_as_evidence():
    slow = node("n4", 80, problems=[("thermal.throttling_now", "fail", "CPU 3 is throttling now")])
    c = cluster_of(node("n1", 100), node("n2", 98), node("n3", 102), slow, node("n5", 101))
    u = {x.metric: x for x in c.uniformity()}["dgemm.node"]
    [o] = u.outliers
    assert o["node"] == "n4" and o["worse"] == pytest.approx(0.2) and o["than"] == "median"
    assert o["z"] == pytest.approx(0.6745 * (80 - 100) / u.mad)
    assert "thermal.throttling_now fail" in o["evidence"][0]
    f = next(f for f in c.findings() if f.id == "cluster.outlier.dgemm.node")
    assert f.status == "warn" and "n4" in f.title and "20% worse" in f.title
    assert "CPU 3 is throttling now" in f.evidence


def test_of_two_nodes_the_slower_is_measured_against_the_other():
    """No median of two says which is off: 60 vs 100 is 40% worse than the other node (the
    median, 80, would make it 25%), and the finding says the figures cannot tell more."""
    c = cluster_of(node("a", 100, problems=[("load.competing", "warn", "Other processes used 1.0 CPUs")]),
                   node("b", 60))
    u = {x.metric: x for x in c.uniformity()}["dgemm.node"]
    [o] = u.outliers
    assert o["node"] == "b" and o["than"] == "a" and o["worse"] == pytest.approx(0.4) and o["z"] is None
    f = next(f for f in c.findings() if f.id == "cluster.outlier.dgemm.node")
    assert "b is 40% below a" in f.title and "cannot tell which one is off" in f.title
    assert f.title.endswith("read each node's own findings")       # a whole sentence, not "its own findings may"
    assert "worse than the a" not in f.evidence and "40.0% worse than a" in f.evidence


def test_lower_is_better_metrics_flag_the_high_values():
    c = cluster_of(node("a", lat=100), node("b", lat=101), node("c", lat=130))
    u = {x.metric: x for x in c.uniformity()}["latency.dram"]
    assert [o["node"] for o in u.outliers] == ["c"]


def test_thresholds_per_family_and_override():
    assert threshold_of("dgemm.node") == 0.05 and threshold_of("stream.triad") == 0.10
    assert threshold_of("net.bw.node") == 0.20 and threshold_of("whatever.x") == 0.10
    assert threshold_of("dgemm.node", 0.02) == 0.02
    c = cluster_of(node("a", 100), node("b", 100), node("c", 96))       # 4 % worse: within DGEMM's 5 %
    assert not {x.metric: x for x in c.uniformity()}["dgemm.node"].outliers
    c = cluster_of(node("a", 100), node("b", 100), node("c", 96), threshold=0.03)
    assert [o["node"] for o in {x.metric: x for x in c.uniformity()}["dgemm.node"].outliers] == ["c"]


@pytest.mark.parametrize("threshold, said", [(0.001, "0.1%"), (0.125, "12.5%"), (0.05, "5%")])
def test_a_threshold_is_said_as_it_was_set(threshold, said):
    """--threshold 0.1 (percent) is 0.001: the title said "more than 0%", a limit nobody set;
    12.5 said "12%". The figure compared with it keeps enough digits not to fall below it."""
    c = cluster_of(node("a", 100), node("b", 100), node("c", 100), node("d", 87.4), threshold=threshold)
    f = next(f for f in c.findings() if f.id == "cluster.outlier.dgemm.node")
    assert f"more than {said} below the median" in f.title and "12.6% worse" in f.title
    c = cluster_of(node("a", 100), node("b", 87.4), threshold=threshold)
    f = next(f for f in c.findings() if f.id == "cluster.outlier.dgemm.node")
    assert "b is 12.6% below a" in f.title and f"threshold {said})" in f.title


def test_configuration_differences_name_the_odd_nodes_and_the_majority():
    c = cluster_of(*[node(f"n{i}") for i in range(6)], node("n6", kernel="6.1.0-21"), node("n7", kernel="6.1.0-21"))
    [f] = [f for f in c.findings() if f.id.startswith("cluster.config.")]
    assert f.id == "cluster.config.kernel"
    assert f.data["majority"] == "6.1.0-18" and f.data["majority_nodes"] == 6
    assert f.data["others"] == {"6.1.0-21": ["n6", "n7"]}
    assert "2 of 8 nodes: n6, n7" in f.title


def test_a_check_failing_on_some_nodes_is_one_finding_naming_them():
    bad = [("mem.population", "fail", "DIMM B2 missing")]
    c = cluster_of(node("a"), node("b", problems=bad), node("c", problems=bad))
    f = next(f for f in c.findings() if f.id == "cluster.check.mem.population")
    assert f.status == "fail" and "2 of 3 nodes: b, c" in f.title
    assert f.data["nodes"] == {"b": "DIMM B2 missing", "c": "DIMM B2 missing"}


def test_the_cluster_metric_is_the_median_with_every_value_and_a_shared_peak():
    c = cluster_of(node("a", 100), node("b", 90), node("c", 110))
    m = {x.name: x for x in c.metrics()}["dgemm.node"]
    assert m.value == 100 and sorted(m.values) == [90, 100, 110]
    assert m.peak.value == 120 and m.efficiency == pytest.approx(100 / 120)
    assert m.context["nodes"] == 3
    c = cluster_of(node("a", 100), node("b", 90, peak=140))
    m = {x.name: x for x in c.metrics()}["dgemm.node"]
    assert m.peak is None and m.efficiency is None and "peaks differ" in m.note


def test_a_digest_keeps_valid_figures_and_problems_and_survives_json():
    run = Run(tool_version="0", host="n1", started="2026-01-01T00:00:00Z", command=["ceiling"])
    run.metrics = [Metric.measured("dgemm.node", [90.0, 95.0], "Gflop/s", peak=Peak(120.0, "Gflop/s", "table")),
                   Metric("stream.triad", None, "GB/s", valid=False)]
    run.findings = [Finding("cpu.governor", "warn", "powersave"), Finding("ras.edac", "ok", "no errors")]
    d = digest(run, "n1", {"kernel": "6.1"})
    assert list(d.metrics) == ["dgemm.node"] and d.metrics["dgemm.node"]["value"] == 95.0
    assert d.problems == [("cpu.governor", "warn", "powersave")]
    import json
    again = NodeDigest.from_dict(json.loads(json.dumps(d.to_dict())))
    assert again == d


def test_a_node_without_a_figure_leaves_it_out_not_zero():
    c = cluster_of(node("a", 100), node("b", 100), NodeDigest("c", {}, [], {"kernel": "6.1.0-18"}))
    u = {x.metric: x for x in c.uniformity()}["dgemm.node"]
    assert set(u.values) == {"a", "b"} and not u.outliers
    assert c.nodes == ["a", "b", "c"]


# -- the pairwise network ----------------------------------------------------------------

def test_the_circle_method_meets_every_pair_once_in_n_minus_1_rounds():
    from ceiling.cluster.pairs import schedule
    for n in (2, 3, 4, 7, 8, 33):
        plan = schedule(n, rounds=10 ** 6)
        assert len(plan) == n - 1 + n % 2
        met = set()
        for partners in plan:
            for a, b in enumerate(partners):
                if b >= 0:
                    assert partners[b] == a                       # mutual
                    met.add((min(a, b), max(a, b)))
            assert sum(1 for b in partners if b < 0) == n % 2     # a bye only for an odd count
        assert len(met) == n * (n - 1) // 2
    assert len(schedule(100, rounds=5)) == 5


def _pairs(n, lat, bad_node=None, bad_link=None):
    """Every pair measured: lat us, 3x for bad_node's pairs, 3x for the one bad link."""
    per = [[] for _ in range(n)]
    for a in range(n):
        for b in range(n):
            if a != b:
                v = lat * (3 if bad_node in (a, b) else 1) * (3 if bad_link in ((a, b), (b, a)) else 1)
                per[a].append({"round": 0, "partner": b, "latency_us": v, "bandwidth_mbs": 10000.0 / (v / lat),
                               "valid": True, "msg": ""})
    return per


def test_a_node_slow_with_every_partner_is_a_node_problem():
    from ceiling.analysis.pairs import conclude
    nodes = [f"n{i}" for i in range(6)]
    series, metrics, findings = conclude(nodes, _pairs(6, 2.0, bad_node=4), 5, 5)
    f = {x.id: x for x in findings}
    assert list(f["cluster.pairs.latency.node"].data["nodes"]) == ["n4"]
    assert "cluster.pairs.latency.link" not in f                 # its pairs are its own problem
    m = {x.name: x for x in metrics}["net.pairs.latency"]
    assert m.value == 2.0 and m.context["pairs"] == 15 and m.valid
    lat = next(s for s in series if s.name == "cluster.pairs.latency")
    assert lat.kind == "matrix" and lat.labels == nodes and lat.matrix[0][1] == 2.0 and lat.matrix[0][0] is None


def test_one_slow_pair_is_a_link_problem():
    from ceiling.analysis.pairs import conclude
    nodes = [f"n{i}" for i in range(6)]
    _, _, findings = conclude(nodes, _pairs(6, 2.0, bad_link=(1, 3)), 5, 5)
    f = {x.id: x for x in findings}
    assert "cluster.pairs.latency.node" not in f
    assert f["cluster.pairs.latency.link"].data["links"] == [["n1", "n3", 6.0]]
    assert "n1-n3" in f["cluster.pairs.bandwidth.link"].title


def test_a_sampled_network_says_so():
    from ceiling.analysis.pairs import conclude
    per = _pairs(6, 2.0)
    for ps in per:
        del ps[2:]                                                # each rank met 2 partners
    series, metrics, _ = conclude([f"n{i}" for i in range(6)], per, 2, 5)
    assert "2 of 5 rounds" in series[0].context["sampled"] and "sampled" in metrics[0].context


def _busy(d, evidence="other processes used 1.00 CPUs"):
    d.metrics["dgemm.node"]["disturbed"] = evidence
    return d


def test_a_node_s_disturbed_figure_travels_in_its_digest():
    m = Metric.measured("dgemm.node", [26.8], "Gflop/s")
    m.context["disturbed"] = "other processes used 1.00 CPUs"
    d = NodeDigest.from_dict(digest(Run(tool_version="0", host="a", started="", command=[], metrics=[m]), "a",
                                    {}).to_dict())
    assert d.metrics["dgemm.node"]["disturbed"] == "other processes used 1.00 CPUs"


def test_the_cluster_gives_no_verdict_when_every_node_met_competing_load():
    from ceiling.analysis import summary
    from ceiling.report import labels, terminal
    c = cluster_of(_busy(node("a", 26.8)), _busy(node("b", 27.0)))
    run = Run(tool_version="0", host="a", started="", command=[], metrics=c.metrics())
    assert "2 of 2 nodes met competing load (a, b: other processes used 1.00 CPUs)" == \
        run.metric("dgemm.node").context["disturbed"]
    from ceiling.analysis.analyse import analyse
    run.analysis = analyse(run)
    assert run.analysis.verdict.kind == "no_verdict"
    assert labels.verdict_text(run).startswith("No verdict: dgemm.node would be furthest below its peak")
    assert run.analysis.figure("dgemm.node").state == "disturbed"
    assert "disturbed: 26.9 Gflop/s measured while other processes were busy" in terminal.summary(run)
    from ceiling.report import html_cluster, terminal_cluster
    from ceiling.results.model import Node
    run.analysis.uniformity, run.nodes = c.uniformity(), [Node(name="a"), Node(name="b")]
    assert "disturbed, no figure of the cluster: 2 of 2 nodes met competing load" in \
        terminal_cluster.cluster_section(run, width=200)
    assert 'competing load</span> disturbed, no figure of the cluster' in html_cluster.cluster_section(run)
    assert summary.verdict(Run(tool_version="0", host="a", started="", command=[],
                               metrics=cluster_of(node("a", 26.8), node("b", 27.0)).metrics())).kind == "below_peak"


def test_nodes_that_met_competing_load_are_left_out_of_the_cluster_s_median():
    c = cluster_of(_busy(node("a", 20.0)), node("b", 100.0), node("c", 98.0))
    m = {x.name: x for x in c.metrics()}["dgemm.node"]
    assert m.value == 99.0 and m.stats.median == 98.0 and "disturbed" not in m.context
    assert m.context["left_out"].startswith("1 of 3 nodes met competing load (a:")
    assert m.efficiency == pytest.approx(99.0 / 120.0)


@pytest.mark.parametrize("bad", [{"name": "n1", "metrics": {"stream.triad": 5}}, {"metrics": {}}, [1, 2],
                                 {"name": "n1", "problems": [["a", "b"]]},
                                 {"name": "n1", "metrics": {"x": {"value": 1, "peak": [1]}}}])
def test_a_digest_not_of_its_shape_is_refused_when_read_not_when_analysed(bad):
    """Another rank's digest is read on rank 0 (verbs/cluster.py makes that node "not measured"
    on this ValueError); one let through crashed Cluster.add."""
    with pytest.raises(ValueError, match="not a node's digest"):
        NodeDigest.from_dict(bad)


def test_a_figure_the_environment_lowered_on_a_node_is_no_cluster_verdict():
    """OPENBLAS_CORETYPE=Haswell on the nodes: the cluster's DGEMM carries the variable, as a node's
    own does, so the cluster's verdict is not DGEMM's (issue 34)."""
    from ceiling.analysis import summary
    cap = {"cause": "env", "variable": "OPENBLAS_CORETYPE", "value": "Haswell", "library": "openblas",
           "effect": "isa", "isa_run": "avx2", "isa_node": "avx512", "dgemm": "capped"}
    m = Metric.measured("dgemm.node", [26.8], "Gflop/s", peak=Peak(280.0, "Gflop/s", "f"),
                        context={"env_caps": [cap]})
    sent = digest(Run(tool_version="0", host="a", started="", command=[], metrics=[m]), "a", {}).to_dict()
    a = NodeDigest.from_dict(sent)
    assert a.metrics["dgemm.node"]["env_caps"][0]["variable"] == "OPENBLAS_CORETYPE"
    b = NodeDigest.from_dict(dict(sent, name="b"))
    metrics = cluster_of(a, b).metrics()
    dgemm = {x.name: x for x in metrics}["dgemm.node"]
    assert dgemm.context["env_caps"][0]["nodes"] == ["a", "b"]
    v = summary.verdict(Run(tool_version="0", host="a", started="", command=[], metrics=metrics))
    assert v.kind == "no_verdict" and "OPENBLAS_CORETYPE=Haswell" in v.evidence
    # without the variable the same figures are the cluster's verdict
    plain = cluster_of(node("a", 26.8, peak=280.0), node("b", 26.8, peak=280.0)).metrics()
    assert summary.verdict(Run(tool_version="0", host="a", started="", command=[],
                               metrics=plain)).metric == "dgemm.node"
