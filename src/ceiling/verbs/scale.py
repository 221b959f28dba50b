"""``ceiling scale``: a program run at several thread or rank counts, ``--repeat`` times each, in a
seeded random interleaved order (recorded in the study), as one scaling study (results.model.Study,
kind "scaling", parameter "threads" or "ranks").

Each run is observed as ``profile --experiments`` re-runs a program (observe/, in a process group
of its own, its output discarded or, with ``--metric``, kept in a private file and searched; the
competing load read beside it), becomes a Run of its own (the application, its exit status, one
metric: ``scale.time``, its wall time, or ``scale.metric``, the figure ``--metric`` read: a time or a
rate by ``--metric-kind``, else by the unit the regex names, else a time, recorded in the study) and is
recorded in the history as it finishes (Ctrl-C or SIGTERM keeps the finished runs and saves the
study partial, as ``bench --repeat`` does, verbs/repeat.py). A run that fails is kept with its exit
status and left out of its point. Then analysis/scaling_models.py says what the points mean
(speedup, efficiency, Karp-Flatt; Amdahl or Gustafson; a chosen model with its extrapolation; the
honesty findings); the study carries those as its analysis notes, and the terminal, ``--json``,
``--out`` and the history get the study.

The command takes ``{threads}``, ``{ranks}``, ``{nodes}`` or ``{n}`` (the count of this point),
substituted in every argument; ``--threads`` also sets OMP_NUM_THREADS; ``--ranks`` needs the count
in the command (``mpirun -n {ranks} ./app``), ``--nodes`` too (``srun -N {nodes} ./app``), and runs
only inside a batch allocation at most that many nodes large (``allocated_nodes``).
"""
from __future__ import annotations

import argparse
import os
import random
import re
import socket
import sys
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple  # noqa: F401

from .. import __version__
from ..errors import BadValueError, CeilingError, MetricNotFoundError, PathError, UsageError, interruption
from ..units import parse_count
from . import common

NAME = "scale"
HELP = "strong or weak scaling of a program: ceiling scale --threads 1,2,4 -- ./app"
DESCRIPTION = ("Run a program at several thread or rank counts, several times each in a random interleaved "
               "order, and report speedup, efficiency, the Karp-Flatt serial fraction, Amdahl's (or Gustafson's) "
               "serial fraction with its interval, a fitted model with its prediction beyond the data, and "
               "what the data cannot support. The program's output is discarded (kept and searched with "
               "--metric: a time, lower is better, or a rate, higher is better, --metric-kind).")
EPILOG = ("{threads}, {ranks}, {nodes} and {n} in the command are replaced by each point's count. Exit status: 0, "
          "or 16 "
          "when --metric matched nothing, 130 interrupted (the finished runs are kept).")
MAX_COUNT = 1 << 20
PROFILE_INTERVAL_S = 0.1        # the /proc sampler's interval with --profile (ceiling profile's default)
PLACEHOLDERS = ("{threads}", "{ranks}", "{nodes}", "{n}")
RESOURCES = ("threads", "ranks", "nodes")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS]",
                   help="the program to run and its arguments, after --")
    g = p.add_argument_group("scale")
    g.add_argument("--threads", metavar="LIST", help="thread counts, e.g. 1,2,4,8 (sets OMP_NUM_THREADS)")
    g.add_argument("--ranks", metavar="LIST", help="rank counts, e.g. 1,2,4 (the command holds {ranks})")
    g.add_argument("--nodes", metavar="LIST", help="node counts of this allocation, e.g. 1,2,4 (the command holds "
                   "{nodes}: salloc -N 4 ceiling scale --nodes 1,2,4 -- srun -N {nodes} ./app); refused outside an "
                   "allocation (SLURM_JOB_NUM_NODES, PBS_NODEFILE) and past its size")
    g.add_argument("--weak", action="store_true", help="weak scaling: the problem grows with the count "
                   "({n} in the command); scaled efficiency and Gustafson instead of speedup and Amdahl")
    g.add_argument("--repeat", default="3", metavar="N", help="runs per point (default 3)")
    g.add_argument("--metric", metavar="REGEX", help="read the program's own figure from its output: the last "
                   "match's first group (or the match) is the figure")
    g.add_argument("--metric-kind", choices=("time", "rate"), help="the figure --metric reads is a time (lower is "
                   "better) or a rate (Mflups, GB/s: higher is better); default: from the unit the regex names "
                   "next to its group (s, ms: time; /s, flops, lups: rate), else time")
    g.add_argument("--profile", action="store_true", help="profile each run as ceiling profile does (the /proc "
                   "sampler and the interposer; no hardware counters): the time split per point (on a CPU, waiting "
                   "for one, waiting off it, inside I/O and MPI calls) says why the curve bends")
    g.add_argument("--extrap", metavar="FILE", help="also write the points in Extra-P's text input format")
    g.add_argument("--seed", default="0", metavar="N", help="seed of the run order (default 0)")
    g.add_argument("--timeout", metavar="SECONDS", help="kill a run that takes longer (its point keeps the others)")
    from .work import add_work
    add_work(p.add_argument_group("work (each count's point on this node's roofline, the time per unit)"),
             ("--flops", "--memory-bytes", "--ops", "--work"), " in one run, the same at every count (strong "
             "scaling; with --weak have the program state it: ceiling_work, with --profile)")
    common.output_options(p)


def counts(text: Optional[str], what: str) -> List[int]:
    """'1,2,4' as [1, 2, 4]: positive whole numbers, each once, ascending; one line otherwise."""
    out = set()
    for part in (text or "").split(","):
        try:
            v = int(part.strip())
        except ValueError:
            raise BadValueError(f"scale: {what} {text!r}: give whole numbers separated by commas (1,2,4)") from None
        if not 1 <= v <= MAX_COUNT:
            raise BadValueError(f"scale: {what} {v}: must be between 1 and {MAX_COUNT}")
        out.add(v)
    return sorted(out)


def allocated_nodes(env) -> Tuple[Optional[int], str]:
    """The number of nodes of the batch allocation ceiling runs in, and where it was read: Slurm's
    SLURM_JOB_NUM_NODES (SLURM_NNODES in old releases), else the distinct hosts of PBS/Torque's
    PBS_NODEFILE; (None, "") outside an allocation or where those cannot be read."""
    for var in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"):
        try:
            n = int(env.get(var, ""))
        except ValueError:
            continue
        if n >= 1:
            return n, var
    path = env.get("PBS_NODEFILE")
    if path:
        try:
            with open(path) as f:
                hosts = {line.strip() for line in f if line.strip()}
        except OSError:
            return None, ""
        if hosts:
            return len(hosts), "PBS_NODEFILE"
    return None, ""


def substitute(cmd: Sequence[str], n: int) -> List[str]:
    """``cmd`` with {threads}, {ranks}, {nodes} and {n} replaced by ``n`` in every argument."""
    out = []
    for a in cmd:
        for ph in PLACEHOLDERS:
            a = a.replace(ph, str(n))
        out.append(a)
    return out


def order(points: Sequence[int], repeat: int, seed: int) -> List[int]:
    """The run order: ``repeat`` rounds, each every point once, shuffled by a generator seeded with ``seed``
    (interleaved: no point's runs all at one time of the node's day)."""
    rng = random.Random(seed)
    out: List[int] = []
    for _ in range(repeat):
        r = list(points)
        rng.shuffle(r)
        out += r
    return out


def read_metric(text: str, regex: "re.Pattern[str]") -> Optional[float]:
    """The last match's first group (or the whole match) as a number; None when nothing matched or it is no number."""
    last = None
    for m in regex.finditer(text):
        last = m
    if last is None:
        return None
    try:
        return float(last.group(1) if last.groups() else last.group(0))
    except (TypeError, ValueError):
        return None


_RATE = re.compile(r"/\s*s\b|/\s*sec|per\s*s(ec(ond)?)?\b|flops?\b|flups|lups|ops\b|iops|it/s|hz\b|"
                   r"rate|throughput|bandwidth|speed", re.IGNORECASE)
_TIME = re.compile(r"\b(ns|us|µs|ms|s|sec|secs|seconds?|min|minutes?|h|hours?)\b|time|elapsed|duration|latency|"
                   r"took", re.IGNORECASE)


_WORDS = {"time", "elapsed", "duration", "latency", "took", "rate", "throughput", "bandwidth", "speed"}


def metric_kind(pattern: str) -> Tuple[Optional[str], str]:
    """From a --metric regex, whether its figure is a "time" or a "rate", and its unit ("" when the
    regex says only "time" or "rate"): looked for right after the first group, then right before
    it, then in the whole pattern (escapes such as \\s and \\d removed first); (None, "") when
    it names none."""
    start = pattern.find("(")
    while start >= 0 and pattern[start + 1:start + 2] == "?" and pattern[start + 2:start + 3] != "P":
        start = pattern.find("(", start + 1)
    spans = [pattern]
    if start >= 0:
        depth, end = 0, len(pattern)
        for k in range(start, len(pattern)):
            if pattern[k] == "\\":
                continue
            if pattern[k] == "(" and (k == 0 or pattern[k - 1] != "\\"):
                depth += 1
            elif pattern[k] == ")" and pattern[k - 1] != "\\":
                depth -= 1
                if depth == 0:
                    end = k + 1
                    break
        spans = [pattern[end:].split("(")[0], pattern[:start].split(")")[-1], pattern]
    for text in spans:
        text = re.sub(r"\\[A-Za-z]", " ", text)
        text = re.sub(r"[\[\]{}()*+?.^$|\\0-9,:=_-]", " ", text)
        for kind, rx in (("rate", _RATE), ("time", _TIME)):
            m = rx.search(text)
            if m:
                a, b = m.start(), m.end()
                while a > 0 and not text[a - 1].isspace():
                    a -= 1
                while b < len(text) and not text[b].isspace():
                    b += 1
                word = text[a:b]
                return kind, "" if word.lower() in _WORDS else word
    return None, ""


def _resolve(name: str) -> str:
    return common.resolve_program(name, "scale")


def _parse(args: argparse.Namespace) -> Tuple[str, List[int], List[str], int, int, Optional["re.Pattern[str]"]]:
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("scale: give the program after --: ceiling scale --threads 1,2 -- ./app")
    given = [r for r in RESOURCES if getattr(args, r, None)]
    if len(given) != 1:
        raise UsageError("scale: give one of --threads LIST, --ranks LIST or --nodes LIST")
    resource = given[0]
    pts = counts(getattr(args, resource), f"--{resource}")
    joined = " ".join(cmd)
    if resource == "ranks" and "{ranks}" not in joined and "{n}" not in joined:
        raise UsageError("scale: --ranks needs the count in the command: ceiling scale --ranks 1,2,4 -- "
                         "mpirun -n {ranks} ./app")
    if resource == "nodes":
        if "{nodes}" not in joined and "{n}" not in joined:
            raise UsageError("scale: --nodes needs the count in the command: ceiling scale --nodes 1,2,4 -- "
                             "srun -N {nodes} ./app")
        nodes, source = allocated_nodes(os.environ)
        if nodes is None:
            raise UsageError("scale: --nodes runs its points on the nodes of an allocation, and there is none here "
                             "(no SLURM_JOB_NUM_NODES, no PBS_NODEFILE): salloc -N 4 ceiling scale --nodes 1,2,4 -- "
                             "srun -N {nodes} ./app")
        if pts[-1] > nodes:
            raise BadValueError(f"scale: --nodes {pts[-1]}: the allocation has {nodes} node{'s' if nodes != 1 else ''} "
                                f"({source})")
        args.allocation = {"nodes": nodes, "from": source}
    repeat = parse_count(args.repeat, what="--repeat", low=1, high=1000)
    seed = parse_count(args.seed, what="--seed", low=0, high=2 ** 32)
    regex = None
    if args.metric:
        try:
            regex = re.compile(args.metric)
        except re.error as e:
            raise BadValueError(f"scale: --metric {args.metric!r}: not a regular expression ({e})") from None
    if getattr(args, "metric_kind", None) and regex is None:
        raise UsageError("scale: --metric-kind says what --metric reads: give --metric REGEX too")
    from .work import stated, work_of
    args.stated = stated(*work_of(args, "scale"))
    if args.stated and args.weak and (args.stated["flops"] is not None or args.stated["bytes"] is not None):
        raise UsageError("scale: --weak grows the work with the count, so one --flops/--memory-bytes cannot state it: "
                         "have the program state its work with ceiling_work and use --profile")
    if getattr(args, "timeout", None):
        from ..units import parse_seconds
        args.timeout_s = parse_seconds(args.timeout, what="--timeout")
    return resource, pts, cmd, repeat, seed, regex


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from ..report.exporters.history import History
    from ..results.model import SCALING, Study, utcnow
    resource, pts, cmd, repeat, seed, regex = _parse(args)
    _resolve(substitute(cmd, pts[0])[0])
    common.check_outputs(args)
    if args.extrap:
        from ..report.exporters.paths import check_writable
        check_writable(args.extrap, "--extrap")
    say = common.say(args)
    store = common.open_store(args)
    host = socket.gethostname()
    runs = order(pts, repeat, seed)
    study = Study(kind=SCALING, parameter=resource, unit=resource, tool_version=__version__, host=host,
                  started=utcnow(), command=["ceiling", *argv], study_id=uuid.uuid4().hex, hosts=[host],
                  fixed={"command": cmd, "weak": bool(args.weak), "repeat": repeat, "seed": seed, "order": runs,
                         "metric": args.metric or "", "cpus": len(os.sched_getaffinity(0)),
                         "profile": bool(args.profile)})
    if resource == "nodes":
        study.fixed["allocation"] = args.allocation
    if regex is not None:
        kind, unit = metric_kind(args.metric)
        study.fixed.update(metric_kind=args.metric_kind or kind or "time", metric_unit=unit,
                           metric_kind_from="--metric-kind" if args.metric_kind else
                           f"the regex's unit {unit!r}" if kind else "no unit in the regex: taken as a time")
        say(f"scale: --metric read as a {study.fixed['metric_kind']} ({study.fixed['metric_kind_from']})")
    code = 0
    unmatched = ""
    try:
        for k, n in enumerate(runs):
            say(f"scale: run {k + 1} of {len(runs)}: {n} {resource}")
            run, value = _one(cmd, n, resource, regex, argv, getattr(args, "timeout_s", None),
                              rate=study.fixed.get("metric_kind") == "rate", unit=study.fixed.get("metric_unit", ""),
                              profile=bool(args.profile))
            from ..results.model import Member
            study.members.append(Member(n, run.run_id, run))
            if store is not None:
                common.deliver(run, [History(store, quiet=True)], 0, lambda line: None)
            if regex is not None and value is None and run.application.exit_status == 0:
                unmatched = (f"scale: --metric {args.metric!r} matched nothing in the output of "
                             f"{' '.join(run.application.command)} (exit status 0)")
                study.partial, study.partial_reason = True, f"{unmatched}; {k + 1} of {len(runs)} runs made"
                code = MetricNotFoundError.exit_code
                break
    except KeyboardInterrupt as e:
        why, c = interruption(e)
        code = code or c
        study.partial, study.partial_reason = True, f"{why}; {len(study.members)} of {len(runs)} runs made"
    study.finished = utcnow()
    from ..analysis.scaling_study import of_study
    result = of_study(study)
    study.analysis.notes = notes(result)
    if args.stated or args.profile:
        _roofline(study, args)
    from .repeat import deliver_study
    code = deliver_study(study, args, store, say, code)
    if args.extrap:
        try:                                  # after the study is kept: a file system that filled since the
            _extrap(args.extrap, result)   # check at the start costs the export alone
        except CeilingError as e:
            print(f"ceiling: {e}", file=sys.stderr)
            code = code or PathError.exit_code
    if unmatched:
        print(f"ceiling: {unmatched}", file=sys.stderr)
    return code


def _one(cmd: Sequence[str], n: int, resource: str, regex, argv: Sequence[str], timeout_s: Optional[float],
         rate: bool = False, unit: str = "", profile: bool = False):
    """One run at count ``n``: (its Run, the figure read or None)."""
    from ..files.private import make_dir, remove_tree
    from ..observe import Instruments, Overdue, observe
    from ..results.model import HIGHER, LOWER, Application, Metric, Run, utcnow
    c = substitute(cmd, n)
    exe = _resolve(c[0])
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT")}
    if resource == "threads":
        env["OMP_NUM_THREADS"] = str(n)
    tmp = make_dir("ceiling-scale-") if regex is not None else ""
    out_path = os.path.join(tmp, "output") if tmp else None
    run = Run(tool_version=__version__, host=socket.gethostname(), started=utcnow(), command=["ceiling", *argv],
              run_id=uuid.uuid4().hex, environment={resource: n, "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS")})
    value = None
    try:
        try:
            o = observe(c, exe, Instruments(interval_s=PROFILE_INTERVAL_S if profile else 0, interpose=profile,
                                            counters=False, cost="", competing=True,
                                            discard_output=out_path is None, env=env, own_group=True,
                                            deadline_s=timeout_s, output=out_path))
        except Overdue as e:
            run.application = Application(command=c, exit_status=None, signal="SIGKILL", started=run.started)
            run.partial, run.partial_reason = True, str(e)
            run.finished = utcnow()
            return run, None
        except OSError as e:
            raise CeilingError(f"scale: {c[0]}: could not be started ({e.strerror or e})") from None
        if out_path:
            with open(out_path, "r", errors="replace") as f:
                value = read_metric(f.read(), regex)
    finally:
        if tmp:
            remove_tree(tmp)
    run.application = Application(command=c, exit_status=o.exit_status, signal=o.signal, wall_s=o.wall_s,
                                  started=o.started, finished=o.finished)
    run.findings = list(o.competing)
    if profile:
        # the profile's figures (app.time.*, app.mpi.*, app.io.*.time) join the run's metrics; its findings
        # stay out: the study's findings are about the study (analysis/scaling_study.gathered)
        from ..analysis.app_roofline import work_metrics
        from ..analysis.profile_run import analyse as profiled
        done = profiled(o, lambda prefix: [], None)
        run.metrics.extend(done.metrics + work_metrics(done.work))      # and what it stated with ceiling_work
        run.application.calls = _calls(done.profile)
    ok = o.returncode == 0
    if ok and regex is None:
        value = o.wall_s
    if ok and value is not None:
        name = "scale.metric" if regex is not None else "scale.time"
        run.metrics.append(Metric.measured(name, [value], unit if regex is not None else "s",
                                           better=HIGHER if rate else LOWER, context={resource: n}))
    if not ok:
        run.partial, run.partial_reason = True, f"the program ended with {o.signal or f'exit status {o.exit_status}'}"
    run.finished = utcnow()
    return run, value


def _calls(breakdown: Dict[str, Any]):
    """What a profiled point keeps for the models per MPI call and per region (analysis/scaling_calls.py):
    each MPI function's and named region's time, and the processes a per-process mean divides by. Not
    the whole profile: the point is a member run, and its page is the plain run's."""
    from ..results.profile import CallTimes, profile_from
    full = profile_from({k: breakdown[k] for k in ("mpi", "regions", "regions_lost") if k in breakdown})
    ranks = full.mpi.ranks if full.mpi is not None else 0
    return CallTimes(processes=ranks or max((g.processes for g in full.regions), default=0),
                     mpi=list(full.mpi.functions) if full.mpi is not None else [], regions=full.regions)


def _roofline(study, args: argparse.Namespace) -> None:
    """Each count's point on this node's roofline (analysis/app_roofline.of_study), from the work
    stated or the runs' ceiling_work: the study's roofline and a note per point; E = W/P per count
    with --work too."""
    from ..analysis import app_roofline, roofline
    from .profile import _history, _machine
    lookup = _history(args, study.host)
    pts, lines, rl = app_roofline.of_study(study, args.stated,
                                           lambda: roofline.of_node(_machine(None).to_dict(), lookup))
    study.analysis.notes += lines
    if rl is not None and app_roofline.study_points(pts, study.parameter):
        study.analysis.roofline = roofline.stored(rl, app_roofline.study_points(pts, study.parameter))
    n, unit = (args.stated or {}).get("work") or (None, "")
    if n:
        from statistics import median
        walls: Dict[float, List[float]] = {}
        for m in study.members:
            a = m.run.application if m.run is not None else None
            if a is not None and a.exit_status == 0 and a.wall_s:
                walls.setdefault(float(m.value), []).append(a.wall_s)
        for c, ts in sorted(walls.items()):
            t = median(ts)
            study.analysis.notes.append(f"per unit of work at {c:g} {study.parameter}: {t / n * 1e9:.4g} ns "
                                        f"({n / t:.4g} {unit} per second, the median wall time)")


def _extrap(path: str, result: Dict[str, Any]) -> None:
    from ..report.extrap import text
    try:
        with open(path, "w") as f:
            f.write(text(result))
    except OSError as e:
        raise PathError(f"scale: --extrap {path}: could not be written ({e.strerror or e})") from None


def notes(result: Dict[str, Any]) -> List[str]:
    from ..report.terminal_scale import summary_lines
    return summary_lines(result)
