"""Command line: the verbs and their options, nothing else. Each verb is a module
of ceiling.verbs (verbs.VERBS) with its options (configure) and one call (main)."""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from . import __version__, verbs
from .errors import CeilingError, UsageError, interruption, raise_terminated


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # main prints "ceiling: " before every error; a verb's parser names the verb after it
        verb = self.prog.split(" ", 1)[1] + ": " if " " in self.prog else ""
        raise UsageError(f"{verb}{message} (see '{self.prog} --help')")


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The command line; with ``only`` (the verb the command line starts with), that verb's options alone."""
    p = _Parser(prog="ceiling", description="What limits performance on this node, and by how much.",
                epilog="Run 'ceiling VERB --help' for a verb's options. Exit codes: see README.md.")
    p.add_argument("--version", action="version", version=f"ceiling {__version__}")
    config = dict(metavar="FILE.toml", help="figures that override what is detected (see README)")
    p.add_argument("--config", **config)
    sub = p.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for name, mod in verbs.load(only).items():
        vp = sub.add_parser(name, help=mod.HELP, description=mod.DESCRIPTION, epilog=getattr(mod, "EPILOG", None))
        mod.configure(vp)
        # also after the verb, where users put it (`ceiling run --config F`); absent there, the global one stands
        vp.add_argument("--config", default=argparse.SUPPRESS, **config)
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
        only = argv[0] if argv and argv[0] in verbs.VERBS else None
        parser = build_parser(only)
        try:
            args = parser.parse_args(argv)
        except CeilingError as e:
            # every rank of an MPI launch has this command line: only rank 0 says what is wrong with it
            e.all_ranks = True          # type: ignore[attr-defined]
            raise
        if not args.verb:
            parser.print_help()
            return 0
        return verbs.load(only)[args.verb].main(args, argv)
    except CeilingError as e:
        # an error every MPI rank raised alike is printed once, by rank 0
        if not getattr(e, "all_ranks", False) or _launched_rank() == 0:
            from .units import printable       # a path or name from outside is shown, never obeyed
            print(f"ceiling: {printable(str(e))}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt as e:
        why, code = interruption(e)
        print(f"ceiling: {why}", file=sys.stderr)
        return code
    except BrokenPipeError:
        return 0
