"""``ceiling run/check/bench --textfile DIR``: the run's figures, peaks, efficiencies, verdict and checks in
DIR/ceiling.prom for node_exporter's textfile collector (report/prometheus_run.py). Debian's
``prometheus-node-exporter`` reads what ``check`` and a quick ``bench`` wrote; the file is merged run after
run, replaced atomically (a SIGTERM while it is written leaves the old one whole), and a directory that
cannot take it is one line and exit 4 with the run still recorded."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ceiling.analysis.analyse import ensure
from ceiling.errors import PathError, UsageError
from ceiling.report import prometheus_run as pr
from ceiling.results.model import Finding, Metric, Peak, Run
from ceiling.results.store import Store

from prometheus_servers import needs_node_exporter, node_exporter_page
from test_probe_prometheus import ENV


def _series(path: Path) -> dict:
    """{(name, frozenset(labels)): value} of a textfile, read with prometheus_client's own parser."""
    out = {}
    for fam in text_string_to_metric_families(path.read_text()):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _get(series: dict, name: str, **labels):
    return series.get((name, frozenset(labels.items())))


def _run(metrics=(), findings=(), started="2026-11-28T06:00:00+00:00") -> Run:
    r = Run(tool_version="0.1.0", host="n1", started=started, command=["ceiling"], run_id="r" * 32,
            metrics=list(metrics), findings=list(findings))
    ensure(r)
    return r


def _triad(value: float, peak: float = 200.0) -> Metric:
    return Metric.measured("stream.triad", [value, value * 0.99], "GB/s", peak=Peak(peak, "GB/s", "8 ch x 25.6"),
                           context={"threads": 64, "placement": "compact", "array_bytes": 1 << 30})


def test_figures_peaks_efficiency_verdict_and_checks_with_bounded_labels(tmp_path):
    bad = Metric.measured("dgemm.node", [10.0], "Gflop/s")
    bad.valid = False
    other_size = Metric.measured("stream.triad", [50.0], "GB/s", context={"threads": 64, "placement": "compact",
                                                                          "array_bytes": 1 << 20})
    remote = Metric.measured("stream.triad", [90.0], "GB/s", context={"threads": 8}, node="n2")
    r = _run([_triad(100.0), Metric.measured("latency.dram", [95.0, 96.0], "ns", "lower"), bad, other_size, remote],
             [Finding("cpu.governor", "warn", "powersave"), Finding("cpu.governor", "fail", "worse"),
              Finding("mem.thp", "ok", "fine"), Finding("perf.paranoid", "skipped", "no perf"),
              Finding("mem.thp", "fail", "on n2", node="n2")])
    pr.write_run(r, str(tmp_path))
    s = _series(tmp_path / "ceiling.prom")
    triad = dict(metric="stream.triad", unit="GB/s", threads="64", placement="compact")
    assert _get(s, "ceiling_metric_value", **triad) == 100.0          # the headline; the 1 MiB figure left out
    assert _get(s, "ceiling_metric_peak", **triad) == 200.0
    assert _get(s, "ceiling_metric_efficiency_ratio", **triad) == pytest.approx(0.5)
    assert _get(s, "ceiling_metric_value", metric="latency.dram", unit="ns", threads="", placement="") == 95.0
    assert not [k for k in s if ("metric", "dgemm.node") in k[1]]       # failed validation: not trusted
    assert len([k for k in s if k[0] == "ceiling_metric_value"]) == 2    # n2's figure is n2's node_exporter's
    assert _get(s, "ceiling_metric_timestamp_seconds", **triad) == 1795845600.0
    assert _get(s, "ceiling_verdict_info", kind="below_peak", metric="stream.triad") == 1.0
    assert _get(s, "ceiling_verdict_efficiency_ratio", metric="stream.triad") == pytest.approx(0.5)
    assert _get(s, "ceiling_check_severity", check="cpu.governor") == 2.0        # the worst of the check's
    assert _get(s, "ceiling_check_severity", check="mem.thp") == 0.0             # this node's, not n2's
    assert _get(s, "ceiling_check_severity", check="perf.paranoid") == -1.0
    assert {k for k, _ in s} == set(pr.FAMILIES)
    assert os.listdir(tmp_path) == ["ceiling.prom"]


def test_a_run_replaces_what_it_measured_and_keeps_the_rest(tmp_path):
    pr.write_run(_run([_triad(100.0)], [Finding("cpu.governor", "warn", "powersave")]), str(tmp_path))
    # a check later (cron): its findings replace the checks', the measured ceilings and the verdict stay
    pr.write_run(_run([], [Finding("cpu.governor", "ok", "performance"), Finding("mem.thp", "warn", "never")],
                      started="2026-11-28T07:00:00+00:00"), str(tmp_path))
    s = _series(tmp_path / "ceiling.prom")
    assert _get(s, "ceiling_metric_value", metric="stream.triad", unit="GB/s", threads="64",
                placement="compact") == 100.0
    assert _get(s, "ceiling_verdict_info", kind="below_peak", metric="stream.triad") == 1.0
    assert _get(s, "ceiling_check_severity", check="cpu.governor") == 0.0
    assert _get(s, "ceiling_check_timestamp_seconds", check="cpu.governor") == 1795849200.0
    # a bench of the same metric replaces its figure and the verdict; the checks stay
    pr.write_run(_run([_triad(150.0)]), str(tmp_path))
    s = _series(tmp_path / "ceiling.prom")
    assert [v for (n, _), v in s.items() if n == "ceiling_metric_value"] == [150.0]
    assert _get(s, "ceiling_check_severity", check="mem.thp") == 1.0
    # a file that is not ours to read is replaced whole
    (tmp_path / "ceiling.prom").write_text("garbage{{{\n")
    pr.write_run(_run([_triad(120.0)]), str(tmp_path))
    assert [v for (n, _), v in _series(tmp_path / "ceiling.prom").items() if n == "ceiling_metric_value"] == [120.0]


def test_sigterm_while_the_file_is_written_leaves_the_old_one_whole(tmp_path):
    """A real SIGTERM, handled as the CLI handles it (a KeyboardInterrupt), arriving while the exposition text
    is being generated: the previous file is untouched and no temporary file is left beside it."""
    pr.write_run(_run([_triad(100.0)]), str(tmp_path))
    before = (tmp_path / "ceiling.prom").read_bytes()
    child = textwrap.dedent(f"""
        import signal, sys, time
        from prometheus_client import CollectorRegistry
        from prometheus_client.core import GaugeMetricFamily
        from ceiling.errors import raise_terminated
        from ceiling.report.prometheus import write_textfile
        signal.signal(signal.SIGTERM, raise_terminated)
        class Slow:
            def collect(self):
                g = GaugeMetricFamily("ceiling_metric_value", "x", labels=["metric"])
                g.add_metric(["a"], 1.0)
                yield g
                print("writing", flush=True)
                time.sleep(60)
                yield GaugeMetricFamily("ceiling_check_severity", "y", value=1.0)
        reg = CollectorRegistry(auto_describe=False)
        reg.register(Slow())
        try:
            write_textfile({str(tmp_path / "ceiling.prom")!r}, reg)
        except KeyboardInterrupt:
            sys.exit(143)
        """)
    p = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "writing"
    p.terminate()
    assert p.wait(timeout=30) == 143
    assert (tmp_path / "ceiling.prom").read_bytes() == before
    assert os.listdir(tmp_path) == ["ceiling.prom"]


def test_a_directory_gone_after_the_check_costs_the_textfile_only(tmp_path):
    """The directory is checked before measuring; one removed meanwhile: one line, exit 4, the run recorded."""
    from ceiling.report.exporters.history import History
    from ceiling.report.exporters.textfile import Textfile
    from ceiling.verbs.common import deliver
    gone = tmp_path / "tf"
    gone.mkdir()
    tf = Textfile(str(gone))
    tf.prepare()
    gone.rmdir()
    lines = []
    with Store(tmp_path / "h.db") as store:
        r = _run([_triad(100.0)])
        code = deliver(r, [History(store), tf], 0, lines.append)
        assert code == PathError.exit_code and [x.run_id for x in store.list()] == [r.run_id]


def test_textfile_refused_before_measuring(tmp_path):
    from ceiling.verbs.common import check_outputs
    with pytest.raises(UsageError, match="under --cluster"):
        check_outputs(argparse.Namespace(textfile=str(tmp_path), cluster=True))
    f = tmp_path / "file"
    f.write_text("")
    for d, why in ((tmp_path / "nosuch", "not a directory"), (f, "not a directory")):
        r = subprocess.run([sys.executable, "-m", "ceiling", "check", "--only", "os", "--no-store",
                            "--textfile", str(d)], capture_output=True, text=True, timeout=120, env=ENV)
        assert r.returncode == 4 and r.stderr.strip() == f"ceiling: --textfile {d}: {why}", r.stderr


@needs_node_exporter
def test_node_exporter_serves_what_check_and_a_quick_bench_wrote(tmp_path):
    tf = tmp_path / "textfile"
    tf.mkdir()
    db = str(tmp_path / "h.db")
    for args in (["check", "--only", "os"], ["bench", "memory", "--quick"]):
        r = subprocess.run([sys.executable, "-m", "ceiling", *args, "--db", db, "--textfile", str(tf)],
                           capture_output=True, text=True, timeout=300, env=ENV)
        assert r.returncode == 0 and f"Prometheus textfile: {tf}/ceiling.prom" in r.stdout, r.stderr
    assert os.listdir(tf) == ["ceiling.prom"]
    text = node_exporter_page(tf)
    assert "node_textfile_scrape_error 0" in text
    assert 'ceiling_check_severity{check="os.clocksource"}' in text             # the check's, kept after the bench
    assert 'ceiling_metric_value{metric="stream.triad",placement="compact",threads="' in text
    assert 'ceiling_verdict_info{kind="' in text
    with Store(db) as s:
        assert len(s.list()) == 2
