"""The verbs: one module each, registered by name in VERBS.

A verb module has NAME, HELP, DESCRIPTION (and optionally EPILOG),
``configure(parser)`` adding its options, and ``main(args, argv) -> int``.
cli.py builds the command line from this table and calls the chosen verb's
main; a verb measures (through session.Session), analyses, and hands the Run
to its exporters (common.deliver). Adding a verb is a new module here and
one line in VERBS. Verb modules import what they measure with inside main(),
so that ``ceiling --help`` stays instant.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Dict, Optional

# In the order `ceiling --help` lists them. A name without a dot is a module of this
# package; a dotted name is imported as it is (a verb that lives elsewhere).
VERBS = ("run", "machine", "check", "bench", "profile", "trace", "scale", "model", "history", "compare", "show",
         "probe", "monitor")


def load(only: Optional[str] = None) -> Dict[str, ModuleType]:
    """{verb name: its module}, in VERBS order; with ``only``, a verb of this package named so, that verb
    alone (the command line of one verb imports none of the others' modules: ``ceiling compare`` starts
    sooner). A name that is no such verb loads them all (a dotted verb's NAME is known once imported)."""
    names = [only] if only is not None and "." not in only and only in VERBS else VERBS
    out = {}
    for name in names:
        mod = importlib.import_module(name if "." in name else f"{__name__}.{name}")
        out[mod.NAME] = mod
    return out
