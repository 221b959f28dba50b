"""The pages a latency figure is measured on: the transparent huge page policy,
the base and huge page sizes, the words a figure states them in, and whether
base pages changed a figure (bench/latency.py measures, this only decides)."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

KIB, MIB = 1 << 10, 1 << 20
PAGES_DIFFER = 0.05             # base pages this much slower or faster: a figure of their own


def thp_mode(root: str = "/") -> Tuple[Optional[str], str]:
    """Transparent huge page policy ("always", "madvise", "never") and where it was read."""
    path = f"{root.rstrip('/')}/sys/kernel/mm/transparent_hugepage/enabled"
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        return None, f"{path}: {e.strerror or e}"
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1], path
    return None, f"{path}: no selected policy in {text.strip()!r}"


def page_sizes(root: str = "/") -> Tuple[int, Optional[int]]:
    """(base page bytes, transparent huge page bytes or None when the kernel does not say)."""
    try:
        base = os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        base = 4096
    try:
        with open(f"{root.rstrip('/')}/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") as f:
            huge: Optional[int] = int(f.read().strip())
    except (OSError, ValueError):
        huge = None
    return base, huge


def pages_context(on_huge: bool, sizes: Tuple[int, Optional[int]]) -> Dict[str, Any]:
    """The page size a figure was measured with: ``pages`` in words, ``page_bytes`` (None when
    the huge page size is unknown)."""
    base, huge = sizes
    if on_huge:
        words = (f"{size_words(huge)} pages (transparent huge pages, madvise)" if huge else
                 "transparent huge pages (madvise; size unknown: no hpage_pmd_size)")
        return {"pages": words, "page_bytes": huge}
    return {"pages": f"{size_words(base)} pages", "page_bytes": base}


def size_words(n: int) -> str:
    for unit, f in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", KIB)):
        if n >= f and n % f == 0:
            return f"{n // f} {unit}"
    return f"{n} bytes"


def thp_note() -> Optional[str]:
    mode, src = thp_mode()
    if mode in ("always", "madvise"):
        return None
    why = f"policy 'never' ({src})" if mode == "never" else f"unknown ({src})"
    return (f"transparent huge pages unavailable: {why}; sets beyond the TLB's reach "
            "(a few MiB with 4 KiB pages) include page-walk time")


def pages_differ(huge: List[float], small: List[float]) -> bool:
    """Whether base pages changed the figure: the best repetitions more than PAGES_DIFFER apart,
    and the two sets of repetitions apart (the slower set's fastest above the faster set's
    slowest), so that noise on a busy node does not make a difference of its own."""
    if not huge or not small:
        return False
    if abs(min(small) / min(huge) - 1) <= PAGES_DIFFER:
        return False
    lo, hi = (huge, small) if min(huge) < min(small) else (small, huge)
    return min(hi) > max(lo)
