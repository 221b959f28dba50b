"""ceiling probe's Prometheus side, with the real parts: Debian's ``prometheus`` scrapes the probe's
endpoint on loopback and its HTTP API is queried for the series; every panel of the Grafana dashboard
(dashboards/ceiling-probe.json) runs its PromQL there and must return series; Debian's
``prometheus-node-exporter`` reads the probe's textfile. A port in use and a textfile directory that is
not one are one line and their exit codes. No timing figure is asserted: only series, labels and signs.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from prometheus_servers import (get, needs_node_exporter, needs_prometheus, node_exporter_page,
                                prometheus_scraping, serving_ceiling, wait_for)

REPO = Path(__file__).resolve().parents[1]
OPS = {"read", "write", "md.stat", "md.read", "md.delete", "md.create"}
HOME = tempfile.mkdtemp(prefix="ceiling-probe-prom-test-")
ENV = {**os.environ, "XDG_DATA_HOME": HOME}
SMALL = ["--data-size", "2M", "--files", "8", "--interval", "0.1", "--window", "1"]


@pytest.fixture(scope="module", autouse=True)
def _history_home():
    yield
    shutil.rmtree(HOME, ignore_errors=True)


def ceiling(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True, timeout=timeout,
                          env=ENV)


def test_port_in_use_is_one_line_and_exit_15(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        r = ceiling("probe", "--dir", str(tmp_path), *SMALL, "--duration", "0.1", "--listen", f"127.0.0.1:{port}")
    finally:
        s.close()
    assert r.returncode == 15 and r.stderr.count("\n") == 1 and "in use" in r.stderr, r.stderr
    assert not (tmp_path / "ceiling-probe-" / "data").exists()
    assert not any((p / "data").exists() for p in tmp_path.iterdir())     # refused before any preparation


@pytest.mark.parametrize("args, code, text", [
    (["--textfile", "/nonexistent/dir"], 4, "not a directory"),
    (["--listen", "9464"], 2, "not ADDRESS:PORT"),
])
def test_bad_exporter_options(tmp_path, args, code, text):
    r = ceiling("probe", "--dir", str(tmp_path), *SMALL, "--duration", "0.1", "--listen", "off", *args)
    assert r.returncode == code and text in r.stderr and r.stderr.count("\n") == 1, r.stderr


@pytest.fixture
def running_probe(tmp_path):
    d = tmp_path / "fs"
    d.mkdir(mode=0o700)
    with serving_ceiling(tmp_path, ["probe", "--dir", str(d), *SMALL, "--duration", "300"],
                         "ceiling_probe_latency_seconds", "the probe", ENV) as (port, tf):
        yield port, tf


def test_endpoint_is_prometheus_exposition_with_a_histogram_per_op(running_probe):
    from prometheus_client.parser import text_string_to_metric_families
    port, _ = running_probe
    wait_for(lambda: "ceiling_probe_slowdown_ratio{" in get(f"http://127.0.0.1:{port}/metrics"), 30, "a window")
    fams = {f.name: f for f in text_string_to_metric_families(get(f"http://127.0.0.1:{port}/metrics"))}
    assert fams["ceiling_probe_latency_seconds"].type == "histogram"
    assert {s.labels["op"] for s in fams["ceiling_probe_latency_seconds"].samples} == OPS
    assert {s.labels["op"] for s in fams["ceiling_probe_slowdown_ratio"].samples} == OPS
    assert all(s.value > 0 for s in fams["ceiling_probe_slowdown_ratio"].samples)


@needs_prometheus
def test_prometheus_scrapes_the_probe_and_every_dashboard_panel_returns_series(running_probe, tmp_path):
    port, _ = running_probe
    with prometheus_scraping(tmp_path, "ceiling_probe", port) as query:
        counts = wait_for(lambda: len(query("ceiling_probe_latency_seconds_count > 0")) == len(OPS)
                          and query("ceiling_probe_latency_seconds_count > 0"), 90, "prometheus to scrape the probe")
        assert {r["metric"]["op"] for r in counts} == OPS
        assert {r["metric"]["job"] for r in counts} == {"ceiling_probe"}
        ratios = wait_for(lambda: query("ceiling_probe_slowdown_ratio"), 60, "a slowdown ratio")
        assert {r["metric"]["op"] for r in ratios} == OPS and all(float(r["value"][1]) > 0 for r in ratios)
        dash = json.loads((REPO / "dashboards" / "ceiling-probe.json").read_text())
        for panel in dash["panels"]:
            for t in panel["targets"]:
                expr = t["expr"].replace("$__rate_interval", "15s").replace("$instance", ".*")
                got = wait_for(lambda: query(expr), 60, f"panel {panel['title']!r}: {expr}")
                assert {r["metric"].get("op") for r in got} == OPS, (panel["title"], got)


@needs_node_exporter
def test_node_exporter_reads_the_textfile(running_probe, tmp_path):
    _, tf = running_probe
    wait_for(lambda: (tf / "ceiling_probe.prom").exists(), 30, "the textfile")
    assert [n for n in os.listdir(tf)] == ["ceiling_probe.prom"]          # no temporary file left beside it
    text = node_exporter_page(tf)
    assert "node_textfile_scrape_error 0" in text
    for op in OPS:
        assert f'ceiling_probe_latency_seconds_count{{op="{op}"}}' in text
