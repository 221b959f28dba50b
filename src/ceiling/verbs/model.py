"""``ceiling model``: E = W / P for a workload the user describes (analysis/efficiency.py): the
quantities it moved or computed (``--net-bytes``, ``--read-bytes``, ``--write-bytes``,
``--memory-bytes``, ``--flops``; units of work with ``--ops`` or ``--work "1e7 records"``) and the
time it took (``--time``), against this node's measured ceilings from the history or the peaks the
user gives (``--peak network=100GbE``); ``--html FILE`` the same as a page with the workload on the
roofline (report/html_model.py). Runs nothing; reads the history only."""
from __future__ import annotations

import argparse
import json
import re
import sys
from typing import List

from ..errors import BadValueError, UsageError
from .work import add_work, work_of

NAME = "model"
HELP = ("efficiency E = W/P of a workload you describe: ceiling model --net-bytes 100MiB --time 0.1s "
        "--peak network=100GbE")
DESCRIPTION = ("For each quantity of work given (bytes over the network, to and from storage or memory; flops) and "
               "the time it took: the achieved rate W, the peak P (--peak, else this node's newest measured ceiling "
               "in the history, named with its run and date), E = W/P, and the subsystem with the highest E as the "
               "bound.")

def configure(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--time", metavar="SECONDS", help="the time the work took (0.39, 0.39s, 5m)")
    add_work(g)
    g.add_argument("--peak", action="append", default=[], metavar="SUBSYSTEM=RATE",
                   help="a peak to use instead of the history's: network=100GbE, memory=200GB/s, flops=3Tflop/s "
                        "(subsystems: network, read, write, memory, flops)")
    g.add_argument("--json", action="store_true", help="the result as JSON")
    g.add_argument("--html", metavar="FILE", help="also write the result as a self-contained HTML page, with the "
                   "workload on this node's roofline where --flops and --memory-bytes are both given")
    g.add_argument("--db", metavar="PATH", help="the history to read the node's ceilings from")


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
    if not args.time:
        raise UsageError("model: give the time the work took: --time 0.39s")
    time_s = _seconds(args.time)
    work, ops, unit = work_of(args)
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
    result = efficiency(work, time_s, peaks, _lookup(args), ops)
    result["ops_unit"] = unit
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
    else:
        print("\n".join(lines(result)))
    if args.html:                 # after the result is printed: a path that cannot be written loses nothing
        from .. import __version__
        from ..report import html_model
        html_model.write(result, lines(result), __version__, args.html)
    return 0


def _lookup(args: argparse.Namespace):
    """This node's newest stored metrics by prefix (verbs/profile.py's reading of the history)."""
    import socket
    from .profile import _history
    return _history(args, socket.gethostname())
