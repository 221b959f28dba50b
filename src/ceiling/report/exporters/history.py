"""The SQLite history (results/store.py): the run recorded for `ceiling history`,
`ceiling show` and comparisons."""
from __future__ import annotations

from typing import Optional

from ...results.model import Run
from .base import Exporter


class History(Exporter):
    what = "history"
    failed = "not saved"

    def __init__(self, store, quiet: bool = False):
        self.store, self.quiet = store, quiet      # the Store is opened (and checked) before measuring

    def export(self, run: Run) -> Optional[str]:
        self.store.save(run)
        return None if self.quiet else f"Recorded as run {run.run_id[:12]} in {self.store.path}"
