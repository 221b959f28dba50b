"""What a storage measurement's raw outcome becomes in a report: latency
percentiles, the samples each thread keeps, whether the page cache was
defeated, and the metric with its validation (bench/storage.py and
bench/storage_queue.py share them)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core.io import LAT_CAP, IoRaw
from ..results.model import HIGHER, Metric, Peak
from .base import judge

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
MIBS, IOPS, OPS, US = "MiB/s", "IOPS", "op/s", "µs"
LAT_SAMPLES = 65536                 # per phase and repetition, all threads (LAT_CAP a thread at most,
                                    # never below 16)
RESIDENT_OK = 0.01                  # at most 1 % of pages left in the page cache counts as defeated
LAT_QUANTILES = (50, 90, 99, 99.9)


def latency_summary(samples: Sequence[float]) -> Dict[str, Any]:
    """p50/p90/p99/p99.9/max in microseconds of per-operation seconds (numpy's linear percentiles)."""
    if not len(samples):
        return {}
    a = np.asarray(samples, dtype=float)
    out: Dict[str, Any] = {f"p{q:g}": round(float(v) * 1e6, 3)
                           for q, v in zip(LAT_QUANTILES, np.percentile(a, LAT_QUANTILES))}
    out["max"] = round(float(a.max()) * 1e6, 3)
    out["samples"] = int(a.size)
    return out


def lat_cap(threads: int) -> int:
    """Latency samples kept per thread, ``threads`` those of every process: all together keep
    about LAT_SAMPLES per phase and repetition (LAT_CAP at most, 16 at least, per thread)."""
    return min(LAT_CAP, max(16, LAT_SAMPLES // max(1, threads)))


def cache_defeat(raw: IoRaw) -> Tuple[str, bool]:
    """Which method kept the read phase off the page cache, and whether it held."""
    res = raw.resident
    if res is None:
        if raw.direct:
            return "O_DIRECT (residency not measurable: mmap/mincore failed)", True
        return ("posix_fadvise(DONTNEED) asked, but residency could not be measured (mmap/mincore failed): "
                "the read figure may be the page cache's"), False
    pct = f"{res:.1%} of the file pages resident before the read (mincore)"
    if res <= RESIDENT_OK:
        return ("O_DIRECT" if raw.direct else "posix_fadvise(DONTNEED) after fsync") + f": {pct}", True
    return f"none held: {pct}; the read figure is partly the page cache's", False


def metric(name: str, values: List[float], unit: str, raw: IoRaw, better: str = HIGHER,
            peak: Optional[Peak] = None, context: Optional[Dict[str, Any]] = None, note: str = "") -> Metric:
    m = Metric.measured(name, values, unit, better, peak=peak, context=context or {})
    m.note = note
    return judge(m, raw.valid, f"validation failed: {raw.msg or 'data read back did not match'}")
