"""A program on this node's roofline (``ceiling profile``, and per point ``ceiling scale``): its
operational intensity I = flops / bytes and its flop rate = flops / time, placed against this
node's measured roofs (analysis/roofline.py: ``of_node`` builds them from the history, ``place``
names the roof that bounds the point, its distance to it and the next roof above).

The work comes from up to three places, each a point of its own (labelled with its source, none
preferred over another: they may disagree, and that is worth seeing):

- hardware counters: flops from the CPU's flop events (probes/perf_flops.py) and the memory
  traffic's lower bound, last-level read misses x line (probes/perf_counters.derive): the bytes are
  a lower bound, so the intensity is an upper bound;
- the work the user states: ``--flops N --memory-bytes N`` (the bytes moved to and from memory), the
  time the program's wall time;
- the work the program states itself, ``ceiling_work(flops, bytes)`` (include/ceiling/region.h,
  the Fortran module, ceiling.region.work), recorded by the interposer per process and summed
  here over every process and MPI rank (``recorded``).

Without any: no point, and the words say what is known (the profile's bound: compute, memory, or
on a CPU with the two not told apart) and what would give the point. Pure: nothing is measured or
read here.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..results.analysis import RooflinePoint
from ..results.model import OK, SKIPPED, Finding
from ..units import num
from . import roofline

STATED, RECORDED, COUNTERS = "stated", "ceiling_work", "counters"
SOURCE_WORDS = {STATED: "stated on the command line", RECORDED: "stated by the program (ceiling_work)",
                COUNTERS: "hardware counters"}
SOURCE_SHORT = {STATED: "--flops --memory-bytes", RECORDED: "ceiling_work", COUNTERS: "counters"}


def recorded(records: Sequence[Any]) -> Optional[Dict[str, Any]]:
    """The work the program's processes stated with ceiling_work (the interposer's "work" lines),
    summed over every process and rank: {flops, bytes, calls, refused, processes}; None when no
    process stated any."""
    from ..probes.interpose_lines import Work
    lines = [(r, ln) for r in records for ln in r.of("work", Work)]
    if not lines:
        return None
    return {"flops": float(sum(ln.flops or 0 for _, ln in lines)),
            "bytes": float(sum(ln.bytes or 0 for _, ln in lines)),
            "calls": sum(ln.calls or 0 for _, ln in lines), "refused": sum(ln.refused or 0 for _, ln in lines),
            "processes": len({(r.process.host, r.process.pid, r.process.start_ns) for r, _ in lines})}


def counted(counters: Dict[str, Any]) -> Tuple[Optional[Dict[str, Any]], str]:
    """The work the hardware counters give ({flops, bytes, how}), or None and why not."""
    if not counters:
        return None, "none were opened"
    if not counters.get("available"):
        return None, "none here (the finding profile.counters says why)"
    derived = counters.get("derived") or {}
    why = counters.get("not_derived") or {}
    f, b = derived.get("flops"), derived.get("memory_traffic_min_bytes")
    if f is None:
        return None, ("the counters give no flops: " + why["flops"] if "flops" in why else
                      counters.get("why") or "no flop event is known for this CPU")
    if b is None:
        return None, "the counters give no memory traffic: " + why.get("memory_traffic_min_bytes", "not derived")
    if not b["value"] or b["value"] <= 0:
        return None, "the counters counted no last-level read misses: no memory traffic to make an intensity of"
    return {"flops": float(f["value"]), "bytes": float(b["value"]),
            "how": f"flops: {f.get('how', '')} ({f.get('note', '')}); bytes: {b.get('how', '')} (a lower bound: "
                   "read misses only, no prefetches or write-backs, so the intensity is an upper bound)"}, ""


def works(stated: Optional[Dict[str, Any]], program: Optional[Dict[str, Any]],
          counters: Optional[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], List[str]]:
    """Each source's work that can give a point ({source, flops, bytes, how}) and, for the
    others, why not (one line each)."""
    out: List[Dict[str, Any]] = []
    why: List[str] = []
    if counters is not None:
        got, no = counted(counters)
        if got:
            out.append({"source": COUNTERS, **got})
        else:
            why.append(f"hardware counters: {no}")
    if stated and stated.get("flops") is not None and stated.get("bytes"):
        out.append({"source": STATED, "flops": stated["flops"], "bytes": stated["bytes"],
                    "how": f"--flops {stated['flops']:.4g} --memory-bytes {stated['bytes']:.4g}"})
    elif stated and stated.get("flops") is not None:
        why.append("stated: --flops without --memory-bytes gives a flop rate but no intensity")
    elif stated and stated.get("bytes"):
        why.append("stated: --memory-bytes without --flops gives no flop rate")
    if program:
        if program["calls"] and program["bytes"] > 0:
            out.append({"source": RECORDED, "flops": program["flops"], "bytes": program["bytes"],
                        "how": f"{program['calls']} ceiling_work call(s) in {program['processes']} process(es)"
                               + (f"; {program['refused']} refused (a negative or not-a-number value)"
                                  if program["refused"] else "")})
        else:
            why.append(f"ceiling_work: {program['calls']} call(s) stated {num(program['bytes'])} bytes"
                       + (f" ({program['refused']} refused: a negative or not-a-number value)"
                          if program["refused"] else "") + ": no intensity")
    return out, why


def point(work: Dict[str, Any], time_s: float, rl: roofline.Roofline) -> Dict[str, Any]:
    """One work's point: intensity (flop/byte), rate (Gflop/s) over ``time_s``, and its placement."""
    intensity = work["flops"] / work["bytes"]
    gflops = work["flops"] / time_s / 1e9
    p = {**work, "time_s": time_s, "intensity": intensity, "gflops": gflops}
    if work["flops"] <= 0:
        p["why_not_placed"] = "no floating-point work stated (0 flops): no place on the roofline's log axes"
        return p
    p["placement"] = roofline.place(rl, intensity, gflops)
    return p


def words(p: Dict[str, Any]) -> Tuple[str, str]:
    """(title, evidence) of a point, in the user's units."""
    src = SOURCE_WORDS[p["source"]]
    head = (f"{p['flops']:.4g} flop and {p['bytes']:.4g} B in {num(p['time_s'])} s: "
            f"{num(p['gflops'])} Gflop/s at {num(p['intensity'])} flop/B ({p['how']})")
    if "why_not_placed" in p:
        return f"Roofline ({src}): not placed", f"{head}; {p['why_not_placed']}"
    pl = p["placement"]
    if "missing" in pl:
        return (f"Roofline ({src}): {num(p['gflops'])} Gflop/s at {num(p['intensity'])} flop/B, no roof to "
                "place it under", f"{head}; missing: {'; '.join(pl['missing'])}")
    share = pl["of_roof"]
    where = (f"at {share:.0%} of it, {pl['distance']:.0%} below" if share <= 1 else
             f"above it ({share:.0%}): the stated bytes include traffic the caches served, or the roof was "
             "measured low")
    nxt = pl.get("next")
    above = (f"next roof above: {nxt['label']}, {num(nxt['gflops'])} Gflop/s at this intensity "
             f"({nxt['gflops'] / pl['roof_gflops']:.3g}x the bound)" if nxt else
             "no roof above it at this intensity")
    title = (f"Roofline ({src}): {pl['bound_kind']}-bound, {num(p['gflops'])} Gflop/s at {num(p['intensity'])} "
             f"flop/B is {share:.0%} of the {pl['bound_label']} roof")
    return title, (f"{head}; bound by {pl['bound_label']} ({num(pl['roof_gflops'])} Gflop/s at this intensity; "
                   f"{pl['bound_source']}), {where}; ridge at {num(pl['ridge'])} flop/B; {above}")


def no_point_words(bound: str, why: Sequence[str]) -> Tuple[str, str]:
    """(title, evidence) when no work is known: what the profile's bound says, and what would place it."""
    known = {"compute": "compute-bound (hardware counters)", "memory": "memory-bound (hardware counters)",
             "cpu": "on a CPU, compute and memory not told apart"}.get(bound, f"bound: {bound}" if bound else
                                                                    "no bound known")
    return (f"Roofline: no point ({known})",
            "The point needs the work done: --flops N --memory-bytes N (the bytes moved to and from memory), "
            "ceiling_work(flops, bytes) called in the program (C: include/ceiling/region.h; Fortran: the "
            "ceiling_region module; Python: ceiling.region.work), or hardware counters of flops (Intel's "
            "FP_ARITH_INST_RETIRED, AMD's RetiredSseAvxFlops) and of memory traffic"
            + (f". Here: {'; '.join(why)}" if why else "") + ".")


def conclude(stated: Optional[Dict[str, Any]], program: Optional[Dict[str, Any]],
             counters: Optional[Dict[str, Any]], time_s: Optional[float],
             roofs: Callable[[], roofline.Roofline], bound: str = ""
             ) -> Tuple[List[Dict[str, Any]], List[Finding], Optional[roofline.Roofline]]:
    """(points, findings, roofline): each source's point placed on this node's roofline (``roofs``,
    asked only when there is a point to place) over ``time_s`` (the program's wall time), a finding
    per point ("profile.roofline"); without any, one finding that says why, and no roofline."""
    found, why = works(stated, program, counters)
    if found and (not time_s or time_s <= 0):
        why += [f"{w['source']}: no time measured to make a rate of" for w in found]
        found = []
    if not found:
        title, evidence = no_point_words(bound, why)
        return [], [Finding(id="profile.roofline", status=SKIPPED, title=title, evidence=evidence,
                            data={"why": list(why)})], None
    rl = roofs()
    pts = [point(w, time_s, rl) for w in found]
    out = []
    for p in pts:
        title, evidence = words(p)
        out.append(Finding(id="profile.roofline", status=OK if "placement" in p and "missing" not in p["placement"]
                           else SKIPPED, title=title, evidence=evidence,
                           data={k: v for k, v in p.items() if k != "how"}))
    if why:
        out[-1].evidence += ". Not placed: " + "; ".join(why)
    return pts, out, rl


def stored_points(pts: Sequence[Dict[str, Any]], name: str = "application", label: str = "") -> List[RooflinePoint]:
    """The points a report draws (results.analysis.RooflinePoint), those that can be placed."""
    return [RooflinePoint(name=f"{name} ({p['source']})", label=f"{label or name} ({SOURCE_SHORT[p['source']]})",
                          intensity=p["intensity"], value=p["gflops"], source=p["how"])
            for p in pts if "placement" in p]


# -- a scaling study: one point per count ------------------------------------------------------

WORK_FLOPS, WORK_BYTES = "app.work.flops", "app.work.bytes"     # a member run's ceiling_work, summed


def work_metrics(program: Optional[Dict[str, Any]]) -> List[Any]:
    """A profiled run's ceiling_work as its metrics (``ceiling scale --profile`` keeps them with
    each member run): flops and bytes, summed over its processes; none without a call."""
    from ..results.model import HIGHER, Metric
    if not program or not program["calls"]:
        return []
    ctx = {"calls": program["calls"], "processes": program["processes"], "refused": program["refused"]}
    return [Metric.measured(WORK_FLOPS, [program["flops"]], "flop", HIGHER, context=ctx),
            Metric.measured(WORK_BYTES, [program["bytes"]], "B", HIGHER, context=ctx)]


def of_study(study: Any, stated: Optional[Dict[str, Any]], roofs: Callable[[], roofline.Roofline]
             ) -> Tuple[List[Dict[str, Any]], List[str], Optional[roofline.Roofline]]:
    """(points, lines, roofline) of a scaling study: per count, the median flop rate of its
    finished runs (flops over each run's wall time) at the median intensity, from the work stated
    (the same at every count: strong scaling) or each run's own ceiling_work (``work_metrics``);
    each placed on ``roofs()``. Lines say each point's placement, or why there is none."""
    from statistics import median
    by: Dict[float, List[Tuple[float, float, float]]] = {}     # count -> [(flops, bytes, seconds)]
    source = STATED if stated and stated.get("flops") is not None and stated.get("bytes") else RECORDED
    for m in study.members:
        run = m.run
        if run is None or run.application is None or run.application.exit_status != 0 or not run.application.wall_s:
            continue
        if source == STATED:
            f, b = stated["flops"], stated["bytes"]
        else:
            fm, bm = run.metric(WORK_FLOPS), run.metric(WORK_BYTES)
            if fm is None or bm is None or not bm.value:
                continue
            f, b = fm.value, bm.value
        by.setdefault(float(m.value), []).append((f, b, run.application.wall_s))
    if not by:
        why = ("no finished run to make a rate of" if source == STATED else
               "no run stated its work with ceiling_work (read with --profile, where the interposer is in)")
        return [], [f"roofline: no point: {why}; --flops N --memory-bytes N, or ceiling_work in the program with "
                    "--profile, would give each count's point"], None
    rl = roofs()
    pts, lines = [], []
    unit = study.parameter
    for n in sorted(by):
        runs = by[n]
        p = point({"source": source, "flops": median(f for f, _, _ in runs), "bytes": median(b for _, b, _ in runs),
                   "how": SOURCE_WORDS[source]}, 1.0, rl)
        p.update(count=n, gflops=median(f / t / 1e9 for f, _, t in runs), runs=len(runs),
                 time_s=median(t for _, _, t in runs))
        if "placement" in p:
            p["placement"] = roofline.place(rl, p["intensity"], p["gflops"])
        pts.append(p)
        pl = p.get("placement") or {}
        head = f"roofline at {n:g} {unit}: {num(p['gflops'])} Gflop/s at {num(p['intensity'])} flop/B"
        lines.append(head + (f" ({p['why_not_placed']})" if "why_not_placed" in p else
                             f", missing {'; '.join(pl['missing'])}" if "missing" in pl else
                             f", {pl['bound_kind']}-bound, {pl['of_roof']:.0%} of the {pl['bound_label']} roof"
                             + (f" (next: {pl['next']['label']}, {pl['next']['gflops'] / pl['roof_gflops']:.3g}x)"
                                if pl.get("next") else "")))
    lines[0] += f" ({SOURCE_WORDS[source]}; median of each count's runs)"
    return pts, lines, rl


def study_points(pts: Sequence[Dict[str, Any]], unit: str) -> List[RooflinePoint]:
    """A study's points as the plot draws them, each labelled with its count."""
    return [RooflinePoint(name=f"{p['count']:g} {unit}", label=f"{p['count']:g} {unit}", intensity=p["intensity"],
                          value=p["gflops"], source=SOURCE_WORDS[p["source"]]) for p in pts if "placement" in p]
