"""ceiling bench: measure subsystems against their peaks; network and storage under MPI."""
from __future__ import annotations

import argparse
import json
from typing import List

from ..errors import UsageError
from . import common

NAME = "bench"
HELP = "measure subsystems against their peaks"
DESCRIPTION = ("Run benchmark suites: " + ", ".join(common.BENCH_SUITES) + ". 'all' is the node's own "
               "(compute to cores); network runs under MPI (mpirun -n 2 ceiling bench network); "
               "storage writes in a new directory under --dir.")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("suites", nargs="*", metavar="SUITE",
                   help="one or more of: " + ", ".join(common.BENCH_SUITES) + " (default: all)")
    p.add_argument("--quick", action="store_true", help="short benchmarks")
    p.add_argument("--list", action="store_true", help="list the kernels in the C core and exit")
    p.add_argument("--dir", metavar="DIR", help="storage: where to write (a new ceiling-io-* subdirectory, removed "
                   "afterwards; default $TMPDIR or /tmp)")
    p.add_argument("--clean", action="store_true", help="storage: first remove the ceiling-io-* directories "
                   "that your killed runs left in DIR (a run names them when it finds them)")
    p.add_argument("--node-timeout", metavar="SECONDS",
                   help="under MPI: end the job when a rank has not answered for this long (30, 5m; default: "
                   "sized from the work of each wait, at least 2 minutes); what was measured is kept, exit 11")
    p.add_argument("--site-mpi", nargs="?", const="auto", metavar="MPICC",
                   help="network: measure with another MPI of this node (its mpicc; default: the only other "
                   "one found): builds mpi4py against it once in a cached environment, then runs its "
                   "launcher -n 2 ceiling bench network (not under mpirun)")
    p.add_argument("--repeat", metavar="N", help="measure the same suites N times (N >= 2), one run each, kept "
                   "together as one repetition study: each run in the history as usual, the study listed by "
                   "'ceiling history --studies' and shown by 'ceiling show STUDY' (--json, --save-json and --out "
                   "then write the study)")
    common.measure_options(p)
    common.output_options(p, textfile=True)
    from .cluster import configure
    configure(p, node_timeout=False)


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from . import repeat, suites
    from .measure import measure, measure_mpi
    if args.list:
        return _list_kernels(args)
    repeats = repeat.count(args)
    if args.cluster and ({"network", "storage"} & set(args.suites)):
        raise UsageError("--cluster measures each node on its own: the network between nodes is --pairs "
                         "(ceiling bench compute --cluster --pairs, or ceiling run --cluster); the network and "
                         "storage suites measure the ranks together already (mpirun -n N ceiling bench network)")
    if args.site_mpi and args.suites != ["network"]:
        raise UsageError("--site-mpi measures the network alone: ceiling bench network --site-mpi [MPICC]")
    if "network" in args.suites:
        if len(set(args.suites)) > 1:
            raise UsageError("the network suite runs on its own, under MPI: mpirun -n 2 ceiling bench network")
        if args.site_mpi:
            return _site_mpi(args, argv)
        return measure_mpi(args, argv, "network")
    from ..cluster.comm import world
    from ..cluster.launch import launched_size
    n = launched_size()
    if "storage" in args.suites and n == 0 and not args.cluster:       # a PMIx launcher: only MPI knows the size
        n = world("serialized").Get_size()
    if "storage" in args.suites and n > 1:
        if len(set(args.suites)) > 1:
            raise UsageError("under MPI the storage suite runs on its own: "
                             "mpirun -n N ceiling bench storage --dir DIR")
        return measure_mpi(args, argv, "storage")
    steps = suites.steps(args.suites, args.quick)
    if repeats:
        return repeat.measure_repeated(args, argv, steps, repeats)
    return measure(args, argv, steps, with_checks=False, report_html=bool(args.out), steps_must_run=True)


def _site_mpi(args: argparse.Namespace, argv: List[str]) -> int:
    """Measure with another MPI of this node (cluster/site_mpi.py): the environment made once,
    the command printed, then run; its exit status is this one's."""
    import subprocess
    import sys
    from ..cluster import site_mpi
    from ..cluster.launch import launched_size
    if launched_size() != 1:
        raise UsageError("--site-mpi starts its own launcher: run it without mpirun or srun "
                         "(ceiling bench network --site-mpi)")
    inst = site_mpi.choose(args.site_mpi)

    def say(text: str) -> None:
        print(f"ceiling: {text}", file=sys.stderr, flush=True)
    venv = site_mpi.prepare(inst, say)
    cmd = site_mpi.launch_argv(inst, venv, site_mpi.without_site_mpi(argv))
    say(f"measuring with {inst.name} ({inst.how}): {' '.join(cmd)}")
    try:
        rc = subprocess.run(cmd).returncode
    except KeyboardInterrupt:
        return 130
    return 128 - rc if rc < 0 else rc       # a launcher killed by a signal: the shell's convention


def _list_kernels(args: argparse.Namespace) -> int:
    from .. import core
    ks = core.kernels()
    if args.json:
        print(json.dumps([k.__dict__ for k in ks], indent=1))
        return 0
    print(f"{'kernel':<16} {'family':<10} {'isa':<7} {'runs here':<9} {'B/iter':>7} {'flop/iter':>9}  what one "
          "iteration is")
    for k in ks:
        print(f"{k.name:<16} {k.family:<10} {k.isa:<7} {'yes' if k.supported else 'no':<9} "
              f"{k.bytes_per_iter:>7g} {k.flops_per_iter:>9g}  {k.doc}")
    return 0
