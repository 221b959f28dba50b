"""The monitor's metrics for Prometheus: the last sample as an exposition page (Prometheus's text
format 0.0.4, written here: ``MonitorCollector.page``), served and written through the probe's exporter
(report/prometheus.py: ``serve_page``, ``textfile_path``, ``write_textfile``; ``DIR/ceiling_monitor.prom``).

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

from typing import Any, Dict, List, Optional, Sequence, Tuple

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


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _num(v: float) -> str:
    return repr(float(v))


class MonitorCollector:
    """Holds the last sample and its exposition page (text format 0.0.4), made on the first scrape after
    each sample and served as it is until the next: a scrape of 10,000 jobs' series is then one write of
    bytes (prometheus_client's collectors build an object per sample, 1.6 s for 70,000 of them on the
    2-CPU host this was written on; benchmarks/monitor_scrape.py)."""

    def __init__(self) -> None:
        import threading
        self._lock = threading.Lock()
        self._node: Dict[str, float] = {}
        self._jobs: List[Tuple[Any, Dict[str, float]]] = []
        self._self: Tuple[float, int] = (0.0, 0)
        self._page: Optional[bytes] = None

    def update(self, node: Dict[str, float], jobs: Sequence[Tuple[Any, Dict[str, float]]],
               self_cpu_s: float, samples: int) -> None:
        with self._lock:
            self._node, self._jobs, self._self = dict(node), list(jobs), (self_cpu_s, samples)
            self._page = None

    def page(self) -> bytes:
        """The exposition page of the last sample (what /metrics serves and the textfile holds)."""
        with self._lock:
            if self._page is None:
                self._page = self._render().encode()
            return self._page

    def _render(self) -> str:
        node, jobs, (cpu_s, samples) = self._node, self._jobs, self._self
        fams: Dict[str, Tuple[str, str, List[str]]] = {}

        def add(name: str, doc: str, labels: Sequence[Tuple[str, str]], v: float, kind: str = "gauge") -> None:
            fam = fams.setdefault(name, (kind, doc, []))
            lab = ",".join(f'{k}="{_esc(x)}"' for k, x in labels)
            sample = name + ("_total" if kind == "counter" else "")
            fam[2].append(f"{sample}{{{lab}}} {_num(v)}" if lab else f"{sample} {_num(v)}")
        for key, v in node.items():
            head, _, rest = key.partition(".")
            if head in _NODE:
                name, doc, labels = _NODE[head]
                add(name, doc, list(zip(labels, rest.split(".", len(labels) - 1))), v)
            elif head == "disk":
                dev, _, what = rest.rpartition(".")
                kind, direction = _DISK.get(what, ("", ""))
                if kind == "busy":
                    add("ceiling_monitor_disk_busy_ratio", "Fraction of the interval the disk had I/O in flight",
                        [("device", dev)], v)
                elif kind == "bytes":
                    add("ceiling_monitor_disk_bytes_per_second", "Disk throughput",
                        [("device", dev), ("direction", direction)], v)
                elif kind == "ops":
                    add("ceiling_monitor_disk_operations_per_second", "Disk operations completed",
                        [("device", dev), ("direction", direction)], v)
            elif head == "net":
                nic, _, what = rest.rpartition(".")
                if what in _NET:
                    add("ceiling_monitor_network_bytes_per_second", "Network throughput",
                        [("interface", nic), ("direction", _NET[what])], v)
        for name, doc, kind in _JOB_FAMILIES:           # in this order, present even with no job
            fams.setdefault(name, (kind, doc, []))
        seen = set()
        for j, r in reversed(jobs):               # one series per job id (the newest, should two share it)
            if j.job_id in seen:
                continue
            seen.add(j.job_id)
            lv = [("job_id", j.job_id), ("user", j.user or ("" if j.uid is None else str(j.uid)))]
            for name, v in (("ceiling_monitor_job_cpus", j.cpus), ("ceiling_monitor_job_cpu_busy", r.get("cpu_busy")),
                            ("ceiling_monitor_job_cpu_seconds", j.cpu_s), ("ceiling_monitor_job_memory_bytes",
                                                                           j.mem_bytes),
                            ("ceiling_monitor_job_memory_peak_bytes", j.mem_peak_bytes)):
                if v is not None:
                    kind, doc, _ = fams[name]
                    add(name, doc, lv, v, kind)
            for direction, v in (("read", j.read_bytes), ("write", j.write_bytes)):
                if v is not None:
                    add("ceiling_monitor_job_io_bytes", "The job's storage I/O", lv + [("direction", direction)], v,
                        "counter")
        add("ceiling_monitor_self_cpu_seconds", "CPU time the monitor itself used", [], cpu_s, "counter")
        add("ceiling_monitor_samples", "Samples the monitor took", [], samples, "counter")
        out = []
        for name, (kind, doc, lines) in fams.items():
            if lines:      # text format 0.0.4: a counter's family is named as its samples, _total
                head = name + "_total" if kind == "counter" else name
                out.append(f"# HELP {head} {doc}\n# TYPE {head} {kind}\n")
                out.append("\n".join(lines) + "\n")
        return "".join(out)


_JOB_FAMILIES = (
    ("ceiling_monitor_job_cpus", "CPUs the job may run on", "gauge"),
    ("ceiling_monitor_job_cpu_busy", "CPUs the job kept busy over the interval", "gauge"),
    ("ceiling_monitor_job_cpu_seconds", "CPU time the job used", "counter"),
    ("ceiling_monitor_job_memory_bytes", "The job's memory now", "gauge"),
    ("ceiling_monitor_job_memory_peak_bytes", "The job's memory peak", "gauge"),
    ("ceiling_monitor_job_io_bytes", "The job's storage I/O", "counter"),
)
