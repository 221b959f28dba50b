"""What the interposer adds to one intercepted call on this node, measured before a
profile (``ceiling profile`` multiplies it by the calls the program made).

dd copies /dev/zero to /dev/null one byte at a time: two intercepted calls per
byte (a read and a write) and almost nothing else, so the difference between dd
run with the interposer counting and dd run without it, per call, is the
interposer's cost. Process start-up (loading the library, writing the record)
differs too, so each way runs twice, with no bytes and with COUNT bytes, and
only the difference of the two enters: the slope, not the intercept. Each run is
dd's CPU time (wait4's rusage), the best of ROUNDS, the ways alternating; other
load on the node stretches wall time, much less the CPU time a process uses.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, Optional

from ..files.private import temporary_dir

COUNT = 200_000        # bytes: 400,000 intercepted calls, a few tens of ms
ROUNDS = 3


def measure(lib: Path, count: int = COUNT, rounds: int = ROUNDS) -> Dict[str, object]:
    """{"per_call_ns": float or None, "how": words, "why": why it is None}."""
    dd = shutil.which("dd")
    if dd is None:
        return {"per_call_ns": None, "why": "dd is not installed: nothing to calibrate with"}
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT")}
    best: Dict[tuple, float] = {}
    with temporary_dir("ceiling-ipcost-") as tmp:       # 0700 in a safe $TMPDIR (files/private.py)
        counting = dict(base, LD_PRELOAD=str(lib), CEILING_INTERPOSE_OUT=str(Path(tmp) / "r.%p"))
        for _ in range(rounds):
            for way, env in (("plain", base), ("counting", counting)):
                for n in (0, count):
                    t = _time(dd, n, env)
                    if t is None:
                        return {"per_call_ns": None, "why": "dd failed"}
                    best[(way, n)] = min(best.get((way, n), t), t)
    slope = {w: best[(w, count)] - best[(w, 0)] for w in ("plain", "counting")}
    per_call = (slope["counting"] - slope["plain"]) / (2 * count) * 1e9
    return {"per_call_ns": max(per_call, 0.0),
            "how": f"dd of {count} single bytes /dev/zero to /dev/null ({2 * count} intercepted calls) with and "
                   f"without the interposer counting, best of {rounds} alternating runs, start-up subtracted"}


def _time(dd: str, n: int, env: Dict[str, str]) -> Optional[float]:
    """dd's CPU time (user + system from wait4: the kernel's exact run time, which other load
    on the node does not stretch as it stretches wall time)."""
    p = subprocess.Popen([dd, "if=/dev/zero", "of=/dev/null", "bs=1", f"count={n}"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    return ru.ru_utime + ru.ru_stime if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else None
