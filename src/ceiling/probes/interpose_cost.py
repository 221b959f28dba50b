"""What the interposer adds to one intercepted call on this node, measured once per
build of the interposer and node (``ceiling profile`` multiplies it by the calls the
program made).

dd copies /dev/zero to /dev/null one byte at a time: two intercepted calls per
byte (a read and a write) and almost nothing else, so the difference between dd
run with the interposer counting and dd run without it, per call, is the
interposer's cost. Process start-up (loading the library, writing the record)
differs too, so each way runs twice, with no bytes and with COUNT bytes, and
only the difference of the two enters: the slope, not the intercept. Each run is
dd's CPU time (wait4's rusage), the best of ROUNDS, the ways alternating; other
load on the node stretches wall time, much less the CPU time a process uses.

The twelve dd runs took half a second before every profile, so the figure is
kept in the user's cache (``$XDG_CACHE_HOME/ceiling``, else ~/.cache/ceiling,
checked as the history's directory is: files/private.data_dir) under the SHA-256
of the library's content and the host's name: a rebuilt interposer, or another
node sharing the home directory, measures again. An entry is read only from a
regular file of ours that no one else can write, opened without following a
link, and written through a new temporary file renamed into place; one that does
not parse is measured again. Where the cache cannot be used the figure is
measured as before, and ``how`` says why it was not kept.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, Optional

from ..errors import PathError
from ..files.private import data_dir, others_can_write, temporary_dir

COUNT = 200_000        # bytes: 400,000 intercepted calls, a few tens of ms
ROUNDS = 3
CACHE_VERSION = 1      # the entry's layout and the method above; another value is measured again


def measure(lib: Path, count: int = COUNT, rounds: int = ROUNDS, cache: bool = True) -> Dict[str, object]:
    """{"per_call_ns": float or None, "how": words, "why": why it is None, "cached": bool}:
    from the cache when this build of ``lib`` was measured on this host, else measured
    (and kept, when ``cache`` and the measurement succeeded)."""
    where, key, why_not = _entry(lib) if cache else (None, "", "")
    if where is not None:
        hit = _read(where, key)
        if hit is not None:
            return {"per_call_ns": hit["per_call_ns"], "cached": True,
                    "how": f"{hit['how']}; measured {hit['measured']} for this build of the interposer on this "
                           f"host, kept in {where}"}
    out = _measure(lib, count, rounds)
    out["cached"] = False
    if where is not None and out.get("per_call_ns") is not None:
        why_not = _write(where, dict(out, key=key, version=CACHE_VERSION,
                                     measured=time.strftime("%Y-%m-%d %H:%M:%S %Z")))
    if why_not and out.get("per_call_ns") is not None:
        out["how"] = f"{out['how']}; not kept for the next profile: {why_not}"
    return out


def cache_base() -> str:
    """$XDG_CACHE_HOME (an absolute path; the XDG spec ignores a relative one), else ~/.cache."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")


def _entry(lib: Path):
    """(the cache file for this build of ``lib`` on this host, its key, "") or (None, "", why not)."""
    try:
        with open(lib, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError as e:
        return None, "", f"{lib} cannot be read ({e.strerror})"
    key = f"{digest}@{socket.gethostname()}"
    try:
        d = data_dir(cache_base())
    except PathError as e:
        return None, "", str(e)
    name = hashlib.sha256(key.encode()).hexdigest()[:24]
    return Path(d) / f"interpose-cost-{name}.json", key, ""


def _read(path: Path, key: str) -> Optional[dict]:
    """The entry at ``path`` for ``key``, if it is a regular file of ours no one else can write
    (not followed if a link) holding a figure; None otherwise (then it is measured again)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or others_can_write(st):
                return None
            doc = json.loads(f.read(65536).decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    per = doc.get("per_call_ns") if isinstance(doc, dict) else None
    if (doc is None or doc.get("key") != key or doc.get("version") != CACHE_VERSION or isinstance(per, bool)
            or not isinstance(per, (int, float)) or not 0 <= per < 1e9
            or not isinstance(doc.get("how"), str) or not isinstance(doc.get("measured"), str)):
        return None
    return doc


def _write(path: Path, doc: dict) -> str:
    """``doc`` into ``path`` by way of a new 0600 file renamed into place; "" or why it failed."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".interpose-cost.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        return f"cannot write in {path.parent} ({e.strerror})"
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return f"cannot write {path} ({e.strerror})"
    return ""


def _measure(lib: Path, count: int, rounds: int) -> Dict[str, object]:
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
