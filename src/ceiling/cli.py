"""Command line: verbs and options only. Each verb is one call into ceiling.app."""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from . import __version__
from .errors import CeilingError, UsageError, interruption, raise_terminated

BENCH_SUITES = ("all", "compute", "dgemm", "memory", "cache", "latency", "cores", "network", "storage")


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def _measure_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("measurement")
    g.add_argument("--threads", type=str, metavar="N",
                   help="threads for multi-threaded kernels (default: OMP_NUM_THREADS, else every CPU this process may use)")
    g.add_argument("--placement", default="compact", metavar="POLICY",
                   help="compact (one thread per core first), scatter (round-robin over NUMA domains), or node:N")
    g.add_argument("--reps", type=str, metavar="N", help="timed repetitions per measurement")
    g.add_argument("--size", type=str, metavar="BYTES",
                   help="array / working-set size, e.g. 512MiB or 2G (default: sized from the caches)")
    g.add_argument("--isa", metavar="ISA", help="force one kernel variant: scalar, sse2, avx2, avx512, neon, sve")
    g.add_argument("--nt-stores", action="store_true", help="STREAM with non-temporal (streaming) stores")
    g.add_argument("--oversubscribe", action="store_true", help="allow more threads than available CPUs")


def _output_options(p: argparse.ArgumentParser, store: bool = True, html: bool = True) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--json", action="store_true", help="print the run as versioned JSON on stdout (terminal text goes to stderr)")
    if html:
        g.add_argument("--out", metavar="FILE.html", help="write the single-file HTML report here")
    g.add_argument("--save-json", metavar="FILE.json", help="also write the run's JSON to this file")
    if store:
        g.add_argument("--db", metavar="PATH", help="SQLite history (default: ~/.local/share/ceiling/history.db)")
        g.add_argument("--no-store", action="store_true", help="do not record this run in the history")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ceiling", description="What limits performance on this node, and by how much.",
                epilog="Run 'ceiling VERB --help' for a verb's options. Exit codes: see README.md.")
    p.add_argument("--version", action="version", version=f"ceiling {__version__}")
    p.add_argument("--config", metavar="FILE.toml", help="figures that override what is detected (see README)")
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)

    r = sub.add_parser("run", help="the main job: machine, checks, quick benchmarks, HTML report",
                       description="Machine model + checks + benchmarks + a single-file HTML report and a one-screen summary.")
    r.add_argument("--quick", action="store_true", help="short benchmarks (under a minute on a small node)")
    _measure_options(r)
    _output_options(r)

    m = sub.add_parser("machine", help="topology, ISA, clocks and theoretical peaks of this node",
                       description="Sockets, NUMA domains, cores, caches, ISA, clocks (read and measured) and peaks with provenance.")
    m.add_argument("--no-measure", action="store_true", help="do not measure the clock (peaks then use the read clock)")
    m.add_argument("--root", metavar="DIR", help="read /proc and /sys below DIR (a recorded machine) instead of this node")
    _output_options(m, store=False, html=False)

    c = sub.add_parser("check", help="the node's condition and configuration",
                       description="Findings (ok / warn / fail / skipped), each with evidence, why it matters and how to fix it.",
                       epilog="Exit status: 0, unless --strict or --nhc: 1 when a check warns, 2 when one fails "
                              "(usable as Slurm's HealthCheckProgram).")
    c.add_argument("--only", action="append", metavar="AREA", help="only these areas or check ids (repeat, or comma-separated); "
                   "see --list")
    c.add_argument("--list", action="store_true", help="list the checks and their areas, and exit")
    c.add_argument("--explain", metavar="ID", help="print the long explanation of one check, and exit")
    c.add_argument("--strict", action="store_true", help="exit 1 when a check warns, 2 when one fails")
    c.add_argument("--nhc", action="store_true", help="print one health-check line (NHC style) instead of the table; implies --strict")
    c.add_argument("--noise-seconds", type=str, metavar="S", help="length of the OS-noise window (default 2)")
    c.add_argument("--root", metavar="DIR", help="check a recorded /proc and /sys tree below DIR (checks of the live process are skipped)")
    c.add_argument("-v", "--verbose", action="store_true", help="show evidence for every finding, not only for problems")
    _output_options(c, store=True, html=False)

    b = sub.add_parser("bench", help="measure subsystems against their peaks",
                       description="Run benchmark suites: " + ", ".join(BENCH_SUITES) + ". 'all' is the node's own "
                                   "(compute to cores); network runs under MPI (mpirun -n 2 ceiling bench network); "
                                   "storage writes in a new directory under --dir.")
    b.add_argument("suites", nargs="*", metavar="SUITE", help="one or more of: " + ", ".join(BENCH_SUITES) + " (default: all)")
    b.add_argument("--quick", action="store_true", help="short benchmarks")
    b.add_argument("--list", action="store_true", help="list the kernels in the C core and exit")
    b.add_argument("--dir", metavar="DIR", help="storage: where to write (a new ceiling-io-* subdirectory, removed "
                   "afterwards; default $TMPDIR or /tmp)")
    _measure_options(b)
    _output_options(b)

    h = sub.add_parser("history", help="runs recorded in the SQLite history",
                       description="List recorded runs, or one metric across runs.")
    h.add_argument("--db", metavar="PATH", help="SQLite history (default: ~/.local/share/ceiling/history.db)")
    h.add_argument("--host", help="only runs of this host")
    h.add_argument("--metric", metavar="NAME", help="one metric across runs, e.g. stream.triad")
    h.add_argument("--limit", type=str, default="20", metavar="N", help="at most N rows (default 20)")
    h.add_argument("--json", action="store_true", help="JSON on stdout")

    s = sub.add_parser("show", help="render a recorded run (id from history, or a JSON file)",
                       description="Print a stored run or a saved JSON file, or write its HTML report.")
    s.add_argument("run", metavar="RUN", help="run id (or a unique prefix of 6+ characters) or a .json file")
    s.add_argument("--db", metavar="PATH", help="SQLite history to read from")
    s.add_argument("--out", metavar="FILE.html", help="write the HTML report here")
    s.add_argument("--json", action="store_true", help="print the JSON document")
    return p


def _launched_rank() -> int:
    from .cluster.launch import launched_rank
    return launched_rank()


def _sigterm_as_interrupt() -> None:
    """SIGTERM (scancel, a job's time limit) ends a run as Ctrl-C does: what was
    measured is kept and reported, temporary files go, exit 143."""
    import signal
    import threading
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, raise_terminated)


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _sigterm_as_interrupt()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not args.verb:
            parser.print_help()
            return 0
        from . import app  # after parsing: --help and --version stay instant
        return app.dispatch(args, argv)
    except CeilingError as e:
        # an error every MPI rank raised alike is printed once, by rank 0
        if not getattr(e, "all_ranks", False) or _launched_rank() == 0:
            print(f"ceiling: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt as e:
        why, code = interruption(e)
        print(f"ceiling: {why}", file=sys.stderr)
        return code
    except BrokenPipeError:
        return 0
