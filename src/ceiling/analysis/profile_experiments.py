"""Compute or memory, without hardware counters: what the sensitivity
experiments of `ceiling profile --experiments` measured, and what it means.

The program is run again, uninstrumented, alone and beside each co-runner of
probes/corunner.py, the arms interleaved round by round; each arm's time is the
median of its rounds. Slowdowns are against the program alone:

    spin      the control: a co-runner that only computes, in registers. What
              sharing the CPUs (or a core's SMT sibling) costs any program.
    bandit    memory traffic at two intensities (half and full duty): a program
              bound by memory bandwidth slows with the traffic, more at full
              duty than at half (the slope of the Bandwidth Bandit method).
    pirate    the last-level cache taken: a program whose working set lives in
              that cache slows; one that streams from memory or computes in
              registers hardly does.

Net of the control (the co-runners share the CPUs alike), a slowdown of
SENSITIVE or more beside the bandit at full duty, at least as large as at half,
says memory bandwidth. So does the other direction, which a node with
bandwidth to spare needs (one bandit core cannot saturate it, and a program
pulling memory from one core is then hardly slowed): the co-runners report
their own rate, and the bandit losing PRESSURE or more of what it pulls alone
(net of what the computing control loses) says the program streams from
memory. Else a slowdown beside the pirate says the last-level cache (memory
latency once it is gone); else compute. Each needs the power to see it: a
reference thread that only streams memory, beside the same bandits, must slow
by twice SENSITIVE or more (bandwidth), and one working in half the last-level
cache must slow as much beside the pirates (cache). Where the bandits lack it (a
node with bandwidth to spare for one more core: the 2-vCPU development VMs) no
bandwidth verdict is drawn; where the pirates lack it (a cache smaller than the
machine says, as in a VM shown its host's; a cache the pirate does not share) no
cache verdict; and "compute" needs both. Else the verdict is "unknown", with the
figures, and the "cpu" bound stays. How sure: high when the net effect is at
least twice the spread of the program's own runs alone, else low.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..results.analysis import Bound
from ..results.model import OK, SKIPPED, WARN, Finding

SENSITIVE = 0.10      # a net slowdown of 10 % or more: sensitive to what the co-runner takes
PRESSURE = 0.15       # the bandit losing 15 % of its bandwidth (net) beside the program: it streams memory
ARMS = (("alone", None, 0.0), ("spin", "spin", 1.0), ("bandit_half", "bandit", 0.5),
        ("bandit", "bandit", 1.0), ("pirate", "pirate", 1.0))


def _taken(rates: Dict[str, Sequence[Optional[float]]], arm: str, alone: str) -> Optional[float]:
    """How much of its rate alone a co-runner lost beside the program (median over rounds)."""
    a = [x for x in rates.get(arm, []) if x]
    b = [x for x in rates.get(alone, []) if x]
    return 1 - statistics.median(a) / statistics.median(b) if a and b else None


def classify(times: Dict[str, Sequence[float]], rates: Optional[Dict[str, Sequence[Optional[float]]]] = None
             ) -> Dict[str, Any]:
    """{"bound": compute|memory, "by": bandwidth|cache|None, "net": {arm: net slowdown},
    "slowdown": {arm: slowdown}, "median_s": {arm: s}, "confidence": high|low, "words": ...}"""
    med = {arm: statistics.median(v) for arm, v in times.items() if v}
    alone = med.get("alone")
    if not alone:
        return {"bound": None, "why": "the program's runs alone did not finish"}
    slow = {arm: t / alone - 1 for arm, t in med.items() if arm != "alone"}
    control = slow.get("spin", 0.0)
    net = {arm: s - control for arm, s in slow.items() if arm != "spin"}
    own = times["alone"]
    noise = (max(own) - min(own)) / alone if len(own) > 1 else None
    # The other way round: what the program took from the co-runners. A program that streams
    # from memory takes bandwidth from the bandit even where, on a node with bandwidth to spare,
    # it is not slowed itself; net of what sharing the CPUs takes from the spinning control.
    lost_bw = _taken(rates or {}, "bandit", "bandit_alone")
    lost_cpu = _taken(rates or {}, "spin", "spin_alone")
    pressure = lost_bw - (lost_cpu or 0.0) if lost_bw is not None else None
    power = _taken(rates or {}, "reference_beside_bandit", "reference_alone")
    cache_power = _taken(rates or {}, "resident_beside_pirate", "resident_alone")
    sees_bw = power is not None and power >= 2 * SENSITIVE
    sees_cache = cache_power is not None and cache_power >= 2 * SENSITIVE
    # Slowed by the bandits, or taking from them, where the reference says they could not show it:
    # no bandwidth verdict, and no cache verdict either (the pirates move memory too).
    bandwidth_hint = net.get("bandit", 0.0) >= SENSITIVE or (pressure is not None and pressure >= PRESSURE)
    by: Optional[str] = None
    if sees_bw and net.get("bandit", 0.0) >= SENSITIVE and net.get("bandit", 0.0) >= net.get("bandit_half", 0.0) - 0.02:
        by = "bandwidth"
    elif sees_bw and pressure is not None and pressure >= PRESSURE:
        by = "bandwidth"
    elif sees_cache and net.get("pirate", 0.0) >= SENSITIVE and (sees_bw or not bandwidth_hint):
        by = "cache"
    base = {"net": net, "slowdown": slow, "median_s": med, "noise": noise, "power": power,
            "cache_power": cache_power, "pressure": pressure, "corunner_lost": {"bandit": lost_bw, "spin": lost_cpu}}
    # Could the experiment have seen it? Below twice SENSITIVE for a reference, whatever this
    # program showed beside that co-runner (beyond what the reference itself suffers) is noise.
    if by is None and not (sees_bw and sees_cache):
        lacking = []
        if not sees_bw:
            lacking.append(f"a thread that only streams memory slowed {power:.0%} beside the memory-traffic "
                           f"co-runners ({2 * SENSITIVE:.0%} needed), so this node has memory bandwidth to spare and a "
                           "program limited by its own cores' memory accesses would not slow either"
                           if power is not None else
                           "the memory-traffic co-runners' power could not be measured (no CPU for a reference)")
        if not sees_cache:
            lacking.append(f"a thread working in half the last-level cache slowed {cache_power:.0%} beside the "
                           f"cache-taking co-runners ({2 * SENSITIVE:.0%} needed), so they could not take enough of "
                           "it (a cache smaller than the machine reports, or not shared with them)"
                           if cache_power is not None else
                           "the cache-taking co-runners' power could not be measured (no CPU for a reference)")
        ruled = ([] if not sees_bw else [f"not memory bandwidth (net {_pct(net.get('bandit'))} beside the traffic)"]) + \
            ([] if not sees_cache else [f"not the last-level cache (net {_pct(net.get('pirate'))} with it taken)"])
        why = "inconclusive: " + "; ".join(ruled + lacking)
        return {"bound": None, "by": None, "why": why, "confidence": "low", "words": why, **base}
    effect = max([abs(net.get("bandit", 0.0)), abs(net.get("pirate", 0.0)), abs(pressure or 0.0) / 2])
    sure = "high" if noise is not None and effect >= 2 * noise and (by or effect < SENSITIVE / 2) else "low"
    words = (f"alone {alone:.3g} s (median of {len(own)}" + (f", spread {noise:.0%}" if noise is not None else "")
             + "); beside a co-runner that only computes " + f"{_pct(control)}, memory traffic at half duty "
             f"{_pct(slow.get('bandit_half'))} and full {_pct(slow.get('bandit'))}, the last-level cache taken "
             f"{_pct(slow.get('pirate'))}; net of the control: bandwidth {_pct(net.get('bandit'))}, cache "
             f"{_pct(net.get('pirate'))}"
             + (f"; the memory-traffic co-runner lost {lost_bw:.0%} of its bandwidth beside the program (the "
                f"computing one {lost_cpu:.0%} of its rate)" if lost_bw is not None and lost_cpu is not None else ""))
    return {"bound": "memory" if by else "compute", "by": by, "confidence": sure, "words": words, **base}


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:+.0%}"


def apply(result: Dict[str, Any], bounds: List[Bound], findings: List[Finding]
          ) -> Tuple[List[Bound], List[Finding]]:
    """The experiments' verdict in place of the undecided "cpu" bound (and its finding)."""
    if not result.get("bound"):
        if result.get("why"):
            findings = findings + [Finding(
                id="profile.experiments", status=SKIPPED, title="Sensitivity experiments: compute or memory "
                                                                "not decided", evidence=result["why"],
                why="Without hardware counters, the experiments are what tells the two apart; they need co-runners "
                    "able to take enough memory bandwidth, and the last-level cache, to matter.",
                fix="Run them on a node where the program uses most cores (co-runners then compete), or where "
                    "hardware counters are available.",
                data={k: result.get(k) for k in ("slowdown", "power", "cache_power", "pressure")})]
        return bounds, findings
    kind, by = result["bound"], result.get("by")
    what = {"bandwidth": "memory bandwidth", "cache": "the last-level cache (memory latency beyond it)",
            None: "computation"}[by]
    out = []
    for b in bounds:
        if b.bound == "cpu":
            b = Bound(b.subject, kind, b.share, f"{b.evidence}; sensitivity experiments: {what} "
                                                f"({result['words']}; confidence {result['confidence']})",
                      dict(b.data, experiments={k: result[k] for k in ("net", "slowdown", "confidence", "by")}))
        out.append(b)
    findings = [f for f in findings if f.id != "profile.cpu"]
    findings.append(Finding(
        id="profile.experiments", status=WARN if by else OK,
        title=f"Sensitivity experiments: the time on a CPU is {what}" + ("" if by else " (not memory)"),
        evidence=result["words"] + f"; confidence {result['confidence']}",
        why=("It slows when another core takes memory bandwidth: more cores or faster code will not help "
             "until it moves less data." if by == "bandwidth" else
             "It slows when its data is pushed out of the last-level cache: it lives in that cache." if by == "cache"
             else "Taking memory bandwidth or cache from it hardly slows it: its speed is the cores'."),
        fix=("Move less data: block for the caches, fuse loops, use smaller types; place threads over every "
             "memory channel (NUMA)." if by == "bandwidth" else
             "Keep the working set inside the cache (blocking), or give each process more of it (fewer per "
             "socket)." if by == "cache" else
             "Vectorise, use more cores, or reduce the work; compare with the node's peak ('ceiling bench "
             "compute')."),
        data={k: result[k] for k in ("net", "slowdown", "median_s", "confidence", "by")}))
    return out, findings
