"""Where ``ceiling trace`` puts its trace: the Perfetto file and the OTF2 archive's directory from --trace
and --format (``trace_names``), checked before the program runs (``trace_path``). Apart from verbs/trace.py
so that verbs/profile.py, which trace.py builds on, can name a wrapped rank's own trace too."""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import List, Optional, Tuple

from ..errors import PathError

OTF2_SUFFIX = "-otf2"        # the OTF2 archive's directory: the Perfetto file's name without .pftrace, and this


@dataclass(frozen=True)
class TracePaths:
    """Where the trace goes: the Perfetto file and the OTF2 archive's directory (its anchor file
    ``traces.otf2`` inside), each None when its format was not asked for."""
    perfetto: Optional[str]
    otf2: Optional[str]


def trace_path(given: Optional[str], cmd: List[str], formats: Tuple[str, ...] = ("perfetto",)) -> TracePaths:
    """Where the trace goes (TracePaths): checked before the program runs (each directory must exist
    and be writable; an existing file or archive is not overwritten)."""
    named = trace_names(given, cmd, formats)
    perfetto, otf2 = named.perfetto, named.otf2
    for out, what in ((perfetto, "the Perfetto trace"), (otf2, "the OTF2 archive")):
        if out is None:
            continue
        d = os.path.dirname(out)
        if not os.path.isdir(d):
            raise PathError(f"--trace {given or out}: directory {d} does not exist")
        if not os.access(d, os.W_OK):
            raise PathError(f"--trace {given or out}: directory {d} is not writable")
        if os.path.exists(out):
            raise PathError(f"--trace {out}: exists ({what}); ceiling does not overwrite a trace (give another name)")
    return named


def trace_names(given: Optional[str], cmd: List[str], formats: Tuple[str, ...] = ("perfetto",)) -> TracePaths:
    """The trace's places from --trace (or the default name), unchecked."""
    if given:
        path = os.path.abspath(given)
    else:
        prog = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(cmd[0])) if cmd else "program"
        stem = os.path.abspath(f"ceiling-trace-{prog}-{time.strftime('%Y%m%d-%H%M%S')}")
        path = stem + (".pftrace" if "perfetto" in formats else OTF2_SUFFIX)
    perfetto = path if "perfetto" in formats else None
    otf2 = None
    if "otf2" in formats:
        otf2 = path if perfetto is None else (path[:-len(".pftrace")] if path.endswith(".pftrace") else path) + \
            OTF2_SUFFIX
    return TracePaths(perfetto, otf2)
