"""The interposer's cost per call is measured once per build of the library and host,
then read from the user's cache: a second profile runs no dd at all. The cache follows
the private-directory rules (files/private.py): an entry someone else could have
written, or a link, is measured again, never trusted. No timings are asserted."""
from __future__ import annotations

import json
import shutil

import pytest

from ceiling import core
from ceiling.probes import interpose_cost

LIB = core.interpose_library_path()
# a missing interposer is a broken build and fails (conftest's interposer_library)
pytestmark = [pytest.mark.usefixtures("interposer_library"),
              pytest.mark.skipif(shutil.which("dd") is None, reason="no dd on PATH")]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    base = tmp_path / "cache"
    base.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_CACHE_HOME", str(base))
    return base / "ceiling"


def no_dd(monkeypatch, tmp_path):
    """PATH without dd: a measurement now says so; only the cache can give a figure."""
    empty = tmp_path / "empty-path"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))


def test_a_second_measure_reads_the_cache_and_runs_no_dd(cache, tmp_path, monkeypatch):
    first = interpose_cost.measure(LIB, count=2000, rounds=1)
    assert first["per_call_ns"] is not None and first["cached"] is False
    entries = list(cache.glob("interpose-cost-*.json"))
    assert len(entries) == 1 and (entries[0].stat().st_mode & 0o077) == 0
    no_dd(monkeypatch, tmp_path)
    second = interpose_cost.measure(LIB, count=2000, rounds=1)
    assert second["cached"] is True and second["per_call_ns"] == first["per_call_ns"]
    assert "kept in" in second["how"] and first["how"] in second["how"]


def test_another_build_of_the_library_is_measured_again(cache, tmp_path, monkeypatch):
    interpose_cost.measure(LIB, count=2000, rounds=1)
    other = tmp_path / "libother.so"
    other.write_bytes(LIB.read_bytes() + b"\0")           # another build: other content
    no_dd(monkeypatch, tmp_path)
    out = interpose_cost.measure(other, count=2000, rounds=1)
    assert out["per_call_ns"] is None and "dd is not installed" in out["why"]


@pytest.mark.parametrize("spoil", ["group_writable", "link", "garbage"])
def test_an_entry_that_cannot_be_trusted_is_measured_again(cache, tmp_path, monkeypatch, spoil):
    interpose_cost.measure(LIB, count=2000, rounds=1)
    entry = next(cache.glob("interpose-cost-*.json"))
    if spoil == "group_writable":
        entry.chmod(0o666)
    elif spoil == "link":
        real = tmp_path / "elsewhere.json"
        real.write_text(entry.read_text())
        entry.unlink()
        entry.symlink_to(real)
    else:
        doc = json.loads(entry.read_text())
        doc["per_call_ns"] = "fast"
        entry.write_text(json.dumps(doc))
    no_dd(monkeypatch, tmp_path)
    out = interpose_cost.measure(LIB, count=2000, rounds=1)
    assert out["per_call_ns"] is None and out["cached"] is False


def test_a_cache_directory_others_can_write_is_not_used(tmp_path, monkeypatch):
    base = tmp_path / "shared"
    base.mkdir()
    base.chmod(0o777)                                    # writable by all, no sticky bit
    monkeypatch.setenv("XDG_CACHE_HOME", str(base))
    out = interpose_cost.measure(LIB, count=2000, rounds=1)
    assert out["per_call_ns"] is not None and "not kept for the next profile" in out["how"]
    assert not (base / "ceiling").exists()


def test_the_loaders_reads_are_measured_the_same_each_run_and_kept(cache, monkeypatch, tmp_path):
    # what the dynamic loader reads to load the interposer (its ELF header) is measured, every run
    # alike, and kept beside the per-call cost under another name; the second time from the cache
    first = interpose_cost.loader_reads(LIB, rounds=2)
    assert first["cached"] is False and first["rchar"] > 0 and first["syscr"] >= 1, first
    assert len(list(cache.glob("interpose-loader-*.json"))) == 1
    assert not list(cache.glob("interpose-cost-*.json"))
    monkeypatch.setenv("CEILING_LAUNCHER", str(tmp_path / "missing"))     # no program to measure with
    second = interpose_cost.loader_reads(LIB)
    assert second["cached"] is True and (second["rchar"], second["syscr"]) == (first["rchar"], first["syscr"])


def test_without_a_program_to_calibrate_with_the_loaders_reads_are_unknown_with_the_reason(
        cache, monkeypatch, tmp_path):
    monkeypatch.setenv("CEILING_LAUNCHER", str(tmp_path / "missing"))
    out = interpose_cost.loader_reads(LIB)
    assert out["rchar"] is None and "not built" in out["why"]
    assert not list(cache.glob("interpose-loader-*.json"))
