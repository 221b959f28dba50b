"""What the verbs share: option groups, option checks, the output of a Run
(exporters and exit codes), and the small helpers around them."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Callable, List, Optional

from .. import core
from ..errors import INTERRUPTED_EXIT, BadValueError, CeilingError, PathError, UsageError, ValidationError, held_signals
from ..report.exporters.base import Exporter, InternalFailure, deliver as _deliver_all, prepare
from ..results.measure import Options
from ..results.model import Run
from ..sysfs import meminfo_bytes
from ..units import parse_count, parse_seconds, parse_size
from . import suites

ISAS = ("scalar", "sse2", "avx2", "avx512", "neon", "sve")
# What `ceiling bench` takes: the node's own suites (suites.py), the network under MPI, storage.
BENCH_SUITES = ("all", *suites.ORDER, "network", *suites.EXTRA)


# -- option groups ------------------------------------------------------------------

def measure_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("measurement")
    g.add_argument("--threads", type=str, metavar="N",
                   help="threads for multi-threaded kernels (default: OMP_NUM_THREADS, else every CPU this process may "
                        "use)")
    g.add_argument("--placement", default="compact", metavar="POLICY",
                   help="compact (one thread per core first), scatter (round-robin over NUMA domains), or node:N")
    g.add_argument("--reps", type=str, metavar="N", help="timed repetitions per measurement")
    g.add_argument("--size", type=str, metavar="BYTES",
                   help="array / working-set size, e.g. 512MiB or 2G (default: sized from the caches)")
    g.add_argument("--isa", metavar="ISA", help="force one kernel variant: scalar, sse2, avx2, avx512, neon, sve")
    g.add_argument("--nt-stores", action="store_true", help="STREAM with non-temporal (streaming) stores")
    g.add_argument("--oversubscribe", action="store_true", help="allow more threads than available CPUs")
    g.add_argument("--retry-disturbed", type=str, metavar="N",
                   help="measure a step that met competing load again, up to N times (default 0: its figures "
                        "are shown as disturbed, not as the node's)")


def output_options(p: argparse.ArgumentParser, store: bool = True, html: bool = True,
                   json_refused: str = "", textfile: bool = False) -> None:
    """The output options; ``json_refused``: why a verb refuses --json (one that runs a program,
    whose standard output it is), said in its help instead of what --json does elsewhere; ``textfile``:
    the verb offers --textfile (run, check, bench: a node's ceilings and checks for Prometheus)."""
    g = p.add_argument_group("output")
    g.add_argument("--json", action="store_true",
                   help=f"refused: {json_refused}" if json_refused else
                   "print the run as versioned JSON on stdout (terminal text goes to stderr)")
    if html:
        g.add_argument("--out", metavar="FILE.html", help="write the single-file HTML report here")
    g.add_argument("--save-json", metavar="FILE.json", help="also write the run's JSON to this file")
    if store:
        g.add_argument("--db", metavar="PATH", help="SQLite history (default: ~/.local/share/ceiling/history.db)")
        g.add_argument("--no-store", action="store_true", help="do not record this run in the history")
    if textfile:
        g.add_argument("--textfile", metavar="DIR", help="also write the figures, peaks, efficiencies, verdict and "
                       "checks as Prometheus series to DIR/ceiling.prom (node_exporter's textfile collector "
                       "directory), atomically, keeping what earlier runs wrote of the rest")


# -- option values --------------------------------------------------------------------

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
    opts = Options(quick=getattr(args, "quick", False), threads=threads, placement=placement, reps=reps,
                   size_bytes=size, isa=isa, nt_stores=getattr(args, "nt_stores", False),
                   oversubscribe=getattr(args, "oversubscribe", False), storage_dir=getattr(args, "dir", None))
    opts.storage_clean = bool(getattr(args, "clean", False))
    opts.retry_disturbed = parse_count(getattr(args, "retry_disturbed", None), what="--retry-disturbed",
                                       low=0, high=100) or 0
    opts.node_timeout_s = parse_seconds(getattr(args, "node_timeout", None), what="--node-timeout")
    return opts


def open_store(args: argparse.Namespace):
    """The history store, or None with --no-store; opened (and checked) before measuring."""
    if getattr(args, "no_store", False):
        return None
    from ..results.store import Store
    return Store(getattr(args, "db", None), check=True)    # a damaged history is refused, not written to


def config(args: argparse.Namespace):
    from ..machine import config as cfg
    return cfg.load(args.config) if getattr(args, "config", None) else cfg.load()


def progress(args: argparse.Namespace):
    from ..report.progress import Progress
    return Progress(stream=sys.stderr)


def text_stream(args: argparse.Namespace):
    """Terminal text goes to stdout, or to stderr when stdout carries JSON or belongs to the
    program a verb runs (``args.text_to_stderr``: ceiling profile)."""
    return sys.stderr if getattr(args, "json", False) or getattr(args, "text_to_stderr", False) else sys.stdout


def say(args: argparse.Namespace) -> Callable[[str], None]:
    stream = text_stream(args)
    return lambda text: print(text, file=stream, flush=True)


def width() -> int:
    try:
        return max(60, min(os.get_terminal_size().columns, 140))
    except OSError:
        return 100


def color(args: argparse.Namespace) -> bool:
    return text_stream(args).isatty() and not getattr(args, "json", False) and "NO_COLOR" not in os.environ


def require_dir(path: Optional[str], what: str = "--root") -> None:
    if path and not os.path.isdir(path):
        raise PathError(f"{what} {path}: not a directory")


# -- the output of a Run ----------------------------------------------------------------

def exporters(args: argparse.Namespace, store, *, html: bool, render: Optional[Callable[[Run], str]] = None,
              quiet_store: bool = False) -> List[Exporter]:
    """The outputs the usual options ask for, in delivery order: --save-json, the HTML report,
    the history, the terminal, --json."""
    from ..report.exporters.history import History
    from ..report.exporters.json_doc import JsonFile, JsonStdout
    from ..report.exporters.terminal import Terminal
    out: List[Exporter] = []
    if getattr(args, "save_json", None):
        out.append(JsonFile(args.save_json))
    if html:
        from ..report.exporters.html_file import HtmlFile     # only when asked for: a tenth of a second
        out.append(HtmlFile(getattr(args, "out", None)))
    if store is not None:
        out.append(History(store, quiet=quiet_store))
    if getattr(args, "textfile", None):
        from ..report.exporters.textfile import Textfile
        out.append(Textfile(args.textfile))
    out.append(Terminal(say(args), color=color(args), width=width(), render=render))
    if getattr(args, "json", False):
        out.append(JsonStdout())
    return out


def check_outputs(args: argparse.Namespace, html: bool = True) -> None:
    """Refuse --out and --save-json paths that cannot be written, before measuring. The
    exporters are imported only when asked for (the HTML one costs a tenth of a second, before
    ``ceiling profile`` starts its program)."""
    outs: List[Exporter] = []
    if html and getattr(args, "out", None):
        from ..report.exporters.html_file import HtmlFile
        outs.append(HtmlFile(args.out))
    if getattr(args, "save_json", None):
        from ..report.exporters.json_doc import JsonFile
        outs.append(JsonFile(args.save_json))
    if getattr(args, "textfile", None):
        if getattr(args, "cluster", False):
            raise UsageError("--textfile writes this node's series for its node_exporter; under --cluster rank 0 "
                             "would write every node's into its own node's file: run it on each node instead")
        from ..report.exporters.textfile import Textfile
        outs.append(Textfile(args.textfile))
    prepare(outs)


def deliver(run: Run, outputs: List[Exporter], code: int, say: Callable[[str], None],
            partial_exit: bool = True) -> int:
    """Analyse ``run`` once, hand it to every output (receipts through ``say``), and settle
    the exit code: ``code`` (a step's error, an interruption) stands; then invalid measurements
    (9), a partial run (130; not with ``partial_exit`` False: a verb whose exit status is its
    program's, which ended as it chose), an output that could not be written (4)."""
    from ..analysis.analyse import ensure
    from ..units import printable
    # Once measured, a run is delivered: Ctrl-C or SIGTERM now waits until every output is
    # written (a second one stops at once, and the exporters remove their temporary files).
    with held_signals() as held:
        ensure(run)
        errors = _deliver_all(run, outputs, lambda line: say(printable(line)))   # receipts name outside paths
    for e in errors:
        print(f"ceiling: {printable(e)}", file=sys.stderr)
    if held.signum is not None:
        why, icode = held.interruption()
        print(f"ceiling: {why} while the run was delivered; every output was written first", file=sys.stderr)
        if code == 0:
            code = icode
    invalid = [m.name for m in run.metrics if not m.valid]
    if invalid:
        print(f"ceiling: {len(invalid)} measurement(s) failed validation and are not trusted: {', '.join(invalid)}",
              file=sys.stderr)
        if code == 0:
            code = ValidationError.exit_code
    if run.partial and code == 0 and partial_exit:
        code = INTERRUPTED_EXIT
    if errors and code == 0:
        code = 1 if any(isinstance(e, InternalFailure) for e in errors) else PathError.exit_code
    return code


class CommandNotFound(CeilingError):
    exit_code = 127         # the shell's code, which users and scripts expect


class CommandNotExecutable(CeilingError):
    exit_code = 126         # the shell's code


def resolve_program(name: str, verb: str) -> str:
    """The path of the program a verb runs (profile, scale), as the shell would find it; one line and the
    shell's 127 (not found) or 126 (not executable) otherwise."""
    path = name if "/" in name else shutil.which(name)
    if path is None or not os.path.exists(path):
        raise CommandNotFound(f"{verb}: {name}: command not found")
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise CommandNotExecutable(f"{verb}: {name}: not an executable file")
    return path
