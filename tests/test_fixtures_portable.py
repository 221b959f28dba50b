"""Recorded fixtures and golden documents name no path of the machine they were made on: a
user's clone (and CI's fresh one) has neither this checkout's path, nor this home directory,
nor this Python's prefix. Recorders scrub them (tests/fixtures/profile_golden/record.py)."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLACES = [ROOT / "tests" / "fixtures", ROOT / "tests" / "golden"]


def _own_paths():
    paths = {str(ROOT), sys.prefix, sys.base_prefix, str(Path.home())}
    return sorted(p.rstrip("/") + "/" for p in paths if p and p.rstrip("/"))


def test_no_fixture_names_a_path_of_this_machine():
    own = [p.encode() for p in _own_paths()]
    found = []
    for place in PLACES:
        for f in sorted(place.rglob("*")):
            if f.is_file():
                data = f.read_bytes()
                found += [f"{f.relative_to(ROOT)}: {p.decode()}" for p in own if p in data]
    assert not found, found[:10]


def test_the_check_sees_a_path_of_this_machine(tmp_path):
    planted = tmp_path / "x.json"
    planted.write_text(f'{{"exe": "{Path.home()}/bin/app"}}')
    assert any(p.encode() in planted.read_bytes() for p in _own_paths())
