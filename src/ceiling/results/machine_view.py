"""A typed view of the machine facts a Run stores.

``Run.machine`` is ``Machine.to_dict()`` as it was recorded, so that a run
read back from JSON or the history carries exactly what was measured, even
from an older ceiling. Analysis and reports read it through this view
instead of poking at dictionary keys, so they need neither the machine model
(which describes the node at hand, not the recorded one) nor each other.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..units import figure
from .model import Peak


def as_dict(obj: Any) -> Dict[str, Any]:
    """A Machine, a Machine.to_dict(), a nested fact or None, as a dictionary."""
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return obj
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return dict(getattr(obj, "__dict__", {}))


def peak_from(obj: Any) -> Optional[Peak]:
    """A Peak from a Peak or its dictionary form (JSON); None otherwise."""
    if obj is None:
        return None
    if isinstance(obj, Peak):
        return obj
    if isinstance(obj, dict):
        return Peak(obj.get("value"), obj.get("unit", ""), obj.get("provenance", ""))
    return None


class MachineFacts:
    """Read-only accessors over a recorded machine; every missing fact is None or empty."""

    def __init__(self, machine: Any):
        self.raw: Dict[str, Any] = as_dict(machine)

    def __bool__(self) -> bool:
        return bool(self.raw)

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    @property
    def threads(self) -> int:
        """Logical CPUs of the node (0 when unknown)."""
        return int(self.raw.get("threads") or 0)

    @property
    def numa_nodes(self) -> List[Dict[str, Any]]:
        return [as_dict(n) for n in self.raw.get("nodes") or []]

    @property
    def unknowns(self) -> Dict[str, str]:
        """Why a fact is unknown, by its key ("clocks.base_ghz", "memory_channels", ...)."""
        return dict(self.raw.get("unknowns") or {})

    @property
    def clocks(self) -> Dict[str, Any]:
        return as_dict(self.raw.get("clocks"))

    def peaks(self) -> Dict[str, Peak]:
        """Every theoretical peak the machine model derived, by key ("flops.dp.node", "membw.node")."""
        out = {}
        for key, raw in (self.raw.get("peaks") or {}).items():
            p = peak_from(raw)
            if p is not None:
                out[key] = p
        return out

    def peak(self, key: str) -> Optional[Peak]:
        return peak_from((self.raw.get("peaks") or {}).get(key))

    def caches(self) -> List[Dict[str, Any]]:
        """Data and unified caches with a known size, ordered by level."""
        out = [as_dict(c) for c in self.raw.get("caches", []) or []]
        out = [c for c in out if c.get("type") != "instruction" and figure(c.get("size_bytes"))]
        return sorted(out, key=lambda c: (figure(c.get("level")) or 0, str(c.get("type", ""))))

    def socket_of(self) -> Dict[str, Any]:
        """The socket of each CPU, keyed by the CPU id as text (series labels are text)."""
        out = {}
        for c in self.raw.get("cpus") or []:
            c = as_dict(c)
            out[str(c.get("id"))] = c.get("socket")
        return out
