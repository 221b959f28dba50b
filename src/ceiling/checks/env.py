"""Virtualization: is this a VM."""
from __future__ import annotations

from .base import Probe, check, ok, warn


@check("env.virtualized")
def virtualized(p: Probe):
    """Virtual machine or bare metal (the cpuid hypervisor bit, DMI vendor).

    warn: a VM. The hypervisor decides the clock, where virtual CPUs run on
    physical cores (and whether that changes), how guest memory maps to host
    pages, and which other guests share the hardware: topology and peaks may
    differ from the host's, and figures vary with the host's load.

    Fix: for reference numbers run on bare metal, or with dedicated, pinned
    vCPUs and huge-page-backed guest memory.
    """
    m = p.machine
    if m.virtualized:
        return warn(f"Running in a virtual machine ({m.virtualized})", evidence=f"hypervisor: {m.virtualized}",
                    why="the hypervisor decides clocks, placement of virtual CPUs on physical cores, and memory layout: "
                        "topology and peaks may differ from the host's, and other guests compete for the same hardware",
                    fix="for reference numbers run on bare metal, or with dedicated (pinned) vCPUs",
                    cause="virtual_machine", data={"hypervisor": m.virtualized})
    return ok("Bare metal (no hypervisor flag)")
