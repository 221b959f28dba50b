"""Numbers in and out: parsing what users type (sizes and counts, with one-line
errors) and writing figures the way HPC users write them.

Figures are shown with three significant digits (four when the value is at
least 1000, never dropping integer digits), binary units for sizes (KiB, MiB),
and times scaled to ns / µs / ms / s so a column never shows "123456 ns".
Every layer that writes a number (findings, analysis notes, reports) uses
these, so a figure reads the same everywhere. Whatever is not a finite number
(None, NaN, a string from a damaged file) is written as "-" (``figure``).
"""
from __future__ import annotations

import math
import re
from typing import Any, Optional, Tuple

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


_SECONDS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_seconds(text: Optional[str], *, what: str, low: float = 1.0, high: float = 7 * 86400) -> Optional[float]:
    """'30', '30s', '5m', '1h', '90d' -> seconds in [low, high]; None passes through."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(s|min|m|h|d)?\s*", str(text))
    if not m:
        raise UsageError(f"{what} {text!r}: not a duration (examples: 30, 90s, 5m, 1h)")
    value = float(m.group(1)) * _SECONDS[m.group(2) or ""]
    if not low <= value <= high:
        raise BadValueError(f"{what} {text!r}: must be from {low:g} s to {high / 86400:g} days")
    return value


# -- text from outside ------------------------------------------------------------

# C0 controls but tab and newline, DEL, and C1 controls: what a terminal would act on.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every control character a terminal would act on (ESC, BEL, CR, ...)
    written out as \\xNN, so that a hostname, a model name or a JSON file cannot move the
    cursor, retitle the window or fake a line of the report."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


# -- writing figures ---------------------------------------------------------------

DASH = "-"          # shown for a missing number; ASCII so it survives e-mail

_TIME_UNITS = ("ns", "µs", "ms", "s")


def figure(value: Any) -> Optional[float]:
    """``value`` as a finite float, or None when it is no figure: None, NaN, an infinity,
    an integer beyond a float, true/false, a string, a list. A run read back from a file
    or a history row may hold any of these where a figure goes; every writer of numbers
    goes through this, so such a value reads as unknown instead of failing a report."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        v = float(value)
    except OverflowError:
        return None
    return v if math.isfinite(v) else None


def count(value: Any) -> Optional[int]:
    """``value`` as a whole number (3, 3.0), or None when it is no whole number (see ``figure``)."""
    v = figure(value)
    return int(v) if v is not None and v.is_integer() else None


def num(value: Any, sig: int = 3) -> str:
    """``value`` with ``sig`` significant digits, keeping every integer digit below 1e15; DASH
    for no figure."""
    v = figure(value)
    if v is None:
        return DASH
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e15:       # no rate or size is this large: a figure from a damaged file, kept short
        return f"{v:.{max(sig - 1, 0)}e}"
    if a >= 10 ** sig or a >= 1000:
        return f"{v:.0f}"
    if a < 1e-3:
        return f"{v:.{max(sig - 1, 0)}e}"
    decimals = sig - 1 - int(math.floor(math.log10(a)))
    text = f"{v:.{max(decimals, 0)}f}"
    # 9.996 rounds to "10.00": one digit too many.
    if decimals > 0 and len(text.lstrip("-").replace(".", "").lstrip("0")) > sig:
        text = f"{v:.{decimals - 1}f}"
    if sig > 3 and "." in text:
        # A peak is shown with a fourth digit only when it has one (409.6, not 62.40).
        text = text.rstrip("0").rstrip(".")
    return text


def pct(fraction: Any) -> str:
    """A fraction as a percentage: "61%", "0.4%", "103%"; DASH for no figure."""
    f = figure(fraction)
    p = None if f is None else figure(100.0 * f)
    if p is None:
        return DASH
    if 0 < abs(p) < 1:
        return f"{p:.1f}%"
    return f"{p:.0f}%"


def pct_sig(fraction: Any, sig: int = 4) -> str:
    """A percentage with up to ``sig`` significant digits and no padding zeros, for a limit
    someone chose and a figure compared with it: "5%", "12.5%", "0.1%", where ``pct`` would
    round 0.125 to "12%" and 0.001 to "0.1%" but 0.0125 to "1%"; DASH for no figure."""
    p = figure(fraction)
    p = None if p is None else figure(100.0 * p)
    return DASH if p is None else f"{p:.{max(1, sig)}g}%"


def size(nbytes: Any) -> str:
    """Bytes in binary units: "32 KiB", "1.5 MiB", "24 GiB"; DASH for no figure."""
    v = figure(nbytes)
    if v is None:
        return DASH
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            if unit == "B":
                return f"{v:.0f} B"
            text = num(v)
            if "." in text:
                text = text.rstrip("0").rstrip(".")   # "32 KiB", not "32.0 KiB"
            return f"{text} {unit}"
        v /= 1024.0
    return f"{v} B"  # unreachable


def time_scale(value: Any, unit: str) -> Tuple[float, str]:
    """Factor and unit that show ``value`` (in ``unit``) below 1000 when it is a time."""
    if unit not in _TIME_UNITS or figure(value) is None:
        return 1.0, unit
    i = _TIME_UNITS.index(unit)
    factor = 1.0
    v = abs(float(value))
    while v >= 1000 and i < len(_TIME_UNITS) - 1:
        v /= 1000.0
        factor /= 1000.0
        i += 1
    return factor, _TIME_UNITS[i]


def quantity(value: Any, unit: str, sig: int = 3) -> Tuple[str, str]:
    """(number text, unit text) with times rescaled to a readable unit."""
    factor, shown = time_scale(value, unit)
    v = figure(value)
    return num(None if v is None else v * factor, sig), shown


def with_unit(value: Any, unit: str, sig: int = 3) -> str:
    """ "38.1 GB/s", "1.20 µs", or "-" for a missing value (or no figure)."""
    text, shown = quantity(value, unit, sig)
    if figure(value) is None:
        return DASH
    return f"{text} {shown}".rstrip()
