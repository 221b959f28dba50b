"""ceiling trace -- CMD: when and where the program's I/O and MPI happen.

The whole of ``ceiling profile`` (verbs/profile.py: the same launch, exit status, untouched
output, Ctrl-C handling, page and findings), with the interposer's per-event channel on
(observe's ``Instruments.trace``, the limits of ``TraceLimits``), and after the program:

1. the events, read per thread file (probes/interpose_events.py), streamed into a Perfetto
   trace (report/exporters/perfetto.py, ``--trace FILE.pftrace``) and, with ``--format otf2``
   (or ``perfetto,otf2``), an OTF2 archive for Vampir, Scalasca and ``otf2-print``
   (report/exporters/otf2.py, written by OTF2's own library: checked before the program runs);
2. the anti-patterns the time line shows (analysis/trace_patterns.py), against this node's
   storage ceilings from the history; a single writer refines the profile's whole-run finding
   (its window and time lost), not a second one;
3. the time line binned (analysis/trace_bins.py; the time outside calls split into computing
   and waiting by the /proc sampler's CPU series) and kept in the run, so that the HTML report,
   now and re-rendered from the history, draws it (report/html_trace.py).

The run keeps the trace's path, size, events, what the limits dropped and what recording cost
(the finding ``trace.recorded``: events x the per-event cost measured on this node + the
recorder's write-outs, analysis/trace_cost.py), not the events. The event files are removed
once converted.

Beside the program, the node's counters every --interval (observe/companions.NodeTracks,
probes/node_sampler.py): the trace's counter tracks, the time line's, and the fluctuating-I/O
finding's evidence of the device's own traffic.

Under mpirun or srun (``mpirun -n N ceiling trace -- ./app``), each rank's ceiling records its
rank with a 1/N share of --max-size, and at MPI_Finalize the interposer sends every rank's event
files to rank 0's (csrc/interpose/mpi_trace.c), whose ceiling writes the one trace; the others
say only what they recorded after MPI_Finalize (trace_output.left_behind).
"""
from __future__ import annotations

import argparse
import re
import shutil
from typing import List, Optional, Tuple

from ..errors import BadValueError, UsageError
from . import common, profile
from .trace_paths import TracePaths, trace_path

NAME = "trace"
HELP = "run a program and record when its I/O and MPI calls happen: ceiling trace -- ./app args"
DESCRIPTION = ("Run a program as `ceiling profile` does (its output untouched, its exit status passed on) and "
               "record every intercepted I/O and MPI call as an event: a Perfetto trace (open it at "
               "ui.perfetto.dev), the profile's page, and the anti-patterns only a time line shows (a single "
               "writer while the others wait, I/O whose speed swings, serialized I/O phases, metadata storms).")
EPILOG = ("Exit status: the program's (128 + N when signal N ended it); 127 command not found, 126 not executable; "
          "2 a bad option, 3 a value out of range, 17 --format otf2 without OTF2's library.")
MAX_SIZE = 1 << 30           # the event files' budget at most, whatever the free space
FREE_SHARE = 0.10            # ... and at most this share of the free space where they are kept
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
FORMATS = ("perfetto", "otf2")
def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS]",
                   help="the program to run and its arguments, after --")
    g = p.add_argument_group("trace")
    g.add_argument("--trace", metavar="PATH",
                   help="where the trace goes: the Perfetto file (default: "
                        "ceiling-trace-PROGRAM-YYYYmmdd-HHMMSS.pftrace in the current directory); with --format otf2 "
                        "alone, the OTF2 archive's directory (default ceiling-trace-PROGRAM-YYYYmmdd-HHMMSS-otf2); "
                        "with both, the archive goes beside the Perfetto file, named as it is without .pftrace, with "
                        "-otf2")
    g.add_argument("--format", metavar="LIST", default="perfetto",
                   help="what to write: perfetto (the default; ui.perfetto.dev), otf2 (an OTF2 archive for Vampir, "
                        "Scalasca and otf2-print, written with OTF2's library: pip install otf2), or perfetto,otf2")
    g.add_argument("--max-size", metavar="BYTES",
                   help="the events' size for the whole run, all processes together (default: 10%% of the free "
                        "space where they are kept, 1 GiB at most); past it, events are dropped and counted")
    g.add_argument("--calls", metavar="LIST",
                   help="record only these calls or classes, comma-separated (write,pwrite64 or META,MPI_COLL); "
                        "the profile still counts every call")
    g.add_argument("--exclude", metavar="LIST", help="do not record these calls or classes")
    g.add_argument("--min-duration", metavar="TIME",
                   help="do not record calls shorter than this (e.g. 10us, 1ms; a number is seconds)")
    g.add_argument("--max-per-site", metavar="N", type=int,
                   help="record the first N events of each call in each thread (Vampir's filter), count the rest")
    g.add_argument("--window", metavar="START:END",
                   help="record only between these seconds after the program started, in every process (e.g. 10:20)")
    g.add_argument("--interval", metavar="SECONDS", default="0.1",
                   help="time between two readings of /proc (default 0.1)")
    g.add_argument("--no-measure", action="store_true",
                   help="compare the program only with ceilings this node's history holds")
    from .profile import work_options
    work_options(p)
    common.output_options(p, store=True, html=True, json_refused="the program's standard output is its own "
                          "(the run's JSON would be mixed into it); use --save-json FILE.json")


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from ..errors import CeilingError
    from .profile_launch import launched_rank
    cmd = args.command[1:] if args.command[:1] == ["--"] else list(args.command)
    wrapped = launched_rank()
    try:
        args.trace_limits = limits(args)
        args.trace_formats = formats(args.format)
    except CeilingError as e:
        if wrapped and wrapped[0] != 0:
            # every rank has the same options and stops alike before its program starts: rank 0 says it
            raise SystemExit(e.exit_code) from None
        raise
    # where the trace goes, and OTF2's library, are checked where the trace is written, before the program
    # runs: by rank 0 only in a wrapped launch (verbs/profile.py, with the outputs, ending the job when one is
    # refused; the other ranks' nodes need no libotf2)
    args.trace_path, args.otf2_library = None, None
    args.trace_where = lambda: outputs(args, cmd)
    # what profile's options would be; trace has none of its reruns
    args.no_interpose, args.experiments, args.overhead = False, False, False
    return profile.main(args, argv)


def formats(text: Optional[str]) -> Tuple[str, ...]:
    """--format's list (perfetto, otf2 or both, in that order); one line and exit 2 for anything else."""
    got = [x.strip().lower() for x in (text or "").split(",") if x.strip()]
    bad = [x for x in got if x not in FORMATS]
    if bad or not got:
        raise UsageError(f"--format {text!r}: {', '.join(bad) or 'nothing'}: not a trace format (perfetto, otf2, or "
                         "perfetto,otf2)")
    return tuple(f for f in FORMATS if f in got)


def outputs(args: argparse.Namespace, cmd: List[str]) -> TracePaths:
    """Where the trace goes (trace_path), and OTF2's library into ``args.otf2_library`` when otf2 is asked for:
    without it the program would run for a trace that cannot be written."""
    args.otf2_library = otf2_library() if "otf2" in args.trace_formats else None
    return trace_path(args.trace, cmd, args.trace_formats)


def otf2_library():
    """OTF2's library (core/otf2lib.py looks for it); Otf2UnavailableError, exit 17, saying what is missing."""
    from ..core.otf2lib import library
    return library()


def _seconds(text: str, what: str) -> float:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s)?\s*", text or "")
    if not m:
        raise UsageError(f"{what} {text!r}: not a time (a number of seconds, or with ns, us, ms, s)")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def _names(text: Optional[str], what: str) -> Tuple[str, ...]:
    if not text:
        return ()
    from ..probes.interpose_names import names
    calls = names().calls
    known = {c.fn for c in calls} | {c.fn + "_c" for c in calls}
    classes = {c.cls.upper() for c in calls}
    out = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [x for x in out if x not in known and x.upper() not in classes]
    if bad or not out:
        raise UsageError(f"{what} {text!r}: {', '.join(bad) or 'nothing'}: no such call or class (classes: "
                         f"{', '.join(sorted(classes))})")
    return out


def limits(args: argparse.Namespace):
    """TraceLimits from the options; one line and exit 2 for a bad one, before the program runs."""
    from ..observe.model import TraceLimits
    from ..units import parse_size
    window = None
    if args.window is not None:
        lo, sep, hi = args.window.partition(":")
        if not sep:
            raise UsageError(f"--window {args.window!r}: not START:END (seconds after the program started)")
        window = (_seconds(lo, "--window"), _seconds(hi, "--window"))
        if window[1] <= window[0]:
            raise BadValueError(f"--window {args.window}: its end must come after its start")
    if args.max_per_site is not None and args.max_per_site < 1:
        raise BadValueError(f"--max-per-site {args.max_per_site}: must be at least 1")
    min_ns = int(round(_seconds(args.min_duration, "--min-duration") * 1e9)) if args.min_duration else 0
    if args.max_size is not None:
        size = parse_size(args.max_size, what="--max-size")
        if size < 1 << 16:
            raise BadValueError(f"--max-size {args.max_size}: at least 64 KiB (a thread's buffer)")
    else:
        size = default_size()
    return TraceLimits(max_bytes=size, calls=_names(args.calls, "--calls"), exclude=_names(args.exclude, "--exclude"),
                       min_duration_ns=min_ns, max_per_call=args.max_per_site or 0, window_s=window)


def default_size(where: Optional[str] = None) -> int:
    """10% of the free space where the event files are kept ($TMPDIR), 1 GiB at most, 1 MiB at least."""
    import tempfile
    try:
        free = shutil.disk_usage(where or tempfile.gettempdir()).free
    except OSError:
        return MAX_SIZE
    return max(1 << 20, min(MAX_SIZE, int(free * FREE_SHARE)))


