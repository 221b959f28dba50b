"""The node as a whole, read from /proc and /sys: one read is a ``NodeRead`` of counters and levels,
two successive reads give the rates (``rates``). ``ceiling monitor`` samples with it every
``--interval``; profile and trace can take the same reads (their per-process part stays in
proc_sampler.py).

What is read, and how each figure is made:

- CPU: /proc/stat's first line (USER_HZ ticks summed over CPUs); each state's share of the ticks
  that passed (``cpu.user``, ``cpu.system``, ``cpu.iowait``, ``cpu.steal``, ... as fractions 0-1 of
  the node's CPU time; nice counts as user, irq and softirq as system, as top and vmstat show them).
- Memory: /proc/meminfo, bytes (``mem.total``, ``mem.available``, ``mem.used`` = total - available,
  ``mem.cached``, ``mem.dirty``).
- Disks: /proc/diskstats, whole disks only (those /sys/block lists; loop and ram devices left out),
  512-byte sectors whatever the device's sector size (the kernel's convention): ``disk.DEV.read_Bps``,
  ``write_Bps``, ``read_iops``, ``write_iops`` and ``busy`` (io_ticks: the fraction of the interval
  with I/O in flight, as iostat's %util).
- Network: /proc/net/dev, per interface: ``net.IF.rx_Bps``, ``tx_Bps``.
- PSI: /proc/pressure/{cpu,memory,io} (Linux 4.20+, and only where the kernel was built and booted
  with it): ``psi.RES.some`` / ``full``, the fraction of the interval some / all tasks stalled.
  Absent: ``NodeRead.psi`` is None and ``psi_note`` says why.
- Load: /proc/loadavg (``load.1``, ``load.5``, ``load.15``).

Counters: a counter smaller than before wrapped (32-bit fields of diskstats on 32-bit kernels) when
the earlier value was in the top half of 32 bits, and the difference is taken modulo 2^32; otherwise
the device was reset or replaced and that interval's rate of it is left out. A device or interface
that appears has its first rate one interval later; one that disappears is no longer in the rates.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
CPU_STATES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
PSI = ("cpu", "memory", "io")
SECTOR = 512          # /proc/diskstats counts 512-byte sectors (Documentation/admin-guide/iostats.rst)
WRAP = 1 << 32


@dataclass
class NodeRead:
    """One read of the node's counters (monotonic ``t``, wall clock ``wall``, seconds)."""

    t: float
    wall: float
    cpu: Dict[str, int] = field(default_factory=dict)                       # ticks per state
    mem: Dict[str, int] = field(default_factory=dict)                       # bytes
    disks: Dict[str, Tuple[int, int, int, int, int]] = field(default_factory=dict)  # rd ios, rd sect, wr..., ticks ms
    nets: Dict[str, Tuple[int, int]] = field(default_factory=dict)          # rx bytes, tx bytes
    psi: Optional[Dict[str, int]] = None                                    # "io.some" -> total microseconds
    load: Tuple[float, ...] = ()


class NodeSampler:
    """Reads of one node under ``root`` ("/" for this one; a recorded tree in tests)."""

    def __init__(self, root: str = "/"):
        self.proc = os.path.join(root, "proc")
        self.sys = os.path.join(root, "sys")
        self.psi_note = ""
        self._whole: Optional[set] = None

    def read(self) -> NodeRead:
        r = NodeRead(time.monotonic(), time.time())
        r.cpu = _cpu(self.proc)
        r.mem = _meminfo(self.proc)
        r.disks = self._disks()
        r.nets = _netdev(self.proc)
        r.psi = _psi(self.proc)
        if r.psi is None and not self.psi_note:
            self.psi_note = (f"no pressure stall information ({self.proc}/pressure absent: kernel before 4.20, "
                             "or built or booted without PSI, psi=1)")
        r.load = _loadavg(self.proc)
        return r

    def _disks(self) -> Dict[str, Tuple[int, int, int, int, int]]:
        try:
            whole: Optional[set] = set(os.listdir(os.path.join(self.sys, "block")))
        except OSError:
            whole = None                       # no /sys: every device but partitions' guess
        out = {}
        for name, fields in _diskstats(self.proc).items():
            if name.startswith(("loop", "ram")):
                continue
            if whole is not None and name not in whole:
                continue                       # a partition: its disk already counts its I/O
            out[name] = fields
        return out


def _delta(a: int, b: int) -> Optional[int]:
    if b >= a:
        return b - a
    if a >= WRAP // 2 and a < WRAP and b < WRAP:
        return b + WRAP - a                   # a 32-bit counter wrapped
    return None                               # reset or replaced: no rate this interval


def rates(a: NodeRead, b: NodeRead) -> Dict[str, float]:
    """The node's figures over the interval from ``a`` to ``b`` (module docstring for each name)."""
    dt = b.t - a.t
    out: Dict[str, float] = {}
    if dt <= 0:
        return out
    d = {s: _delta(a.cpu.get(s, 0), b.cpu.get(s, 0)) for s in CPU_STATES if s in b.cpu}
    if d and all(v is not None for v in d.values()):
        total = sum(d.values())                # type: ignore[arg-type]
        if total > 0:
            g = {k: v / total for k, v in d.items()}     # type: ignore[operator]
            out["cpu.user"] = g.get("user", 0) + g.get("nice", 0)
            out["cpu.system"] = g.get("system", 0) + g.get("irq", 0) + g.get("softirq", 0)
            out["cpu.iowait"] = g.get("iowait", 0)
            out["cpu.steal"] = g.get("steal", 0)
            out["cpu.idle"] = g.get("idle", 0)
    m = b.mem
    for key, name in (("MemTotal", "total"), ("MemAvailable", "available"), ("Cached", "cached"),
                      ("Dirty", "dirty")):
        if key in m:
            out[f"mem.{name}"] = float(m[key])
    if "MemTotal" in m and "MemAvailable" in m:
        out["mem.used"] = float(m["MemTotal"] - m["MemAvailable"])
    for dev, now in b.disks.items():
        was = a.disks.get(dev)
        if was is None:
            continue
        dd = [_delta(x, y) for x, y in zip(was, now)]
        names = (("read_iops", 1.0), ("read_Bps", SECTOR), ("write_iops", 1.0), ("write_Bps", SECTOR),
                 ("busy", 1e-3))
        for (name, scale), v in zip(names, dd):
            if v is not None:
                out[f"disk.{dev}.{name}"] = min(v * 1e-3 / dt, 1.0) if name == "busy" else v * scale / dt
    for nic, now in b.nets.items():
        was = a.nets.get(nic)
        if was is None:
            continue
        for name, x, y in (("rx_Bps", was[0], now[0]), ("tx_Bps", was[1], now[1])):
            v = _delta(x, y)
            if v is not None:
                out[f"net.{nic}.{name}"] = v / dt
    if a.psi is not None and b.psi is not None:
        for key, now in b.psi.items():
            if key in a.psi:
                v = _delta(a.psi[key], now)
                if v is not None:
                    out[f"psi.{key}"] = min(v / 1e6 / dt, 1.0)
    for name, v in zip(("load.1", "load.5", "load.15"), b.load):
        out[name] = v
    return out


def _read(path: str) -> str:
    with open(path, errors="replace") as f:      # a garbled file is figures missing, never a traceback
        return f.read()


def _cpu(proc: str) -> Dict[str, int]:
    try:
        first = _read(f"{proc}/stat").split("\n", 1)[0].split()
        if first and first[0] == "cpu":
            return {n: int(v) for n, v in zip(CPU_STATES, first[1:])}
    except (OSError, ValueError):
        pass
    return {}


def _meminfo(proc: str) -> Dict[str, int]:
    out = {}
    try:
        for line in _read(f"{proc}/meminfo").splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                out[key] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    except OSError:
        pass
    return out


def _diskstats(proc: str) -> Dict[str, Tuple[int, int, int, int, int]]:
    out = {}
    try:
        text = _read(f"{proc}/diskstats")
    except OSError:
        return out
    for line in text.splitlines():
        f = line.split()
        if len(f) < 14:
            continue
        try:   # reads completed, sectors read, writes completed, sectors written, time doing I/O (ms)
            out[f[2]] = (int(f[3]), int(f[5]), int(f[7]), int(f[9]), int(f[12]))
        except ValueError:
            continue
    return out


def _netdev(proc: str) -> Dict[str, Tuple[int, int]]:
    out = {}
    try:
        text = _read(f"{proc}/net/dev")
    except OSError:
        return out
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        f = rest.split()
        if not sep or len(f) < 9:
            continue
        try:
            out[name.strip()] = (int(f[0]), int(f[8]))
        except ValueError:
            continue
    return out


def _psi(proc: str) -> Optional[Dict[str, int]]:
    if not os.path.isdir(f"{proc}/pressure"):
        return None
    out: Dict[str, int] = {}
    for res in PSI:
        try:
            for line in _read(f"{proc}/pressure/{res}").splitlines():
                kind, *kv = line.split()
                total = dict(x.split("=", 1) for x in kv if "=" in x).get("total")
                if total is not None and total.isdigit():
                    out[f"{res}.{kind}"] = int(total)
        except (OSError, ValueError):
            continue                  # EOPNOTSUPP where PSI is compiled in but off (psi=0)
    return out or None


def _loadavg(proc: str) -> Tuple[float, ...]:
    try:
        return tuple(float(x) for x in _read(f"{proc}/loadavg").split()[:3])
    except (OSError, ValueError):
        return ()


TRACKED = (("disk.", ".read_Bps", "disk {} read bytes/s", "B/s"),
           ("disk.", ".write_Bps", "disk {} write bytes/s", "B/s"),
           ("net.", ".rx_Bps", "net {} rx bytes/s", "B/s"),
           ("net.", ".tx_Bps", "net {} tx bytes/s", "B/s"))


def counter_tracks(reads, t0_ns: int, interval_s: float = 0.0):
    """The node's tracks over a traced run (results/events.Counters): each disk's read and write
    bytes/s, each network interface's (not the loopback) received and sent bytes/s, the share of
    the node's CPU time busy (user + system), and PSI io and cpu "some" where the kernel has it; each value
    the rate over one interval between two reads, placed at the interval's end (a run shorter than
    one interval still has the one from before its start to after its end), in ns since ``t0_ns``
    (CLOCK_MONOTONIC, as the events). A device or interface that moved nothing over the whole run
    is left out."""
    import numpy as np

    from ..results.events import Counters, Track
    series: Dict[Tuple[str, str, str], Tuple[list, list]] = {}

    def add(name: str, unit: str, device: str, t: int, v: float) -> None:
        ts, vs = series.setdefault((name, unit, device), ([], []))
        ts.append(t)
        vs.append(v)
    for a, b in zip(reads, reads[1:]):
        r = rates(a, b)
        if not r:
            continue
        t = int(round(b.t * 1e9)) - int(t0_ns)
        if t < 0:
            continue                        # over before the trace's start (the program's first process)
        for key, v in r.items():
            for lead, tail, name, unit in TRACKED:
                if key.startswith(lead) and key.endswith(tail):
                    dev = key[len(lead):-len(tail)]
                    if dev != "lo":
                        add(name.format(dev), unit, dev, t, v)
        if "cpu.user" in r and "cpu.system" in r:
            add("cpu busy", "share", "", t, r["cpu.user"] + r["cpu.system"])
        if "psi.io.some" in r:
            add("psi io some", "share", "", t, r["psi.io.some"])
        if "psi.cpu.some" in r:         # a runnable task waited for a CPU: tells a preempted call from a slow one
            add("psi cpu some", "share", "", t, r["psi.cpu.some"])
    tracks = [Track(name, unit, "node", np.array(ts, np.int64), np.array(vs, np.float64), device=dev)
              for (name, unit, dev), (ts, vs) in series.items() if unit != "B/s" or any(vs)]
    return Counters(tracks, interval_s)
