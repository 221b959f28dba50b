"""A one-line progress bar for the terminal, with the interface of
bench.base.NullProgress: ``start(label, total=0.0)``, ``advance(amount=1.0)``,
``done()``.

It draws on a TTY (``enabled=None`` decides from the stream); elsewhere it writes
one line as each step starts ("ceiling: memory ..."; a part of a run's step
indented under it), or nothing with CEILING_PROGRESS=none. The bar redraws
in place with a carriage return at most ten times a second, and shows a
spinner when the total is unknown (0). A background thread keeps the elapsed
time moving while the main thread sits in a long C call (core.run releases
the GIL); every draw happens under one lock, so the main thread may call
``advance`` while the ticker draws. When disabled it writes nothing at all.
"""
from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from typing import IO, Optional

from ._format import duration

INTERVAL_S = 0.1          # at most ten redraws a second
SPINNER = "|/-\\"         # ASCII: safe on every terminal
_BAR = 24                 # bar width in characters at full size


def _is_tty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty()) and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):   # no isatty, or the stream is closed
        return False


class Progress:
    """Progress of one step at a time, drawn on ``stream`` (default: stderr)."""

    def __init__(self, stream: Optional[IO[str]] = None, enabled: Optional[bool] = None):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_tty(self.stream) if enabled is None else bool(enabled)
        # Not a terminal (a batch job's output file, a pipe): one line as each step starts, so
        # a log says what ran and what was running when it stopped. CEILING_PROGRESS=none: nothing.
        self.lines = (enabled is None and not self.enabled
                      and os.environ.get("CEILING_PROGRESS", "").lower() not in ("none", "0", "off"))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._active = False
        self._label = ""
        self._total = 0.0
        self._done = 0.0
        self._t0 = 0.0
        self._last = 0.0          # monotonic time of the last draw
        self._shown = 0           # length of the line on screen, to blank leftovers
        self._spin = 0
        self._columns = 80
        self._step: Optional[str] = None   # the run's step open in lines mode: its parts are indented

    # -- the NullProgress interface ----------------------------------------------

    def start(self, label: str, total: float = 0.0, step: bool = False) -> None:
        """Begin a step (``step``: one of a run's steps, which the next starts are parts
        of until ``done(step=True)``); a step still running is finished first."""
        if self.lines:
            text = " ".join(str(label).split())
            if step:
                self._step = text
            elif self._step is not None and text.lower() == self._step.lower():
                return                      # "stream" then "STREAM": said once
            try:
                self.stream.write(f"ceiling: {'  ' if self._step and not step else ''}{text} ...\n")
                self.stream.flush()
            except (OSError, ValueError):
                self.lines = False
            return
        if not self.enabled:
            return
        self.done()
        with self._lock:
            self._label = " ".join(str(label).split())   # one line, whatever the caller passed
            self._total = max(0.0, float(total or 0.0))
            self._done = 0.0
            self._t0 = time.monotonic()
            self._spin = 0
            self._columns = max(20, shutil.get_terminal_size((80, 24)).columns)
            # One event per ticker: a ticker that outlived its join cannot wake up for the next step.
            self._stop = threading.Event()
            self._active = True
            self._draw()
            if not self._active:          # the stream broke on the first draw
                return
        self._thread = threading.Thread(target=self._tick, args=(self._stop,), name="ceiling-progress",
                                        daemon=True)
        self._thread.start()

    def advance(self, amount: float = 1.0) -> None:
        """Count ``amount`` more of the total done; redraws at most every INTERVAL_S."""
        if not self.enabled:
            return
        with self._lock:
            if not self._active:
                return
            self._done += float(amount)
            if time.monotonic() - self._last >= INTERVAL_S:
                self._draw()

    def done(self, step: bool = False) -> None:
        """Finish the step: draw its final line (100% when a total was given) and a newline."""
        if step:
            self._step = None
        if not self.enabled:
            return
        with self._lock:
            if not self._active:
                return
            if self._total:
                self._done = self._total
            self._draw(final=True)
            self._active = False
        self._stop.set()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(timeout=1.0)

    close = done

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.done()

    # -- drawing --------------------------------------------------------------------

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(INTERVAL_S):
            with self._lock:
                if not self._active or stop.is_set():
                    return
                if time.monotonic() - self._last >= INTERVAL_S * 0.9:
                    self._spin += 1
                    self._draw()

    def line(self) -> str:
        """The text of the bar as it would be drawn now, fitted to the terminal width."""
        elapsed = duration(time.monotonic() - self._t0)
        width = self._columns - 1          # writing the last column would wrap on some terminals
        if self._total:
            frac = min(1.0, max(0.0, self._done / self._total))
            tail = f" {frac * 100:3.0f}%  {elapsed}"
            # The label keeps at least half a narrow line; the bar gets what is left, or nothing.
            keep = min(len(self._label), max(10, width // 2))
            bar_w = min(_BAR, max(0, width - len(tail) - 4 - keep))
            if bar_w >= 5:
                fill = int(frac * bar_w)          # floor: the bar is full only when the step is
                head = ">" if 0 < fill < bar_w else ""
                tail = f"  [{'=' * max(0, fill - len(head))}{head}{' ' * (bar_w - fill)}]" + tail
        else:
            tail = f"  {SPINNER[self._spin % len(SPINNER)]}  {elapsed}"
        room = max(0, width - len(tail))
        label = self._label if len(self._label) <= room else self._label[:max(0, room - 3)] + "..."
        return (label + tail)[:width]

    def _draw(self, final: bool = False) -> None:
        """Write the line in place; the caller holds the lock."""
        text = self.line()
        pad = " " * max(0, self._shown - len(text))
        try:
            self.stream.write("\r" + text + pad + ("\n" if final else ""))
            self.stream.flush()
        except (OSError, ValueError):
            # A closed or broken stream must not stop a benchmark: stop drawing instead.
            self.enabled = False
            self._active = False
            self._stop.set()
            return
        self._shown = 0 if final else len(text)
        self._last = time.monotonic()
