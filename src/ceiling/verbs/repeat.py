"""``ceiling bench --repeat N``: the same measurement N times, one Run each, kept together as one
repetition study (results.model.Study, kind "repetition", parameter "repetition" = 1..N).

Each member is measured as ``ceiling bench`` measures one run (measure.measure_node), analysed and
recorded in the history as soon as it is made (a study stopped part way keeps its members), and
is a run like any other there: ``history --metric`` shows its figures, ``show RUN`` shows it. Once
every member is made (or one stopped the study: Ctrl-C, a step that could not run), the study
itself is delivered: its row in the history (grouping the members), ``--save-json`` its document
with every member whole, ``--out`` its HTML page, the terminal its table of members, ``--json`` its
document on stdout. The figures are the members' own: the study adds no statistic across them
(that is the study's analysis, compare's and the models' to fill).
"""
from __future__ import annotations

import argparse
import socket
import sys
import uuid
from typing import Any, Dict, List

from .. import __version__
from ..errors import (INTERRUPTED_EXIT, CeilingError, PathError, UsageError, ValidationError, held_signals,
                      interruption)
from ..results.measure import Options
from ..results.model import REPETITION, Member, Study, utcnow
from ..units import parse_count, printable
from . import common

MAX_REPEAT = 1000


def count(args: argparse.Namespace) -> int:
    """--repeat's N (2 or more), checked with the options it cannot go with; 0 without --repeat."""
    n = parse_count(getattr(args, "repeat", None), what="--repeat", low=2, high=MAX_REPEAT)
    if n is None:
        return 0
    if getattr(args, "cluster", False):
        raise UsageError("--repeat measures this node again and again; --cluster measures every node once: "
                         "give one of them")
    if {"network", "storage"} & set(args.suites) or getattr(args, "site_mpi", None):
        raise UsageError("--repeat repeats the node's own suites (compute to cores); the network and storage "
                         "suites measure many ranks together: run them again yourself")
    return n


def fixed(args: argparse.Namespace, opts: Options) -> Dict[str, Any]:
    """What every member shares: the suites and the options as given (nothing guessed)."""
    out: Dict[str, Any] = {"suites": list(args.suites) or ["all"], "quick": bool(opts.quick),
                           "placement": opts.placement}
    for key, value in (("threads", opts.threads), ("reps", opts.reps), ("size_bytes", opts.size_bytes),
                       ("isa", opts.isa)):
        if value is not None:
            out[key] = value
    if opts.nt_stores:
        out["nt_stores"] = True
    return out


def measure_repeated(args: argparse.Namespace, argv: List[str], steps, n: int) -> int:
    """Measure ``steps`` ``n`` times into a repetition study and deliver it (module docstring)."""
    from ..report.exporters.history import History
    from .measure import measure_node
    opts = common.options(args)
    say = common.say(args)
    common.check_outputs(args)          # --out and --save-json: the study's page and document
    cfg = common.config(args)
    store = common.open_store(args)
    host = socket.gethostname()
    study = Study(kind=REPETITION, parameter="repetition", tool_version=__version__, host=host, started=utcnow(),
                  command=["ceiling", *argv], study_id=uuid.uuid4().hex, fixed=fixed(args, opts), hosts=[host])
    code = 0
    try:
        for i in range(1, n + 1):
            say(f"repetition {i} of {n}")
            run, c = measure_node(argv, opts, cfg, steps, False, common.progress(args), steps_must_run=True)
            study.members.append(Member(i, run.run_id, run))
            if "threads" not in study.fixed and isinstance(run.environment.get("threads"), int):
                study.fixed["threads"] = run.environment["threads"]      # what every member ran with
            outs = [History(store, quiet=True)] if store is not None else []
            if getattr(args, "textfile", None):          # each repetition's figures, the newest last
                from ..report.exporters.textfile import Textfile
                outs.append(Textfile(args.textfile))
            c = common.deliver(run, outs, c, say)
            code = code or c
            if run.partial or c not in (0, ValidationError.exit_code):
                # Ctrl-C, or a step that could not run: the next repetition would stop the same way
                why = run.partial_reason if run.partial else f"repetition {i} ended with exit code {c}"
                _stop(study, f"{why}; {i} of {n} repetitions made")
                break
    except KeyboardInterrupt as e:       # between the steps of measure_node: its run was not made
        why, c = interruption(e)
        code = code or c
        _stop(study, f"{why}; {len(study.members)} of {n} repetitions made")
    study.finished = utcnow()
    return deliver_study(study, args, store, say, code)


def _stop(study: Study, reason: str) -> None:
    study.partial = True
    study.partial_reason = reason


def deliver_study(study: Study, args: argparse.Namespace, store, say, code: int) -> int:
    """The study's outputs, as common.deliver hands out a run's: files and the history, the terminal,
    the receipts, then the document on stdout; one failing costs only itself (exit 4)."""
    from ..report import html_study, terminal_study
    from ..results import jsonio
    errors: List[str] = []
    receipts: List[str] = []

    def attempt(what: str, work) -> None:
        try:
            line = work()
        except (CeilingError, OSError) as e:
            errors.append(f"{what}: {e}")
            return
        if line:
            receipts.append(line)
    with held_signals() as held:
        if store is not None:
            attempt("study not saved in the history", lambda: store.save_study(study) and
                    f"Recorded as study {study.study_id[:12]} in {store.path}")
        if getattr(args, "save_json", None):
            attempt("JSON not saved", lambda: jsonio.dump_study(study, args.save_json))
        if getattr(args, "out", None):
            attempt("HTML report not written", lambda: html_study.write(study, args.out) or f"HTML report: {args.out}")
        say(terminal_study.render(study, width=common.width()))
        for line in receipts:
            say(printable(line))
        if getattr(args, "json", False):
            sys.stdout.write(jsonio.dumps_study(study))
    for e in errors:
        print(f"ceiling: {printable(e)}", file=sys.stderr)
    if held.signum is not None and code == 0:
        code = held.interruption()[1]
    if study.partial and code == 0:
        code = INTERRUPTED_EXIT
    if errors and code == 0:
        code = PathError.exit_code
    return code
