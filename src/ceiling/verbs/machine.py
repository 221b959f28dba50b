"""ceiling machine: topology, ISA, clocks and theoretical peaks of this node (or of a recorded tree)."""
from __future__ import annotations

import argparse
import sys
from typing import List

from . import common

NAME = "machine"
HELP = "topology, ISA, clocks and theoretical peaks of this node"
DESCRIPTION = "Sockets, NUMA domains, cores, caches, ISA, clocks (read and measured) and peaks with provenance."


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-measure", action="store_true", help="do not measure the clock (peaks then use the read clock)")
    p.add_argument("--root", metavar="DIR",
                   help="read /proc and /sys below DIR (a recorded machine) instead of this node")
    common.output_options(p, store=False, html=False)


def main(args: argparse.Namespace, argv: List[str]) -> int:
    from .. import machine as machine_mod
    from ..report import terminal
    from .session import Session
    root = args.root or "/"
    common.require_dir(args.root)
    cfg = common.config(args)
    measure = not args.no_measure and root == "/"
    if measure:
        progress = common.progress(args)
        progress.start("machine model and clock")
        try:
            m = machine_mod.detect(root, measure=True, config=cfg)
        finally:
            progress.done()
    else:
        m = machine_mod.detect(root, measure=False, config=cfg)
    session = Session(argv)
    session.set_machine(m)
    run = session.finish()
    if args.save_json:
        from ..results import jsonio
        jsonio.dump(run, args.save_json)
    common.say(args)(terminal.render_machine(run))
    if args.json:        # the run document, as every verb's --json: schema_version, the machine section
        from ..results import jsonio
        sys.stdout.write(jsonio.dumps(run))
    return 0
