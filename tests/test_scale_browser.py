"""`ceiling scale --out`: the study page's speedup and efficiency plots in headless Chromium. Both are
laid out with a size; the speedup is on log2 y, so the measured points are not squashed under an ideal
line drawn out to the extrapolation; the extrapolated counts have ticks and a rule marks where the data
end; the page needs no horizontal scroll. Skipped when no Chromium is installed (CEILING_CHROMIUM)."""
from __future__ import annotations

import re
import stat
import sys
import textwrap

import pytest

from ceiling import cli
from test_report_browser import needs_chromium, probe_page

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@needs_chromium
def test_speedup_and_efficiency_plots_are_legible(tmp_path, capsys):
    app = tmp_path / "law.py"
    app.write_text("#!" + sys.executable + "\n" + textwrap.dedent("""
        import math, os
        p = int(os.environ["OMP_NUM_THREADS"])
        print("step time", 10 / p + 0.05 * p * math.log2(p), "s")
    """))
    app.chmod(app.stat().st_mode | stat.S_IXUSR)
    out = tmp_path / "study.html"
    assert cli.main(["scale", "--threads", "1,2,4,8,16,32", "--repeat", "1", "--no-store", "--metric",
                     r"step time ([\d.e-]+) s", "--out", str(out), "--", str(app)]) == 0
    capsys.readouterr()
    page = out.read_text(encoding="utf-8")
    speedup = re.search(r'<svg[^>]*aria-labelledby="scale-speedup-t.*?</svg>', page, flags=re.S)
    assert speedup, page[:2000]
    svg = speedup.group(0)
    assert ">128<" in svg and "largest point measured" in svg and "speedup (log2)" in svg
    probe = probe_page(tmp_path, page)
    assert len(probe["plots"]) == 2
    for p in probe["plots"]:
        assert p["w"] >= 300 and p["h"] >= 200 and p["marks"] >= 6, p
    assert probe["width"] <= 1280
