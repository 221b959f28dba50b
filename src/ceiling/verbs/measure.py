"""The measuring flow the verbs share: a Session filled step by step on this
node (``measure``) or on every rank of an MPI job (``measure_mpi``), then
analysed and delivered. Ctrl-C or SIGTERM keeps what was measured."""
from __future__ import annotations

import argparse
from typing import Callable, List, Tuple

from ..errors import CeilingError, StalledError, interruption
from ..results.measure import Context, NullProgress, Outcome
from ..results.model import Job, Run
from . import common, suites
from .session import Session

Step = Tuple[str, Callable]


def measure(args: argparse.Namespace, argv: List[str], steps: List[Step], with_checks: bool,
            report_html: bool, steps_must_run: bool = False) -> int:
    """Measure ``steps`` into one Run and deliver it (with --cluster: on every node of the
    MPI job, verbs/cluster.py). ``steps_must_run``: a step that could not run (a full disk,
    a kernel refusing) makes the exit code its error's, after everything else was saved;
    ``ceiling run`` instead reports it and goes on."""
    if getattr(args, "cluster", False):
        from .cluster import run_cluster

        def node(progress) -> Tuple[Run, int]:
            return measure_node(argv, common.options(args), common.config(args), steps, with_checks, progress)
        return run_cluster(args, node, report_html)
    opts = common.options(args)
    say = common.say(args)
    common.check_outputs(args)
    cfg = common.config(args)
    store = common.open_store(args)
    run, code = measure_node(argv, opts, cfg, steps, with_checks, common.progress(args), steps_must_run)
    return common.deliver(run, common.exporters(args, store, html=report_html), code, say)


def measure_node(argv: List[str], opts, cfg, steps: List[Step], with_checks: bool, progress,
                 steps_must_run: bool = False) -> Tuple[Run, int]:
    """This node's Run and the exit code so far: the machine, the clock, the checks, the steps."""
    from .. import machine as machine_mod
    from ..checks import run_checks
    from ..machine import placement

    session = Session(argv, opts, progress)
    session.remeasure = suites.ORDER
    code = 0
    # Placement is validated on the read-only model, before the clock is measured.
    m = machine_mod.detect("/", measure=False, config=cfg)
    cpus = placement.plan(m, opts.threads, opts.placement, oversubscribe=opts.oversubscribe)
    session.set_machine(m, cpus)        # a run stopped from here on is delivered, partial
    checks = suites.preflights()
    # The clock under load: measured for the steps whose figures it bounds (not storage alone).
    clocked = any(label not in suites.NO_CLOCK for label, _ in steps)
    try:
        for fn in dict.fromkeys(checks[label] for label, _ in steps if label in checks):
            fn(Context(m, opts, cpus, NullProgress()))      # a bad --size or --dir: its exit code, now
        if clocked:
            progress.start("machine model and clock")
            try:
                m = machine_mod.detect("/", measure=True, config=cfg)
            finally:
                progress.done()
        session.set_machine(m, cpus)
        if clocked:
            from ..bench.compute import clock_metrics
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
    if code == 0 and steps_must_run and session.step_errors:
        code = session.step_errors[0].exit_code     # before deliver: not the 130 of a partial run
    return run, code


def measure_mpi(args: argparse.Namespace, argv: List[str], suite: str) -> int:
    """``mpirun -n N ceiling bench network`` or ``... bench storage``: every rank
    measures, rank 0 reports.

    MPI is checked first (mpi4py, a library; two ranks or more for the network),
    before anything imports mpi4py.MPI with other settings or measures. The clock
    is not measured: on N ranks at once it would disturb the others and say
    nothing about the network or the file system.
    """
    from ..bench import network
    from ..cluster import watchdog
    from ..cluster.comm import world
    from ..cluster.stop import DeferredStop

    # storage's agreement points run on its I/O thread: MPI_THREAD_SERIALIZED
    comm = network.preflight() if suite == "network" else world("serialized")
    dog = watchdog.start(comm)           # from here on, every wait for other ranks has a deadline
    try:
        comm = watchdog.wrap(comm)
        with DeferredStop(comm) as stop:     # from here on, a signal stops every rank at one point
            return _measure_ranks(args, argv, suite, comm, stop, dog)
    finally:
        watchdog.stop()


def _measure_ranks(args: argparse.Namespace, argv: List[str], suite: str, comm, stop, dog) -> int:
    import contextlib
    import functools
    from .. import machine as machine_mod
    from ..bench import network, storage, storage_mpi
    from ..cluster.gather import pids_on_this_host
    from ..cluster.launch import node_name
    from ..cluster.stop import everywhere

    leader = comm.Get_rank() == 0
    try:                     # every rank parses the same command line: one error, printed once
        opts = common.options(args)
        cfg = common.config(args)
    except CeilingError as e:
        raise everywhere(e) from None
    dog.timeout = opts.node_timeout_s
    if suite == "network":
        network.preflight(comm, opts)
    say = common.say(args) if leader else (lambda text: None)
    if leader:
        common.check_outputs(args)
    store = common.open_store(args) if leader else None
    session = Session(argv, opts, common.progress(args) if leader else NullProgress())
    session.own_pids = pids_on_this_host(comm)
    m = machine_mod.detect("/", measure=False, config=cfg)
    cpus = sorted(m.affinity) or [c.id for c in m.cpus if c.online]
    session.set_machine(m, cpus)
    nodes = comm.allgather(node_name())
    if leader:
        # What the run says of its MPI, asked now: the rescue below runs on the watchdog's thread,
        # which makes no MPI call.
        mpi = _mpi_of_job(nodes, suite)
        def rescue(line: str) -> None:
            """A rank stopped answering (the watchdog's thread, the main thread blocked in MPI)."""
            for out in dog.held():
                session.add(out)
            session.partial(line)
            common.deliver(mpi(session.finish()), common.exporters(args, store, html=bool(getattr(args, "out", None))),
                           StalledError.exit_code, say)
        dog.rescue = rescue
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
    dropped = dog.finding() if leader else None       # forged datagrams on the watchdog's channel
    if dropped is not None:
        session.run.findings.append(dropped)
    run = session.finish()
    if code == 0 and session.step_errors:
        code = session.step_errors[0].exit_code
    if not leader:
        return code
    return common.deliver(mpi(run), common.exporters(args, store, html=bool(getattr(args, "out", None))), code, say)


def _mpi_of_job(nodes: List[str], suite: str) -> Callable[[Run], Run]:
    """What sets a run's job (Run.job) and its MPI (environment["mpi"]: library, device,
    transport; for the network, the other MPI installations found): every figure of a run under
    MPI is that library's."""
    from ..cluster.installations import mpi_facts
    from ..cluster.launch import launcher_in_use
    from ..cluster.library import library
    lib = library()
    facts = mpi_facts(lib, look_for_others=suite == "network")
    per = {n: nodes.count(n) for n in nodes}
    launcher = launcher_in_use()

    def add(run: Run) -> Run:
        run.job = Job(launcher=launcher, mpi_library=lib.description, ranks=len(nodes), nodes=len(per),
                      ranks_per_node=next(iter(per.values())) if len(set(per.values())) == 1 else None,
                      node_names=list(per))
        run.environment = dict(run.environment, mpi=facts)
        return run
    return add
