"""ceiling run: the main job - machine model, checks, quick benchmarks, HTML report."""
from __future__ import annotations

import argparse
from typing import List

from . import common

NAME = "run"
HELP = "the main job: machine, checks, quick benchmarks, HTML report"
DESCRIPTION = "Machine model + checks + benchmarks + a single-file HTML report and a one-screen summary."


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="short benchmarks (under a minute on a small node)")
    common.measure_options(p)
    common.output_options(p)
    from .cluster import configure
    configure(p, pairs=True)


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from . import suites
    from .measure import measure
    return measure(args, argv, suites.steps(["all"], args.quick), with_checks=True, report_html=True)
