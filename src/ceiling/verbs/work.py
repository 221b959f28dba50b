"""The work a program states, for E = W/P: the options (``ceiling model``'s, and profile's, trace's and scale's,
which take the run's wall time as the time) and their values, parsed before anything runs. The same quantities
place the program on the roofline (analysis/app_roofline.py: ``stated``, --flops with --memory-bytes)."""
from __future__ import annotations

import argparse
import math
import re
from typing import Any, Dict, Optional, Tuple

from ..errors import BadValueError, UsageError

QUANTITIES = (("net_bytes", "network"), ("read_bytes", "read"), ("write_bytes", "write"),
              ("memory_bytes", "memory"), ("flops", "flops"))


def add_work(g, only=None, where: str = "") -> None:
    """The options that state a workload's quantities (model's, and profile's and trace's: E = W/P of the run;
    scale's ``only`` those a roofline point and the time per unit need); ``where`` says of what."""
    opts = (("--net-bytes", "SIZE", "bytes sent over the network (100MiB, 5GB)"),
            ("--read-bytes", "SIZE", "bytes read from storage"),
            ("--write-bytes", "SIZE", "bytes written to storage"),
            ("--memory-bytes", "SIZE", "bytes moved to and from memory"),
            ("--flops", "N", "floating-point operations (2.4e12)"),
            ("--ops", "N", "units of work (1e7): the time per unit is given too"),
            ("--work", "'N UNITS'", "units of work with what they count (\"1e7 records\"), as --ops with the unit "
                                    "named"))
    for name, metavar, text in opts:
        if only is None or name in only:
            g.add_argument(name, metavar=metavar, help=text + where)


def work_of(args: argparse.Namespace, verb: str = "model"):
    """(the stated quantities by subsystem, units of work or None, what a unit is); {} when none was given. Bad
    values are one line (UsageError, BadValueError) before anything runs."""
    from ..units import parse_size
    work = {}
    for attr, key in QUANTITIES:
        text = getattr(args, attr, None)
        if text:
            work[key] = _number(text, "--flops", verb) if key == "flops" else \
                float(parse_size(text, what=f"{verb}: --{attr.replace('_', '-')}"))
            if work[key] <= 0:
                raise BadValueError(f"{verb}: --{attr.replace('_', '-')} {text!r}: must be larger than zero")
    ops = _number(args.ops, "--ops", verb) if getattr(args, "ops", None) else None
    unit = ""
    if getattr(args, "work", None):
        if ops is not None:
            raise UsageError(f"{verb}: give --ops or --work, not both")
        ops, unit = parse_work(args.work, verb)
    return work, ops, unit


def parse_work(text: str, verb: str) -> Tuple[float, str]:
    """'1e7 records' -> (1e7, "records"); one line and the usage exit code otherwise."""
    m = re.fullmatch(r"\s*(\S+)\s*(.*?)\s*", text)
    try:
        n = float(m.group(1)) if m else float("nan")
    except ValueError:
        n = float("nan")
    if not math.isfinite(n) or n <= 0:
        raise UsageError(f"{verb}: --work {text!r}: give a number above zero and what it counts (\"1e7 records\")")
    return n, m.group(2) or "units"


def stated(work: Dict[str, float], ops: Optional[float], unit: str) -> Optional[Dict[str, Any]]:
    """What the roofline reads of the stated work (analysis/app_roofline.py): {"flops", "bytes" (memory),
    "work": (n, unit)}, None where not given; None when nothing was."""
    if not work and ops is None:
        return None
    return {"flops": work.get("flops"), "bytes": work.get("memory"),
            "work": (ops, unit or "units") if ops is not None else None}


def _number(text: str, what: str, verb: str = "model") -> float:
    try:
        v = float(text)
    except ValueError:
        raise UsageError(f"{verb}: {what} {text!r}: not a number (examples: 1e7, 2.4e12)") from None
    if not v > 0 or v != v or v == float("inf"):
        raise BadValueError(f"{verb}: {what} {text!r}: must be larger than zero")
    return v
