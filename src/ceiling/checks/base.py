"""The frame every check stands in: one registry, one way to read files, one
way to say ok / warn / fail / skipped.

A check is a small function registered with ``@check("area.name")``. It
takes a :class:`Probe` and returns one :class:`Finding` made with ``ok``,
``warn``, ``fail`` or ``skipped``; the runner stamps the id. Its docstring is
the long explanation ``ceiling check --explain ID`` prints: what it reads,
the thresholds, why it matters, how to fix it. So the explanation and the
code that applies it sit together and change together.

Every file is read through the probe, below ``probe.root``: tests point it at
a fixture tree (a recorded /proc and /sys), and nothing needs root. A file
that is absent, unreadable, not text or empty reads as ``None``; a check then
says ``skipped`` and why, it never raises.

A finding that is not ok says what caused it in ``data["cause"]`` (a short
word: "competing_process", "not_root", "tool_missing") and its ``fix`` is the
one for that cause, so the advice cannot contradict the evidence: ``warn``,
``fail`` and ``skipped`` take ``cause=``, and a warn or fail without one is a
bug that the strict runner (tests) refuses. Root-ness is an input
(``Probe.is_root``), so a check never tells root to use sudo, and tests can
plant either.

Checks that look at this process or measure something now (rlimits,
statvfs, the OS-noise window) are marked ``live``: on a recorded tree they
are skipped, because the tree is not this node.
"""
from __future__ import annotations

import inspect
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence

from ..sysfs import Root, decode, first_int
from ..results.model import FAIL, OK, SKIPPED, WARN, Finding

if TYPE_CHECKING:      # annotations only: the machine package costs a tenth of a second to import,
    from ..machine.model import Machine    # before `ceiling profile` starts its program (checks/load.py)

# Areas in the order a report shows them: the node's condition (what can
# change from one hour to the next) first, then its configuration. Their
# titles are display names, so they are the report's (report/labels.py).
AREAS = ("thermal", "ras", "load", "noise", "placement", "mem", "fs", "cpu", "numa", "os", "limits",
         "cgroup", "perf", "irq", "env")


@dataclass
class Options:
    """What ``ceiling check`` may spend; the defaults keep it under 15 s."""

    noise_s: float = 2.0          # OS-noise window, whole
    stability_probes: int = 5     # short core-to-core probes for placement stability


@dataclass
class Probe:
    """What a check may look at: the tree below ``root``, the machine model, and
    (when ``live``) this process and this node now. It reads with the one reader
    (sysfs.Root), strictly decoded: a check judges nothing from mangled text."""

    root: Path
    machine: Machine
    live: bool = False
    options: Options = field(default_factory=Options)
    # Whether ceiling runs as root: decides between "run it as root" and what
    # root itself must do. None on a recorded tree (who will read it is unknown).
    is_root: Optional[bool] = None

    def __post_init__(self):
        self.fs = Root(self.root)

    @classmethod
    def of(cls, machine: Machine, root: str = "/", options: Optional[Options] = None,
           is_root: Optional[bool] = None) -> "Probe":
        live = str(root) == "/"
        if is_root is None and live:
            is_root = os.geteuid() == 0
        return cls(Path(root), machine, live=live, options=options or Options(), is_root=is_root)

    def path(self, rel: str) -> Path:
        return self.fs.p(rel)

    def raw(self, rel: str) -> Optional[bytes]:
        """The file's bytes, or None. Every read of a check comes through here
        (the robustness test replaces it to feed checks garbage)."""
        return self.fs.raw(rel)

    def read(self, rel: str) -> Optional[str]:
        """The file's text, stripped; None when absent, unreadable, binary or empty."""
        return decode(self.raw(rel), strict=True)

    def read_int(self, rel: str) -> Optional[int]:
        """The file's first word as an integer (0x... read as hex); None when it is not one."""
        return first_int(self.read(rel), 0)

    def lines(self, rel: str) -> List[str]:
        text = self.read(rel)
        return text.splitlines() if text else []

    def listdir(self, rel: str) -> List[str]:
        """Names in a directory, sorted naturally (cpu2 before cpu10); [] if absent."""
        return self.fs.listdir(rel, natural=True)

    def exists(self, rel: str) -> bool:
        return self.fs.exists(rel)

    def cpus(self) -> List[int]:
        """The CPUs this check is about: the ones this process may use, else all online."""
        m = self.machine
        if m.affinity:
            return sorted(m.affinity)
        return sorted(c.id for c in m.cpus if c.online)



# -- results -------------------------------------------------------------------

def _data(cause: str, data: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    out = dict(data or {})
    if cause:
        out["cause"] = cause
    return out


def ok(title: str, evidence: str = "", why: str = "", fix: str = "", needs_root: bool = False,
       data: Optional[Dict[str, Any]] = None) -> Finding:
    return Finding("", OK, title, evidence=evidence, why=why, fix=fix, needs_root=needs_root, data=dict(data or {}))


def warn(title: str, evidence: str = "", why: str = "", fix: str = "", needs_root: bool = False,
         cause: str = "", data: Optional[Dict[str, Any]] = None) -> Finding:
    """A warning; ``cause`` names what made it (data["cause"]) and ``fix`` must be that cause's."""
    return Finding("", WARN, title, evidence=evidence, why=why, fix=fix, needs_root=needs_root, data=_data(cause, data))


def fail(title: str, evidence: str = "", why: str = "", fix: str = "", needs_root: bool = False,
         cause: str = "", data: Optional[Dict[str, Any]] = None) -> Finding:
    return Finding("", FAIL, title, evidence=evidence, why=why, fix=fix, needs_root=needs_root, data=_data(cause, data))


def skipped(title: str, evidence: str = "", why: str = "", fix: str = "", needs_root: bool = False,
            cause: str = "", data: Optional[Dict[str, Any]] = None) -> Finding:
    """Not judged; where the reason can be removed, ``cause`` names it and ``fix`` says how."""
    return Finding("", SKIPPED, title, evidence=evidence, why=why, fix=fix, needs_root=needs_root,
                   data=_data(cause, data))


# -- the registry --------------------------------------------------------------

@dataclass(frozen=True)
class Check:
    id: str
    fn: Callable[[Probe], Finding]
    live: bool = False      # reads this process or measures now: skipped on a recorded tree

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def explain(self) -> str:
        return inspect.cleandoc(self.fn.__doc__ or "(no explanation written)")


REGISTRY: Dict[str, Check] = {}


def check(check_id: str, live: bool = False):
    """Register a check function under ``check_id`` ("area.name")."""
    area = check_id.split(".", 1)[0]
    if area not in AREAS or "." not in check_id:
        raise ValueError(f"check id {check_id!r}: must be AREA.NAME with AREA one of {', '.join(AREAS)}")

    def register(fn: Callable[[Probe], Finding]) -> Callable[[Probe], Finding]:
        if check_id in REGISTRY and REGISTRY[check_id].fn is not fn:
            raise ValueError(f"check id {check_id!r} registered twice")
        REGISTRY[check_id] = Check(check_id, fn, live=live)
        return fn
    return register


def select(only: Optional[Sequence[str]] = None) -> List[Check]:
    """Registered checks in report order, restricted to areas or ids in ``only``."""
    order = {a: i for i, a in enumerate(AREAS)}
    checks = sorted(REGISTRY.values(), key=lambda c: order[c.area])  # stable: module order within an area
    if not only:
        return checks
    return [c for c in checks if c.area in only or c.id in only]


def run_one(c: Check, probe: Probe, strict: bool = False) -> Finding:
    """Run one check. A check that raises is a bug; outside tests (``strict``)
    it becomes a skipped finding naming the error, so it never costs the run."""
    if c.live and not probe.live:
        f = skipped(f"{c.id}: not applicable to a recorded tree",
                    evidence=f"it reads this process or measures this node now; --root is {probe.root}")
    else:
        try:
            f = c.fn(probe)
        except Exception as e:
            if strict:
                raise
            f = skipped(f"{c.id}: could not run ({type(e).__name__})", evidence=f"{type(e).__name__}: {e}",
                        why="a bug in ceiling: please report it with this line")
        if not isinstance(f, Finding):
            if strict:
                raise TypeError(f"check {c.id} returned {type(f).__name__}, not a Finding")
            f = skipped(f"{c.id}: returned no finding", why="a bug in ceiling: please report it")
        elif strict and f.status in (WARN, FAIL) and not f.data.get("cause"):
            raise ValueError(f"check {c.id} returned {f.status} without data['cause']: its fix must follow a cause")
    f.id = c.id
    return f


def run(machine: Machine, root: str = "/", only: Optional[Iterable[str]] = None,
        options: Optional[Options] = None, strict: bool = False,
        timings: Optional[Dict[str, float]] = None) -> List[Finding]:
    probe = Probe.of(machine, root, options)
    out = []
    for c in select(list(only) if only else None):
        t0 = time.perf_counter()
        out.append(run_one(c, probe, strict=strict))
        if timings is not None:
            timings[c.id] = time.perf_counter() - t0
    return out


def worst(findings: Iterable[Finding]) -> str:
    """fail > warn > ok (skipped counts as ok: an absent feature is not a fault)."""
    statuses = {f.status for f in findings}
    return FAIL if FAIL in statuses else WARN if WARN in statuses else OK
