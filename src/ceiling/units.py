"""Parsing the numbers users type: sizes and counts, with one-line errors."""
from __future__ import annotations

import re
from typing import Optional

from .errors import BadValueError, UsageError

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgtp]?)(i?)(b?)\s*$", re.IGNORECASE)
_POW = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_size(text: str, *, what: str = "--size", limit: Optional[int] = None) -> int:
    """'512MiB', '2G', '64k', '1048576' -> bytes. K/M/G are binary (as likwid-bench and
    lat_mem_rd read them); 'kB', 'MB', 'GB' are decimal. Zero, negative or above
    ``limit`` (e.g. physical memory) raise BadValueError."""
    s = text.strip()
    if s.startswith("-"):
        raise BadValueError(f"{what} {text!r}: must be positive")
    m = _SIZE.match(s)
    if not m:
        raise UsageError(f"{what} {text!r}: not a size (examples: 512MiB, 2G, 64k, 1048576)")
    num, prefix, binary, b = m.groups()
    prefix = prefix.lower()
    base = 1000 if (prefix and b and not binary and b == "B") else 1024
    value = int(float(num) * base ** _POW[prefix])
    if value <= 0:
        raise BadValueError(f"{what} {text!r}: must be larger than zero")
    if limit is not None and value > limit:
        raise BadValueError(f"{what} {text!r}: larger than this node's memory ({limit / 2**30:.1f} GiB)")
    return value


def parse_count(text: Optional[str], *, what: str, low: int = 1, high: Optional[int] = None,
                high_reason: str = "") -> Optional[int]:
    """A whole number in [low, high]; None passes through."""
    if text is None:
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        raise UsageError(f"{what} {text!r}: not a whole number") from None
    if value < low:
        raise BadValueError(f"{what} {value}: must be at least {low}")
    if high is not None and value > high:
        raise BadValueError(f"{what} {value}: more than {high}{' ' + high_reason if high_reason else ''}")
    return value
