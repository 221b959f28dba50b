"""The monitor's metrics for Prometheus: a collector (prometheus_client's custom-collector interface)
that turns the last sample into metric families when scraped, served and written through the probe's
exporter (report/prometheus.py: ``serve``, ``textfile_path``; ``DIR/ceiling_monitor.prom``).

Node series (the node is Prometheus's ``instance``):
- ``ceiling_monitor_cpu_ratio{mode}``: user, system, iowait, steal, idle, fractions of the node's CPU time;
- ``ceiling_monitor_memory_bytes{kind}``: total, available, used, cached, dirty;
- ``ceiling_monitor_disk_bytes_per_second{device,direction}``, ``..._disk_operations_per_second``,
  ``..._disk_busy_ratio{device}``; ``ceiling_monitor_network_bytes_per_second{interface,direction}``;
- ``ceiling_monitor_pressure_ratio{resource,kind}`` (PSI: the fraction of the interval stalled);
  ``ceiling_monitor_load{period}``.

Job series, labelled ``job_id`` and ``user``: ``ceiling_monitor_job_cpus`` (allowed),
``..._job_cpu_seconds_total``, ``..._job_cpu_busy`` (CPUs kept busy over the interval),
``..._job_memory_bytes``, ``..._job_memory_peak_bytes``, ``..._job_io_bytes_total{direction}``. Only
the jobs of the last sample are exported: a job's series end with it, so the cardinality is the
jobs running now (Prometheus marks them stale at its next scrape).

The monitor's own cost: ``ceiling_monitor_self_cpu_seconds_total`` and ``ceiling_monitor_samples_total``.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Sequence, Tuple

TEXTFILE = "ceiling_monitor.prom"

_NODE = {   # flat name's prefix -> (metric, help, label names, how the name's parts become labels)
    "cpu": ("ceiling_monitor_cpu_ratio", "Fraction of the node's CPU time in each mode", ("mode",)),
    "mem": ("ceiling_monitor_memory_bytes", "The node's memory", ("kind",)),
    "psi": ("ceiling_monitor_pressure_ratio", "Fraction of the interval tasks stalled (PSI)", ("resource", "kind")),
    "load": ("ceiling_monitor_load", "Load average", ("period",)),
}
_DISK = {"read_Bps": ("bytes", "read"), "write_Bps": ("bytes", "write"), "read_iops": ("ops", "read"),
         "write_iops": ("ops", "write"), "busy": ("busy", "")}
_NET = {"rx_Bps": "receive", "tx_Bps": "transmit"}


class MonitorCollector:
    """Holds the last sample; ``collect`` is called by prometheus_client on each scrape (its thread)."""

    def __init__(self) -> None:
        self._node: Dict[str, float] = {}
        self._jobs: List[Tuple[object, Dict[str, float]]] = []
        self._self: Tuple[float, int] = (0.0, 0)

    def update(self, node: Dict[str, float], jobs: Sequence[Tuple[object, Dict[str, float]]],
               self_cpu_s: float, samples: int) -> None:
        # new objects swapped in whole: a scrape sees the last sample or the one before, never half
        self._node, self._jobs, self._self = dict(node), list(jobs), (self_cpu_s, samples)

    def describe(self) -> Iterable:
        return []                      # no fixed set: the registry must not call collect at registration

    def collect(self) -> Iterable:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        node, jobs, (cpu_s, samples) = self._node, self._jobs, self._self
        fams: Dict[str, GaugeMetricFamily] = {}

        def g(name: str, doc: str, labels: Sequence[str]) -> GaugeMetricFamily:
            if name not in fams:
                fams[name] = GaugeMetricFamily(name, doc, labels=list(labels))
            return fams[name]
        for key, v in node.items():
            head, _, rest = key.partition(".")
            if head in _NODE:
                name, doc, labels = _NODE[head]
                g(name, doc, labels).add_metric(rest.split(".", len(labels) - 1), v)
            elif head == "disk":
                dev, _, what = rest.rpartition(".")
                kind, direction = _DISK.get(what, ("", ""))
                if kind == "busy":
                    g("ceiling_monitor_disk_busy_ratio", "Fraction of the interval the disk had I/O in flight",
                      ("device",)).add_metric([dev], v)
                elif kind == "bytes":
                    g("ceiling_monitor_disk_bytes_per_second", "Disk throughput",
                      ("device", "direction")).add_metric([dev, direction], v)
                elif kind == "ops":
                    g("ceiling_monitor_disk_operations_per_second", "Disk operations completed",
                      ("device", "direction")).add_metric([dev, direction], v)
            elif head == "net":
                nic, _, what = rest.rpartition(".")
                if what in _NET:
                    g("ceiling_monitor_network_bytes_per_second", "Network throughput",
                      ("interface", "direction")).add_metric([nic, _NET[what]], v)
        yield from fams.values()
        lab = ["job_id", "user"]
        cpus = GaugeMetricFamily("ceiling_monitor_job_cpus", "CPUs the job may run on", labels=lab)
        busy = GaugeMetricFamily("ceiling_monitor_job_cpu_busy", "CPUs the job kept busy over the interval",
                                 labels=lab)
        cpu = CounterMetricFamily("ceiling_monitor_job_cpu_seconds", "CPU time the job used", labels=lab)
        mem = GaugeMetricFamily("ceiling_monitor_job_memory_bytes", "The job's memory now", labels=lab)
        peak = GaugeMetricFamily("ceiling_monitor_job_memory_peak_bytes", "The job's memory peak", labels=lab)
        io = CounterMetricFamily("ceiling_monitor_job_io_bytes", "The job's storage I/O",
                                 labels=lab + ["direction"])
        seen = set()
        for j, r in reversed(jobs):               # one series per job id (the newest, should two share it)
            jid = getattr(j, "job_id")
            if jid in seen:
                continue
            seen.add(jid)
            lv = [jid, getattr(j, "user") or str(getattr(j, "uid") if getattr(j, "uid") is not None else "")]
            if j.cpus is not None:
                cpus.add_metric(lv, j.cpus)
            if "cpu_busy" in r:
                busy.add_metric(lv, r["cpu_busy"])
            if j.cpu_s is not None:
                cpu.add_metric(lv, j.cpu_s)
            if j.mem_bytes is not None:
                mem.add_metric(lv, j.mem_bytes)
            if j.mem_peak_bytes is not None:
                peak.add_metric(lv, j.mem_peak_bytes)
            if j.read_bytes is not None:
                io.add_metric(lv + ["read"], j.read_bytes)
            if j.write_bytes is not None:
                io.add_metric(lv + ["write"], j.write_bytes)
        yield from (cpus, busy, cpu, mem, peak, io)
        yield CounterMetricFamily("ceiling_monitor_self_cpu_seconds", "CPU time the monitor itself used",
                                  value=cpu_s)
        yield CounterMetricFamily("ceiling_monitor_samples", "Samples the monitor took", value=samples)
