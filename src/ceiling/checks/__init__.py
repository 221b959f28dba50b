"""Checks of the node's condition and configuration; each returns a Finding.

One module per area (base.AREAS); importing a module registers its checks.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional

from ..results.model import Finding
from .base import AREAS, REGISTRY, Options, run

if TYPE_CHECKING:      # annotations only: the machine package costs a tenth of a second to import,
    from ..machine.model import Machine    # before `ceiling profile` starts its program (checks/load.py)

# One module per area, named after it, imported in report order.
MODULES = tuple(AREAS)


def load_all() -> None:
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}")


def run_checks(machine: Machine, root: str = "/", only: Optional[Iterable[str]] = None,
               options: Optional[Options] = None, strict: bool = False,
               timings: Optional[Dict[str, float]] = None) -> List[Finding]:
    load_all()
    return run(machine, root, only=only, options=options, strict=strict, timings=timings)


__all__ = ["AREAS", "REGISTRY", "Options", "load_all", "run_checks"]
