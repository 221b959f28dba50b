"""The verbs: each turns parsed options into a Session, runs its steps, and
hands the Run to the reports and the store. No measuring or formatting here."""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from . import core
from .results.measure import Options, Outcome
from .sysfs import meminfo_bytes
from .errors import (INTERRUPTED_EXIT, BadValueError, CeilingError, PathError, UsageError, ValidationError,
                     interruption)
from .results.model import Run
from .session import Session
from .units import parse_count, parse_size

ISAS = ("scalar", "sse2", "avx2", "avx512", "neon", "sve")


# -- options -------------------------------------------------------------------

def options(args: argparse.Namespace) -> Options:
    """Validate measurement options before anything is measured."""
    isa = getattr(args, "isa", None)
    if isa is not None and isa not in ISAS:
        raise UsageError(f"--isa {isa!r}: unknown (one of {', '.join(ISAS)})")
    if isa is not None and not core.isa_supported(isa):
        have = ", ".join(i for i in ISAS if core.isa_supported(i))
        raise BadValueError(f"--isa {isa}: this CPU cannot run it (it runs: {have})")
    size = None
    if getattr(args, "size", None) is not None:
        # Storage sizes are bounded by the file system's free space (checked by its preflight), not by memory.
        on_disk = "storage" in (getattr(args, "suites", None) or [])
        size = parse_size(args.size, what="--size", limit=None if on_disk else meminfo_bytes("MemTotal"))
    reps = parse_count(getattr(args, "reps", None), what="--reps", low=1, high=10000)
    threads = parse_count(getattr(args, "threads", None), what="--threads", low=1)
    placement = getattr(args, "placement", "compact")
    if placement not in ("compact", "scatter") and not placement.startswith("node:"):
        raise UsageError(f"--placement {placement!r}: unknown (compact, scatter or node:N)")
    return Options(quick=getattr(args, "quick", False), threads=threads, placement=placement, reps=reps,
                   size_bytes=size, isa=isa, nt_stores=getattr(args, "nt_stores", False),
                   oversubscribe=getattr(args, "oversubscribe", False), storage_dir=getattr(args, "dir", None))


def _check_writable(path: Optional[str], what: str) -> None:
    """Refuse an output path before measuring, not after."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise PathError(f"{what} {path}: is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise PathError(f"{what} {path}: directory {parent} does not exist")
    # Try it: access() says yes to root even where the file system says no (/proc, read-only mounts).
    existed = p.exists()
    try:
        with open(p, "a"):
            pass
    except OSError as e:
        raise PathError(f"{what} {path}: not writable ({e.strerror})") from None
    if not existed:
        p.unlink()


def _open_store(args: argparse.Namespace):
    """The history store, or None with --no-store; opened (and checked) before measuring."""
    if getattr(args, "no_store", False):
        return None
    from .results.store import Store
    return Store(getattr(args, "db", None))


def _config(args: argparse.Namespace):
    from .machine import config
    return config.load(args.config) if getattr(args, "config", None) else config.load()


def _progress(args: argparse.Namespace):
    from .report.progress import Progress
    return Progress(stream=sys.stderr)


def _say(args: argparse.Namespace) -> Callable[[str], None]:
    """Terminal text goes to stdout, or to stderr when stdout carries JSON."""
    stream = sys.stderr if getattr(args, "json", False) else sys.stdout
    return lambda text: print(text, file=stream, flush=True)


# -- suites --------------------------------------------------------------------

def suites(names: List[str], quick: bool) -> List[Tuple[str, Callable]]:
    from .bench import compute, cores, latency, memory, storage
    table: Dict[str, List[Tuple[str, Callable]]] = {
        "compute": [("flops", compute.bench_flops)],
        "dgemm": [("dgemm", compute.bench_dgemm)],
        "memory": [("stream", memory.bench_stream), ("stream-threads", memory.bench_stream_threads),
                   ("numa-bandwidth", memory.bench_numa_bandwidth)],
        "cache": [("cache-bandwidth", memory.bench_cache_bandwidth)],
        "latency": [("latency", latency.bench_latency), ("numa-latency", latency.bench_numa_latency)],
        "cores": [("core-to-core", cores.bench_c2c)],
        "storage": [("storage", storage.bench_storage)],
    }
    order = ["compute", "dgemm", "memory", "cache", "latency", "cores"]
    extra = ["storage"]        # writes to disk: only when asked for, never in "all" or ceiling run
    wanted = names or ["all"]
    for n in wanted:
        if n != "all" and n not in table:
            raise UsageError(f"unknown suite {n!r} (one of: all, {', '.join(order + extra)}, network)")
    chosen = (order if "all" in wanted else [n for n in order if n in wanted]) + [n for n in extra if n in wanted]
    return [step for n in chosen for step in table[n]]


# -- the measuring verbs -------------------------------------------------------

def _measure(args: argparse.Namespace, argv: List[str], steps: List[Tuple[str, Callable]],
             with_checks: bool, report_html: bool, steps_must_run: bool = False) -> int:
    """Measure ``steps`` into one Run and deliver it. ``steps_must_run``: a step that
    could not run (a full disk, a kernel refusing) makes the exit code its error's,
    after everything else was saved; ``ceiling run`` instead reports it and goes on."""
    from . import machine as machine_mod
    from .checks import run_checks
    from .machine import placement

    opts = options(args)
    say = _say(args)
    out_html = getattr(args, "out", None)
    _check_writable(out_html, "--out")
    _check_writable(getattr(args, "save_json", None), "--save-json")
    cfg = _config(args)
    store = _open_store(args)
    progress = _progress(args)
    session = Session(argv, opts, progress)
    code = 0
    # Placement is validated on the read-only model, before the clock is measured.
    m = machine_mod.detect("/", measure=False, config=cfg)
    cpus = placement.plan(m, opts.threads, opts.placement, oversubscribe=opts.oversubscribe)
    if any(label == "storage" for label, _ in steps):
        from .bench import storage
        from .results.measure import Context, NullProgress
        storage.preflight(Context(m, opts, cpus, NullProgress()))   # bad --dir or size: its exit code, now
    try:
        if steps:
            progress.start("machine model and clock")
            try:
                m = machine_mod.detect("/", measure=True, config=cfg)
            finally:
                progress.done()
        session.set_machine(m, cpus)
        if steps:
            from .bench.compute import clock_metrics
            session.add(clock_metrics(m))
        if with_checks:
            session.add(Outcome(findings=run_checks(m)))
        for label, fn in steps:
            session.bench(label, fn)
    except KeyboardInterrupt as e:
        if getattr(e, "outcome", None) is not None:    # a step's partial results (storage)
            session.add(e.outcome)
        why, code = interruption(e)
        session.interrupted(f"{why}: results so far are kept")
    run = session.finish()
    code = _deliver(args, run, store, say, report_html, code)
    if code == 0 and steps_must_run and session.step_errors:
        code = session.step_errors[0].exit_code
    return code


def _default_report_path(run: Run) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"ceiling-{run.host.split('.')[0]}-{stamp}.html"
    here = Path.cwd()
    if os.access(here, os.W_OK):
        return here / name
    from .results.store import default_db_path
    return default_db_path().parent / name


def _deliver(args: argparse.Namespace, run: Run, store, say, report_html: bool, code: int,
             render: Optional[Callable[[Run], str]] = None) -> int:
    """Save and show a Run; every output is attempted even if another one fails."""
    from .report import html, terminal
    from .results import jsonio
    errors: List[str] = []
    if store is not None:
        try:
            store.save(run)
        except (CeilingError, OSError) as e:
            errors.append(f"history not saved: {e}")
    if getattr(args, "save_json", None):
        try:
            jsonio.dump(run, args.save_json)
        except (CeilingError, OSError) as e:
            errors.append(f"JSON not saved: {e}")
    report_path = None
    if report_html:
        report_path = Path(args.out) if getattr(args, "out", None) else _default_report_path(run)
        try:
            report_path.parent.mkdir(parents=True, exist_ok=True)
            html.write(run, str(report_path))
        except (CeilingError, OSError) as e:
            errors.append(f"HTML report not written: {e}")
            report_path = None
    color = sys.stdout.isatty() and not args.json and "NO_COLOR" not in os.environ
    width = _width()
    if render is not None:
        say(render(run))
    else:
        say(terminal.render(run, color=color, width=width))
        say(terminal.summary(run))
    if report_path is not None:
        say(f"HTML report: {report_path}")
    if store is not None and not any(e.startswith("history") for e in errors) and not getattr(args, "nhc", False):
        say(f"Recorded as run {run.run_id[:12]} in {store.path}")
    if args.json:
        sys.stdout.write(jsonio.dumps(run))
    for e in errors:
        print(f"ceiling: {e}", file=sys.stderr)
    invalid = [m.name for m in run.metrics if not m.valid]
    if invalid:
        print(f"ceiling: {len(invalid)} measurement(s) failed validation and are not trusted: {', '.join(invalid)}",
              file=sys.stderr)
        if code == 0:
            code = ValidationError.exit_code
    if run.partial and code == 0:
        code = INTERRUPTED_EXIT
    if errors and code == 0:
        code = PathError.exit_code
    return code


def _width() -> int:
    try:
        return max(60, min(os.get_terminal_size().columns, 140))
    except OSError:
        return 100


def cmd_run(args: argparse.Namespace, argv: List[str]) -> int:
    return _measure(args, argv, suites(["all"], args.quick), with_checks=True, report_html=True)


def cmd_bench(args: argparse.Namespace, argv: List[str]) -> int:
    if args.list:
        return _list_kernels(args)
    if "network" in args.suites:
        if len(set(args.suites)) > 1:
            raise UsageError("the network suite runs on its own, under MPI: mpirun -n 2 ceiling bench network")
        return _measure_mpi(args, argv, "network")
    from .cluster.comm import world
    from .cluster.launch import launched_size
    n = launched_size()
    if "storage" in args.suites and n == 0:       # a PMIx launcher: only MPI knows the size
        n = world("serialized").Get_size()
    if "storage" in args.suites and n > 1:
        if len(set(args.suites)) > 1:
            raise UsageError("under MPI the storage suite runs on its own: "
                             "mpirun -n N ceiling bench storage --dir DIR")
        return _measure_mpi(args, argv, "storage")
    steps = suites(args.suites, args.quick)
    return _measure(args, argv, steps, with_checks=False, report_html=bool(args.out), steps_must_run=True)


def _measure_mpi(args: argparse.Namespace, argv: List[str], suite: str) -> int:
    """``mpirun -n N ceiling bench network`` or ``... bench storage``: every rank
    measures, rank 0 reports.

    MPI is checked first (mpi4py, a library; two ranks or more for the network),
    before anything imports mpi4py.MPI with other settings or measures. The clock
    is not measured: on N ranks at once it would disturb the others and say
    nothing about the network or the file system.
    """
    from .bench import network
    from .cluster.comm import world
    from .cluster.stop import DeferredStop

    # storage's agreement points run on its I/O thread: MPI_THREAD_SERIALIZED
    comm = network.preflight() if suite == "network" else world("serialized")
    with DeferredStop(comm) as stop:     # from here on, a signal stops every rank at one point
        return _measure_mpi_ranks(args, argv, suite, comm, stop)


def _measure_mpi_ranks(args: argparse.Namespace, argv: List[str], suite: str, comm, stop) -> int:
    import contextlib
    import functools
    from . import machine as machine_mod
    from .bench import network, storage, storage_mpi
    from .results.measure import Context, NullProgress
    from .cluster.gather import pids_on_this_host
    from .cluster.stop import everywhere

    leader = comm.Get_rank() == 0
    try:                     # every rank parses the same command line: one error, printed once
        opts = options(args)
        cfg = _config(args)
    except CeilingError as e:
        raise everywhere(e) from None
    if suite == "network":
        network.preflight(comm, opts)
    say = _say(args) if leader else (lambda text: None)
    if leader:
        _check_writable(getattr(args, "out", None), "--out")
        _check_writable(getattr(args, "save_json", None), "--save-json")
    store = _open_store(args) if leader else None
    session = Session(argv, opts, _progress(args) if leader else NullProgress())
    session.own_pids = pids_on_this_host(comm)
    m = machine_mod.detect("/", measure=False, config=cfg)
    cpus = sorted(m.affinity) or [c.id for c in m.cpus if c.online]
    session.set_machine(m, cpus)
    code = 0
    with contextlib.ExitStack() as stack:
        fn: Callable = network.bench_network
        try:
            stop.agree()         # a signal during the set-up: nothing measured, every rank leaves here
            if suite == "storage":   # bad --dir, sizes or space on any rank: one line, its exit code, on every rank
                ready = stack.enter_context(storage_mpi.prepare_parallel(Context(m, opts, cpus, NullProgress())))
                fn = functools.partial(storage.bench_storage, parallel=ready)
            session.bench(suite, fn)
        except KeyboardInterrupt as e:
            if getattr(e, "outcome", None) is not None:      # what was measured before it
                session.add(e.outcome)
            why, code = interruption(e)
            session.interrupted(f"{why}: results so far are kept")
    run = session.finish()
    if code == 0 and session.step_errors:
        code = session.step_errors[0].exit_code
    if not leader:
        return code
    return _deliver(args, run, store, say, bool(getattr(args, "out", None)), code)


def _check_options(args: argparse.Namespace):
    """--only and --noise-seconds, validated against the registry before anything runs."""
    from .checks import REGISTRY, Options, load_all
    from .checks.base import AREAS
    load_all()
    only = [w.strip() for item in (args.only or []) for w in item.split(",") if w.strip()]
    for w in only:
        if w not in AREAS and w not in REGISTRY:
            raise UsageError(f"--only {w!r}: no such area or check (areas: {', '.join(AREAS)}; see --list)")
    opts = Options()
    if args.noise_seconds is not None:
        try:
            opts.noise_s = float(args.noise_seconds)
        except ValueError:
            raise UsageError(f"--noise-seconds {args.noise_seconds!r}: not a number") from None
        if not 0.05 <= opts.noise_s <= 600:
            raise BadValueError(f"--noise-seconds {opts.noise_s:g}: must be between 0.05 and 600")
    return only or None, opts


def _explain(check_id: str) -> int:
    from .checks import REGISTRY, load_all
    from .checks.base import AREAS
    load_all()
    c = REGISTRY.get(check_id)
    if c is None:
        near = [i for i in REGISTRY if check_id.split(".")[-1] in i or i.startswith(check_id)]
        hint = f" (did you mean {', '.join(sorted(near)[:4])}?)" if near else " (see 'ceiling check --list')"
        raise UsageError(f"--explain {check_id!r}: no such check{hint}")
    print(f"{c.id}  [{AREAS[c.area]}]{'  (live: this process, now)' if c.live else ''}\n")
    print(c.explain)
    return 0


def _list_checks(args: argparse.Namespace) -> int:
    from .checks import load_all
    from .checks.base import AREAS, select
    load_all()
    checks = select()
    if args.json:
        print(json.dumps([{"id": c.id, "area": c.area, "live": c.live, "summary": c.explain.splitlines()[0]}
                          for c in checks], indent=1))
        return 0
    for area, title in AREAS.items():
        group = [c for c in checks if c.area == area]
        if group:
            print(f"{area:<10} {title}")
            for c in group:
                print(f"  {c.id:<26} {c.explain.splitlines()[0]}")
    return 0


def cmd_check(args: argparse.Namespace, argv: List[str]) -> int:
    from . import machine as machine_mod
    from .checks import run_checks
    from .checks.base import worst
    from .report import terminal
    if args.explain:
        return _explain(args.explain)
    if args.list:
        return _list_checks(args)
    only, copts = _check_options(args)
    if args.root and not Path(args.root).is_dir():
        raise PathError(f"--root {args.root}: not a directory")
    root = args.root or "/"
    say = _say(args)
    _check_writable(getattr(args, "save_json", None), "--save-json")
    cfg = _config(args)
    store = None if args.root else _open_store(args)
    progress = _progress(args)
    session = Session(argv, Options(quick=True), progress)
    code = 0
    try:
        if root == "/":
            # The clock under load is evidence for cpu.clock and the throttling checks.
            progress.start("machine model and clock")
            try:
                m = machine_mod.detect("/", measure=True, config=cfg)
            finally:
                progress.done()
        else:
            m = machine_mod.detect(root, measure=False, config=cfg)
        session.set_machine(m, sorted(m.affinity) or None)
        progress.start("checks")
        try:
            session.add(Outcome(findings=run_checks(m, root, only=only, options=copts)))
        finally:
            progress.done()
    except KeyboardInterrupt as e:
        why, code = interruption(e)
        session.interrupted(f"{why}: findings so far are kept")
    run = session.finish()
    color = sys.stdout.isatty() and not args.json and "NO_COLOR" not in os.environ
    if args.nhc:
        render = lambda r: terminal.nhc_line(r)  # noqa: E731
    else:
        render = lambda r: terminal.render_checks(r, color=color, width=_width(), verbose=args.verbose)  # noqa: E731
    code = _deliver(args, run, store, say, False, code, render=render)
    if code == 0 and (args.strict or args.nhc):
        code = {"fail": 2, "warn": 1}.get(worst(run.findings), 0)
    return code


def _list_kernels(args: argparse.Namespace) -> int:
    ks = core.kernels()
    if args.json:
        print(json.dumps([k.__dict__ for k in ks], indent=1))
        return 0
    print(f"{'kernel':<16} {'family':<10} {'isa':<7} {'runs here':<9} {'B/iter':>7} {'flop/iter':>9}  what one iteration is")
    for k in ks:
        print(f"{k.name:<16} {k.family:<10} {k.isa:<7} {'yes' if k.supported else 'no':<9} "
              f"{k.bytes_per_iter:>7g} {k.flops_per_iter:>9g}  {k.doc}")
    return 0


def cmd_machine(args: argparse.Namespace, argv: List[str]) -> int:
    from . import machine as machine_mod
    from .report import terminal
    root = args.root or "/"
    if args.root and not Path(args.root).is_dir():
        raise PathError(f"--root {args.root}: not a directory")
    cfg = _config(args)
    measure = not args.no_measure and root == "/"
    if measure:
        progress = _progress(args)
        progress.start("machine model and clock")
        try:
            m = machine_mod.detect(root, measure=True, config=cfg)
        finally:
            progress.done()
    else:
        m = machine_mod.detect(root, measure=False, config=cfg)
    session = Session(argv)
    session.set_machine(m)
    run = session.finish()
    if args.save_json:
        from .results import jsonio
        jsonio.dump(run, args.save_json)
    _say(args)(terminal.render_machine(run))
    if args.json:
        print(json.dumps(m.to_dict(), indent=1, default=_json_default))
    return 0


def _json_default(o):
    if hasattr(o, "__dict__"):
        return o.__dict__
    return str(o)


def cmd_history(args: argparse.Namespace, argv: List[str]) -> int:
    from .report import terminal
    from .results.store import Store
    limit = parse_count(args.limit, what="--limit", low=1)
    store = Store(args.db)
    if args.metric:
        rows = store.metrics_history(args.metric, host=args.host)[-limit:]
    else:
        rows = store.list(host=args.host, limit=limit)
    if args.json:
        print(json.dumps(rows, indent=1, default=_json_default))
    else:
        print(terminal.render_history(rows, metric=args.metric))
    return 0


def cmd_show(args: argparse.Namespace, argv: List[str]) -> int:
    from .report import html, terminal
    from .results import jsonio
    if args.out:
        _check_writable(args.out, "--out")
    if args.run.endswith(".json") or Path(args.run).is_file():
        if not Path(args.run).is_file():
            raise PathError(f"{args.run}: no such file")
        run = jsonio.load(args.run)
    else:
        from .results.store import Store
        run = Store(args.db).get(args.run)
    if args.out:
        html.write(run, args.out)
    if args.json:
        sys.stdout.write(jsonio.dumps(run))
    else:
        print(terminal.render(run, color=sys.stdout.isatty() and "NO_COLOR" not in os.environ, width=_width()))
        print(terminal.summary(run))
    return 0


VERBS = {"run": cmd_run, "bench": cmd_bench, "check": cmd_check, "machine": cmd_machine,
         "history": cmd_history, "show": cmd_show}


def dispatch(args: argparse.Namespace, argv: List[str]) -> int:
    return VERBS[args.verb](args, argv)
