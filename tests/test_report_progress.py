"""report.progress: draws only on a TTY, redraws in place at a bounded rate,
keeps ticking from its own thread, and is safe to drive while it ticks.

These tests assert bounds that hold however slow the machine is, never a time.
"""
import io
import threading
import time

import pytest

from ceiling.results.measure import NullProgress
from ceiling.report.progress import INTERVAL_S, SPINNER, Progress


class Tty(io.StringIO):
    """A terminal stand-in that records every write."""

    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()

    def isatty(self):
        return True


def _frames(text):
    """The lines drawn, in order (each begins with a carriage return)."""
    return [f.rstrip("\n") for f in text.split("\r") if f]


def _tickers():
    return [t for t in threading.enumerate() if t.name == "ceiling-progress" and t.is_alive()]


def test_same_interface_as_null_progress():
    for name in ("start", "advance", "done"):
        assert callable(getattr(Progress, name)) and callable(getattr(NullProgress, name))


def test_a_line_per_step_when_not_a_tty(monkeypatch):
    monkeypatch.delenv("CEILING_PROGRESS", raising=False)
    plain = io.StringIO()                           # a batch job's log: no bar, a line as each step starts
    p = Progress(plain)
    p.start("machine model and clock")
    p.done()
    p.start("stream", 10)
    p.advance()
    p.done()
    assert plain.getvalue() == "ceiling: machine model and clock ...\nceiling: stream ...\n" and not _tickers()


def test_parts_of_a_runs_step_are_indented_under_it(monkeypatch):
    monkeypatch.delenv("CEILING_PROGRESS", raising=False)
    plain = io.StringIO()
    p = Progress(plain)
    p.start("flops", step=True)                     # the run's step (Session), then the bench's own parts
    for part in ("peak flop/s DP avx2", "peak flop/s DP scalar"):
        p.start(part)
        p.done()
    p.done(step=True)
    p.start("stream", step=True)
    p.start("STREAM", 4)                            # the same name: not said twice
    p.done()
    p.done(step=True)
    p.start("checks")
    p.done()
    assert plain.getvalue() == ("ceiling: flops ...\nceiling:   peak flop/s DP avx2 ...\n"
                                "ceiling:   peak flop/s DP scalar ...\nceiling: stream ...\nceiling: checks ...\n")


@pytest.mark.parametrize("enabled", [None, False])
def test_silent_when_not_a_tty_or_disabled(enabled):
    plain = io.StringIO()                           # isatty() is False
    stream = plain if enabled is None else Tty()
    p = Progress(stream, enabled=enabled)
    p.start("stream", 10)
    for _ in range(10):
        p.advance()
    p.done()
    p.start("spinner")
    p.done()
    assert stream.getvalue() == "" and not _tickers()


def test_bar_redraws_in_place_and_ends_at_100_percent(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    out = Tty()
    p = Progress(out)
    p.start("STREAM triad, 2 threads", total=4)
    for _ in range(4):
        p.advance()
    p.done()
    text = out.getvalue()
    assert text.startswith("\r") and text.endswith("\n") and text.count("\n") == 1
    frames = _frames(text)
    assert frames[0].startswith("STREAM triad, 2 threads  [") and frames[0].split()[-3] == "0%"
    assert frames[-1].split()[-3] == "100%" and "[" + "=" * 24 + "]" in frames[-1]
    assert frames[-1].endswith(" s")


def test_spinner_and_ticker_move_while_the_caller_is_blocked(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = Tty()
    p = Progress(out)
    p.start("latency chase")                     # total 0: indeterminate
    deadline = time.monotonic() + 10
    while len(_frames(out.getvalue())) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)                          # the main thread does nothing, as in a C call
    assert _tickers()
    p.done()
    frames = _frames(out.getvalue())
    assert len(frames) >= 3
    assert "%" not in out.getvalue()
    assert {f.split()[-3] for f in frames} <= set(SPINNER) and len({f.split()[-3] for f in frames}) >= 2
    assert not _tickers()                         # done() stops the ticker


def test_redraws_are_rate_limited():
    out = Tty()
    p = Progress(out)
    t0 = time.monotonic()
    p.start("many small steps", total=20000)
    for _ in range(20000):
        p.advance()
    elapsed = time.monotonic() - t0
    p.done()
    frames = _frames(out.getvalue())
    # One frame at start, one at done, and at most one per interval in between (advance or ticker).
    assert len(frames) <= elapsed / (INTERVAL_S * 0.9) + 3


def test_safe_to_advance_from_main_thread_while_ticking(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    out = Tty()
    p = Progress(out)
    for step in range(3):
        p.start(f"step {step}", total=500)
        end = time.monotonic() + 0.25
        while time.monotonic() < end:
            p.advance(0.01)
        p.done()
    frames = _frames(out.getvalue())
    assert all(f.startswith("step ") and len(f) <= 59 for f in frames)
    assert out.getvalue().count("\n") == 3 and not _tickers()


def test_long_label_is_cut_to_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    out = Tty()
    p = Progress(out)
    p.start("a very long label\nwith a newline " * 5, total=2)
    p.advance()
    p.done()
    frames = _frames(out.getvalue())
    assert all(len(f) <= 39 and "\n" not in f for f in frames)
    assert frames[0].startswith("a very long lab") and "..." in frames[0] and "%" in frames[0]


def test_start_finishes_the_previous_step_and_done_is_idempotent():
    out = Tty()
    p = Progress(out)
    p.start("one", 1)
    p.start("two", 1)
    p.done()
    p.done()
    p.advance()                                  # after done: ignored
    assert out.getvalue().count("\n") == 2 and not _tickers()


def test_a_broken_stream_stops_drawing_without_raising():
    class Closed(Tty):
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

    p = Progress(Closed())
    p.start("x", 3)
    p.advance()
    p.done()
    assert not p.enabled and not _tickers()
