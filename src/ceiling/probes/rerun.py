"""What a re-run of a profiled program is given, for `ceiling profile --experiments`
(experiments/, which observes it through observe/ in a process group of its own): its deadline
(deadline_for), how to run it with the other page size as a user (page_setting), and the watch
of its working set (Footprint, the observation's look: the pages it referenced, window by
window, read from /proc/PID/smaps after writing 1 to /proc/PID/clear_refs, code and libraries
left out; no root needed, the process is ours). Nothing here starts a program or decides
anything (analysis/profile_experiments.py)."""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Tuple


# A re-run's deadline: DEADLINE_FACTOR times the profiled run's wall time, DEADLINE_FLOOR_S at
# least. A program beside a bandit slows by tens of percent, a few times on a node shared with
# other jobs; ten times is a run that will not end (it waits for input it had the first time, a
# lock file the first run left, a peer that is gone).
DEADLINE_FACTOR = 10
DEADLINE_FLOOR_S = 20.0


def deadline_for(profiled_s: float) -> float:
    """Seconds a re-run of a program whose profiled run took ``profiled_s`` may last."""
    return max(DEADLINE_FLOOR_S, DEADLINE_FACTOR * profiled_s)


def page_setting(root: str = "/") -> Dict[str, Any]:
    """How to run the program with the other page size, as a user (no root): where transparent
    huge pages are on for every mapping ("always"), off for it (PR_SET_THP_DISABLE); where they
    are on only where asked ("madvise"), on for what glibc's malloc maps (GLIBC_TUNABLES
    glibc.malloc.hugetlb=1, glibc 2.35 and later); {"why"} where neither can be done (THP
    "never", an older glibc). {"mode", "how", "env", "no_thp"}."""
    try:
        with open(os.path.join(root, "sys/kernel/mm/transparent_hugepage/enabled")) as f:
            text = f.read()
        mode = text[text.index("[") + 1:text.index("]")]
    except (OSError, ValueError):
        return {"why": "transparent huge pages are not offered (no /sys/kernel/mm/transparent_hugepage)"}
    if mode == "always":
        return {"mode": mode, "how": "huge pages off (PR_SET_THP_DISABLE)", "env": {}, "no_thp": True}
    if mode != "madvise":
        return {"mode": mode, "why": f"transparent huge pages are {mode!r} on this node: the page size cannot "
                                     "be changed without root"}
    try:
        lib, ver = os.confstr("CS_GNU_LIBC_VERSION").split()
        new_enough = tuple(int(x) for x in ver.split(".")[:2]) >= (2, 35)
    except (ValueError, OSError, AttributeError):
        new_enough = False
    if not new_enough:
        return {"mode": mode, "why": "transparent huge pages are 'madvise' and glibc is older than 2.35 (no "
                                     "glibc.malloc.hugetlb): the page size cannot be changed from outside"}
    tunables = ":".join(filter(None, [os.environ.get("GLIBC_TUNABLES", ""), "glibc.malloc.hugetlb=1"]))
    return {"mode": mode, "how": "huge pages on for malloc (GLIBC_TUNABLES=glibc.malloc.hugetlb=1)",
            "env": {"GLIBC_TUNABLES": tunables}, "no_thp": False}


# A window that referenced again FULL or more of the data the program had resident at its start
# may have taken in all it touches (a loop sweeping its arrays more than once in it): its bytes say
# how much data, not how fast it is gone through. The next window is then half as long, down to
# MIN_WINDOW_S (a look at a small program's pages costs well under a millisecond; at a large one's
# the look itself sets the window: 30-250 ms for 768 MiB of 4 KiB pages on the busy 2-vCPU Cascade
# Lake guest). Pages new in the window (its resident data grown) are not a second touch.
FULL = 0.5
MIN_WINDOW_S = 0.005


def full(referenced: float, rss: float, rss_before: float) -> bool:
    """Whether a window referenced again FULL or more of what was resident at its start (what it
    referenced less what became resident in it)."""
    return bool(rss_before) and referenced - max(0.0, rss - rss_before) >= FULL * rss_before


class Footprint:
    """A watch for a re-run (Instruments.look): every ``interval_s``, what the processes of the re-run's process group
    referenced since the last look (smaps' Referenced, code and libraries left out: _data_pages;
    then 1 written to clear_refs: the pages' accessed bits cleared; no root needed, the processes
    are ours), summed over them, one figure per window; and the most anonymous memory in huge
    pages seen (AnonHugePages). With ``clear`` False it only reads (the huge pages), leaving the
    accessed bits alone. With each window, the CPU time the group had in it, the interval asked
    for it (halved after a window that referenced FULL of its resident data), and its spans
    (timing()): a look walks every page twice (the read, then the clear), which on a large
    program takes as long as a window, so a page's window runs from the middle of one clear to
    the middle of the next read, and the CPU time is read between the two walks."""

    def __init__(self, interval_s: float, clear: bool = True, proc: str = "/proc"):
        self.interval_s, self.clear, self.proc = interval_s, clear, proc
        # the wait between looks: interval_s of its CPU time, stretched (8 times at most) where it had
        # less than a CPU in the last window (Denning's working set is over the process's own time; a
        # loop that had a quarter of a CPU on a busy node would else show a quarter of its working set)
        self.wait_s = interval_s
        self.windows: List[int] = []        # bytes referenced in each window, the first from the exec
        self.cpu_s: List[float] = []        # CPU time its processes had in each window (schedstat)
        self.intervals_s: List[float] = []  # the interval asked for before each window's look
        self.rss_bytes: List[int] = []      # its data resident at each look (Rss of the mappings counted)
        self.spans_s: List[Optional[float]] = []       # each window's span for its pages (None: the first)
        self.cpu_spans_s: List[Optional[float]] = []   # the span its CPU time was read over (None: the first)
        self.look_s = 0.0                   # time spent looking: the watch's own cost
        self.huge_bytes = 0
        self._cpu_ns: Dict[int, int] = {}
        self._last: Optional[Tuple[float, float]] = None   # the last look: (CPU read, middle of its clear)

    def __call__(self, pgid: int) -> None:
        group = _group(self.proc, pgid)     # before the clock: a scan of every process, slow on a busy node
        t0 = time.monotonic()
        total, huge, rss, seen, ran, pids = 0, 0, 0, False, 0, []
        for pid in group:
            fields = _data_pages(os.path.join(self.proc, str(pid), "smaps"))
            if not fields.get("Rss"):
                continue                # unreadable, or exiting (its memory being freed: nothing mapped)
            seen = True
            pids.append(pid)
            ns = _cpu_ns(os.path.join(self.proc, str(pid)))
            ran += ns - self._cpu_ns.get(pid, 0)
            self._cpu_ns[pid] = ns
            total += fields.get("Referenced", 0)
            huge += fields.get("AnonHugePages", 0)
            rss += fields.get("Rss", 0)
        t_read = time.monotonic()
        if self.clear:
            for pid in pids:
                try:
                    with open(os.path.join(self.proc, str(pid), "clear_refs"), "w") as f:
                        f.write("1")
                except OSError:
                    pass
        t_clear = time.monotonic()
        self.look_s += t_clear - t0         # the walks: the scan for the group is not counted
        self.huge_bytes = max(self.huge_bytes, huge)
        if seen and self.clear:
            self.windows.append(total)
            self.cpu_s.append(ran / 1e9)
            self.intervals_s.append(self.interval_s)
            self.rss_bytes.append(rss)
            last = self._last
            self.spans_s.append((t0 + t_read) / 2 - last[1] if last else None)
            self.cpu_spans_s.append(t_read - last[0] if last else None)
            self._last = (t_read, (t_read + t_clear) / 2)
            if full(total, rss, self.rss_bytes[-2] if len(self.rss_bytes) > 1 else 0):
                self.interval_s = max(MIN_WINDOW_S, self.interval_s / 2)
            share = ran / 1e9 / (t_read - last[0]) if last and t_read > last[0] else 1.0
            self.wait_s = self.interval_s / min(1.0, max(1 / 8, share))

    def timing(self) -> Dict[str, Any]:
        """The windows' intervals, spans and resident data, for the record (Referenced per second of
        CPU: analysis/profile_footprint.stream_rate)."""
        return {"interval_s": self.intervals_s, "span_s": self.spans_s, "cpu_span_s": self.cpu_spans_s,
                "rss_bytes": self.rss_bytes}


def _cpu_ns(path: str) -> int:
    """The CPU time of every thread of a process so far, in ns (schedstat's first field): a window
    in which the program hardly ran says nothing of what it touches when it runs."""
    total = 0
    try:
        tids = os.listdir(os.path.join(path, "task"))
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(os.path.join(path, "task", tid, "schedstat")) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


def _group(proc: str, pgid: int) -> List[int]:
    """The processes of process group ``pgid``."""
    out = []
    try:
        names = os.listdir(proc)
    except OSError:
        return [pgid]
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc, name, "stat"), "rb") as f:
                text = f.read()
            if int(text[text.rindex(b")") + 2:].split()[2]) == pgid:
                out.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _data_pages(path: str) -> Dict[str, int]:
    """Referenced, AnonHugePages and Rss of a process's smaps, in bytes, over its mappings but those of
    code and shared objects (the executable's and the libraries' files, mapped without write):
    their page-cache pages are shared with every process using the same library, whose accesses
    set the pages' referenced flag too (a register loop showed 1.1 MiB "referenced" in one window
    of four on a busy node, its own 8 KiB in the others). A file of data it maps stays counted.
    {} when it cannot be read."""
    out = {"Referenced": 0, "AnonHugePages": 0, "Rss": 0}
    counted, exe = False, _exe(path)
    try:
        with open(path) as f:
            for line in f:
                words = line.split()
                if not words:
                    continue
                if not words[0].endswith(":"):          # a mapping's header: range perms offset dev inode [path]
                    name = words[5] if len(words) > 5 else ""
                    code = "x" in words[1] or (name.startswith("/") and "w" not in words[1]
                                               and (".so" in os.path.basename(name) or name == exe))
                    counted = not code
                elif counted and words[0] in ("Referenced:", "AnonHugePages:", "Rss:") and len(words) == 3:
                    out[words[0].rstrip(":")] += int(words[1]) * 1024
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return out


def _exe(smaps: str) -> str:
    try:
        return os.readlink(os.path.join(os.path.dirname(smaps), "exe"))
    except OSError:
        return ""
