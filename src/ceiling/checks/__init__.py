"""Checks of the node's condition and configuration; each returns Findings."""
from __future__ import annotations

from typing import List

from ..machine.model import Machine
from ..results.model import Finding


def run_checks(machine: Machine, root: str = "/") -> List[Finding]:
    from . import load, system
    findings = system.run(machine, root)
    if root == "/":
        findings.append(load.check_idle(len(machine.affinity) or machine.threads or 1))
    return findings
