"""The words a report uses for what results name by key: metrics, subsystems,
check areas, and the verdict the analysis stored.

Display names live here and nowhere below: measurements and analysis speak in
keys ("stream.triad", "cpu"), reports turn keys into words. The terminal and
the HTML report both read this module, so they always tell the same story.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..analysis.summary import ISA_SUFFIXES
from ..results.machine_view import as_dict
from ..results.model import Metric, Run
from ..results.placements import PLACEMENT_TITLES
from ..units import pct, size, with_unit

# Names a summary shows, in the order it shows them, with the words a user reads.
LABELS = {
    "clock.single": "Clock (one core busy)",
    "clock.all": "Clock (all cores busy)",
    "flops.dp.core": "DP flops (one core)",
    "flops.sp.core": "SP flops (one core)",
    "flops.dp.node": "DP flops (all cores)",
    "flops.sp.node": "SP flops (all cores)",
    "dgemm.node": "DGEMM (all cores)",
    "stream.copy": "STREAM copy",
    "stream.scale": "STREAM scale",
    "stream.add": "STREAM add",
    "stream.triad": "STREAM triad",
    "bandwidth.l1": "L1 load bandwidth",
    "bandwidth.l2": "L2 load bandwidth",
    "bandwidth.l3": "L3 load bandwidth",
    "bandwidth.dram": "DRAM load bandwidth",
    "latency.l1": "L1 latency",
    "latency.l2": "L2 latency",
    "latency.l3": "L3 latency",
    "latency.dram": "DRAM latency",
    "latency.l1.small_pages": "L1 latency",
    "latency.l2.small_pages": "L2 latency",
    "latency.l3.small_pages": "L3 latency",
    "latency.dram.small_pages": "DRAM latency",
    "latency.numa_factor": "Remote/local NUMA latency",
    "c2c.smt": "Core-to-core, SMT siblings",
    "c2c.l2": "Core-to-core, shared L2",
    "c2c.l3": "Core-to-core, shared L3",
    "c2c.socket": "Core-to-core, same socket",
    "c2c.cross_socket": "Core-to-core, across sockets",
}

for _key, _words in PLACEMENT_TITLES.items():
    LABELS[f"net.pingpong.latency.{_key}"] = f"MPI latency ({_words})"
    LABELS[f"net.pingpong.bandwidth.{_key}"] = f"MPI ping-pong bandwidth ({_words})"
    LABELS[f"net.bw.{_key}"] = f"MPI streaming bandwidth ({_words})"
LABELS.update({
    "net.barrier": "MPI Barrier", "net.allreduce.8B": "MPI Allreduce 8 B", "net.allreduce.1MiB": "MPI Allreduce 1 MiB",
    "net.alltoall.4KiB": "MPI Alltoall 4 KiB",
    "storage.seq.write.fpp": "Sequential write (a file per thread)",
    "storage.seq.read.fpp": "Sequential read (a file per thread)",
    "storage.seq.write.shared": "Sequential write (one shared file)",
    "storage.seq.read.shared": "Sequential read (one shared file)",
    "storage.iops.randread": "Random 4 KiB reads", "storage.iops.randwrite": "Random 4 KiB writes",
    "storage.queue.read": "Sequential read, queued", "storage.queue.write": "Sequential write, queued",
    "storage.queue.randread": "Random 4 KiB reads, queued", "storage.queue.randwrite": "Random 4 KiB writes, queued",
    "storage.md.create": "File creates", "storage.md.stat": "File stats", "storage.md.unlink": "File removals",
})

# What each verb's summary leads with, those measured: a storage or network run shows its own.
HEADLINE = ("clock.single", "clock.all", "flops.dp.node", "dgemm.node", "stream.triad",
            "latency.l1", "latency.l1.small_pages", "latency.l2", "latency.l2.small_pages",
            "latency.l3", "latency.l3.small_pages", "latency.dram", "latency.dram.small_pages",
            "c2c.smt", "c2c.l2", "c2c.l3", "c2c.socket", "c2c.cross_socket",
            *(f"net.{kind}.{p}" for p in PLACEMENT_TITLES
              for kind in ("pingpong.latency", "pingpong.bandwidth", "bw")),
            "net.barrier", "net.allreduce.8B", "net.allreduce.1MiB", "net.alltoall.4KiB",
            "storage.seq.write.fpp", "storage.seq.read.fpp", "storage.seq.write.shared", "storage.seq.read.shared",
            "storage.iops.randread", "storage.iops.randwrite", "storage.queue.read", "storage.queue.write",
            "storage.queue.randread", "storage.queue.randwrite", "storage.md.create", "storage.md.stat",
            "storage.md.unlink")

# The peaks of the machine model and the metrics they are peaks of: a run shows a peak
# only when it measured something it is the peak of (no flop/s peaks under a network run).
PEAK_FAMILIES = {"flops": ("flops.", "dgemm."), "membw": ("stream.", "bandwidth.dram")}

# First dotted component -> the subsystem a user would name.
SUBSYSTEMS = {
    "clock": "Clock",
    "flops": "Compute",
    "dgemm": "Compute",
    "stream": "Memory bandwidth",
    "latency": "Memory latency",
    "c2c": "Core-to-core latency",
    "network": "Network",
    "net": "Network",
    "storage": "Storage",
}

# The check areas (the first component of a finding id), in report order: the node's
# condition (what can change from one hour to the next) first, then its configuration.
AREA_TITLES = {
    "thermal": "Throttling",
    "ras": "Memory and machine-check errors",
    "load": "Competing load",
    "noise": "OS noise",
    "placement": "Placement stability",
    "mem": "Memory",
    "fs": "File systems",
    "cpu": "CPU clock and power",
    "numa": "NUMA",
    "os": "Kernel and OS",
    "limits": "Resource limits",
    "cgroup": "Containers and cgroups",
    "perf": "Profiling support",
    "irq": "Interrupts",
    "env": "Environment (VM, BLAS variables)",
}


def label(name: str) -> str:
    """The words for a metric name; the name itself when it has none."""
    if name in LABELS:
        return LABELS[name]
    base, _, last = name.rpartition(".")
    if last in ISA_SUFFIXES and base in LABELS:
        return f"{LABELS[base]} ({last.upper()})"
    return name


def page_words(m: Metric) -> str:
    """"2 MiB pages", "4 KiB pages": the page size a latency figure was measured with."""
    n = m.context.get("page_bytes")
    return f"{size(n)} pages" if isinstance(n, int) and n > 0 else "huge pages, size unknown"


def subsystem(name: str) -> str:
    head = name.split(".", 1)[0]
    if name.startswith("bandwidth."):
        return "Memory bandwidth" if name == "bandwidth.dram" else "Cache bandwidth"
    return SUBSYSTEMS.get(head, head.capitalize())


def headline(run: Run) -> List[Tuple[str, Metric]]:
    """(label, metric) for the metrics a summary shows, in a fixed order, those present."""
    out = []
    for name in HEADLINE:
        m = run.metric(name)
        if m is None and name == "flops.dp.node":
            m = run.metric("flops.dp.core")
            name = "flops.dp.core"
        if m is not None:
            text = label(name)
            at = m.context.get("plateau_size_bytes") or m.context.get("bytes")
            if name.startswith(("net.pingpong.bandwidth.", "net.bw.")) and isinstance(at, int):
                text += f" at {size(at)}"
            ranks = m.context.get("k_ranks")
            if name.startswith(("net.barrier", "net.allreduce", "net.alltoall")) and isinstance(ranks, int):
                text += f", {ranks} ranks"
            if name.startswith("latency.") and m.context.get("pages"):
                text += f" ({page_words(m)})"
            depth = m.context.get("in_flight")
            if name.startswith("storage.queue.") and isinstance(depth, int):
                text += f" ({depth} in flight)"
            out.append((text, m))
    return out


def shown_peaks(run: Run) -> List[Tuple[str, object]]:
    """The machine's peaks a report of this run shows: all of them when it measured nothing
    (``ceiling machine``), else those of the metrics it measured."""
    items = sorted((as_dict(run.machine).get("peaks") or {}).items())
    if not run.metrics:
        return items
    names = [m.name for m in run.metrics]
    keep = {fam for fam, prefixes in PEAK_FAMILIES.items() if any(n.startswith(prefixes) for n in names)}
    return [(k, v) for k, v in items if k.split(".", 1)[0] in keep or k.split(".", 1)[0] not in PEAK_FAMILIES]


def verdict_text(run: Run) -> str:
    """The one sentence a summary leads with, from the verdict the analysis stored."""
    v = run.analysis.verdict
    if v is None:
        return "No verdict was recorded for this run."
    if v.kind == "below_peak" and v.peak is not None:
        text = (f"Furthest below peak - {subsystem(v.metric)}: {label(v.metric)} {with_unit(v.value, v.unit)} is "
                f"{pct(v.efficiency)} of the {with_unit(v.peak.value, v.peak.unit or v.unit, sig=4)} peak")
        if v.peak.provenance:
            text += f" ({v.peak.provenance})"
        if v.evidence:      # unstable (the median quoted), or a lower metric the environment set
            text += f"; {v.evidence}"
        return text
    if v.kind == "unknown_peaks":
        # One reason often covers many metrics (every storage figure on one device): say it once.
        by_reason: Dict[str, List[str]] = {}
        for item in v.unknown:
            by_reason.setdefault(item.get("reason", ""), []).append(label(item.get("metric", "")))
        parts = []
        for why, names in by_reason.items():
            who = names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"
            parts.append(f"{who}: {why.removeprefix('unknown: ')}")
        return "No efficiency can be given: every peak is unknown. " + "; ".join(parts)
    if v.kind == "nothing_measured":
        return "Nothing was measured in this run."
    if v.kind == "no_verdict":
        return "No verdict: " + (v.evidence or "the measurements were disturbed")
    return "No measured metric has a theoretical peak to compare with."


def area_title(area: str) -> str:
    return AREA_TITLES.get(area, area)


def verdict_lead(text: str) -> Optional[Tuple[str, str]]:
    """("Furthest below peak", the rest) when the sentence leads with it, else None (HTML bolds it)."""
    lead = "Furthest below peak - "
    return ("Furthest below peak", text[len(lead):]) if text.startswith(lead) else None
