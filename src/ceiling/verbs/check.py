"""ceiling check: the node's condition and configuration, as findings."""
from __future__ import annotations

import argparse
import json
from typing import List

from ..errors import BadValueError, UsageError, interruption
from ..results.measure import Options, Outcome
from . import common

NAME = "check"
HELP = "the node's condition and configuration"
DESCRIPTION = "Findings (ok / warn / fail / skipped), each with evidence, why it matters and how to fix it."
EPILOG = ("Exit status: 0, unless --strict: 1 when a check warns, 2 when one fails. --nhc (usable as "
          "Slurm's HealthCheckProgram, as LBNL NHC): 2 when a check fails, warnings printed only; "
          "--nhc --strict: 1 for warnings too.")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--only", action="append", metavar="AREA",
                   help="only these areas or check ids (repeat, or comma-separated); "
                   "see --list")
    p.add_argument("--list", action="store_true", help="list the checks and their areas, and exit")
    p.add_argument("--explain", metavar="ID", help="print the long explanation of one check, and exit")
    p.add_argument("--strict", action="store_true", help="exit 1 when a check warns, 2 when one fails")
    p.add_argument("--nhc", action="store_true", help="print one health-check line (NHC style) instead of the table; "
                   "exit 2 when a check fails (a node to drain), 0 when checks only warn (with --strict: 1)")
    p.add_argument("--noise-seconds", type=str, metavar="S", help="length of the OS-noise window (default 2)")
    p.add_argument("--root", metavar="DIR",
                   help="check a recorded /proc and /sys tree below DIR (checks of the live process are skipped)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show evidence for every finding, not only for problems")
    common.output_options(p, store=True, html=False, textfile=True)
    from .cluster import configure
    configure(p)


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from ..checks.base import worst
    from ..report import terminal
    if args.explain:
        return _explain(args.explain)
    if args.list:
        return _list_checks(args)
    only, copts = _check_options(args)
    common.require_dir(args.root)
    color = common.color(args)
    if args.nhc:
        render = terminal.nhc_line
    else:
        def render(r):
            return terminal.render_checks(r, color=color, width=common.width(), verbose=args.verbose)

    def settle(run, code: int) -> int:
        if code == 0 and (args.strict or args.nhc):
            # A health check drains a node on errors only, as LBNL NHC does: a low memlock or
            # fragmented huge pages are worth a line, not a drained node.
            code = {"fail": 2, "warn": 1 if args.strict else 0}.get(worst(run.findings), 0)
        return code
    if args.cluster:
        from .cluster import run_cluster
        return run_cluster(args, lambda progress: _check_node(args, argv, only, copts, progress), False,
                           render=render, settle=settle)
    say = common.say(args)
    common.check_outputs(args, html=False)
    store = None if args.root else common.open_store(args)
    run, code = _check_node(args, argv, only, copts, common.progress(args))
    outputs = common.exporters(args, store, html=False, render=render, quiet_store=args.nhc)
    return settle(run, common.deliver(run, outputs, code, say))


def _check_node(args: argparse.Namespace, argv: List[str], only, copts, progress):
    """This node's findings as a Run, and the exit code so far (130 when interrupted)."""
    from .. import machine as machine_mod
    from ..checks import run_checks
    from .session import Session
    root = args.root or "/"
    cfg = common.config(args)
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
    return session.finish(), code


def _check_options(args: argparse.Namespace):
    """--only and --noise-seconds, validated against the registry before anything runs."""
    from ..checks import REGISTRY, Options as CheckOptions, load_all
    from ..checks.base import AREAS
    load_all()
    only = [w.strip() for item in (args.only or []) for w in item.split(",") if w.strip()]
    for w in only:
        if w not in AREAS and w not in REGISTRY:
            raise UsageError(f"--only {w!r}: no such area or check (areas: {', '.join(AREAS)}; see --list)")
    opts = CheckOptions()
    if args.noise_seconds is not None:
        try:
            opts.noise_s = float(args.noise_seconds)
        except ValueError:
            raise UsageError(f"--noise-seconds {args.noise_seconds!r}: not a number") from None
        if not 0.05 <= opts.noise_s <= 600:
            raise BadValueError(f"--noise-seconds {opts.noise_s:g}: must be between 0.05 and 600")
    return only or None, opts


def _explain(check_id: str) -> int:
    from ..checks import REGISTRY, load_all
    from ..report.labels import area_title
    load_all()
    c = REGISTRY.get(check_id)
    if c is None:
        near = [i for i in REGISTRY if check_id.split(".")[-1] in i or i.startswith(check_id)]
        hint = f" (did you mean {', '.join(sorted(near)[:4])}?)" if near else " (see 'ceiling check --list')"
        raise UsageError(f"--explain {check_id!r}: no such check{hint}")
    print(f"{c.id}  [{area_title(c.area)}]{'  (live: this process, now)' if c.live else ''}\n")
    print(c.explain)
    return 0


def _list_checks(args: argparse.Namespace) -> int:
    from ..checks import load_all
    from ..checks.base import AREAS, select
    from ..report.labels import area_title
    load_all()
    checks = select()
    if args.json:
        print(json.dumps([{"id": c.id, "area": c.area, "live": c.live, "summary": c.explain.splitlines()[0]}
                          for c in checks], indent=1))
        return 0
    for area in AREAS:
        group = [c for c in checks if c.area == area]
        if group:
            print(f"{area:<10} {area_title(area)}")
            for c in group:
                print(f"  {c.id:<26} {c.explain.splitlines()[0]}")
    return 0
