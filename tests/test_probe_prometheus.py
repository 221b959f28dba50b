"""ceiling probe's Prometheus side, with the real parts: Debian's ``prometheus`` scrapes the probe's
endpoint on loopback and its HTTP API is queried for the series; every panel of the Grafana dashboard
(dashboards/ceiling-probe.json) runs its PromQL there and must return series; Debian's
``prometheus-node-exporter`` reads the probe's textfile. A port in use and a textfile directory that is
not one are one line and their exit codes. No timing figure is asserted: only series, labels and signs.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OPS = {"read", "write", "md.stat", "md.read", "md.delete", "md.create"}
HOME = tempfile.mkdtemp(prefix="ceiling-probe-prom-test-")
ENV = {**os.environ, "XDG_DATA_HOME": HOME}
SMALL = ["--data-size", "2M", "--files", "8", "--interval", "0.1", "--window", "1"]


@pytest.fixture(scope="module", autouse=True)
def _history_home():
    yield
    shutil.rmtree(HOME, ignore_errors=True)


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ceiling(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "ceiling", *args], capture_output=True, text=True, timeout=timeout,
                          env=ENV)


def get(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def wait_for(fn, timeout: float = 90, what: str = ""):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            got = fn()
            if got:
                return got
        except OSError as e:
            last = e
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what} ({last})")


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
    port = free_port()
    tf = tmp_path / "textfile"
    tf.mkdir()
    d = tmp_path / "fs"
    d.mkdir(mode=0o700)
    p = subprocess.Popen([sys.executable, "-m", "ceiling", "probe", "--dir", str(d), *SMALL, "--duration", "300",
                          "--listen", f"127.0.0.1:{port}", "--textfile", str(tf), "--db", str(tmp_path / "h.db")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        wait_for(lambda: "ceiling_probe_latency_seconds" in get(f"http://127.0.0.1:{port}/metrics"), 60, "the probe")
        yield port, tf
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "stopped on SIGTERM" in out


def test_endpoint_is_prometheus_exposition_with_a_histogram_per_op(running_probe):
    from prometheus_client.parser import text_string_to_metric_families
    port, _ = running_probe
    wait_for(lambda: "ceiling_probe_slowdown_ratio{" in get(f"http://127.0.0.1:{port}/metrics"), 30, "a window")
    fams = {f.name: f for f in text_string_to_metric_families(get(f"http://127.0.0.1:{port}/metrics"))}
    assert fams["ceiling_probe_latency_seconds"].type == "histogram"
    assert {s.labels["op"] for s in fams["ceiling_probe_latency_seconds"].samples} == OPS
    assert {s.labels["op"] for s in fams["ceiling_probe_slowdown_ratio"].samples} == OPS
    assert all(s.value > 0 for s in fams["ceiling_probe_slowdown_ratio"].samples)


@pytest.mark.skipif(shutil.which("prometheus") is None,
                    reason="Debian's prometheus is not installed (apt-get install prometheus; .ci/run does)")
def test_prometheus_scrapes_the_probe_and_every_dashboard_panel_returns_series(running_probe, tmp_path):
    port, _ = running_probe
    api = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                   "scrape_configs:\n  - job_name: ceiling_probe\n"
                   f"    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n")
    log = open(tmp_path / "prometheus.log", "w")
    prom = subprocess.Popen(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{api}"], stdout=log, stderr=log)

    def query(expr: str):
        body = json.loads(get(f"http://127.0.0.1:{api}/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
        assert body["status"] == "success", body
        return body["data"]["result"]
    try:
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
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        log.close()


@pytest.mark.skipif(shutil.which("prometheus-node-exporter") is None,
                    reason="Debian's prometheus-node-exporter is not installed (.ci/run installs it)")
def test_node_exporter_reads_the_textfile(running_probe, tmp_path):
    _, tf = running_probe
    wait_for(lambda: (tf / "ceiling_probe.prom").exists(), 30, "the textfile")
    assert [n for n in os.listdir(tf)] == ["ceiling_probe.prom"]          # no temporary file left beside it
    port = free_port()
    ne = subprocess.Popen(["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}",
                           "--collector.disable-defaults", "--collector.textfile",
                           f"--collector.textfile.directory={tf}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        text = wait_for(lambda: get(f"http://127.0.0.1:{port}/metrics"), 30, "node_exporter")
    finally:
        ne.terminate()
        ne.wait(timeout=30)
    assert "node_textfile_scrape_error 0" in text
    for op in OPS:
        assert f'ceiling_probe_latency_seconds_count{{op="{op}"}}' in text
