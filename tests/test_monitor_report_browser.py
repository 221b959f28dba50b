"""`ceiling monitor --report --html`: the job's I/O and the probe's slowdown laid out by headless Chromium
on one time axis. Skipped when no Chromium is installed (CEILING_CHROMIUM)."""
from __future__ import annotations

import time

import pytest

from ceiling import cli
from test_monitor_report import SEG, _history
from test_report_browser import PROBE, needs_chromium, probe_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@needs_chromium
def test_both_plots_are_laid_out(tmp_path, capsys):
    t0 = (time.time() // SEG - 15) * SEG
    db, out = tmp_path / "h.db", tmp_path / "r.html"
    _history(db, t0)
    assert cli.main(["monitor", "--report", "--job", "1234", "--db", str(db), "--since", "3h",
                     "--html", str(out)]) == 0
    capsys.readouterr()
    page = out.read_text(encoding="utf-8")
    assert 'data-line="probe write"' in page and 'data-line="write (MB/s)"' in page and "threshold 3x" in page
    probe = probe_page(tmp_path, page, PROBE)
    plots = {p["series"]: p for p in probe["plots"]}
    assert set(plots) == {"monitor-io", "monitor-probe"}
    for name, p in plots.items():
        assert p["w"] > 150 and p["h"] > 100 and p["marks"] >= 12, (name, p)
    assert probe["width"] <= 1280
