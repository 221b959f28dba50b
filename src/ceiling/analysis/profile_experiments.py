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
cache verdict; and "compute" needs both.

What is not a slowdown decides too (issue 26: a register loop stayed undecided
on a node where the pirates had no power). The program's working set, the pages
it referenced in each window of a run alone: within one core's private caches
in FITS of the windows, it cannot be bound by the last-level cache or memory,
whatever the co-runners could show: compute (a slowdown beside them is then a
contradiction, and no verdict); beyond the last-level cache, the absence of
slowdowns does not make it compute. Beyond the last-level cache, and PAGES_SENSITIVE
or more faster with huge pages than without (the page size checked to have
changed, AnonHugePages), taking no bandwidth from the bandits (slowed beside
them it may be: their traffic raises the latency of memory): its loads wait on
memory one after another, through TLB misses: memory latency. Where the co-runners
cannot decide (bandits without power, or a disturbed node), its working-set rate may
(analysis/profile_footprint.py): the bytes of the pages it referenced per second of its
CPU, at its STREAMS_MIN to STREAMS_MAX of one core's streaming rate per second of CPU, with
its pages touched whole and data MANY times the last-level cache, say it spends that
share of its time moving data from memory at one core's rate: memory bandwidth (one
core's streaming rate), medium confidence at most. A node disturbed during
the experiments (competing load around them; the computing control, the same
work every round, alone at rates DISTURBED apart; the program's own runs alone
as far apart) lets no slowdown decide, only the working set. Else the verdict is
"unknown", with the figures and the reason, and the "cpu" bound stays. How
sure: high when the net effect is at least twice the spread of the program's
own runs alone (for latency, also bandwidth ruled out by bandits with power;
for a working set, the slowdowns agreeing on an undisturbed node), else low; for the
working-set rate medium (low on a disturbed node): a rate set beside a reference read at
another moment, pages its unit.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..results.analysis import Bound
from ..results.model import OK, SKIPPED, WARN, Finding
from .profile_footprint import (FITS, PAGES_SENSITIVE, page_effect, page_rate_ratio, stream_rate, streams,
                                working_set)

SENSITIVE = 0.10      # a net slowdown of 10 % or more: sensitive to what the co-runner takes
PRESSURE = 0.15       # the bandit losing 15 % of its bandwidth (net) beside the program: it streams memory
DISTURBED = 0.10      # the control's rate alone, or the program's time alone, 10 % apart between rounds
ARMS = (("alone", None, 0.0), ("spin", "spin", 1.0), ("bandit_half", "bandit", 0.5),
        ("bandit", "bandit", 1.0), ("pirate", "pirate", 1.0), ("pages", "pages", 0.0))


def _taken(rates: Dict[str, Sequence[Optional[float]]], arm: str, alone: str) -> Optional[float]:
    """How much of its rate alone a co-runner lost beside the program (median over rounds)."""
    a = [x for x in rates.get(arm, []) if x]
    b = [x for x in rates.get(alone, []) if x]
    return 1 - statistics.median(a) / statistics.median(b) if a and b else None


def _disturbed(rates: Dict[str, Sequence[Optional[float]]], noise: Optional[float]) -> List[str]:
    """Why the node was disturbed during the experiments, if it was: the computing control, which
    does the same work every round, ran at rates DISTURBED or more apart alone (something else
    took its CPU); or the program's own runs alone differed as much."""
    out = []
    spin = [x for x in rates.get("spin_alone", []) if x]
    if len(spin) >= 2 and min(spin) < (1 - DISTURBED) * max(spin):
        out.append(f"the computing control alone ran at {min(spin) / 1e9:.3g} to {max(spin) / 1e9:.3g} Gflop/s from "
                   f"round to round ({1 - min(spin) / max(spin):.0%} apart): something else took its CPU")
    if noise is not None and noise >= DISTURBED:
        out.append(f"the program's own runs alone differed by {noise:.0%}, as much as the effects looked for")
    return out


def classify(times: Dict[str, Sequence[float]], rates: Optional[Dict[str, Sequence[Optional[float]]]] = None,
             footprint: Optional[Dict[str, Any]] = None, pages: Optional[Dict[str, Any]] = None,
             caches: Optional[Dict[str, Optional[int]]] = None, competing: Sequence[str] = (),
             footprint_pages: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """{"bound": compute|memory|None, "by": bandwidth|cache|latency|None, "net": {arm: net slowdown},
    "slowdown": {arm: slowdown}, "median_s": {arm: s}, "confidence": high|low, "words": ...,
    "working_set", "pages", "disturbed"}; "why" when undecided. ``footprint`` and ``pages`` are
    run_arms' ("footprint", "pages"); ``caches`` {"private_bytes", "llc_bytes"}; ``competing``: the
    competing load seen around the experiments (checks/load.py), which disturbs them as well."""
    rates = rates or {}
    med = {arm: statistics.median(v) for arm, v in times.items() if v}
    alone = med.get("alone")
    if not alone:
        return {"bound": None, "why": "the program's runs alone did not finish"}
    slow = {arm: t / alone - 1 for arm, t in med.items() if arm != "alone"}
    control = slow.get("spin", 0.0)
    net = {arm: s - control for arm, s in slow.items() if arm not in ("spin", "pages")}
    own = times["alone"]
    noise = (max(own) - min(own)) / alone if len(own) > 1 else None
    # The other way round: what the program took from the co-runners. A program that streams
    # from memory takes bandwidth from the bandit even where, on a node with bandwidth to spare,
    # it is not slowed itself; net of what sharing the CPUs takes from the spinning control.
    lost_bw = _taken(rates, "bandit", "bandit_alone")
    lost_cpu = _taken(rates, "spin", "spin_alone")
    pressure = lost_bw - (lost_cpu or 0.0) if lost_bw is not None else None
    power = _taken(rates, "reference_beside_bandit", "reference_alone")
    cache_power = _taken(rates, "resident_beside_pirate", "resident_alone")
    sees_bw = power is not None and power >= 2 * SENSITIVE
    sees_cache = cache_power is not None and cache_power >= 2 * SENSITIVE
    ws = working_set(footprint, (caches or {}).get("private_bytes"), (caches or {}).get("llc_bytes"))
    pg = page_effect(times, pages, footprint, noise)
    disturbed = list(competing) + _disturbed(rates, noise)
    reference = rates.get("reference_alone_per_cpu_s") or []
    sr = stream_rate(footprint, reference)
    sr_other = stream_rate(footprint_pages, reference) if footprint_pages else {}
    st = streams(ws, sr, pg, page_rate_ratio(sr, sr_other, footprint, footprint_pages, pages))
    # Slowed by the bandits, or taking from them, where the reference says they could not show it:
    # no bandwidth verdict, and no cache verdict either (the pirates move memory too).
    bandwidth_hint = net.get("bandit", 0.0) >= SENSITIVE or (pressure is not None and pressure >= PRESSURE)
    slowed = max(net.get("bandit", 0.0), net.get("bandit_half", 0.0), net.get("pirate", 0.0)) >= SENSITIVE
    by: Optional[str] = None
    bound: Optional[str] = None
    contradiction = ""
    takes_bw = pressure is not None and pressure >= PRESSURE
    if disturbed:
        pass                            # no slowdown decides; the working set, not a time, still may
    elif sees_bw and takes_bw:
        by = "bandwidth"
    elif ws.get("beyond") and pg.get("sensitive") and pg["gain"] > 0 and not takes_bw:
        # scattered loads over more than the caches hold, the TLB's reach their limit; slowed beside
        # the bandits too, it meets their loaded latency (a chase slowed 8 % on the Zen 5 guest) and
        # is not called bandwidth unless it took bandwidth from them
        by = "latency"
    elif sees_bw and net.get("bandit", 0.0) >= SENSITIVE and \
            net.get("bandit", 0.0) >= net.get("bandit_half", 0.0) - 0.02:
        by = "bandwidth"
    elif sees_cache and net.get("pirate", 0.0) >= SENSITIVE and (sees_bw or not bandwidth_hint):
        by = "cache"
    if ws.get("fits"):
        # what happens beyond a core's private caches cannot slow it: a slowdown there says the runs differed
        if by or (slowed and not disturbed):
            contradiction = (f"its working set fits one core's private caches, yet it slowed {_pct(max(net.values()))} "
                             "(net) beside the co-runners" + (f" and took {pressure:.0%} of the memory traffic's "
                                                              "bandwidth" if by and pressure is not None else "")
                             + ", which reach no core's private caches: something else changed between its runs")
            by = None
        else:
            bound = "compute"
    elif by:
        bound = "memory"
    elif not disturbed and sees_bw and sees_cache and not ws.get("beyond"):
        # not where its working set says its data comes from memory: STREAM Triad on the Cascade Lake
        # guest slowed 3 % net beside bandits that slowed the streaming reference 30 %
        bound = "compute"
    basis = "slowdowns"
    if bound is None and not contradiction and (disturbed or not sees_bw) and ws.get("beyond") and st["ok"]:
        # the co-runners cannot decide (a node with bandwidth to spare beside one core, or a disturbed
        # one); what it touches per second of its CPU says it streams its data at one core's rate
        bound, by, basis = "memory", "bandwidth", "working-set rate"
    base = {"net": net, "slowdown": slow, "median_s": med, "noise": noise, "power": power,
            "cache_power": cache_power, "pressure": pressure, "corunner_lost": {"bandit": lost_bw, "spin": lost_cpu},
            "working_set": {k: v for k, v in ws.items() if k != "words"},
            "pages": {k: v for k, v in pg.items() if k != "words"}, "disturbed": disturbed, "basis": basis,
            "stream_rate": dict(sr, other_pages=sr_other or None, against=st["against"])}
    known = "; ".join(x for x in (ws.get("words"), pg.get("words"), st["words"] if ws.get("beyond") else "") if x)
    if bound is None:
        lacking = []
        if disturbed:
            lacking.append("the node was disturbed during the experiments (" + "; ".join(disturbed) + "), so no "
                           "slowdown decides")
        if contradiction:
            lacking.append(contradiction)
        if not disturbed and not sees_bw:
            lacking.append(f"a thread that only streams memory slowed {power:.0%} beside the memory-traffic "
                           f"co-runners ({2 * SENSITIVE:.0%} needed), so this node has memory bandwidth to spare and a "
                           "program limited by its own cores' memory accesses would not slow either"
                           if power is not None else
                           "the memory-traffic co-runners' power could not be measured (no CPU for a reference)")
        if not disturbed and not sees_cache:
            lacking.append(f"a thread working in half the last-level cache slowed {cache_power:.0%} beside the "
                           f"cache-taking co-runners ({2 * SENSITIVE:.0%} needed), so they could not take enough of "
                           "it (a cache smaller than the machine reports, or not shared with them)"
                           if cache_power is not None else
                           "the cache-taking co-runners' power could not be measured (no CPU for a reference)")
        if ws.get("beyond") and not disturbed and sees_bw and sees_cache:
            lacking.append(f"its data comes from memory (working set beyond the last-level cache in "
                           f"{ws['share_beyond']:.0%} of the windows), yet it slowed {_pct(net.get('bandit'))} (net) "
                           "beside the memory traffic that slowed the streaming reference "
                           f"{power:.0%}: neither memory bandwidth nor computation is shown")
        if not ws.get("fits"):
            lacking.append(f"its working set does not fit one core's private caches in {FITS:.0%} of the windows"
                           if ws.get("windows") else f"its working set is unknown: {ws.get('why')}")
        if ws.get("beyond") and (disturbed or not sees_bw):
            lacking.append("its working-set rate does not say memory bandwidth: " + "; ".join(st["against"]))
        if ws.get("beyond") and not disturbed:
            lacking.append("the other page size changed its time by less than a dependent-load (latency) bound "
                           f"program's would ({PAGES_SENSITIVE:.0%}, and twice the spread of its runs)"
                           if pg.get("gain") is not None and pg.get("taken") else
                           "the page size could not be changed for it: " + (
                               pg.get("why") or "its anonymous memory in huge pages was the same either way"))
        ruled = [] if disturbed else (
            ([] if not sees_bw else [f"not memory bandwidth (net {_pct(net.get('bandit'))} beside the traffic)"]) +
            ([] if not sees_cache else [f"not the last-level cache (net {_pct(net.get('pirate'))} with it taken)"]))
        why = "inconclusive: " + "; ".join(ruled + lacking)
        return {"bound": None, "by": None, "why": why + (f" ({known})" if known else ""), "confidence": "low",
                "words": why, **base}
    effect = max([abs(net.get("bandit", 0.0)), abs(net.get("pirate", 0.0)), abs(pressure or 0.0) / 2])
    if basis == "working-set rate":
        # a rate set beside a reference read at another moment, pages as the unit: never more than medium
        sure = "medium" if not disturbed else "low"
    elif by == "latency":
        # bandwidth ruled out by bandits with the power to show it (nothing taken from them), and a page
        # effect well above the noise
        sure = "high" if sees_bw and pressure is not None and noise is not None and \
            pg["gain"] >= 2 * max(noise, SENSITIVE / 2) else "low"
    elif bound == "compute" and ws.get("fits"):
        # the working set alone says it; the slowdowns, where the node let them speak, agree
        sure = "high" if not disturbed and noise is not None and not slowed else "low"
    else:
        sure = "high" if noise is not None and effect >= 2 * noise and (by or effect < SENSITIVE / 2) else "low"
    words = (f"alone {alone:.3g} s (median of {len(own)}" + (f", spread {noise:.0%}" if noise is not None else "")
             + "); beside a co-runner that only computes " + f"{_pct(control)}, memory traffic at half duty "
             f"{_pct(slow.get('bandit_half'))} and full {_pct(slow.get('bandit'))}, the last-level cache taken "
             f"{_pct(slow.get('pirate'))}; net of the control: bandwidth {_pct(net.get('bandit'))}, cache "
             f"{_pct(net.get('pirate'))}"
             + (f"; the memory-traffic co-runner lost {lost_bw:.0%} of its bandwidth beside the program (the "
                f"computing one {lost_cpu:.0%} of its rate)" if lost_bw is not None and lost_cpu is not None else "")
             + (f"; {known}" if known else "")
             + (f"; the node was disturbed ({'; '.join(disturbed)}): the slowdowns decide nothing, the working set "
                + ("and its rate do" if basis == "working-set rate" else "does") if disturbed else ""))
    return {"bound": bound, "by": by, "confidence": sure, "words": words, **base}


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
                why="Without hardware counters, the experiments are what tells the two apart; they need a node "
                    "nothing else runs on, and co-runners able to take enough memory bandwidth, and the last-level "
                    "cache, to matter.",
                fix="Run them on a node of your own (an exclusive allocation), where the program uses most cores "
                    "(co-runners then compete), or where hardware counters are available.",
                data={k: result.get(k) for k in ("slowdown", "power", "cache_power", "pressure", "working_set",
                                                 "pages", "stream_rate", "disturbed")})]
        return bounds, findings
    kind, by = result["bound"], result.get("by")
    what = {"bandwidth": "memory bandwidth", "cache": "the last-level cache (memory latency beyond it)",
            "latency": "memory latency (dependent loads over more memory than the caches and the TLB reach)",
            None: "computation"}[by]
    rate = result.get("basis") == "working-set rate"
    if rate:
        what = "memory bandwidth (one core's streaming rate)"
    keep = ("net", "slowdown", "confidence", "by", "basis", "working_set", "pages", "stream_rate", "disturbed")
    out = []
    for b in bounds:
        if b.bound == "cpu":
            b = Bound(b.subject, kind, b.share, f"{b.evidence}; sensitivity experiments: {what} "
                                                f"({result['words']}; confidence {result['confidence']})",
                      dict(b.data, experiments={k: result.get(k) for k in keep}))
        out.append(b)
    findings = [f for f in findings if f.id != "profile.cpu"]
    findings.append(Finding(
        id="profile.experiments", status=WARN if by else OK,
        title=f"Sensitivity experiments: the time on a CPU is {what}" + ("" if by else " (not memory)"),
        evidence=result["words"] + f"; confidence {result['confidence']}",
        why=("Its data lies far beyond the last-level cache and it goes through every byte of it at about the rate "
             "one core streams memory: its time on a CPU goes to moving data. The co-runners could not show it "
             "(one core's memory accesses are limited by the core itself here, not by the node's bandwidth); more "
             "cores would each stream at this rate until the node's bandwidth is reached." if rate else
             "It slows when another core takes memory bandwidth: more cores or faster code will not help "
             "until it moves less data." if by == "bandwidth" else
             "It slows when its data is pushed out of the last-level cache: it lives in that cache." if by == "cache"
             else "Its data lies beyond the last-level cache, and it runs at a speed set by the page size: each load "
                  "waits for the one before, through a TLB miss; bandwidth is not what it lacks." if by == "latency"
             else "Its working set stays in its core's private caches, or taking memory bandwidth and cache from it "
                  "hardly slows it: its speed is the cores'."),
        fix=("Move less data: block for the caches, fuse loops, use smaller types; split the sweep over more "
             "cores (threads or ranks) placed over every memory channel (NUMA). Huge pages will not help: it "
             "touches its pages whole." if rate else
             "Move less data: block for the caches, fuse loops, use smaller types; place threads over every "
             "memory channel (NUMA)." if by == "bandwidth" else
             "Keep the working set inside the cache (blocking), or give each process more of it (fewer per "
             "socket)." if by == "cache" else
             "Use huge pages (madvise(MADV_HUGEPAGE), GLIBC_TUNABLES=glibc.malloc.hugetlb=1), put what is read "
             "together next to each other, follow several independent chains at once or prefetch them." if by ==
             "latency" else
             "Vectorise, use more cores, or reduce the work; compare with the node's peak ('ceiling bench "
             "compute')."),
        data={k: result.get(k) for k in ("net", "slowdown", "median_s", "confidence", "by", "basis", "working_set",
                                         "pages", "stream_rate")}))
    return out, findings
