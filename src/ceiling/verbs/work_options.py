"""The work a program does, stated on the command line of ``ceiling profile`` and ``ceiling scale``:
``--flops N``, ``--bytes N`` (moved to and from memory) and ``--work "1e7 records"`` (units of work,
as ``ceiling model --work`` takes them). The options and their reading; the analysis is
analysis/app_roofline.py (the point on the roofline) and analysis/efficiency.py (E = W/P). A bad
value is one line and the usage exit code."""
from __future__ import annotations

import argparse
import math
import re
from typing import Any, Dict, Optional, Tuple

from ..errors import CeilingError, UsageError


def configure(p: argparse.ArgumentParser, where: str = "") -> None:
    g = p.add_argument_group("work (the point on this node's roofline, E = W/P)")
    g.add_argument("--flops", metavar="N", help="floating-point operations the program does" + where
                   + " (2.4e12): with --bytes, its operational intensity and flop rate on this node's roofline")
    g.add_argument("--bytes", metavar="N", help="bytes it moves to and from memory (6e11, 600GB)")
    g.add_argument("--work", metavar="'N UNITS'", help="units of work it does (\"1e7 records\"): the time per "
                   "unit and the units per second")


def _number(text: str, opt: str, verb: str, zero: bool) -> float:
    t = text.strip()
    try:
        v = float(t)
    except ValueError:
        if opt != "--bytes":
            raise UsageError(f"{verb}: {opt} {text!r}: not a number (example: 2.4e12)") from None
        from ..units import parse_size
        try:
            v = float(parse_size(t, what=f"{verb}: {opt}"))
        except CeilingError as e:
            raise UsageError(str(e)) from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not zero):
        raise UsageError(f"{verb}: {opt} {text!r}: must be a finite number "
                         + ("of zero or more" if zero else "larger than zero"))
    return v


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


def stated(args: argparse.Namespace, verb: str) -> Optional[Dict[str, Any]]:
    """{"flops", "bytes", "work": (n, unit)} as given (None where not), or None when nothing is."""
    f, b, w = getattr(args, "flops", None), getattr(args, "bytes", None), getattr(args, "work", None)
    if f is None and b is None and w is None:
        return None
    return {"flops": _number(f, "--flops", verb, zero=True) if f is not None else None,
            "bytes": _number(b, "--bytes", verb, zero=False) if b is not None else None,
            "work": parse_work(w, verb) if w is not None else None}
