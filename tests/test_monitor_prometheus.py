"""ceiling monitor's Prometheus side with the real parts: Debian's ``prometheus`` scrapes the monitor on
loopback and its HTTP API returns a node series and the Slurm job series of a recorded cgroup tree; a
job whose cgroup goes is gone from the next scrape (bounded cardinality); Debian's
``prometheus-node-exporter`` reads the monitor's textfile. No timing figure is asserted."""
import json
import re
import shutil
from pathlib import Path

import pytest

from prometheus_servers import (get, needs_node_exporter, needs_prometheus, node_exporter_page,
                                prometheus_scraping, serving_ceiling, wait_for)
from test_probe_prometheus import ENV

FIX = Path(__file__).parent / "fixtures" / "slurm_cgroups"
REPO = Path(__file__).parent.parent


@pytest.fixture
def running_monitor(tmp_path):
    root = tmp_path / "node"
    shutil.copytree(FIX / "v2", root, symlinks=True)
    with serving_ceiling(tmp_path, ["monitor", "--interval", "0.5", "--duration", "300", "--slurm-root", str(root)],
                         "ceiling_monitor_cpu_ratio", "the monitor", ENV) as (port, tf):
        yield port, tf, root


def test_job_series_end_with_the_job(running_monitor):
    port, _, root = running_monitor
    url = f"http://127.0.0.1:{port}/metrics"
    assert 'ceiling_monitor_job_memory_bytes{job_id="4242"' in get(url)
    shutil.rmtree(root / "sys/fs/cgroup/system.slice/slurmstepd.scope/job_4242")      # the job ended
    wait_for(lambda: 'job_id="4242"' not in get(url), 30, "job 4242's series to go")
    assert 'ceiling_monitor_job_memory_bytes{job_id="4243"' in get(url)


@needs_prometheus
def test_prometheus_scrapes_a_node_series_and_a_job_series(running_monitor, tmp_path):
    port, _, _ = running_monitor
    with prometheus_scraping(tmp_path, "ceiling_monitor", port) as query:
        cpu = wait_for(lambda: query('ceiling_monitor_cpu_ratio{mode="user"}'), 90, "a node series")
        assert len(cpu) == 1 and 0 <= float(cpu[0]["value"][1]) <= 1
        assert cpu[0]["metric"]["job"] == "ceiling_monitor"
        mem = wait_for(lambda: query("ceiling_monitor_job_memory_bytes"), 60, "a job series")
        assert {(r["metric"]["job_id"], float(r["value"][1])) for r in mem} == {("4242", 2147483648.0),
                                                                               ("4243", 1048576.0)}
        cpus = query("ceiling_monitor_job_cpus")
        assert {r["metric"]["job_id"]: float(r["value"][1]) for r in cpus} == {"4242": 4.0, "4243": 5.0}
        # every panel of the monitor's Grafana dashboard runs its PromQL here: it returns series wherever the
        # monitor exports its metric on this node (PSI, a disk, a network interface may be absent); the probe's
        # panel runs (its series come with a probe: test_probe_prometheus checks that expression)
        page = get(f"http://127.0.0.1:{port}/metrics")
        dash = json.loads((REPO / "dashboards" / "ceiling-monitor.json").read_text())
        assert len(dash["panels"]) >= 10
        for panel in dash["panels"]:
            for t in panel["targets"]:
                expr = t["expr"].replace("$__rate_interval", "15s").replace("$instance", ".*")
                metric = re.search(r"(ceiling_\w+)", expr).group(1)
                if metric.startswith("ceiling_probe_") or metric.removesuffix("_total") + "{" not in page \
                        and metric + "{" not in page:
                    query(expr)                                   # valid PromQL, whatever it returns here
                    continue
                got = wait_for(lambda: query(expr), 60, f"panel {panel['title']!r}: {expr}")
                if "job" in metric:
                    assert {r["metric"]["job_id"] for r in got} == {"4242", "4243"}, (panel["title"], got)


@needs_node_exporter
def test_node_exporter_reads_the_textfile(running_monitor):
    _, tf, _ = running_monitor
    wait_for(lambda: (tf / "ceiling_monitor.prom").exists(), 30, "the textfile")
    text = node_exporter_page(tf)
    assert "node_textfile_scrape_error 0" in text
    assert 'ceiling_monitor_job_cpus{job_id="4242"' in text and 'ceiling_monitor_cpu_ratio{mode="user"}' in text


def test_page_is_valid_exposition_and_holds_only_the_last_samples_jobs():
    from prometheus_client.parser import text_string_to_metric_families

    from ceiling.probes.jobs import JobRead
    from ceiling.report.prometheus_monitor import MonitorCollector
    c = MonitorCollector()
    odd = JobRead("9", "9@1:1", "slurm-v2", 0.0, user='a"b\\c\nd', cpus=2, cpu_s=1.5, read_bytes=10, write_bytes=0)
    c.update({"cpu.user": 0.25, "disk.dm-0.read_Bps": 5.0, "net.eth0.100.rx_Bps": 7.0, "psi.io.some": 0.5},
             [(odd, {"cpu_busy": 1.0})], 0.5, 3)
    fams = {f.name: f for f in text_string_to_metric_families(c.page().decode())}
    assert fams["ceiling_monitor_cpu_ratio"].samples[0].labels == {"mode": "user"}
    assert fams["ceiling_monitor_disk_bytes_per_second"].samples[0].labels == {"device": "dm-0",
                                                                               "direction": "read"}
    assert fams["ceiling_monitor_network_bytes_per_second"].samples[0].labels["interface"] == "eth0.100"
    assert fams["ceiling_monitor_pressure_ratio"].samples[0].labels == {"resource": "io", "kind": "some"}
    job = fams["ceiling_monitor_job_cpus"].samples[0]
    assert job.labels == {"job_id": "9", "user": 'a"b\\c\nd'} and job.value == 2
    assert fams["ceiling_monitor_job_cpu_seconds"].type == "counter"
    assert {s.labels["direction"]: s.value for s in fams["ceiling_monitor_job_io_bytes"].samples} == {
        "read": 10, "write": 0}
    c.update({"cpu.user": 0.25}, [], 0.6, 4)
    assert b"job_id" not in c.page()
