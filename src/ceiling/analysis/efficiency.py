"""E = W / P for any workload (`ceiling model`): what a program achieved against what this node
allows, per subsystem, from the work the user states and the time it took.

For each subsystem the user gives a quantity of work (bytes over the network, read or written to
storage, moved to and from memory; floating-point operations), W = quantity / time is the achieved
rate, P the peak: as the user gives it (``--peak network=100Gb/s``, for what this node does not
have), else this node's newest measured ceiling in the history (named with its run and date), else
unknown with the command that would measure it. E = W / P; the subsystem with the highest E is the
bound. The lecture's example: 100 MiB in 0.1 s over 100 GbE is 8.4 % of the link. Nothing here
measures anything.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import roofline

Row = Tuple[str, Optional[float], str, str, str]     # name, value, unit, started, run_id (profile_ceilings.Row)

# subsystem: (what it is, the unit of its rate, the history's prefix, to the rate's unit, how to measure it)
SUBSYSTEMS = {
    "flops": ("floating-point operations", "flop/s", "flops.dp.node", 1e9, "ceiling bench compute"),
    "memory": ("memory traffic", "B/s", "stream.triad", 1e9, "ceiling bench memory"),
    "read": ("storage reads", "B/s", "storage.seq.read.", 1e9, "ceiling bench storage"),
    "write": ("storage writes", "B/s", "storage.seq.write.", 1e9, "ceiling bench storage"),
    "network": ("network traffic", "B/s", "net.pingpong.bandwidth.", 1e9, "mpirun -n 2 ceiling bench network"),
}
_HISTORY_UNITS = {"GB/s": 1e9, "MB/s": 1e6, "TB/s": 1e12, "Gflop/s": 1e9, "Tflop/s": 1e12, "Mflop/s": 1e6}
_POW = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}


def parse_rate(text: str) -> Optional[Tuple[float, str]]:
    """'100 GbE', '100Gb/s' -> (12.5e9, "B/s"); '12.5 GB/s' -> (12.5e9, "B/s"); '3 Tflop/s' ->
    (3e12, "flop/s"); None when it is none of these. b is bits, B bytes; GbE is Gb/s."""
    t = text.strip()
    e = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*gbe", t, re.IGNORECASE)
    if e:                                    # "100 GbE": gigabits per second
        return float(e.group(1)) * 1e9 / 8, "B/s"
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kKmMgGtTpP]?)(.*)", t)
    if not m:
        return None
    num, prefix, unit = float(m.group(1)), m.group(2), m.group(3).strip()
    scale = _POW[prefix.lower()] if prefix else 1.0
    if unit in ("B/s", "Bps"):
        return num * scale, "B/s"
    if unit in ("b/s", "bit/s", "bps"):
        return num * scale / 8, "B/s"
    if unit.lower() in ("flop/s", "flops"):
        return num * scale, "flop/s"
    return None


def _best(rows: Sequence[Row]) -> Optional[Row]:
    rows = [r for r in rows if r[1] is not None and r[2] in _HISTORY_UNITS]
    if not rows:
        return None
    newest = max(r[3] for r in rows)
    return max((r for r in rows if r[3] == newest), key=lambda r: r[1] * _HISTORY_UNITS[r[2]])


def efficiency(work: Dict[str, float], time_s: float, peaks: Dict[str, Tuple[float, str]],
               lookup: Callable[[str], Sequence[Row]], ops: Optional[float] = None) -> Dict[str, Any]:
    """``work``: subsystem -> quantity (bytes, or flops); ``peaks``: subsystem -> (rate, how said)
    the user gave; ``lookup``: the history's newest metrics of this node by prefix. Returns
    {"rows": [{subsystem, what, quantity, achieved, unit, peak, peak_source, efficiency}], "bound",
    "time_s", "ops", "per_op_s"}: efficiency None where the peak is unknown (its source says why)."""
    rows = []
    for key, qty in work.items():
        what, unit, prefix, _, how = SUBSYSTEMS[key]
        achieved = qty / time_s
        peak, source = None, ""
        if key in peaks:
            peak, source = peaks[key][0], f"given: {peaks[key][1]}"
        else:
            row = _best(lookup(prefix))
            if row is not None:
                peak = row[1] * _HISTORY_UNITS[row[2]]
                source = f"this node's {row[0]} = {row[1]:.4g} {row[2]}, measured {row[3][:10]} (run {row[4][:12]})"
            else:
                source = f"unknown: no measurement of this node in the history ({how}; or --peak {key}=RATE)"
        rows.append({"subsystem": key, "what": what, "quantity": qty, "achieved": achieved, "unit": unit,
                     "peak": peak, "peak_source": source, "efficiency": achieved / peak if peak else None})
    known = [r for r in rows if r["efficiency"] is not None]
    bound = max(known, key=lambda r: r["efficiency"])["subsystem"] if known else None
    return {"rows": rows, "bound": bound, "time_s": time_s, "ops": ops,
            "per_op_s": time_s / ops if ops else None, "roofline": roofline_point(rows)}


def roofline_point(rows: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The workload on this node's (DRAM) roofline, from the stated flops and memory bytes: its
    operational intensity I (flop/B), its flop rate, the roof at I (min(peak flop/s, I x bandwidth)),
    which roof that is, the point's share of it, and the ridge intensity; None without both
    quantities, or with the reason when a peak is unknown."""
    by = {r["subsystem"]: r for r in rows}
    if "flops" not in by or "memory" not in by:
        return None
    f, m = by["flops"], by["memory"]
    out: Dict[str, Any] = {"intensity": f["quantity"] / m["quantity"], "flop_rate": f["achieved"]}
    if not f["peak"] or not m["peak"]:
        out["why_no_roof"] = "a peak is unknown: " + "; ".join(r["peak_source"] for r in (f, m) if not r["peak"])
        return out
    # the two peaks E = W/P uses, as a roofline of two roofs, placed as a profiled program is (roofline.place)
    rl = roofline.Roofline((roofline.Roof("flops.dp.node", "flops", f["peak"] / 1e9, True, f["peak_source"]),),
                           (roofline.Roof("stream.triad", "memory", m["peak"] / 1e9, True, m["peak_source"]),),
                           (), ())
    p = roofline.place(rl, out["intensity"], out["flop_rate"] / 1e9)
    out.update(ridge=p["ridge"], roof=p["roof_gflops"] * 1e9, bound=p["bound_kind"], of_roof=p["of_roof"])
    out["next_roof"] = ("the compute peak at intensities above the ridge" if out["bound"] == "memory" else
                        "none: the compute peak is the highest roof")
    return out


def _rate(v: float, unit: str) -> str:
    from ..units import num
    return f"{num(v / 1e9)} G{unit}" if unit == "flop/s" else f"{num(v / 1e9)} GB/s"


def lines(result: Dict[str, Any]) -> List[str]:
    """The result as lines a user can paste into a ticket."""
    from ..units import num, size
    out = []
    for r in result["rows"]:
        e = r["efficiency"]
        qty = f"{r['quantity']:.4g} flop" if r["unit"] == "flop/s" else size(r["quantity"])
        out.append(f"{r['subsystem']}: W = {qty} / {num(result['time_s'])} s = {_rate(r['achieved'], r['unit'])}; P = "
                   + (f"{_rate(r['peak'], r['unit'])} ({r['peak_source']}); E = W/P = {e:.1%}" if e is not None else
                      r["peak_source"]))
    if result["bound"]:
        b = next(r for r in result["rows"] if r["subsystem"] == result["bound"])
        out.append(f"bound: {b['what']} ({b['subsystem']}), at {b['efficiency']:.1%} of its peak, the highest E")
    else:
        out.append("bound: unknown (no peak known for any subsystem)")
    rp = result.get("roofline")
    if rp:
        head = f"roofline: intensity {num(rp['intensity'])} flop/B, {_rate(rp['flop_rate'], 'flop/s')}"
        if "roof" in rp:
            out.append(f"{head}; the {rp['bound']} roof bounds it here ({_rate(rp['roof'], 'flop/s')}; ridge at "
                       f"{num(rp['ridge'])} flop/B), reached {rp['of_roof']:.1%}; next roof: {rp['next_roof']}")
        else:
            out.append(f"{head}; no roof: {rp['why_no_roof']}")
    if result["per_op_s"]:
        out.append(f"per unit of work: {num(result['per_op_s'] * 1e9)} ns ({num(result['ops'])} "
                   f"{result.get('ops_unit') or 'units'})")
    return out
