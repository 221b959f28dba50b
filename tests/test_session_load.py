"""Competing load met by several steps of one run is one finding, each step's evidence in it,
and the metrics table says once which metrics it touched (issue 10, item 4)."""
from ceiling.checks import load
from ceiling.report import terminal
from ceiling.results.measure import Outcome
from ceiling.results.model import Finding, Metric
from ceiling.verbs.session import Session


def test_competing_load_in_several_steps_is_one_finding(monkeypatch):
    busy = {"compute": 1.8, "memory": 1.7, "latency": 0.0}
    state = {}

    def compare(before, after, ncpus, **kw):
        cpus = busy[state["step"]]
        if not cpus:
            return [Finding(load.FINDING_ID, "ok", "No competing load during the measurement")]
        return [Finding(load.FINDING_ID, "warn", f"Other processes used {cpus:.2f} CPUs during the measurement",
                        evidence=f"other processes used {cpus:.2f} CPUs on average over 3.00 s",
                        why="They take CPU time and bandwidth.", fix="Run on an idle node.")]

    monkeypatch.setattr(load, "compare", compare)
    from ceiling.machine.model import Machine
    from ceiling.results.measure import Options
    s = Session(["run"], Options())
    s.set_machine(Machine(), [0])

    def step(name):
        def fn(ctx):
            state["step"] = name
            return Outcome(metrics=[Metric.measured(f"{name}.x", [1.0, 1.1, 0.9], "GB/s")])
        return fn

    for name in busy:
        s.bench(name, step(name))
    run = s.finish()
    found = [f for f in run.findings if f.id.startswith("load.")]
    assert len(found) == 1
    f = found[0]
    assert f.title == ("Competing load during 2 steps (compute, memory): other processes used 1.80 CPUs "
                       "during the measurement")
    assert f.evidence == ("compute: other processes used 1.80 CPUs on average over 3.00 s; "
                          "memory: other processes used 1.70 CPUs on average over 3.00 s")
    text = terminal.metrics_table(run, width=200)
    assert "other processes were busy during this measurement" not in text
    assert text.count("Other processes were busy while 2 metrics were measured (compute.x, memory.x)") == 1


def _session(monkeypatch, loads, retries=1):
    """A Session whose steps meet the competing load ``loads`` lists, attempt after attempt,
    measuring a disturbed step again up to ``retries`` times (--retry-disturbed)."""
    from ceiling.machine.model import Machine
    from ceiling.results.measure import Options
    seq = list(loads)

    def compare(before, after, ncpus, **kw):
        cpus = seq.pop(0)
        if not cpus:
            return [Finding(load.FINDING_ID, "ok", "No competing load during the measurement")]
        return [Finding(load.FINDING_ID, "warn", f"Other processes used {cpus:.2f} CPUs during the measurement",
                        evidence=f"other processes used {cpus:.2f} CPUs", why="w", fix="f")]

    monkeypatch.setattr(load, "compare", compare)
    s = Session(["run"], Options(retry_disturbed=retries))
    s.set_machine(Machine(), [0])
    s.remeasure = ("compute",)
    return s, seq


def _flops(value):
    from ceiling.results.model import Peak
    calls = []

    def fn(ctx):
        calls.append(1)
        return Outcome(metrics=[Metric.measured("flops.dp.node", [value], "Gflop/s",
                                                peak=Peak(100.0, "Gflop/s", "2 cores x 3 GHz x 16"))])
    return fn, calls


def test_a_disturbed_step_is_measured_again_and_the_quiet_figures_kept(monkeypatch):
    s, left = _session(monkeypatch, [1.8, 0.0])
    fn, calls = _flops(34.0)
    s.bench("compute", fn)
    run = s.finish()
    assert len(calls) == 2 and not left
    m = run.metric("flops.dp.node")
    assert "disturbed" not in m.context and "first attempt met competing load" in m.context["remeasured"]
    assert not [f for f in run.findings if f.id.startswith("load.")]
    from ceiling.analysis.analyse import ensure
    ensure(run)
    assert run.analysis.verdict.kind == "below_peak"


def test_load_in_both_attempts_gives_no_verdict_and_marks_the_card(monkeypatch):
    s, _ = _session(monkeypatch, [1.8, 1.7])
    fn, calls = _flops(34.0)
    s.bench("compute", fn)
    run = s.finish()
    assert len(calls) == 2
    assert run.metric("flops.dp.node").context["disturbed"] == "other processes used 1.70 CPUs"
    from ceiling.analysis.analyse import ensure
    from ceiling.report import html, labels
    ensure(run)
    v = run.analysis.verdict
    assert v.kind == "no_verdict" and "measured while other processes were busy" in v.evidence
    assert labels.verdict_text(run).startswith("No verdict: flops.dp.node would be furthest below its peak")
    text = terminal.summary(run)
    assert "34.0" not in text.split("DP flops")[1].split("\n")[0].split("disturbed:")[0]   # no value of the node
    assert "disturbed: 34.0 Gflop/s measured while other processes were busy, not the node's value" in text
    page = html.render(run)
    assert ">disturbed</span>" in page and "<s>34.0 Gflop/s</s> measured while other processes were busy" in page
    assert run.analysis.figure("flops.dp.node").state == "disturbed"


def test_by_default_a_disturbed_step_is_measured_once_and_shown_as_disturbed(monkeypatch):
    s, left = _session(monkeypatch, [1.8], retries=0)
    fn, calls = _flops(34.0)
    s.bench("compute", fn)
    run = s.finish()
    assert len(calls) == 1 and not left
    assert run.metric("flops.dp.node").context["disturbed"] == "other processes used 1.80 CPUs"


def test_retry_disturbed_measures_up_to_n_more_times_and_keeps_the_first_quiet_attempt(monkeypatch):
    s, left = _session(monkeypatch, [1.8, 1.7, 0.0], retries=5)
    fn, calls = _flops(34.0)
    s.bench("compute", fn)
    run = s.finish()
    assert len(calls) == 3 and not left
    m = run.metric("flops.dp.node")
    assert "disturbed" not in m.context
    assert m.context["remeasured"] == ("measured 3 times: the first attempt met competing load "
                                       "(other processes used 1.80 CPUs)")
    s, left = _session(monkeypatch, [1.8, 1.7, 1.6], retries=2)
    s.bench("compute", fn)
    m = s.finish().metric("flops.dp.node")
    assert not left and m.context["disturbed"] == "other processes used 1.60 CPUs"
    assert m.context["remeasured"].endswith(", and so did every other")


def test_steps_not_listed_are_measured_once(monkeypatch):
    s, left = _session(monkeypatch, [1.8])
    fn, calls = _flops(34.0)
    s.bench("storage", fn)
    assert len(calls) == 1 and not left


def test_steps_disturbed_for_different_causes_get_each_causes_fix(monkeypatch):
    """One step met another process, the next the hypervisor's steal: the one finding
    carries both causes, and its fix covers both instead of repeating the first step's."""
    causes = {"compute": [load.COMPETING], "memory": [load.STEAL]}
    state = {}

    def compare(before, after, ncpus, **kw):
        c = causes[state["step"]]
        return [Finding(load.FINDING_ID, "warn", "Busy", evidence="busy", why="cycles", fix=load.fix_for(c),
                        data={"cause": c[0], "causes": c})]

    monkeypatch.setattr(load, "compare", compare)
    from ceiling.machine.model import Machine
    from ceiling.results.measure import Options
    s = Session(["run"], Options())
    s.set_machine(Machine(), [0])

    def step(name):
        def fn(ctx):
            state["step"] = name
            return Outcome(metrics=[Metric.measured(f"{name}.x", [1.0, 1.1, 0.9], "GB/s")])
        return fn

    for name in causes:
        s.bench(name, step(name))
    [f] = [f for f in s.finish().findings if f.id.startswith("load.")]
    assert f.data == {"cause": load.COMPETING, "causes": [load.COMPETING, load.STEAL]}
    assert f.fix == load.fix_for([load.COMPETING, load.STEAL]) and "dedicated (pinned) vCPUs" in f.fix
