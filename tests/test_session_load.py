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
