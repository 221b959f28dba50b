"""ceiling profile -- CMD: what limits this program.

The program runs as ceiling's child with its standard input, output and error
untouched; ceiling's own report goes to standard error when it ends, so the
program's output can still be piped. The exit status is the program's (128 + N
when signal N ended it). Ctrl-C reaches the program from the terminal as it
would without ceiling; ceiling waits for it to end and still reports, marked
partial. Ceiling survives SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2 and
SIGALRM while the program runs, and passes on only those sent to ceiling alone:
one sent to the process group has reached the program already (the rule:
probes/launch.py); SIGHUP, SIGUSR1, SIGUSR2 and SIGALRM before the program starts
and after it ends are noted in the run (``signals_outside``), not fatal.

While it runs, probes/proc_sampler.py reads its threads and processes from
/proc; analysis/profile.py splits their time (on a CPU, waiting for a CPU, off
any CPU) and names the bound. Where the program is dynamically linked and not
setuid, the LD_PRELOAD interposer (csrc/interpose/) is put into it and its
records are read back: POSIX and stdio I/O calls, per file
(analysis/profile_files.py), and MPI calls per rank (analysis/profile_mpi.py).
Hardware counters are opened on it before its exec (probes/perf_counters.py)
where the machine has them.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import time
from typing import List, Optional, Tuple

from ..errors import INTERRUPTED_EXIT, TERMINATED, TERMINATED_EXIT, BadValueError, CeilingError, UsageError
from ..files.private import make_dir, remove_tree
from . import common, profile_overhead
from .lossy import Lossy
from .profile_launch import (abort_job, end_job, interruption, launched_rank, launcher_image, left_tree,
                             preloaded, record_bytes, unwatched, without_own_io)

NAME = "profile"
HELP = "run a program and say what limits it: ceiling profile -- ./app args"
DESCRIPTION = ("Run a program (its output untouched) and report where its time went: on a CPU, waiting for "
               "a CPU, off any CPU; the bound, with evidence; the profiler's own cost. The exit status is "
               "the program's.")
EPILOG = "Exit status: the program's (128 + N when signal N ended it); 127 command not found, 126 not executable."
NOT_FOUND, NOT_EXECUTABLE = 127, 126        # the shell's codes, which users and scripts expect
# A verb that runs a program leaves standard output to it: the run's JSON would be mixed into the
# program's output, unparseable (the rule for every such verb: DESIGN.md, "Output streams").
JSON_REFUSED = ("profile: --json would print the run's JSON into the program's own standard output; "
                "write it to a file with --save-json FILE.json")


class CommandNotFound(CeilingError):
    exit_code = NOT_FOUND


class CommandNotExecutable(CeilingError):
    exit_code = NOT_EXECUTABLE


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS]",
                   help="the program to run and its arguments, after --")
    g = p.add_argument_group("profile")
    g.add_argument("--interval", metavar="SECONDS", default="0.1",
                   help="time between two readings of /proc (default 0.1; the sampler stretches it to stay "
                        "under 1%% of a CPU)")
    g.add_argument("--no-interpose", action="store_true",
                   help="do not put the LD_PRELOAD interposer into the program")
    g.add_argument("--experiments", action="store_true",
                   help="without hardware counters, tell compute from memory by experiment: run the program "
                        "again (13 times: alone, beside co-runners that compute, take memory bandwidth at two "
                        "intensities, or take the last-level cache, and with the other page size, 2 rounds, and "
                        "once to read its working set; then with OMP_NUM_THREADS at 1, half and all the CPUs, 2 "
                        "rounds), its output discarded, each run killed past 10 times the profiled run (20 s at "
                        "least), with reference threads that measure the co-runners' power; the report states "
                        "what they cost")
    g.add_argument("--no-measure", action="store_true",
                   help="compare the program only with ceilings this node's history holds; without it, a "
                        "storage or memory ceiling the history lacks is measured quickly after the program ended "
                        "(storage: 256 MiB, one stream, where the program wrote; memory: STREAM as bench memory "
                        "--quick; a few seconds each)")
    g.add_argument("--overhead", action="store_true",
                   help="run the program 3 more times alone and 3 times watched (sampler and interposer), "
                        "interleaved, their output discarded, and report the slowdown of the medians with its "
                        "spread; refused where the runs did not all end alike")
    common.output_options(p, store=True, html=True, json_refused="the program's standard output is its own "
                          "(the run's JSON would be mixed into it); use --save-json FILE.json")


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from ..probes.launch import Noted
    # SIGHUP, SIGUSR1, SIGUSR2 and SIGALRM are noted, not fatal, from here to the end (probes/launch.py)
    with Noted() as noted:
        code = _main(args, argv, noted)
        late = noted.take()
        if late:
            print(f"ceiling: {', '.join(late)} came while the report was delivered: noted, nothing stopped",
                  file=sys.stderr, flush=True)
        return code


def _main(args: argparse.Namespace, argv: List[str], noted) -> int:
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("profile: no program given (ceiling profile [options] -- CMD [ARGS])")
    if args.json:
        # before anything starts, in every rank of a wrapped launch alike: no program then waits in MPI_Init
        raise UsageError(JSON_REFUSED)
    sys.stderr = Lossy(sys.stderr)         # from here, the program's status is the exit status, whatever stderr is
    interval = _interval(args.interval)
    wrapped = launched_rank()
    try:
        exe = _resolve(cmd[0])
    except CeilingError as e:
        if wrapped:
            abort_job(e, wrapped[0])                 # says the error itself, before the job ends
            raise SystemExit(e.exit_code) from None
        raise
    if wrapped and (args.overhead or args.experiments):
        raise UsageError(f"profile: {'--overhead' if args.overhead else '--experiments'} reruns the program alone, "
                         "which one rank of an MPI job cannot do")
    if wrapped and wrapped[0] != 0:
        # rank 0's ceiling reports every rank: the others touch neither its outputs nor the history
        run, code = _profile(args, argv, cmd, exe, interval, noted, wrapped)
        if run.application.signal:
            print(f"ceiling: rank {wrapped[0]}: its program was killed by {run.application.signal}; rank 0's report, "
                  "if it comes, lacks this rank (a launcher that ends the job for it, as MPICH's mpiexec does, "
                  "kills rank 0's ceiling too, with SIGKILL: no report then)", file=sys.stderr, flush=True)
        return code
    try:
        common.check_outputs(args, html=bool(args.out))
        store = common.open_store(args)
    except CeilingError as e:
        if wrapped:
            end_job(exe, cmd, e, preload_refused(exe))           # says the error itself, before the job ends
            raise SystemExit(e.exit_code) from None
        raise
    run, code = _profile(args, argv, cmd, exe, interval, noted, wrapped)
    args.text_to_stderr = True                 # standard output is the program's
    outputs = common.exporters(args, store, html=bool(args.out), render=_render(args))
    # the program's exit status is ceiling's: one that handled a SIGTERM and exited 0 gives 0, its
    # report marked partial all the same
    delivered = common.deliver(run, outputs, 0, common.say(args), partial_exit=False)
    return code if code else delivered


def _render(args: argparse.Namespace):
    from ..report.terminal_profile import render
    return lambda run: render(run, color=common.color(args), width=common.width())


def _interval(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UsageError(f"--interval {text!r}: not a number of seconds") from None
    if not 0.001 <= v <= 60:
        raise BadValueError(f"--interval {v:g}: must be between 0.001 and 60 seconds")
    return v


def _resolve(name: str) -> str:
    """The program's path, as the shell would find it; one line and 127/126 otherwise."""
    path = name if "/" in name else shutil.which(name)
    if path is None or not os.path.exists(path):
        raise CommandNotFound(f"profile: {name}: command not found")
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise CommandNotExecutable(f"profile: {name}: not an executable file")
    return path


def preload_refused(path: str) -> str:
    """Why LD_PRELOAD cannot reach ``path`` ("" when it can): a setuid or setgid program
    (the loader ignores it there) or a statically linked one (no loader at all). A script
    is run by its interpreter, which the loader does reach."""
    try:
        st = os.stat(path)
        if st.st_mode & 0o6000:
            return "it is setuid or setgid: the dynamic loader ignores LD_PRELOAD there"
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:2] == b"#!":
                return ""
            if head[:4] != b"\x7fELF" or len(head) < 64:
                return ""
            is64, little = head[4] == 2, head[5] == 1
            order = "little" if little else "big"
            if is64:
                phoff, phentsize, phnum = (int.from_bytes(head[32:40], order), int.from_bytes(head[54:56], order),
                                           int.from_bytes(head[56:58], order))
            else:
                phoff, phentsize, phnum = (int.from_bytes(head[28:32], order), int.from_bytes(head[42:44], order),
                                           int.from_bytes(head[44:46], order))
            f.seek(phoff)
            table = f.read(phentsize * min(phnum, 512))
        for i in range(0, len(table), phentsize):
            if int.from_bytes(table[i:i + 4], order) == 3:       # PT_INTERP: it has a dynamic loader
                return ""
        return "it is statically linked: no dynamic loader reads LD_PRELOAD"
    except OSError as e:
        return f"it cannot be read ({e.strerror})"


def _profile(args: argparse.Namespace, argv: List[str], cmd: List[str], exe: str,
             interval: float, noted, wrapped: Optional[Tuple[int, int]] = None) -> Tuple[object, int]:
    # Only what starts the program is imported and done before it: the machine's detection
    # and the analysis wait until it has ended (_wrap_up).
    from .. import core
    from ..probes.launch import Watch
    from ..probes.perf_counters import spawn
    from ..probes.proc_sampler import ProcSampler
    from ..results.model import Application, utcnow

    # a bad config is refused before the program runs; without one, the machine package (a tenth
    # of a second of imports) waits until the program ended
    config = common.config(args) if _config_given(args) else None
    cpus = len(os.sched_getaffinity(0))
    # a rank of an MPI job: the machine before the program, since a stopped job leaves rank 0 only
    # the moments until the launcher kills it to report in (verbs/profile_launch.py)
    m = _machine(config) if wrapped else None

    tmp = make_dir("ceiling-profile-")        # 0700, in a $TMPDIR no one else can swap it in
    env = dict(os.environ)
    lib = core.interpose_library_path()
    refused = ("--no-interpose" if args.no_interpose else
               f"the interposer is not built ({lib} is missing)" if not lib.exists() else preload_refused(exe))
    cost = {}
    if not refused:
        from ..probes.interpose_cost import measure
        if not wrapped:
            cost = measure(lib)                  # before the program, not beside it
        env["LD_PRELOAD"] = " ".join(filter(None, [str(lib), env.get("LD_PRELOAD", "")]))
        env["CEILING_INTERPOSE_OUT"] = os.path.join(tmp, "interpose.%p")
        if wrapped:
            env["CEILING_INTERPOSE_GATHER"] = "1"    # every rank's record to rank 0's at MPI_Finalize

    app = Application(command=cmd, started=utcnow())
    from ..checks.load import Competing
    competing = Competing()
    startup = profile_overhead.since_start()   # ceiling's own start-up: from its start to the program's
    t0 = time.monotonic()
    # The program is forked from ceiling-launch with the counters opened on it before its exec
    # (probes/perf_counters.py, probes/launch.py); ceiling survives the signals of launch.WATCHED
    # meanwhile and passes on only those sent to it alone.
    before = noted.take()
    with Watch() as watch:
        try:
            child = spawn(cmd, exe, env)
        except OSError as e:
            remove_tree(tmp)
            err = CommandNotExecutable(f"profile: {cmd[0]}: {e.strerror}")
            if wrapped:
                abort_job(err, wrapped[0])
                raise SystemExit(err.exit_code) from None
            raise err from None
        sampler = ProcSampler(child.pid, interval).start()
        ended = child.wait(watch)
    wall = time.monotonic() - t0
    sampled = sampler.stop()
    busy = competing.stop(set(sampled.processes), COMPETING_MIN_S)
    from ..analysis import profile_counters, profile_files
    from ..analysis.profile import Rusage, conclude, intercepted_calls, io_calls, launchers
    from ..analysis.profile_ceilings import compare
    from ..analysis.profile_mpi import conclude as mpi_conclude, launcher_pids
    from ..probes import interpose_record
    from ..results.model import SKIPPED, Finding
    from .session import Session
    m = m or _machine(config)
    session = Session(argv)
    session.run.started = app.started
    session.set_machine(m, sorted(m.affinity) or None)
    counters = child.finish(wall, hypervisor=m.virtualized)
    status = ended.status
    interrupted = interruption(ended.signals)
    app.finished, app.wall_s = utcnow(), wall
    code = 0
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        app.signal = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        code = 128 + sig
    else:
        app.exit_status = code = os.WEXITSTATUS(status)

    # a job script's rm -rf $TMPDIR/* may have taken the directory with the records: said, not raised
    removed = "" if refused or os.path.isdir(tmp) else tmp
    try:
        written = record_bytes(tmp)
        records = interpose_record.latest(interpose_record.read_dir(tmp))
    finally:
        remove_tree(tmp)
    io, own_io = without_own_io(ended.io, records, written, None if wrapped else os.uname().nodename)
    # mpirun's, srun's or a shell's own I/O (the launcher's control messages) is not the program's
    starters = set(launcher_pids(records))               # every image of an MPI rank's ancestor
    waiters = set(launchers(sampled, wall)) | starters
    own = [r for r in records if r.get("process", {}).get("pid") not in starters and
           not launcher_image(r, waiters, sampled)]
    # processes this ceiling's sampler and rusage never saw (the ranks other ceilings wrapped; ranks a
    # launcher's daemon started, as srun's slurmstepd): their threads from their records
    others = unwatched(own, child.pid, set(sampled.processes), records)
    metrics, bounds, findings, breakdown = conclude(sampled, Rusage(ended.user_s, ended.system_s, ended.maxrss_bytes,
                                                           io or None),
                                                    wall, cpus, io_calls(own), mpi_conclude(own, wrapped), counters,
                                                    sorted(waiters), others, busy)
    breakdown["launch"] = ended.describe()
    if own_io:
        breakdown["launch"]["interposer_io"] = own_io      # taken off the totals
    left = left_tree(sampled)
    if left:
        breakdown["launch"]["left_tree"] = left.data["processes"]
        findings.append(left)
    breakdown["interposer"] = ({"used": False, "why": refused} if refused else
                               {"used": True, "records": len(records),
                                "modules": sorted({n for r in records for n in r["modules"]}),
                                "skipped": records.counts()})
    findings.extend(interpose_record.findings(records, removed))
    if not refused and not removed and not (wrapped and wrapped[0] != 0):
        gone = interpose_record.unrecorded(preloaded(sampled, preload_refused), records)
        if gone:
            findings.append(gone)
    if wrapped:
        breakdown["wrapped"] = {"rank": wrapped[0], "size": wrapped[1]}
    profile_files.apply(breakdown, findings, own)
    t_quick = time.monotonic()
    breakdown["ceilings"], more = compare(breakdown, _history(args, session.run.host),
                                          None if args.no_measure or interrupted or (wrapped and wrapped[0] != 0)
                                          else _quick(breakdown, m, wall))
    t_quick = time.monotonic() - t_quick
    findings.extend(more)
    bounds, findings, decided = profile_counters.apply(counters, breakdown["ceilings"], bounds, findings)
    if decided and counters.get("available"):
        breakdown["counters_verdict"] = decided
    busiest = max((intercepted_calls([r]) + intercepted_calls([r], ("mpi",)) for r in own), default=0)
    if wrapped and wrapped[0] == 0 and not refused:
        # after the program, not before: the other ranks would wait in MPI_Init meanwhile, spinning.
        # Not when the job was stopped: the launcher kills rank 0's ceiling soon after the other
        # ranks' ceilings exit, and the report comes first
        cost = {"why": f"not measured: the job was {interrupted.split(' ')[0]}"} if interrupted else measure(lib)
    app.overhead = profile_overhead.cost(cost, breakdown, wall, intercepted_calls(records),
                                         intercepted_calls(records, ("mpi",)), busiest)
    app.overhead["ceiling"] = profile_overhead.own_time(startup, time.monotonic() - t0 - wall, t_quick, cost)
    if args.overhead:
        app.overhead["uninstrumented"] = profile_overhead.plain_run(cmd, exe, wall, code,
                                                                    None if refused else env, interval)
    stopped = ""
    if args.experiments:
        from .profile_experiments import experiments
        breakdown["experiments"], bounds, findings = experiments(cmd, exe, m, code, bounds, findings, wall,
                                                                 (ended.user_s or 0) + (ended.system_s or 0) or None)
        stopped = breakdown["experiments"].get("stopped_by", "")
    outside = [{"signal": n, "when": "before the program started"} for n in before] + \
        [{"signal": n, "when": "after the program ended"} for n in noted.take()]
    if outside:
        breakdown["launch"]["signals_outside"] = outside         # noted, nothing stopped
    run = session.run
    run.application = app
    run.metrics.extend(metrics)
    run.findings.extend(findings)
    if refused and not args.no_interpose:
        run.findings.append(Finding(id="profile.interposer", status=SKIPPED,
                                    title="I/O and MPI calls were not counted: " + refused,
                                    evidence=f"{exe}: {refused}; the profile rests on /proc alone"))
    run.environment["profile"] = breakdown
    run.analysis.bounds = bounds
    if interrupted or (app.signal and app.signal in ("SIGINT", "SIGTERM")):
        run.partial, run.partial_reason = True, (interrupted or f"the program ended by {app.signal}") + \
            ": the profile covers the time until then"
    elif stopped:
        # the profile of the run itself is whole; the experiments after it are not
        run.partial, run.partial_reason = True, f"{stopped} during the experiments: the profile of the run is " \
            "complete, the experiments stopped (their figures so far are kept, undecided)"
        code = code or (TERMINATED_EXIT if stopped == TERMINATED else INTERRUPTED_EXIT)
    return session.finish(), code


COMPETING_MIN_S = 0.2      # a shorter run's tick counts (10 ms) say too little about other processes


def _history(args: argparse.Namespace, host: str):
    """This node's newest stored metrics by name prefix, read only (also with --no-store, which
    keeps this run out of the history, not the history out of this run); nothing when the
    history cannot be read."""
    from ..results.store import Store
    try:
        store = Store(getattr(args, "db", None), readonly=True)
    except CeilingError:
        return lambda prefix: []

    def lookup(prefix: str):
        try:
            return store.latest_metrics(prefix, host)
        except CeilingError:
            return []
    return lookup


QUICK_WORTH = 0.05        # the program's time inside I/O calls, as a share of its wall time, that is worth
                          # the seconds of a quick storage measurement after it


def _quick(breakdown: dict, m, wall: Optional[float] = None):
    """profile_ceilings' measure: a ceiling the history lacks measured once, quickly
    (bench/quick_ceiling.py: the storage where the program wrote, STREAM Triad), the first
    time a comparison asks; what was done goes into the breakdown ("quick_ceilings"). Storage
    only where the program spent QUICK_WORTH of its ``wall`` time inside I/O calls: a python
    reading its 4 MB of modules in 20 ms made ceiling measure the storage for 4 s."""
    from ..bench import quick_ceiling
    done: dict = {}

    def measure(prefix: str):
        kind = "memory" if prefix == "stream.triad" else "storage"
        spent = sum(x.get("ns", 0) for x in (breakdown.get("io_calls") or {}).values()) / 1e9
        if kind == "storage" and wall and spent < QUICK_WORTH * wall:
            return None, (f"not measured after the program: its I/O calls took {spent:.3g} s, {spent / wall:.1%} "
                          f"of its {wall:.3g} s, under the {QUICK_WORTH:.0%} worth a measurement of seconds")
        if kind not in done:
            done[kind] = (quick_ceiling.memory(m) if kind == "memory" else
                          quick_ceiling.storage(quick_ceiling.where(breakdown.get("files") or {}, os.getcwd())))
            breakdown.setdefault("quick_ceilings", {})[kind] = done[kind][1]
        rows, how = done[kind]
        row = rows.get(prefix)
        return (row, quick_ceiling.words(how)) if row else (None, how.get("why", "no figure"))
    return measure


def _machine(config):
    from .. import machine as machine_mod
    return machine_mod.detect("/", measure=False, config=config)


def _config_given(args: argparse.Namespace) -> bool:
    """Whether a config may be in force (machine/config.load's order: --config, $CEILING_CONFIG,
    $XDG_CONFIG_HOME/ceiling/config.toml): only then is it read before the program."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return bool(getattr(args, "config", None) or os.environ.get("CEILING_CONFIG")
                or os.path.exists(os.path.join(base, "ceiling", "config.toml")))
