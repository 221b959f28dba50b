"""Debian's ``prometheus`` and ``prometheus-node-exporter`` on loopback, for the tests of what ceiling serves
to them (probe, monitor, run --textfile): a free port, an HTTP GET, a wait until something answers, a
``ceiling`` server started and stopped on SIGTERM, a Prometheus that scrapes it (with its query API), and a
node_exporter that reads a textfile directory. The skip markers carry the reasons the tests have always given.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

needs_prometheus = pytest.mark.skipif(
    shutil.which("prometheus") is None,
    reason="Debian's prometheus is not installed (apt-get install prometheus; .ci/run does)")
needs_node_exporter = pytest.mark.skipif(
    shutil.which("prometheus-node-exporter") is None,
    reason="Debian's prometheus-node-exporter is not installed (.ci/run installs it)")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


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


@contextlib.contextmanager
def serving_ceiling(tmp_path, args, series: str, what: str, env):
    """``python -m ceiling ARGS`` serving /metrics on a free loopback port, writing its textfile in
    TMP_PATH/textfile and its history in TMP_PATH/h.db; waited for until SERIES is on the page, yields
    (port, textfile directory); stopped with SIGTERM, after which it must exit 0 saying so."""
    port = free_port()
    tf = tmp_path / "textfile"
    tf.mkdir()
    p = subprocess.Popen([sys.executable, "-m", "ceiling", *args, "--listen", f"127.0.0.1:{port}",
                          "--textfile", str(tf), "--db", str(tmp_path / "h.db")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for(lambda: series in get(f"http://127.0.0.1:{port}/metrics"), 60, what)
        yield port, tf
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "stopped on SIGTERM" in out


@contextlib.contextmanager
def prometheus_scraping(tmp_path, job: str, port: int):
    """Debian's prometheus scraping 127.0.0.1:PORT as JOB every second (config, TSDB and log under TMP_PATH);
    yields query(expr) -> the result list of its instant-query API, asserting the API said success."""
    api = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                   f"scrape_configs:\n  - job_name: {job}\n"
                   f"    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n")
    log = open(tmp_path / "prometheus.log", "w")
    prom = subprocess.Popen(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{api}"], stdout=log, stderr=log)

    def query(expr: str):
        body = json.loads(get(f"http://127.0.0.1:{api}/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
        assert body["status"] == "success", body
        return body["data"]["result"]
    try:
        yield query
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        log.close()


def node_exporter_page(textfile_dir) -> str:
    """The /metrics page of Debian's prometheus-node-exporter with only its textfile collector, reading
    TEXTFILE_DIR; started on a free loopback port and stopped once the page is read."""
    port = free_port()
    ne = subprocess.Popen(["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}",
                           "--collector.disable-defaults", "--collector.textfile",
                           f"--collector.textfile.directory={textfile_dir}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return wait_for(lambda: get(f"http://127.0.0.1:{port}/metrics"), 30, "node_exporter")
    finally:
        ne.terminate()
        ne.wait(timeout=30)
