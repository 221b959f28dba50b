"""`ceiling compare --out`: the page in headless Chromium. Every compared metric's bar is laid out with a
size and holds its marks (noise band, axis, change bar, interval whisker); the page needs no horizontal
scroll. Skipped when no Chromium is installed (set CEILING_CHROMIUM to point at one)."""
from __future__ import annotations

import json
import re

import pytest

from ceiling import cli
from test_compare import COMPETING, _db, _run
from test_report_browser import needs_chromium, probe_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@needs_chromium
def test_every_bar_is_laid_out_with_its_interval(tmp_path, capsys):
    db = _db(tmp_path, _run("a" * 32, "2026-01-01T00:00:00Z"),
             _run("b" * 32, "2026-01-02T00:00:00Z", {"stream.triad": 0.7, "latency.dram": 1.2}, findings=[COMPETING]))
    out = tmp_path / "cmp.html"
    assert cli.main(["compare", "aaaaaa", "bbbbbb", "--db", db, "--out", str(out), "--json"]) == 0
    compared = [c["metric"] for c in json.loads(capsys.readouterr().out)["changes"]]
    page = out.read_text(encoding="utf-8")
    assert "B was disturbed" in page
    probe = probe_page(tmp_path, page)
    bars = {p["series"]: p for p in probe["plots"]}
    assert set(bars) == set(compared)
    for name, p in bars.items():
        assert p["w"] >= 300 and p["h"] >= 20, (name, p)
        assert p["marks"] >= 3, (name, p)             # noise band, change bar, interval whisker
    assert page.count('class="interval"') == len(compared)      # every row here has repetitions
    assert probe["width"] <= 1280
    first = re.search(r'<svg class="plot cmpbar" data-series="([^"]+)"', page).group(1)
    assert first in ("stream.triad", "latency.dram")      # regressions first, as in the terminal
