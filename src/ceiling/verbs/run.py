"""ceiling run: the main job - machine model, checks, the node's benchmarks, HTML report."""
from __future__ import annotations

import argparse
from typing import List

from . import common

NAME = "run"
HELP = "the main job: machine, checks, the node's benchmarks (minutes), HTML report"
DESCRIPTION = ("Machine model + checks + the node's benchmarks (compute, DGEMM, memory, caches, latency, core to "
               "core; storage and network are 'bench storage' and 'bench network') + a single-file HTML report "
               "and a one-screen summary. It takes minutes; --quick less.")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="a shorter run: fewer repetitions, sizes and thread "
                   "counts, smaller arrays")
    common.measure_options(p)
    common.output_options(p, textfile=True)
    from .cluster import configure
    configure(p, pairs=True)


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from . import suites
    from .measure import measure
    return measure(args, argv, suites.steps(["all"], args.quick), with_checks=True, report_html=True)
