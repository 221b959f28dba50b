"""An OTF2 archive read back by a reader we did not write: Debian's ``otf2-print`` (package otf2-tools;
.ci/run installs it), its events and its global definitions (-G) parsed from its text.

``read(anchor)`` runs it and fails the test when it exits non-zero or says anything on its standard
error (libotf2's errors and warnings: a missing file, a definition out of order); what it returns holds
every event record (kind, location, time, attributes) and every definition (kind, id, attributes).
"""
from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import pytest

OTF2_PRINT = shutil.which("otf2-print")
needs_otf2_print = pytest.mark.skipif(
    OTF2_PRINT is None, reason="Debian's otf2-print is not installed (apt-get install otf2-tools; .ci/run does)")

_EVENT = re.compile(r"^([A-Z_0-9]+)\s+(\d+)\s+(\d+)\s*(.*)$")
_DEF = re.compile(r"^([A-Z_0-9]+)\s+(\d+)?\s*(.*)$")


@dataclass
class Event:
    kind: str
    location: int
    ts: int
    attrs: str

    def get(self, key: str) -> Optional[str]:
        """An attribute's value as printed: a quoted name, a number, a word ("Region", "Bytes Result", ...)."""
        m = re.search(rf'(?:^|, ){re.escape(key)}: ("[^"]*"|[^,(]+)', self.attrs)
        return None if m is None else m.group(1).strip().strip('"')

    def number(self, key: str) -> int:
        return int(self.get(key))


@dataclass
class Archive:
    events: List[Event]
    defs: Dict[str, Dict[int, str]]          # kind -> id -> attributes
    clock: str
    anchor: str = ""
    by_location: Dict[int, List[Event]] = field(default_factory=dict)

    def count(self, kind: str, **attrs) -> int:
        return sum(1 for e in self.events if e.kind == kind and all(e.get(k) == str(v) for k, v in attrs.items()))

    def enters(self) -> Counter:
        """Enter records per region name."""
        return Counter(e.get("Region") for e in self.events if e.kind == "ENTER")

    def region_descr(self) -> Dict[str, str]:
        """Region name -> its description (ceiling's: "<module> <class> (ceiling's interposer)")."""
        out = {}
        for attrs in self.defs.get("REGION", {}).values():
            m = re.match(r'Name: "([^"]*)".*?Descr\.: "([^"]*)"', attrs)
            if m:
                out[m.group(1)] = m.group(2)
        return out

    def location_group(self, location: int) -> int:
        m = re.search(r"Group: \"[^\"]*\" <(\d+)>", self.defs["LOCATION"][location])
        return int(m.group(1))


def _run(args: List[str]) -> str:
    r = subprocess.run([OTF2_PRINT, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and not r.stderr.strip(), f"otf2-print {' '.join(args)}: {r.returncode}\n{r.stderr[:3000]}"
    return r.stdout


def read(anchor) -> Archive:
    anchor = str(anchor)
    events = []
    for line in _run([anchor]).splitlines():
        m = _EVENT.match(line)
        if m and m.group(1) not in ("OTF2",):
            events.append(Event(m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)))
    defs: Dict[str, Dict[int, str]] = defaultdict(dict)
    clock = ""
    for line in _run(["-G", anchor]).splitlines():
        if line.startswith("CLOCK_PROPERTIES"):
            clock = line
            continue
        m = _DEF.match(line)
        if m and m.group(2) is not None:
            defs[m.group(1)][int(m.group(2))] = m.group(3)
    by_loc: Dict[int, List[Event]] = defaultdict(list)
    for e in events:
        by_loc[e.location].append(e)
    return Archive(events, dict(defs), clock, _run(["-A", anchor]), dict(by_loc))


def check_nesting(a: Archive) -> None:
    """Per location: times never go back, every Leave closes the innermost open Enter of its region,
    nothing is left open, and each location's record count is the one its definition states."""
    for loc, evs in a.by_location.items():
        stack: List[str] = []
        last = -1
        for e in evs:
            assert e.ts >= last, f"location {loc}: time goes back at {e}"
            last = e.ts
            if e.kind == "ENTER":
                stack.append(e.get("Region"))
            elif e.kind == "LEAVE":
                assert stack and stack[-1] == e.get("Region"), f"location {loc}: {e} closes {stack[-1:]}"
                stack.pop()
        assert not stack, f"location {loc}: left open {stack}"
        m = re.search(r"# Events: (\d+)", a.defs["LOCATION"][loc])
        assert m and int(m.group(1)) == len(evs), (loc, a.defs["LOCATION"][loc], len(evs))
