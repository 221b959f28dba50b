"""The versioned JSON document of a Run (results/jsonio.py): to a file
(--save-json) or to stdout (--json, after everything else)."""
from __future__ import annotations

import sys
from typing import IO, Optional

from ...results import jsonio
from ...results.model import Run
from .base import STREAM, WRITE, Exporter
from .paths import check_writable


class JsonFile(Exporter):
    what = "JSON"
    failed = "not saved"

    def __init__(self, path: str):
        self.path = path

    def prepare(self) -> None:
        check_writable(self.path, "--save-json")

    def export(self, run: Run) -> Optional[str]:
        jsonio.dump(run, self.path)
        return None


class JsonStdout(Exporter):
    stage = STREAM
    what = "JSON"
    failed = "not printed"

    def __init__(self, stream: Optional[IO[str]] = None):
        self.stream = stream

    def export(self, run: Run) -> Optional[str]:
        (self.stream or sys.stdout).write(jsonio.dumps(run))
        return None


__all__ = ["JsonFile", "JsonStdout", "WRITE"]
