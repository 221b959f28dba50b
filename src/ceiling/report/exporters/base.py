"""The common base of every exporter, and the one delivery path.

An exporter is prepared before anything is measured (so that an unwritable
--out is refused first, not after ten minutes of benchmarks) and asked to
export the finished Run once. Delivery runs the exporters by stage: files and
the history first (WRITE), then the terminal text (SHOW), then the receipts
of what was written ("HTML report: PATH"), then a document on stdout (STREAM)
last, so that a pipe receives nothing else after it. One exporter failing is
reported and the others still run: a full disk must not cost the terminal
report, nor a broken pipe the history.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence

from ...errors import CeilingError
from ...results.model import Run

WRITE, SHOW, STREAM = 0, 1, 2

Say = Callable[[str], None]


class Exporter:
    """One output of a Run."""

    stage: int = WRITE
    what: str = "output"          # names it in an error: "HTML report not written: ..."
    failed: str = "not written"

    def prepare(self) -> None:
        """Refuse, before measuring, an output that cannot be made (raise a CeilingError)."""

    def export(self, run: Run) -> Optional[str]:
        """Write or show ``run``; a line telling the user where it went, or None."""
        raise NotImplementedError


def prepare(exporters: Sequence[Exporter]) -> None:
    for e in exporters:
        e.prepare()


class InternalFailure(str):
    """An error line of an exporter that failed on a bug of ours, not on the path it writes."""


def deliver(run: Run, exporters: Sequence[Exporter], say: Say) -> List[str]:
    """Run every exporter once, by stage; the errors, one line each (``what failed: why``).
    An exporter failing on a bug (any other exception) costs only its own output: the history,
    the JSON and the terminal report of a measured run are not lost to the HTML's bug."""
    errors: List[str] = []
    receipts: List[str] = []
    ordered = sorted(exporters, key=lambda e: e.stage)     # stable: the verb's order within a stage
    for i, e in enumerate(ordered):
        if e.stage > SHOW and (i == 0 or ordered[i - 1].stage <= SHOW):
            _receipts(receipts, say)
        try:
            line = e.export(run)
        except BrokenPipeError:
            raise            # the reader went away (| head): nothing more to say to it
        except (CeilingError, OSError) as err:
            errors.append(f"{e.what} {e.failed}: {err}")
            continue
        except Exception as err:        # noqa: BLE001 - see the doc: one output lost, not all of them
            errors.append(InternalFailure(f"{e.what} {e.failed}: an internal error ({type(err).__name__}: "
                                          f"{err}); the other outputs were written. Please report it"))
            continue
        if line:
            receipts.append(line)
    if not ordered or ordered[-1].stage <= SHOW:
        _receipts(receipts, say)
    return errors


def _receipts(receipts: List[str], say: Say) -> None:
    for line in receipts:
        say(line)
    receipts.clear()
