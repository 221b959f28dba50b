"""What a summary says first: the headline metrics, and the subsystem furthest
below its peak.

Pure functions over a results.model.Run; the terminal and HTML reports both
read them, so the two always tell the same story.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..results.placements import PLACEMENT_TITLES
from ..results.model import FAIL, WARN, Finding, Metric, Run
# The sentence is for a reader, so it is formatted exactly as the reports format
# numbers; report._format imports nothing from analysis, so there is no cycle.
from ..report._format import machine_peak, pct, with_unit

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

HEADLINE = ("clock.single", "clock.all", "flops.dp.node", "dgemm.node", "stream.triad",
            "latency.l1", "latency.l2", "latency.l3", "latency.dram",
            "c2c.smt", "c2c.l2", "c2c.l3", "c2c.socket", "c2c.cross_socket",
            *(f"net.pingpong.{kind}.{p}" for p in PLACEMENT_TITLES for kind in ("latency", "bandwidth")))

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

# Suffixes that name a kernel variant: such a metric measures the variant, not
# the subsystem (the widest variant carries the plain name).
ISA_SUFFIXES = frozenset({"scalar", "sse2", "avx", "avx2", "avx512", "neon", "sve"})

# Machine.peaks keys behind each metric, for when a metric carries no Peak itself.
MACHINE_PEAK = {
    "flops.dp.core": "flops.dp.core", "flops.sp.core": "flops.sp.core",
    "flops.dp.node": "flops.dp.node", "flops.sp.node": "flops.sp.node",
    "dgemm.node": "flops.dp.node", "stream.triad": "membw.node",
}


def label(name: str) -> str:
    """The words for a metric name; the name itself when it has none."""
    if name in LABELS:
        return LABELS[name]
    base, _, last = name.rpartition(".")
    if last in ISA_SUFFIXES and base in LABELS:
        return f"{LABELS[base]} ({last.upper()})"
    return name


def subsystem(name: str) -> str:
    head = name.split(".", 1)[0]
    if name.startswith("bandwidth."):
        return "Memory bandwidth" if name == "bandwidth.dram" else "Cache bandwidth"
    return SUBSYSTEMS.get(head, head.capitalize())


def is_variant(name: str) -> bool:
    return name.rpartition(".")[2] in ISA_SUFFIXES


def _eligible(m: Metric) -> bool:
    return (m.efficiency is not None and m.value is not None and m.valid
            and m.peak is not None and m.peak.known and not is_variant(m.name))


def furthest_below_peak(run: Run) -> Optional[Tuple[Metric, str]]:
    """The valid metric with the lowest known efficiency, and a sentence saying so.

    None when no metric has a known peak; ``unknown_peaks`` then says why.
    Per-ISA variants are left out: they rate a kernel variant, not the node.
    STREAM copy/scale/add stand aside when the triad has a known efficiency.
    """
    cands = [m for m in run.metrics if _eligible(m)]
    if any(m.name == "stream.triad" for m in cands):
        # STREAM's headline is the triad; copy and scale count no write-allocate
        # traffic, so they read lower without the memory being any slower.
        cands = [m for m in cands if m.name == "stream.triad" or not m.name.startswith("stream.")]
    if not cands:
        return None
    m = min(cands, key=lambda x: (x.efficiency, x.name))
    return m, sentence(m)


def sentence(m: Metric) -> str:
    """ "Memory bandwidth: STREAM triad 38.1 GB/s is 61% of the 62.4 GB/s peak (...)"."""
    text = (f"{subsystem(m.name)}: {label(m.name)} {with_unit(m.value, m.unit)} is "
            f"{pct(m.efficiency)} of the {with_unit(m.peak.value, m.peak.unit or m.unit, sig=4)} peak")
    if m.peak.provenance:
        text += f" ({m.peak.provenance})"
    return text


def unknown_peaks(run: Run) -> List[Tuple[str, str]]:
    """(metric name, reason) for headline metrics whose peak is unknown.

    The reason is the peak's provenance when the bench attached an unknown
    Peak, else the machine's peak of the same key, else "no theoretical peak
    is defined for it".
    """
    out = []
    for m in run.metrics:
        if m.value is None or is_variant(m.name) or (m.peak is not None and m.peak.known):
            continue
        if m.name not in MACHINE_PEAK and m.peak is None:
            continue     # latencies and the like have no peak by nature: nothing to explain
        reason = m.peak.provenance if m.peak is not None else ""
        if not reason:
            mp = machine_peak(run.machine, MACHINE_PEAK.get(m.name, m.name))
            reason = mp.provenance if mp is not None and not mp.known else ""
        out.append((m.name, reason or "no theoretical peak was recorded for it"))
    return out


def verdict(run: Run) -> str:
    """The one sentence a summary leads with."""
    found = furthest_below_peak(run)
    if found is not None:
        return "Furthest below peak - " + found[1]
    unknown = unknown_peaks(run)
    if unknown:
        # One reason often covers many metrics (every storage figure on one device): say it once.
        by_reason: Dict[str, List[str]] = {}
        for n, why in unknown:
            by_reason.setdefault(why, []).append(label(n))
        parts = []
        for why, names in by_reason.items():
            who = names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"
            parts.append(f"{who}: {why.removeprefix('unknown: ')}")
        return "No efficiency can be given: every peak is unknown. " + "; ".join(parts)
    if not run.metrics:
        return "Nothing was measured in this run."
    return "No measured metric has a theoretical peak to compare with."


def headline(run: Run) -> List[Tuple[str, Metric]]:
    """(label, metric) for the metrics a summary shows, in a fixed order, those present."""
    out = []
    for name in HEADLINE:
        m = run.metric(name)
        if m is None and name == "flops.dp.node":
            m = run.metric("flops.dp.core")
            name = "flops.dp.core"
        if m is not None:
            out.append((label(name), m))
    return out


def problems(run: Run) -> List[Tuple[Finding, int]]:
    """Fail and warn findings, fails first, each with how many more share its why and fix.

    The same cause met in several steps (competing load during each bench) is
    one problem to the reader: the first finding stands for the group.
    """
    groups: List[Tuple[Finding, int]] = []
    index = {}
    for status in (FAIL, WARN):
        for f in run.findings:
            if f.status != status:
                continue
            key = (f.status, f.why, f.fix) if (f.why or f.fix) else (f.status, f.id, f.title)
            if key in index:
                first, n = groups[index[key]]
                groups[index[key]] = (first, n + 1)
            else:
                index[key] = len(groups)
                groups.append((f, 0))
    return groups
