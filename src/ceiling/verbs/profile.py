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

The program is run and watched by observe/ (the /proc sampler, the LD_PRELOAD
interposer where the program is dynamically linked and not setuid, hardware counters
where the machine has them, the competing load), which returns an Observation;
analysis/profile_run.py says what it means (the split, the bound with evidence, I/O per
class and per file, MPI per rank, the ceilings compared, the cost of watching). This
verb parses, observes, analyses and delivers; DESIGN.md, "Observing an application".
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import List, Optional, Tuple

from ..cluster.stop import everywhere
from ..errors import INTERRUPTED_EXIT, TERMINATED, TERMINATED_EXIT, BadValueError, CeilingError, UsageError
from ..observe.preload import preload_refused
from . import common, profile_overhead
from .lossy import Lossy
from .profile_launch import abort_job, end_job, launched_rank

NAME = "profile"
HELP = "run a program and say what limits it: ceiling profile -- ./app args"
DESCRIPTION = ("Run a program (its output untouched) and report where its time went: on a CPU, waiting for "
               "a CPU, off any CPU; the bound, with evidence; the profiler's own cost. The exit status is "
               "the program's.")
EPILOG = "Exit status: the program's (128 + N when signal N ended it); 127 command not found, 126 not executable."
# A verb that runs a program leaves standard output to it: the run's JSON would be mixed into the
# program's output, unparseable (the rule for every such verb: DESIGN.md, "Output streams").
JSON_REFUSED = ("profile: --json would print the run's JSON into the program's own standard output; "
                "write it to a file with --save-json FILE.json")


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
    work_options(p)
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


def work_options(p: argparse.ArgumentParser) -> None:
    """The work the program does, stated (profile's and trace's): E = W/P over the run's wall time, and the
    roofline point with --flops and --memory-bytes (analysis/efficiency.py, as `ceiling model`)."""
    from .work import add_work
    add_work(p.add_argument_group("work the program does (E = W/P over its wall time, as ceiling model)"))


def _work_finding(work, ops, unit: str, wall_s: float, lookup):
    """The run's E = W/P as a finding: every stated quantity over the wall time against this node's ceilings
    (the history's), the bound, the time per unit of work; the roofline point is the roofline finding's
    (analysis/app_roofline.py, ``_roofline``), not said twice."""
    from ..analysis.efficiency import efficiency, lines
    from ..results.model import OK, Finding
    res = efficiency(work, wall_s, {}, lookup, ops)
    res["ops_unit"] = unit
    said = [ln for ln in lines(res) if not ln.startswith("roofline:")]
    if ops:
        said.append(f"{ops / wall_s:.4g} {unit or 'units'} per second")
    bound = next((r for r in res["rows"] if r["subsystem"] == res["bound"]), None)
    title = (f"E = W/P over the run's {wall_s:.3g} s: {bound['what']} at {bound['efficiency']:.1%} of this node's "
             "peak, the highest" if bound else f"E = W/P over the run's {wall_s:.3g} s: " +
             ("no peak known" if work else said[0]))
    return Finding(id="profile.efficiency", status=OK, title=title, evidence="; ".join(said),
                   why="The work the program states, over its measured time, against what this node measured: the "
                       "subsystem closest to its ceiling is the one to look at first.",
                   data=res)


def _main(args: argparse.Namespace, argv: List[str], noted) -> int:
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    verb = _verb(args)
    if not cmd:
        raise everywhere(UsageError(f"{verb}: no program given (ceiling {verb} [options] -- CMD [ARGS])"))
    if args.json:
        # before anything starts, in every rank of a wrapped launch alike (only rank 0 says it): no
        # program then waits in MPI_Init
        raise everywhere(UsageError(JSON_REFUSED.replace("profile:", f"{verb}:")))
    from .work import stated, work_of
    try:
        work, ops, unit = work_of(args, verb)     # bad values before anything runs, one line from rank 0
    except CeilingError as e:
        raise everywhere(e) from None
    args.work_stated, args.stated = (work, ops, unit), stated(work, ops, unit)
    sys.stderr = Lossy(sys.stderr)         # from here, the program's status is the exit status, whatever stderr is
    interval = _interval(args.interval)
    wrapped = launched_rank()
    try:
        exe = common.resolve_program(cmd[0], verb)
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
        if code in (INTERRUPTED_EXIT, TERMINATED_EXIT):
            _linger()
        return code
    try:
        common.check_outputs(args, html=bool(args.out))
        if getattr(args, "trace_where", None):
            args.trace_path = args.trace_where()       # the trace's places and libotf2 (rank 0's alone, wrapped)
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


def _verb(args: argparse.Namespace) -> str:
    """The verb this run is (profile, or trace, which adds its recording to profile's run)."""
    return "trace" if getattr(args, "trace_limits", None) is not None else "profile"


def _profile(args: argparse.Namespace, argv: List[str], cmd: List[str], exe: str,
             interval: float, noted, wrapped: Optional[Tuple[int, int]] = None) -> Tuple[object, int]:
    # Only what starts the program is imported and done before it: the machine's detection
    # and the analysis wait until it has ended.
    from ..observe import Instruments, observe
    from ..results.model import SKIPPED, Application, Finding

    # a bad config is refused before the program runs; without one, the machine package (a tenth
    # of a second of imports) waits until the program ended
    config = common.config(args) if _config_given(args) else None
    # a rank of an MPI job: the machine before the program, since a stopped job leaves rank 0 only
    # the moments until the launcher kills it to report in (verbs/profile_launch.py)
    m = _machine(config) if wrapped else None
    # rank 0 of a wrapped launch measures the interposer's cost after the program: before, the
    # other ranks would wait in MPI_Init meanwhile, spinning; the others do not report
    trace = getattr(args, "trace_limits", None)
    beside = ()
    if trace is not None and wrapped and trace.max_bytes:
        # the run's budget, each rank its share: one rank's recorder cannot see another node's use
        import dataclasses
        trace = dataclasses.replace(trace, max_bytes=max(1, trace.max_bytes // wrapped[1]))
        args.trace_share = (trace.max_bytes, wrapped[1])
    if trace is not None:
        from ..observe.companions import NodeTracks
        args.trace_node = NodeTracks(interval)             # the node's disks, network and CPU under the calls
        beside = (args.trace_node,)
    tools = Instruments(interval_s=interval, interpose=not args.no_interpose, gather=bool(wrapped),
                        cost="" if wrapped and wrapped[0] != 0 else "after" if wrapped else "before", trace=trace,
                        beside=beside)
    before = noted.take()
    try:
        obs = observe(cmd, exe, tools, machine=lambda: m or _machine(config), wrapped=wrapped)
    except OSError as e:
        err = common.CommandNotExecutable(f"{_verb(args)}: {cmd[0]}: {e.strerror}")
        if wrapped:
            abort_job(err, wrapped[0])
            raise SystemExit(err.exit_code) from None
        raise err from None
    t_end = time.monotonic() - obs.overhead_s             # the program's end
    # ceiling's own start-up: from its start to the program's (the interposer's cost measured included)
    since = profile_overhead.since_start()
    startup = None if since is None else max(0.0, since - (time.monotonic() - obs.start_s))
    from ..analysis.profile_run import analyse
    from .session import Session
    m = obs.machine
    session = Session(argv)
    session.run.started = obs.started
    session.set_machine(m, sorted(m.affinity) or None)
    quick = (None if args.no_measure or obs.interruption or (wrapped and wrapped[0] != 0) else
             _Quick(m, obs.wall_s))
    done = analyse(obs, _history(args, session.run.host), quick)
    bounds, findings, breakdown, code = done.bounds, done.findings, done.profile, obs.code
    app = Application(command=obs.command, started=obs.started, finished=obs.finished, wall_s=obs.wall_s,
                      exit_status=obs.exit_status, signal=obs.signal)
    overhead = dict(done.overhead)
    overhead["ceiling"] = profile_overhead.own_time(startup, time.monotonic() - t_end,
                                                    quick.seconds if quick else 0.0, obs.interposer.cost)
    if args.overhead:
        overhead["uninstrumented"] = profile_overhead.plain_run(obs)
    stopped = ""
    if args.experiments:
        from .profile_experiments import experiments
        cpu = (obs.ended.user_s or 0) + (obs.ended.system_s or 0)
        breakdown["experiments"], bounds, findings = experiments(cmd, exe, m, code, bounds, findings, obs.wall_s,
                                                                 cpu or None)
        stopped = breakdown["experiments"].get("stopped_by", "")
    outside = [{"signal": n, "when": "before the program started"} for n in before] + \
        [{"signal": n, "when": "after the program ended"} for n in noted.take()]
    if outside:
        breakdown["launch"]["signals_outside"] = outside         # noted, nothing stopped
    run = session.run
    run.application = app
    run.metrics.extend(done.metrics)
    run.findings.extend(findings)
    work, ops, unit = getattr(args, "work_stated", ({}, None, ""))
    if work or ops is not None:
        run.findings.append(_work_finding(work, ops, unit, obs.wall_s, _history(args, session.run.host)))
    refused = obs.interposer.why
    if refused and not args.no_interpose:
        run.findings.append(Finding(id="profile.interposer", status=SKIPPED,
                                    title="I/O and MPI calls were not counted: " + refused,
                                    evidence=f"{exe}: {refused}; the profile rests on /proc alone"))
    from ..results.profile import overhead_from, profile_from
    app.profile, app.overhead = profile_from(breakdown), overhead_from(overhead)     # the typed section
    run.analysis.bounds = bounds
    _roofline(run, getattr(args, "stated", None), done, obs, _history(args, session.run.host),
              quick.bind(breakdown) if quick else None)
    if trace is not None and wrapped and wrapped[0] != 0:
        from .trace_output import left_behind
        from .trace_paths import trace_names     # (rank 0's ceiling alone checks the places)
        left_behind(obs, wrapped[0], trace_names(getattr(args, "trace", None), cmd,   # its events went to rank 0's
                                                 getattr(args, "trace_formats", ("perfetto",))))
    elif trace is not None:
        from .trace_output import conclude
        conclude(obs, run, args, _history(args, session.run.host), wrapped)
    if done.partial_reason:
        run.partial, run.partial_reason = True, done.partial_reason
    elif stopped:
        # the profile of the run itself is whole; the experiments after it are not
        run.partial, run.partial_reason = True, f"{stopped} during the experiments: the profile of the run is " \
            "complete, the experiments stopped (their figures so far are kept, undecided)"
        code = code or (TERMINATED_EXIT if stopped == TERMINATED else INTERRUPTED_EXIT)
    return session.finish(), code


def _roofline(run, stated, done, obs, lookup, measure) -> None:
    """The program on this node's roofline (analysis/app_roofline.py), from its counters, the work
    stated with --flops/--memory-bytes or with ceiling_work (E = W/P is ``_work_finding``'s)."""
    from ..analysis import app_roofline, roofline
    pts, found, rl = app_roofline.conclude(stated, done.work, obs.counters, obs.wall_s,
                                           lambda: roofline.of_node(run.machine, lookup, measure),
                                           run.analysis.bounds[0].bound if run.analysis.bounds else "")
    run.findings.extend(found)
    if rl is not None and app_roofline.stored_points(pts):
        run.analysis.roofline = roofline.stored(rl, app_roofline.stored_points(pts))


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


LINGER_S = 10.0           # how long an interrupted rank other than 0 stays, so that rank 0's ceiling can report


def _linger() -> None:
    """An interrupted job (Ctrl-C or SIGTERM to mpiexec, which passes it to every rank): MPICH's
    Hydra kills every rank's ceiling with SIGKILL once one of them exits, so this rank's ceiling,
    done at once, would end rank 0's while it still writes the report (3 runs in 10 lost it). It
    stays until the launcher ends it after rank 0's ceiling exits, or LINGER_S, or another signal."""
    try:
        time.sleep(LINGER_S)
    except KeyboardInterrupt:
        pass


QUICK_WORTH = 0.05        # the program's time inside I/O calls, as a share of its wall time, that is worth
                          # the seconds of a quick storage measurement after it


class _Quick:
    """profile_ceilings' measure (analysis/profile_run.py's ``quick``): a ceiling the history
    lacks measured once, quickly (bench/quick_ceiling.py: the storage where the program wrote,
    STREAM Triad), the first time a comparison asks; what was done is kept in ``ceilings``
    (the profile's "quick_ceilings"). Storage only where the program spent QUICK_WORTH of its
    ``wall`` time inside I/O calls: a python reading its 4 MB of modules in 20 ms made ceiling
    measure the storage for 4 s. ``seconds``: the time its measurements took (ceiling's own,
    apart from the program's)."""

    def __init__(self, m, wall: Optional[float] = None):
        self.m, self.wall, self.seconds = m, wall, 0.0
        self.done: dict = {}
        self.ceilings: dict = {}

    def bind(self, profile: dict):
        """The measure for a program whose I/O calls and files are ``profile``'s ("io_calls", "files")."""
        from ..bench import quick_ceiling
        m, wall, done = self.m, self.wall, self.done

        def measure(prefix: str):
            kind = "memory" if prefix == "stream.triad" else "storage"
            spent = sum(x.get("ns", 0) for x in (profile.get("io_calls") or {}).values()) / 1e9
            if kind == "storage" and wall and spent < QUICK_WORTH * wall:
                return None, (f"not measured after the program: its I/O calls took {spent:.3g} s, "
                              f"{spent / wall:.1%} of its {wall:.3g} s, under the {QUICK_WORTH:.0%} worth a "
                              "measurement of seconds")
            if kind not in done:
                t = time.monotonic()
                done[kind] = (quick_ceiling.memory(m) if kind == "memory" else
                              quick_ceiling.storage(quick_ceiling.where(profile.get("files") or {}, os.getcwd())))
                self.seconds += time.monotonic() - t
                self.ceilings[kind] = done[kind][1]
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
