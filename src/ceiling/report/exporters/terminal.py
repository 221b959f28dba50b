"""The terminal text of a Run: the full report and its one-screen summary, or a
verb's own rendering (``ceiling check``'s table, ``--nhc``'s one line)."""
from __future__ import annotations

from typing import Callable, Optional

from ...results.model import Run
from .. import terminal
from .base import SHOW, Exporter, Say


class Terminal(Exporter):
    stage = SHOW
    what = "terminal report"
    failed = "not shown"

    def __init__(self, say: Say, *, color: bool = False, width: int = 100,
                 render: Optional[Callable[[Run], str]] = None):
        self.say, self.color, self.width, self.render = say, color, width, render

    def export(self, run: Run) -> Optional[str]:
        if self.render is not None:
            self.say(self.render(run))
        else:
            self.say(terminal.render(run, color=self.color, width=self.width))
            self.say(terminal.summary(run))
        return None
