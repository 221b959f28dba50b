"""node_exporter's textfile (--textfile DIR): the run's headline figures, verdict and checks as
Prometheus series in DIR/ceiling.prom (report/prometheus_run.py), written atomically."""
from __future__ import annotations

from typing import Optional

from ...results.model import Run
from .base import Exporter


class Textfile(Exporter):
    what = "Prometheus textfile"
    failed = "not written"

    def __init__(self, directory: str):
        self.directory = directory

    def prepare(self) -> None:
        from ..prometheus import check_textfile_dir
        check_textfile_dir(self.directory)

    def export(self, run: Run) -> Optional[str]:
        from ..prometheus_run import write_run
        return f"Prometheus textfile: {write_run(run, self.directory)}"
