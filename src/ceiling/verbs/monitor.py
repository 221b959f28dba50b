"""ceiling monitor: the node's behaviour over time, linked to its Slurm jobs (or to one command).

Every ``--interval`` (10 s) one sample: the node from /proc and /sys (probes/node_sampler.py) and each
Slurm job from its cgroup (probes/jobs.py), or with ``-- CMD`` that command's process tree. Each sample
is one line on standard output, rows in the history's time series (results/store_monitor.py: each node
its own file, on a local disk; old samples kept as minute means after ``--full``, all dropped after
``--retain``) and the metrics of the probe's exporter (report/prometheus_monitor.py: HTTP on loopback,
node_exporter's textfile). SIGTERM or Ctrl-C stop it after the sample in flight, its rows written:
exit 0 (with ``-- CMD``: the signal goes to the command, and the command's exit status is the
monitor's). Its own CPU time is measured (getrusage) and stated when it stops.

A history whose write failed (a full disk, a lock held too long) keeps its rows in memory (up to
``PENDING_MAX`` samples) and tries again at the next sample: nothing is lost while it recovers.
"""
from __future__ import annotations

import argparse
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

from ..errors import BadValueError, PathError, UsageError
from ..units import parse_seconds

NAME = "monitor"
HELP = "the node's CPU, memory, disks, network and pressure over time, per Slurm job, to the history and Prometheus"
DESCRIPTION = ("Sample /proc and each Slurm job's cgroup every --interval; print one line per sample, keep the "
               "samples in the history and export them for Prometheus. With -- CMD, one command and its processes.")
EPILOG = ("Stops on SIGTERM or Ctrl-C after the sample in flight, exit 0 (with -- CMD: the command's exit status). "
          "Cost: 0.03% of one CPU at 10 s on a 2-CPU VM (benchmarks/monitor_cost.py); each run states its own")
PENDING_MAX = 360           # samples kept in memory while the history cannot be written (an hour at 10 s)
CACHE_KIB = 256             # SQLite page cache of the monitor's history connection (Store.limit_cache)


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS]",
                   help="monitor this command and its processes, and stop when it ends")
    p.add_argument("--interval", default="10s", metavar="DURATION", help="one sample every DURATION (default 10s; "
                   "from 0.1s)")
    p.add_argument("--duration", metavar="DURATION", help="stop after DURATION (default: until SIGTERM / Ctrl-C)")
    p.add_argument("--db", metavar="PATH", help="SQLite history the samples go to, on a local disk (default: "
                   "~/.local/share/ceiling/history.db)")
    p.add_argument("--no-store", action="store_true", help="record nothing in the history")
    p.add_argument("--retain", default="90d", metavar="DURATION",
                   help="keep this long of samples in the history (default 90d)")
    p.add_argument("--full", default="1d", metavar="DURATION",
                   help="keep every sample this long; older ones become one mean per minute (default 1d)")
    p.add_argument("--listen", default="127.0.0.1:9465", metavar="ADDR:PORT",
                   help="serve Prometheus metrics here (default 127.0.0.1:9465; ':9465' for every address; off)")
    p.add_argument("--textfile", metavar="DIR", help="also write DIR/ceiling_monitor.prom for node_exporter's "
                   "textfile collector, atomically, after each sample")
    p.add_argument("--slurm-root", default="/", metavar="DIR", help=argparse.SUPPRESS)   # a recorded tree (tests)
    g = p.add_argument_group("report (samples nothing: reads the history)")
    g.add_argument("--report", action="store_true", help="the node's (or --job's) time line in 10-minute segments, "
                   "the jobs of those minutes compared, and the probe's slowdown over the same minutes")
    g.add_argument("--job", metavar="ID", help="--report: this job (a Slurm job id, or cmd-PID of monitor -- CMD)")
    g.add_argument("--since", default="1d", metavar="DURATION", help="--report: the last DURATION (default 1d)")
    g.add_argument("--until", metavar="DURATION", help="--report: up to DURATION ago (default now)")
    g.add_argument("--segment", default="10m", metavar="DURATION",
                   help="--report: the segments' length (default 10m, as DKRZ shows them; shorter for a short job)")
    g.add_argument("--threshold", default="3", metavar="X",
                   help="--report: a probe factor above X is the file system slow (default 3)")
    g.add_argument("--html", metavar="FILE", help="--report: also as a self-contained HTML page with its plots")
    g.add_argument("--json", action="store_true", help="--report: the result as JSON")


def shared_fs(path: str, mountinfo: str = "/proc/self/mountinfo") -> Optional[str]:
    """The network or user-space file system ``path``'s directory is on (machine/storage.py's list, as
    the probe and bench storage tell them), or None: SQLite's locks are not to be trusted there."""
    from ..machine.storage import NETWORK_FS, mount_of
    d = os.path.dirname(os.path.abspath(path)) or "."
    while not os.path.exists(d) and os.path.dirname(d) != d:
        d = os.path.dirname(d)
    m = mount_of(d, mountinfo)
    if m is not None and (m.fstype in NETWORK_FS or m.fstype.startswith("fuse")):
        return f"{m.fstype} ({m.source})"
    return None


def main(args: argparse.Namespace, argv: List[str]) -> int:
    if args.report:
        return _report(args)
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if args.command and not cmd:
        raise UsageError("monitor: no command after -- (ceiling monitor [options] -- CMD [ARGS])")
    if cmd and args.duration:
        raise UsageError("monitor: --duration with -- CMD: the command's end stops the monitor")
    interval = parse_seconds(args.interval, what="--interval", low=0.1, high=3600) or 10.0
    duration = parse_seconds(args.duration, what="--duration", low=0.1, high=3650 * 86400)
    retain_s = parse_seconds(args.retain, what="--retain", low=60, high=3650 * 86400) or 0.0
    full_s = parse_seconds(args.full, what="--full", low=60, high=3650 * 86400) or 0.0
    from ..report import prometheus
    from ..report.prometheus_monitor import TEXTFILE, MonitorCollector
    from ..results.store import Store, default_db_path
    listen = prometheus.parse_listen(args.listen)
    textfile = prometheus.textfile_path(args.textfile, TEXTFILE)
    store = None
    if not args.no_store:
        db = args.db or str(default_db_path())
        on = shared_fs(db)
        if on is not None:
            raise PathError(f"--db {db}: on {on}, a network file system: SQLite writers there can corrupt it; "
                            "give each node its own history on a local disk (--db /var/tmp/ceiling-$(hostname).db)")
        store = Store(args.db, check=True)          # damaged: exit 5; read-only: exit 4, before any sample
        # appends only: a small page cache keeps its memory flat (SQLite's 2 MiB filled over more than an
        # hour at 10 s: RSS +1.5 MiB in the first hour; benchmarks/monitor_cost.py)
        store.limit_cache(CACHE_KIB)
    collector = MonitorCollector()
    try:
        server = prometheus.serve_page(listen, collector.page)       # a port in use: exit 15
    except BaseException:
        if store is not None:
            store.close()
        raise
    try:
        return _Monitor(args, cmd, interval, duration, retain_s, full_s, store, collector, textfile, listen).run()
    finally:
        prometheus.stop(server)
        if store is not None:
            store.close()


class _Monitor:
    def __init__(self, args, cmd, interval, duration, retain_s, full_s, store, collector, textfile, listen):
        from ..probes.node_sampler import NodeSampler
        self.args, self.cmd, self.interval, self.duration = args, cmd, interval, duration
        self.retain_s, self.full_s, self.store = retain_s, full_s, store
        self.collector, self.textfile, self.listen = collector, textfile, listen
        self.host = socket.gethostname()
        self.node = NodeSampler("/")
        root = args.slurm_root
        self.cgroup_root = os.path.join(root, "sys", "fs", "cgroup")
        self.proc_root = os.path.join(root, "proc")
        self.pending: List[Tuple[list, list]] = []
        self.said: Dict[str, bool] = {}
        self.samples = 0
        self.rows = 0
        self.last_tidy = 0.0
        self.jobs_seen: Dict[str, float] = {}     # key -> first seen (wall)
        self.child: Optional[subprocess.Popen] = None
        self.status: Optional[int] = None
        # with -- CMD standard output is the command's: the monitor's lines go to standard error
        self.out = sys.stderr if cmd else sys.stdout

    # -- the loop ---------------------------------------------------------------------------------

    def run(self) -> int:
        from .probe import _Stop
        from ..probes import jobs as jobsmod
        if self.cmd:
            try:
                self.child = subprocess.Popen(self.cmd)
            except OSError as e:       # as a shell and ceiling profile answer: 127 not found, 126 not runnable
                code = 127 if isinstance(e, FileNotFoundError) else 126
                print(f"ceiling: monitor: {self.cmd[0]}: {'command not found' if code == 127 else e.strerror}",
                      file=sys.stderr, flush=True)
                return code
        self._header()
        stop = _Stop()
        cpu0 = _self_cpu()
        t0 = time.monotonic()
        prev = self.node.read()
        prev_jobs = {j.key: j for j in self._jobs(jobsmod)}
        try:
            n = 0
            while True:
                n += 1
                due = n * self.interval
                if self.duration is not None:
                    due = min(due, self.duration)
                self._wait(stop, t0 + due)
                ended = self.child is not None and _exited(self.child.pid)
                cur = self.node.read()
                jobs_now = self._jobs(jobsmod)
                self._sample(prev, cur, prev_jobs, jobs_now, cpu0)
                prev, prev_jobs = cur, {j.key: j for j in jobs_now}
                if ended:
                    self.status = _status(self.child.wait())
                    self._record_command_end(jobs_now)
                    break
                if stop.signum is not None:
                    if self.child is not None:
                        self.child.send_signal(stop.signum)    # the command decides; we sample until it ends
                        stop.signum = None
                        _drain(stop.r)
                        continue
                    break
                if self.duration is not None and time.monotonic() - t0 >= self.duration:
                    break
        finally:
            stop.close()
            self._flush_history(final=True)
        used = _self_cpu() - cpu0
        wall = time.monotonic() - t0
        why = {signal.SIGTERM: " on SIGTERM", signal.SIGINT: " on SIGINT"}.get(stop.signum or 0, "")
        share = f"{used / wall * 100:.3f}% of one CPU" if wall > 0 else "unknown"
        kept = (f"{self.rows} rows to the history" if self.store is not None else "nothing recorded (--no-store)")
        lost = f"; {sum(len(s) for s, _ in self.pending)} rows NOT recorded" if self.pending else ""
        print(f"ceiling monitor: stopped{why} after {self.samples} samples over {wall:.1f} s; {kept}{lost}; "
              f"its own CPU time {used:.3f} s = {share} (interval {self.interval:g} s)", file=self.out, flush=True)
        if self.child is not None:
            print(f"ceiling monitor: {' '.join(self.cmd)} exited with status {self.status}", file=self.out,
                  flush=True)
            return self.status if self.status is not None else 1
        return 0 if not self.pending else 1

    def _wait(self, stop, until: float) -> None:
        while stop.signum is None:
            left = until - time.monotonic()
            if left <= 0:
                return
            if self.child is not None:        # woken by the command's end within 0.2 s
                if _exited(self.child.pid):
                    return
                left = min(left, 0.2)
            stop.sleep(left)

    def _jobs(self, jobsmod) -> list:
        out = jobsmod.slurm_jobs(self.cgroup_root, self.proc_root)
        if self.child is not None:
            tree = jobsmod.command_tree(self.child.pid)
            if tree is not None:
                out.append(tree)
        return out

    # -- one sample -------------------------------------------------------------------------------

    def _sample(self, prev, cur, prev_jobs, jobs_now, cpu0: float) -> None:
        from ..probes.node_sampler import rates
        from ..probes.jobs import job_rates
        node = rates(prev, cur)
        wall = cur.wall
        step = cur.t - prev.t
        rows = [(self.host, "", k, wall, step, v) for k, v in node.items()]
        job_list = []
        jobs_rows = []
        for j in jobs_now:
            r = job_rates(prev_jobs.get(j.key), j)
            job_list.append((j, r))
            rows.extend((self.host, j.key, k, wall, step, v) for k, v in r.items())
            first = self.jobs_seen.setdefault(j.key, wall)
            jobs_rows.append((self.host, j.key, j.job_id, j.kind, j.uid, j.user, j.cpu_list, first, wall,
                              " ".join(self.cmd) if j.kind == "command" else "", None))
        # the jobs of this sample only: a node that runs jobs for months keeps no list of the ended ones
        self.jobs_seen = {j.key: self.jobs_seen[j.key] for j in jobs_now}
        self.samples += 1
        self.collector.update(node, job_list, _self_cpu() - cpu0, self.samples)
        self._textfile()
        self.pending.append((rows, jobs_rows))
        self._flush_history()
        print(_line(wall, node, len(job_list)), file=self.out, flush=True)

    def _record_command_end(self, jobs_now) -> None:
        key = f"cmd-{self.child.pid}" if self.child is not None else ""
        first = self.jobs_seen.get(key, time.time())
        self.pending.append(([], [(self.host, key, key, "command", os.getuid(), "", "", first, time.time(),
                                   " ".join(self.cmd), self.status)]))

    def _flush_history(self, final: bool = False) -> None:
        if self.store is None:
            self.pending.clear()
            return
        if not self.pending:
            return
        from ..errors import CeilingError
        samples = [r for s, _ in self.pending for r in s]
        jobs = [r for _, j in self.pending for r in j]
        now = time.time()
        tidy = now - self.last_tidy >= 600 or final     # retention and downsampling: every 10 minutes
        try:
            self.store.save_monitor(self.host, samples, jobs, now - self.retain_s if tidy else None,
                                    now - self.full_s if tidy else None)
        except CeilingError as e:
            if not self.said.get("store"):
                print(f"ceiling monitor: samples not yet recorded in the history (kept, tried again at each "
                      f"sample): {e}", file=sys.stderr, flush=True)
            self.said["store"] = True
            del self.pending[:-PENDING_MAX]
            return
        if tidy:
            self.last_tidy = now
        self.rows += len(samples)
        self.pending.clear()
        if self.said.get("store"):
            print("ceiling monitor: the history is written again; the samples kept meanwhile are in it",
                  file=sys.stderr, flush=True)
            self.said["store"] = False

    def _textfile(self) -> None:
        if not self.textfile:
            return
        from ..report.prometheus import write_textfile
        try:
            write_textfile(self.textfile, self.collector.page())
        except OSError as e:
            if not self.said.get("textfile"):
                print(f"ceiling monitor: --textfile not written: {e.strerror or e}", file=sys.stderr, flush=True)
            self.said["textfile"] = True

    def _header(self) -> None:
        from ..probes import jobs as jobsmod
        found = jobsmod.slurm_jobs(self.cgroup_root, self.proc_root)
        kinds = sorted({j.kind for j in found})
        what = (f"{len(found)} Slurm job(s) now ({', '.join(kinds)})" if found else
                f"no Slurm job cgroup under {self.cgroup_root} now (looked for v2 slurmstepd.scope/job_* and "
                "v1 */slurm/uid_*/job_*)")
        print(f"ceiling monitor: {self.host}: one sample every {self.interval:g} s of /proc and /sys; {what}",
              file=self.out, flush=True)
        if self.node.read().psi is None:
            print(f"ceiling monitor: {self.node.psi_note}", file=self.out, flush=True)
        if self.store is not None:
            print(f"ceiling monitor: history {self.store.path}: every sample for {self.args.full}, minute means "
                  f"after, kept {self.args.retain}", file=self.out, flush=True)
        if self.listen:
            print(f"ceiling monitor: Prometheus metrics on http://{self.listen[0]}:{self.listen[1]}/metrics",
                  file=self.out, flush=True)


def _self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)      # every thread of the process (the HTTP server's too)
    return ru.ru_utime + ru.ru_stime


def _exited(pid: int) -> bool:
    """Whether ``pid`` (our child) has ended, without reaping it: its /proc entry stays for a last sample."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _drain(fd: int) -> None:
    os.set_blocking(fd, False)
    try:
        while os.read(fd, 64):
            pass
    except BlockingIOError:
        pass


def _status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _rate(bps: float) -> str:
    return f"{bps / 1e6:.1f} MB/s" if bps >= 1e5 else f"{bps / 1e3:.0f} kB/s"


def _line(wall: float, r: Dict[str, float], jobs: int) -> str:
    stamp = time.strftime("%H:%M:%SZ", time.gmtime(wall))
    parts = [stamp]
    if "cpu.user" in r:
        parts.append(f"cpu user {r['cpu.user'] * 100:.0f}% sys {r['cpu.system'] * 100:.0f}% iowait "
                     f"{r['cpu.iowait'] * 100:.0f}% steal {r['cpu.steal'] * 100:.0f}%")
    if "mem.used" in r:
        parts.append(f"mem {r['mem.used'] / 2**30:.1f}/{r['mem.total'] / 2**30:.1f} GiB")
    rd = sum(v for k, v in r.items() if k.startswith("disk.") and k.endswith(".read_Bps"))
    wr = sum(v for k, v in r.items() if k.startswith("disk.") and k.endswith(".write_Bps"))
    parts.append(f"disk r {_rate(rd)} w {_rate(wr)}")
    rx = sum(v for k, v in r.items() if k.startswith("net.") and k.endswith(".rx_Bps") and not k.startswith("net.lo."))
    tx = sum(v for k, v in r.items() if k.startswith("net.") and k.endswith(".tx_Bps") and not k.startswith("net.lo."))
    parts.append(f"net rx {_rate(rx)} tx {_rate(tx)}")
    if "psi.io.some" in r:
        parts.append(f"io stalled {r['psi.io.some'] * 100:.0f}%")
    if "load.1" in r:
        parts.append(f"load {r['load.1']:.2f}")
    parts.append(f"jobs {jobs}")
    return " | ".join(parts)


def _report(args: argparse.Namespace) -> int:
    """``--report``: the history read (for reading only), analysis/monitor_report.py's report printed."""
    import json

    from ..analysis import monitor_report
    from ..results.store import Store
    if args.command:
        raise UsageError("monitor: --report reads the history; it runs no command")
    since = parse_seconds(args.since, what="--since", low=60, high=3650 * 86400) or 86400.0
    until = parse_seconds(args.until, what="--until", low=0, high=3650 * 86400) if args.until else 0.0
    try:
        threshold = float(args.threshold)
    except ValueError:
        raise BadValueError(f"--threshold {args.threshold!r}: not a number") from None
    if not threshold > 1:
        raise BadValueError(f"--threshold {args.threshold!r}: must be above 1 (a slowdown factor)")
    segment = parse_seconds(args.segment, what="--segment", low=1, high=86400) or 600.0
    if args.db and not os.path.isfile(args.db):
        raise PathError(f"--db {args.db}: no such file")
    now = time.time()
    with Store(args.db, readonly=True) as store:
        lo, hi = now - since, now - (until or 0.0)
        res = monitor_report.report(store.monitor_samples(since=lo, until=hi), store.monitor_jobs(),
                                    store.probe_windows(), lo, hi, args.job, threshold, segment)
    if res.get("error"):
        raise UsageError(f"monitor --report: {res['error']} (the jobs it has: ceiling monitor --report)")
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print("\n".join(monitor_report.lines(res)))
    if args.html:
        from .. import __version__
        from ..report import html_monitor
        html_monitor.write(res, monitor_report.lines(res), __version__, args.html)
    return 0
