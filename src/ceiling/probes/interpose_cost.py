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

The same cache keeps a second figure of the build (``loader_reads``): what the
dynamic loader reads to load the interposer into each process image, before any
of the interposer's code runs (glibc's open_verify reads the library's ELF
header: 832 bytes, one read, here). The kernel counts it in the program's rchar
and syscr, so ``ceiling profile`` takes it off the program's /proc totals once
per image that wrote a record. It is measured, not assumed: ceiling-launch (a
small program of ours, linked to libc alone, as the interposer is) run with and
without the interposer preloaded, its /proc/PID/io read as a zombie, less what
the interposer's record says it read itself (self_read, self_reads); the same
in every one of ROUNDS runs, or no figure, with the reason.
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
    return _cached(lib, cache, "interpose-cost", ("per_call_ns",), _figure, CACHE_VERSION,
                   lambda: _measure(lib, count, rounds))


def _cached(lib: Path, cache: bool, prefix: str, keys, valid, version: int, measure_now) -> Dict[str, object]:
    """The figures ``keys`` for this build of ``lib`` on this host: from its cache entry
    (``prefix``, checked by ``valid`` and ``version``) when there is one, else ``measure_now()``,
    kept for the next profile when ``cache`` and the first key was measured."""
    where, key, why_not = _entry(lib, prefix) if cache else (None, "", "")
    if where is not None:
        hit = _read(where, key, valid, version)
        if hit is not None:
            return dict({k: hit[k] for k in keys}, cached=True,
                        how=f"{hit['how']}; measured {hit['measured']} for this build of the interposer on this "
                            f"host, kept in {where}")
    out = measure_now()
    out["cached"] = False
    if where is not None and out.get(keys[0]) is not None:
        why_not = _write(where, dict(out, key=key, version=version,
                                     measured=time.strftime("%Y-%m-%d %H:%M:%S %Z")))
    if why_not and out.get(keys[0]) is not None:
        out["how"] = f"{out['how']}; not kept for the next profile: {why_not}"
    return out


def cache_base() -> str:
    """$XDG_CACHE_HOME (an absolute path; the XDG spec ignores a relative one), else ~/.cache."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")


def _entry(lib: Path, prefix: str = "interpose-cost"):
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
    return Path(d) / f"{prefix}-{name}.json", key, ""


def _figure(doc: dict) -> bool:
    per = doc.get("per_call_ns")
    return not isinstance(per, bool) and isinstance(per, (int, float)) and 0 <= per < 1e9


def _read(path: Path, key: str, valid=_figure, version: int = CACHE_VERSION) -> Optional[dict]:
    """The entry at ``path`` for ``key``, if it is a regular file of ours no one else can write
    (not followed if a link) holding a figure (``valid``); None otherwise (then it is measured
    again)."""
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
    if (not isinstance(doc, dict) or doc.get("key") != key or doc.get("version") != version or not valid(doc)
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


# ------------------------------------------------------------------ the loader's reads

LOADER_VERSION = 1     # the loader entry's layout and method


def _counts(doc: dict) -> bool:
    return all(not isinstance(doc.get(k), bool) and isinstance(doc.get(k), int) and 0 <= doc[k] < 1 << 30
               for k in ("rchar", "syscr"))


def loader_reads(lib: Path, rounds: int = ROUNDS, cache: bool = True) -> Dict[str, object]:
    """{"rchar": bytes, "syscr": read calls, "how": words, "cached": bool}: what the dynamic
    loader reads, per process image, to load the interposer ``lib`` (module docstring); with
    None for both and "why" where it could not be measured or was not the same every time.
    From the cache when this build was measured on this host."""
    return _cached(lib, cache, "interpose-loader", ("rchar", "syscr"), _counts, LOADER_VERSION,
                   lambda: _loader(lib, rounds))


def _loader(lib: Path, rounds: int) -> Dict[str, object]:
    from .. import core
    prog = core.launcher_path()
    if not os.access(prog, os.X_OK):
        return {"rchar": None, "syscr": None, "why": f"{prog} is not built: nothing to calibrate with"}
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT")}
    seen = set()
    with temporary_dir("ceiling-iploader-") as tmp:
        for i in range(rounds):
            plain = _io_at_exit(str(prog), base)
            out = Path(tmp) / f"r{i}"
            out.mkdir(mode=0o700)
            loaded = _io_at_exit(str(prog), dict(base, LD_PRELOAD=str(lib), CEILING_INTERPOSE_OUT=f"{out}/r.%p"))
            own = _self_read(out)
            if plain is None or loaded is None or own is None:
                return {"rchar": None, "syscr": None,
                        "why": "/proc/PID/io of the calibration run could not be read" if own is not None else
                               "the calibration run under the interposer wrote no whole record"}
            seen.add((loaded["rchar"] - plain["rchar"] - own[0], loaded["syscr"] - plain["syscr"] - own[1]))
    if len(seen) != 1:
        return {"rchar": None, "syscr": None,
                "why": "the loader's reads differed between runs (bytes, calls: "
                       + ", ".join(f"{b}, {c}" for b, c in sorted(seen)) + ")"}
    rchar, syscr = seen.pop()
    if rchar < 0 or syscr < 0:
        return {"rchar": None, "syscr": None,
                "why": f"a run under the interposer read less than one without it ({rchar} B, {syscr} calls)"}
    return {"rchar": rchar, "syscr": syscr,
            "how": f"ceiling-launch (linked to libc alone, as the interposer is) run {rounds} times with and without "
                   "the interposer preloaded, its /proc/PID/io read as a zombie, less the interposer's own reads "
                   f"(its record's self_read): {rchar} B in {syscr} read call(s) every time"}


def _io_at_exit(prog: str, env: Dict[str, str]) -> Optional[Dict[str, int]]:
    """The /proc/PID/io of ``prog`` run without arguments (it prints its usage and exits 2),
    read while it is a zombie: its final counts."""
    p = subprocess.Popen([prog], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
        with open(f"/proc/{p.pid}/io") as f:
            io = {k: int(v) for k, v in (line.split(":") for line in f if ":" in line)}
    except (OSError, ValueError):
        io = None
    finally:
        p.wait()
    return io if io and "rchar" in io and "syscr" in io else None


def _self_read(d: Path) -> Optional[tuple]:
    """(self_read, self_reads) of the one whole record in the directory ``d``."""
    from . import interpose_record
    ends = [r.end for r in interpose_record.latest(interpose_record.read_dir(str(d))) if r.end is not None]
    ends = [e for e in ends if isinstance(e.self_read, int) and isinstance(e.self_reads, int)]
    return (ends[0].self_read, ends[0].self_reads) if len(ends) == 1 else None
