"""Helpers the check tests share: write a file into a fake tree, unpack a
recorded tree with its machine model, run one check strictly (an exception
fails the test instead of becoming a skipped finding)."""
from __future__ import annotations

from pathlib import Path

from ceiling import machine
from ceiling.checks import base
from machine_fixtures import fsroot


def write(root: Path, rel: str, text: str) -> None:
    f = root / rel
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text)


def tree(name, tmp_path_factory):
    """(machine model, root) of a recorded /proc + /sys tree, every file unpacked."""
    root = fsroot(name, tmp_path_factory, full=True)
    return machine.detect(str(root), measure=False), root


def run(check_id, m, root):
    return base.run_one(base.REGISTRY[check_id], base.Probe.of(m, str(root)), strict=True)
