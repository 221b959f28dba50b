"""The code style CI checks: ruff with the rules pyproject.toml selects (lines of at most
120 characters, pyflakes). ruff is one of the test needs (pyproject's `test` extra), so a
missing ruff fails here rather than letting the check pass unseen."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "src", "tests", "benchmarks", "scripts"],
                       cwd=ROOT, capture_output=True, text=True)
    assert "No module named ruff" not in r.stderr, \
        "ruff is missing: install the test needs (scripts/bootstrap.sh --test)"
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_check_sees_a_long_line(tmp_path):
    """The configuration is the repository's: a 121-character line is refused."""
    bad = tmp_path / "bad.py"
    bad.write_text("x = '" + "y" * 115 + "'\n")
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"),
                        str(bad)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 1 and "E501" in r.stdout, r.stdout + r.stderr
