"""A text stream that loses what it cannot write instead of raising (verbs/profile.py's
standard error: the program's exit status must survive a full disk under 2>/dev/full)."""
from __future__ import annotations

import io
import os


class Lossy(io.TextIOBase):
    """Standard error that loses what it cannot write instead of raising: ceiling's report
    goes there, and a full disk (2>/dev/full), a closed pipe or a removed file under it
    must not turn the program's exit status into a traceback's 1. Nothing else can be
    told then; the history and --save-json are written before the terminal text."""

    def __init__(self, stream):
        super().__init__()
        self.stream, self.lost = stream, None
        if stream is None:                     # started with descriptor 2 closed
            self._drop()

    def write(self, text: str) -> int:
        try:
            self.stream.write(text)
            if "\n" in text:
                self.stream.flush()
        except (OSError, ValueError, AttributeError) as e:     # ValueError: closed; AttributeError: None
            self.lost = self.lost or e
            self._drop()
        return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except (OSError, ValueError, AttributeError) as e:
            self.lost = self.lost or e
            self._drop()

    def _drop(self) -> None:
        """Forget what the stream still holds, so that flushing it at exit does not fail again."""
        try:
            self.stream = open(os.devnull, "w")
        except OSError:
            pass

    def isatty(self) -> bool:
        try:
            return self.stream.isatty()
        except (OSError, ValueError, AttributeError):
            return False

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self):
        return getattr(self.stream, "encoding", "utf-8")
