"""ceiling probe --dir DIR: the shared file system's slowdown factor, as users feel it.

Every ``--interval`` one probe iteration (bench/fsprobe.py: a random 1 MiB read and
write, one MD-Workbench iteration), each operation timed in C; every ``--window`` one
line per operation: the window's median and p99, and its slowdown factor against the
baseline (analysis/slowdown.py), a finding line when it is above ``--threshold``.
Runs in the foreground until ``--duration`` ends, or SIGTERM / SIGINT, which stop it
after the iteration in flight (the pool whole) with exit 0: its normal way to end
under systemd or Slurm.
"""
from __future__ import annotations

import argparse
import os
import select
import signal
import socket
import sys
import time
from typing import Dict, List, Optional

from ..errors import BadValueError, PathError, UsageError
from ..units import parse_count, parse_seconds, parse_size

NAME = "probe"
HELP = "the file system's slowdown factor, measured every second the way users feel it"
DESCRIPTION = ("Time a random 1 MiB read and write and one MD-Workbench iteration in --dir every --interval; "
               "print per window each operation's median, p99 and slowdown factor against its baseline.")
EPILOG = ("The data file and pool are kept in DIR/ceiling-probe-HOST between runs (--clean removes them). "
          "Stops on SIGTERM or Ctrl-C after the iteration in flight, exit 0.")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", metavar="DIR", help="a directory on the file system to probe (needed but with --report)")
    p.add_argument("--data-size", metavar="SIZE",
                   help="the data file the 1 MiB reads and writes land in (default 4G where the file system takes "
                        "O_DIRECT, else min(2 x RAM, 10%% of the free space); at least 1M)")
    p.add_argument("--files", default="10000", metavar="N",
                   help="small files in the pool, 3,901 bytes each (default 10000)")
    p.add_argument("--interval", default="1", metavar="SECONDS", help="one iteration every SECONDS (default 1)")
    p.add_argument("--window", default="10m", metavar="DURATION",
                   help="the span each median, p99 and slowdown factor covers (default 10m; as short as 1s)")
    p.add_argument("--duration", metavar="DURATION", help="stop after DURATION (default: until SIGTERM / Ctrl-C)")
    p.add_argument("--threshold", default="3", metavar="X",
                   help="a window whose slowdown factor is above X is a finding (default 3)")
    p.add_argument("--db", metavar="PATH", help="SQLite history the windows go to and the baseline comes from "
                   "(default: ~/.local/share/ceiling/history.db)")
    p.add_argument("--no-store", action="store_true", help="record nothing in the history (its baseline is "
                   "still read)")
    p.add_argument("--baseline", default="30d", metavar="DURATION",
                   help="the baseline: this probe's windows in the history over the last DURATION (default 30d); "
                        "with none, this run's first hour, marked")
    p.add_argument("--retain", default="90d", metavar="DURATION",
                   help="keep this long of probe windows in the history (default 90d)")
    p.add_argument("--full", default="1d", metavar="DURATION",
                   help="keep every window this long; older ones are merged into one per hour and operation "
                        "(default 1d)")
    p.add_argument("--listen", default="127.0.0.1:9464", metavar="ADDR:PORT",
                   help="serve Prometheus metrics here (default 127.0.0.1:9464; ':9464' for every address; off)")
    p.add_argument("--textfile", metavar="DIR", help="also write DIR/ceiling_probe.prom for node_exporter's textfile "
                   "collector, atomically, after each iteration")
    p.add_argument("--clean", action="store_true", help="remove this host's probe directory in --dir, and stop")
    p.add_argument("--report", nargs="*", metavar="HISTORY",
                   help="probe nothing: read these nodes' histories (each node's own file; default --db's) and show "
                        "each node's factors and the windows where the file system was slow for all of them or one "
                        "node alone")
    p.add_argument("--since", default="7d", metavar="DURATION", help="--report: the last DURATION (default 7d)")
    p.add_argument("--json", action="store_true", help="--report: the result as JSON")
    p.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)


def _threshold(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise BadValueError(f"--threshold {text!r}: not a number") from None
    if not x > 1:
        raise BadValueError(f"--threshold {text!r}: must be above 1 (a slowdown factor)")
    return x


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from ..bench import fsprobe_dir
    if args.report is not None:
        return _report(args)
    if not args.dir:
        raise UsageError("probe: give --dir DIR, a directory on the file system to probe (or --report)")
    if args.clean:
        kept = fsprobe_dir.clean(args.dir)
        if kept:
            print(f"ceiling probe: {kept}", file=sys.stderr)
            return 1
        print(f"ceiling probe: removed {os.path.join(args.dir, fsprobe_dir.dir_name())} (or there was none)")
        return 0
    data_size = parse_size(args.data_size, what="--data-size") if args.data_size is not None else 0
    if args.data_size is not None and (data_size < fsprobe_dir.XFER or data_size % fsprobe_dir.ALIGN):
        raise BadValueError(f"--data-size {args.data_size!r}: must be at least 1 MiB and a multiple of 4 KiB")
    files = parse_count(args.files, what="--files", low=1, high=999_999) or 1
    interval = parse_seconds(args.interval, what="--interval", low=0.01) or 1.0
    window = parse_seconds(args.window, what="--window", low=1.0) or 600.0
    duration = parse_seconds(args.duration, what="--duration", low=0.01, high=3650 * 86400)
    threshold = _threshold(args.threshold)
    baseline_s = parse_seconds(args.baseline, what="--baseline", low=60, high=3650 * 86400) or 0.0
    retain_s = parse_seconds(args.retain, what="--retain", low=60, high=3650 * 86400) or 0.0
    full_s = parse_seconds(args.full, what="--full", low=60, high=3650 * 86400) or 0.0
    from ..report import prometheus
    from ..results.store import Store
    listen = prometheus.parse_listen(args.listen)
    with fsprobe_dir.ProbeDir(args.dir) as pd:
        from ..bench.fsprobe import OPS
        exporter = prometheus.Exporter(listen, args.textfile, OPS)      # a port in use fails before any preparation
        store = Store(args.db, readonly=args.no_store)
        rec = _Recorder(store, socket.gethostname(), os.path.realpath(pd.path), args.no_store, retain_s, full_s)
        history = rec.baseline(baseline_s)
        if not data_size:
            data_size, why = pd.default_size()
            print(f"ceiling probe: data file of {data_size / (1 << 20):.0f} MiB: {why} (--data-size to choose)")
        prep = pd.prepare(data_size, files)
        # from the header on (what users and scripts wait for) SIGTERM and SIGINT stop the loop cleanly: a
        # Ctrl-C between the header and the loop's first iteration was a KeyboardInterrupt (exit 130)
        stop = _Stop()
        try:
            _header(prep, interval)
            if history:
                print(f"ceiling probe: baseline from the history: {len(history)} operations, the last "
                      f"{args.baseline} of this probe's windows", flush=True)
            else:
                print("ceiling probe: no baseline in the history yet: this run's first hour is the baseline "
                      "(factors marked so)", flush=True)
            if listen:
                print(f"ceiling probe: Prometheus metrics on http://{listen[0]}:{listen[1]}/metrics", flush=True)
            return _loop(pd, prep, interval, window, duration, threshold, args.seed, history, rec, exporter, stop)
        finally:
            stop.close()
            store.close()
            exporter.close()


def _header(prep, interval: float) -> None:
    from ..bench.fsprobe import BYTES_PER_ITERATION
    for what in prep.created:
        print(f"ceiling probe: made {what} in {prep.path}")
    if prep.repaired:
        print(f"ceiling probe: re-created {prep.repaired} pool file(s) a killed probe left missing or short")
    print(f"ceiling probe: {prep.path} on {prep.fstype}; reads and writes: {prep.cache_mode}")
    if prep.memory_fs:
        print(f"ceiling probe: {prep.fstype} is memory: this is a RAM probe, not a file-system probe")
    print(f"ceiling probe: one iteration every {interval:g} s, {BYTES_PER_ITERATION / 2**20:.2f} MiB each "
          f"({BYTES_PER_ITERATION / interval / 2**20:.2f} MiB/s, "
          f"{BYTES_PER_ITERATION * 3600 / interval / 2**30:.1f} GiB/hour), one operation in flight", flush=True)


class _Stop:
    """SIGTERM and SIGINT asked for a stop: the loop ends after the iteration in flight."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self.r, self.w = os.pipe()
        os.set_blocking(self.w, False)
        self.old = {s: signal.signal(s, self._on) for s in (signal.SIGTERM, signal.SIGINT)}

    def _on(self, signum, frame) -> None:
        self.signum = signum
        try:
            os.write(self.w, b"x")
        except OSError:
            pass

    def sleep(self, seconds: float) -> None:
        if seconds > 0 and self.signum is None:
            select.select([self.r], [], [], seconds)

    def close(self) -> None:
        if self.old is None:
            return
        for s, h in self.old.items():
            signal.signal(s, h)
        self.old = None
        os.close(self.r)
        os.close(self.w)


class _Recorder:
    """The history's side of the probe: its baseline, and each window's rows (with retention)."""

    def __init__(self, store, host: str, directory: str, off: bool, retain_s: float, full_s: float = 86400.0):
        self.store, self.host, self.dir, self.off, self.retain_s = store, host, directory, off, retain_s
        self.full_s = full_s
        self.failed = False
        self.tidied = -1.0          # the hour of the last downsampling: once an hour is enough

    def baseline(self, span_s: float) -> Dict[str, float]:
        got = self.store.probe_baseline(self.host, self.dir, time.time() - span_s)
        return {op: med for op, (med, _) in got.items()}

    def save(self, windows: list) -> None:
        if self.off:
            return
        from ..errors import CeilingError
        rows = [(self.host, self.dir, w.op, w.start, w.end, w.n, w.errors, w.median_s, w.p99_s, w.baseline_s,
                 w.baseline_kind, w.slowdown) for w in windows]        # store_probe.COLUMNS
        now = time.time()
        hour = now // 3600
        try:
            self.store.save_probe(rows, now - self.retain_s, now - self.full_s if hour != self.tidied else None)
            self.tidied = hour
        except CeilingError as e:          # the probe goes on; said once
            if not self.failed:
                print(f"ceiling probe: windows not recorded in the history: {e}", file=sys.stderr, flush=True)
            self.failed = True


def _loop(pd, prep, interval: float, window: float, duration: Optional[float], threshold: float,
          seed: Optional[int], history: Dict[str, float], rec: "_Recorder", exporter, stop: "_Stop") -> int:
    from ..analysis import slowdown
    from ..bench.fsprobe import OPS, Prober
    prober = Prober(prep, seed)
    base = slowdown.Baseline(history)
    samples: Dict[str, List[float]] = {op: [] for op in OPS}
    errors: Dict[str, int] = {op: 0 for op in OPS}
    t0 = time.monotonic()
    wall0 = time.time()
    w_start = 0.0
    iterations = 0
    it = None
    try:
        while stop.signum is None:
            now = time.monotonic() - t0
            if duration is not None and now >= duration:
                break
            it = prober.iterate()
            iterations += 1
            t = time.monotonic() - t0
            for op, s in it.seconds.items():
                samples[op].append(s)
                base.add(t, op, s)
                exporter.observe(op, s)
            for op, e in it.errors.items():
                errors[op] += 1
                exporter.failed(op)
                print(f"ceiling probe: {op} failed: {e}", file=sys.stderr, flush=True)
            if t - w_start >= window:
                ws = _window(slowdown, base, samples, errors, wall0 + w_start, wall0 + t, threshold)
                rec.save(ws)
                for w in ws:
                    exporter.window(w.op, w.slowdown, w.p99_s)
                w_start = t
            _flush(exporter)
            nxt = iterations * interval
            if duration is not None:
                nxt = min(nxt, duration)
            stop.sleep(nxt - (time.monotonic() - t0))
        t = time.monotonic() - t0
        if any(samples.values()) or any(errors.values()):
            rec.save(_window(slowdown, base, samples, errors, wall0 + w_start, wall0 + t, threshold))
    finally:
        prober.close()
        whole = False
        if prober.missing is None and not last_md_failed(it if iterations else None):
            try:
                pd.stopped(prep.data_size, prep.files)
                whole = True
            except OSError:                  # the file system went away: the next start checks the pool
                pass
    why = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT"}.get(stop.signum, "")
    pool = "the pool is whole" if whole else "the pool will be checked and repaired at the next start"
    print(f"ceiling probe: stopped{' on ' + why if why else ''} after {iterations} iterations; {pool}", flush=True)
    return 0


def last_md_failed(it) -> bool:
    """Whether the last iteration's MD-Workbench step failed (the pool may be short of a file)."""
    return it is not None and any(op.startswith("md.") for op in it.errors)


_said: Dict[str, bool] = {}


def _flush(exporter) -> None:
    try:
        exporter.flush()
    except OSError as e:
        if not _said.get("textfile"):
            print(f"ceiling probe: --textfile not written: {e.strerror or e}", file=sys.stderr, flush=True)
        _said["textfile"] = True


def _window(slowdown, base, samples, errors, start: float, end: float, threshold: float) -> list:
    out = []
    stamp = time.strftime("%H:%M:%S", time.gmtime(start)) + "-" + time.strftime("%H:%M:%SZ", time.gmtime(end))
    for op in samples:
        b, kind = base.of(op)
        w = slowdown.window(op, start, end, samples[op], errors[op], b, kind)
        print(_line(stamp, w, threshold), flush=True)
        out.append(w)
        samples[op] = []
        errors[op] = 0
    return out


def _ms(s: Optional[float]) -> str:
    return "-" if s is None else (f"{s * 1e3:.3g} ms" if s >= 1e-3 else f"{s * 1e6:.3g} us")


def _line(stamp: str, w, threshold: float) -> str:
    factor = "unknown (no baseline yet)" if w.slowdown is None else f"{w.slowdown:.2f}x"
    mark = {"first hour": " (baseline: this run's first hour)", "history": " (baseline: history)"}.get(
        w.baseline_kind, "")
    err = f", {w.errors} errors" if w.errors else ""
    finding = f"  FINDING: above {threshold:g}x" if w.above(threshold) else ""
    return (f"{stamp} {w.op:<9} n={w.n}{err} median {_ms(w.median_s)} p99 {_ms(w.p99_s)} "
            f"slowdown {factor}{mark}{finding}")


def _report(args: argparse.Namespace) -> int:
    """``--report``: the histories read (each one that cannot be is one line; none read is an error), their
    windows over ``--since`` set side by side (analysis/slowdown.across_nodes)."""
    import json

    from ..analysis.slowdown import across_lines, across_nodes
    from ..errors import CeilingError
    from ..results.store import Store
    since = parse_seconds(args.since, what="--since", low=60, high=3650 * 86400) or 0.0
    threshold = _threshold(args.threshold)
    paths = args.report or [args.db]
    rows, read = [], 0
    for path in paths:
        if path and not os.path.isfile(path):
            print(f"ceiling probe: {path}: no such file; left out", file=sys.stderr)
            continue
        try:
            store = Store(path, readonly=True)
            try:
                got = store.probe_windows()
            finally:
                store.close()
        except CeilingError as e:
            said = str(e) if path and path in str(e) else f"{path or 'the history'}: {e}"
            print(f"ceiling probe: {said}; left out", file=sys.stderr)
            continue
        read += 1
        rows += [r for r in got if r[4] >= time.time() - since]
    if not read:
        raise PathError("probe --report: no history could be read")
    res = across_nodes(rows, threshold)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print("\n".join(across_lines(res)))
    return 0
