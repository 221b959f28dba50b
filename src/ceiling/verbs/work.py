"""The work a program states, for E = W/P: the options (``ceiling model``'s, and profile's and trace's, which take
the run's wall time as the time) and their values, parsed before anything runs."""
from __future__ import annotations

import argparse

from ..errors import BadValueError, UsageError

QUANTITIES = (("net_bytes", "network"), ("read_bytes", "read"), ("write_bytes", "write"),
              ("memory_bytes", "memory"), ("flops", "flops"))


def add_work(g) -> None:
    """The options that state a workload's quantities (model's, and profile's and trace's: E = W/P of the run)."""
    g.add_argument("--net-bytes", metavar="SIZE", help="bytes sent over the network (100MiB, 5GB)")
    g.add_argument("--read-bytes", metavar="SIZE", help="bytes read from storage")
    g.add_argument("--write-bytes", metavar="SIZE", help="bytes written to storage")
    g.add_argument("--memory-bytes", metavar="SIZE", help="bytes moved to and from memory")
    g.add_argument("--flops", metavar="N", help="floating-point operations (2.4e12)")
    g.add_argument("--ops", metavar="N", help="units of work (1e7 records): the time per unit is given too")


def work_of(args: argparse.Namespace, verb: str = "model"):
    """(the stated quantities by subsystem, units of work or None); {} when none was given. Bad values are one
    line (UsageError, BadValueError) before anything runs."""
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
    return work, ops


def _number(text: str, what: str, verb: str = "model") -> float:
    try:
        v = float(text)
    except ValueError:
        raise UsageError(f"{verb}: {what} {text!r}: not a number (examples: 1e7, 2.4e12)") from None
    if not v > 0 or v != v or v == float("inf"):
        raise BadValueError(f"{verb}: {what} {text!r}: must be larger than zero")
    return v
