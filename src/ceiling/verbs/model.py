"""``ceiling model``: E = W / P for a workload the user describes (analysis/efficiency.py): the
quantities it moved or computed (``--net-bytes``, ``--read-bytes``, ``--write-bytes``,
``--memory-bytes``, ``--flops``; units of work with ``--ops`` or ``--work "1e7 records"``) and the
time it took (``--time``), against this node's measured
ceilings from the history or the peaks the user gives (``--peak network=100GbE``). Runs nothing;
reads the history only."""
from __future__ import annotations

import argparse
import json
import re
import sys
from typing import List

from ..errors import BadValueError, UsageError

NAME = "model"
HELP = ("efficiency E = W/P of a workload you describe: ceiling model --net-bytes 100MiB --time 0.1s "
        "--peak network=100GbE")
DESCRIPTION = ("For each quantity of work given (bytes over the network, to and from storage or memory; flops) and "
               "the time it took: the achieved rate W, the peak P (--peak, else this node's newest measured ceiling "
               "in the history, named with its run and date), E = W/P, and the subsystem with the highest E as the "
               "bound.")
QUANTITIES = (("net_bytes", "network"), ("read_bytes", "read"), ("write_bytes", "write"),
              ("memory_bytes", "memory"), ("flops", "flops"))


def configure(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--time", metavar="SECONDS", help="the time the work took (0.39, 0.39s, 5m)")
    g.add_argument("--net-bytes", metavar="SIZE", help="bytes sent over the network (100MiB, 5GB)")
    g.add_argument("--read-bytes", metavar="SIZE", help="bytes read from storage")
    g.add_argument("--write-bytes", metavar="SIZE", help="bytes written to storage")
    g.add_argument("--memory-bytes", metavar="SIZE", help="bytes moved to and from memory")
    g.add_argument("--flops", metavar="N", help="floating-point operations (2.4e12)")
    g.add_argument("--ops", metavar="N", help="units of work (1e7): the time per unit is given too")
    g.add_argument("--work", metavar="'N UNITS'", help="units of work with what they count (\"1e7 records\"), as "
                   "--ops with the unit named")
    g.add_argument("--peak", action="append", default=[], metavar="SUBSYSTEM=RATE",
                   help="a peak to use instead of the history's: network=100GbE, memory=200GB/s, flops=3Tflop/s "
                        "(subsystems: network, read, write, memory, flops)")
    g.add_argument("--json", action="store_true", help="the result as JSON")
    g.add_argument("--db", metavar="PATH", help="the history to read the node's ceilings from")


def _number(text: str, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UsageError(f"model: {what} {text!r}: not a number (examples: 1e7, 2.4e12)") from None
    if not v > 0 or v != v or v == float("inf"):
        raise BadValueError(f"model: {what} {text!r}: must be larger than zero")
    return v


def _seconds(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(s|ms|us|µs|min|m|h)?\s*", text)
    if not m:
        raise UsageError(f"model: --time {text!r}: not a duration (examples: 0.39, 0.39s, 120ms, 5m)")
    v = float(m.group(1)) * {"": 1, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "min": 60, "m": 60,
                             "h": 3600}[m.group(2) or ""]
    if not v > 0:
        raise BadValueError(f"model: --time {text!r}: must be larger than zero")
    return v


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from ..analysis.efficiency import SUBSYSTEMS, efficiency, lines, parse_rate
    from ..units import parse_size
    if not args.time:
        raise UsageError("model: give the time the work took: --time 0.39s")
    time_s = _seconds(args.time)
    work = {}
    for attr, key in QUANTITIES:
        text = getattr(args, attr)
        if text:
            work[key] = _number(text, "--flops") if key == "flops" else \
                float(parse_size(text, what=f"model: --{attr.replace('_', '-')}"))
    if not work:
        raise UsageError("model: give the work done: --net-bytes, --read-bytes, --write-bytes, --memory-bytes or "
                         "--flops")
    peaks = {}
    for text in args.peak:
        key, _, rate = text.partition("=")
        key = key.strip()
        if key not in SUBSYSTEMS:
            raise UsageError(f"model: --peak {text!r}: give SUBSYSTEM=RATE, SUBSYSTEM one of {', '.join(SUBSYSTEMS)}")
        got = parse_rate(rate)
        if got is None or got[1] != SUBSYSTEMS[key][1]:
            raise BadValueError(f"model: --peak {text!r}: not a rate for {key} (examples: 100GbE, 12.5GB/s, "
                                "3Tflop/s)")
        if not got[0] > 0:
            raise BadValueError(f"model: --peak {text!r}: must be larger than zero")
        peaks[key] = (got[0], rate.strip())
    ops = _number(args.ops, "--ops") if args.ops else None
    unit = ""
    if args.work:
        if ops is not None:
            raise UsageError("model: give --ops or --work, not both")
        from .work_options import parse_work
        ops, unit = parse_work(args.work, "model")
    result = efficiency(work, time_s, peaks, _lookup(args), ops)
    result["ops_unit"] = unit
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
    else:
        print("\n".join(lines(result)))
    return 0


def _lookup(args: argparse.Namespace):
    """This node's newest stored metrics by prefix (verbs/profile.py's reading of the history)."""
    import socket
    from .profile import _history
    return _history(args, socket.gethostname())
