"""Placement plans: which CPU each benchmark thread is pinned to.

Policies (only CPUs in ``machine.affinity`` are used):

- ``compact``: fill the cores of socket 0, then socket 1, ... with one
  thread per physical core; SMT siblings only once every core has one (an
  HPC user who asks for as many threads as cores expects one per core).
- ``scatter``: round-robin over NUMA domains (over sockets when there is one
  domain, over L3 caches when there is one socket), one thread per core
  first, then SMT siblings.
- ``node:N``: the CPUs of NUMA node N only, compact.

When the user set them, OMP_NUM_THREADS gives the default thread count and
OMP_PLACES / OMP_PROC_BIND replace the default (compact) policy, as an
OpenMP runtime would place threads; an explicit scatter or node:N wins over
them. Too many threads for the CPUs allowed raises BadValueError unless
``oversubscribe``.
"""
from __future__ import annotations

import os
import re
from typing import Dict, List, Mapping, Optional, Sequence

from ..errors import BadValueError
from .model import Cpu, Machine


def _allowed(machine: Machine) -> List[Cpu]:
    online = [c for c in machine.cpus if c.online]
    allowed = set(machine.affinity) if machine.affinity else {c.id for c in online}
    return [c for c in online if c.id in allowed]


def _key(c: Cpu):
    return (c.socket, c.node, c.core, c.smt, c.id)


def _by_core(cpus: Sequence[Cpu]) -> List[List[Cpu]]:
    """CPUs grouped by physical core, cores in (socket, node, core) order, siblings by SMT index."""
    cores: Dict[object, List[Cpu]] = {}
    for c in sorted(cpus, key=_key):
        cores.setdefault((c.socket, c.core) if c.core >= 0 else ("cpu", c.id), []).append(c)
    return list(cores.values())


def compact_order(cpus: Sequence[Cpu]) -> List[int]:
    """One CPU per core in core order, then every core's second thread, and so on."""
    cores = _by_core(cpus)
    depth = max((len(g) for g in cores), default=0)
    return [g[k].id for k in range(depth) for g in cores if k < len(g)]


def scatter_order(machine: Machine, cpus: Sequence[Cpu]) -> List[int]:
    """Round-robin over NUMA domains (or sockets, or L3 caches), one thread per core first."""
    for attr in ("node", "socket", "l3"):
        groups: Dict[object, List[Cpu]] = {}
        for c in cpus:
            groups.setdefault(getattr(c, attr), []).append(c)
        if len(groups) > 1:
            break
    ordered = [compact_order(g) for _, g in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0]))]
    # Primary threads of every group first, round-robin; then the SMT siblings.
    primaries = [[i for i in o if _smt(machine, i) == 0] for o in ordered]
    siblings = [[i for i in o if _smt(machine, i) != 0] for o in ordered]
    out: List[int] = []
    for lists in (primaries, siblings):
        longest = max((len(x) for x in lists), default=0)
        for k in range(longest):
            out += [x[k] for x in lists if k < len(x)]
    return out


def _smt(machine: Machine, cpu_id: int) -> int:
    c = machine.cpu(cpu_id)
    return c.smt if c is not None else 0


# ---- OpenMP environment -------------------------------------------------------

def omp_num_threads(env: Mapping[str, str]) -> Optional[int]:
    """The outermost level of OMP_NUM_THREADS ("8" or "8,4"), or None when unset."""
    v = env.get("OMP_NUM_THREADS", "").strip()
    if not v:
        return None
    first = v.split(",")[0].strip()
    if not first.isdigit() or int(first) < 1:
        raise BadValueError(f"OMP_NUM_THREADS={v!r}: not a positive thread count")
    return int(first)


def _split_top(text: str) -> List[str]:
    """Split at commas outside braces."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [x.strip() for x in out if x.strip()]


def _interval(text: str, what: str) -> List[int]:
    parts = [p.strip() for p in text.split(":")]
    if not all(re.fullmatch(r"-?\d+", p) for p in parts) or not 1 <= len(parts) <= 3:
        raise BadValueError(f"OMP_PLACES: cannot read {what!r}")
    start = int(parts[0])
    length = int(parts[1]) if len(parts) > 1 else 1
    stride = int(parts[2]) if len(parts) > 2 else 1
    if length < 1:
        raise BadValueError(f"OMP_PLACES: length must be >= 1 in {what!r}")
    return [start + i * stride for i in range(length)]


def parse_places(text: str, machine: Machine) -> List[List[int]]:
    """OMP_PLACES as lists of CPU ids: "threads", "cores", "sockets", "ll_caches",
    "numa_domains" (each optionally "(n)"), or explicit "{0,1},{2:4}", "{0:4}:4:4"."""
    text = text.strip()
    online = [c for c in machine.cpus if c.online]
    m = re.fullmatch(r"(threads|cores|sockets|ll_caches|numa_domains)\s*(?:\(\s*(\d+)\s*\))?", text, re.I)
    if m:
        kind, count = m.group(1).lower(), m.group(2)
        key = {"threads": lambda c: ("t", c.id), "cores": lambda c: (c.socket, c.core),
               "sockets": lambda c: c.socket, "ll_caches": lambda c: (c.socket, c.l3),
               "numa_domains": lambda c: c.node}[kind]
        groups: Dict[object, List[Cpu]] = {}
        for c in online:
            groups.setdefault(key(c), []).append(c)
        # Places in order of their lowest CPU id, as OpenMP runtimes list
        # them; inside a place one thread per core first.
        places = [compact_order(g) for g in sorted(groups.values(), key=lambda g: min(c.id for c in g))]
        return places[:int(count)] if count else places
    places: List[List[int]] = []
    for item in _split_top(text):
        pm = re.fullmatch(r"(!?)\{([^}]*)\}\s*(?::\s*(\d+)\s*(?::\s*(-?\d+)\s*)?)?", item)
        if not pm:
            raise BadValueError(f"OMP_PLACES={text!r}: cannot read {item!r}")
        if pm.group(1):
            raise BadValueError(f"OMP_PLACES={text!r}: excluded places ('!') are not supported")
        cpus: List[int] = []
        for res in pm.group(2).split(","):
            res = res.strip()
            if res.startswith("!"):
                raise BadValueError(f"OMP_PLACES={text!r}: excluded CPUs ('!') are not supported")
            cpus += _interval(res, res)
        count = int(pm.group(3)) if pm.group(3) else 1
        stride = int(pm.group(4)) if pm.group(4) else len(cpus)
        for k in range(count):
            places.append([c + k * stride for c in cpus])
    return places


def _bind(places: List[List[int]], n: int, bind: str) -> List[int]:
    """Threads to places as OMP_PROC_BIND says; threads on one place take its CPUs in turn."""
    p = len(places)
    if bind in ("master", "primary"):
        idx = [0] * n
    elif bind == "spread":
        idx = [i * p // n for i in range(n)] if n <= p else [min(p - 1, i * p // n) for i in range(n)]
    else:  # close, true
        idx = [i % p for i in range(n)] if n <= p else [i * p // n for i in range(n)]
    used: Dict[int, int] = {}
    out = []
    for i in idx:
        k = used.get(i, 0)
        used[i] = k + 1
        out.append(places[i][k % len(places[i])])
    return out


def plan(machine: Machine, nthreads: Optional[int] = None, policy: str = "compact", *,
         oversubscribe: bool = False, env: Optional[Mapping[str, str]] = None) -> List[int]:
    """CPU ids for ``nthreads`` threads: thread i is pinned to plan[i]."""
    env = os.environ if env is None else env
    cpus = _allowed(machine)
    if not cpus:
        raise BadValueError("no CPU is available to this process (affinity and online CPUs do not meet)")
    allowed_ids = {c.id for c in cpus}
    n = nthreads if nthreads is not None else omp_num_threads(env)
    policy = (policy or "compact").strip()

    places_env = env.get("OMP_PLACES", "").strip()
    bind_env = env.get("OMP_PROC_BIND", "").strip().split(",")[0].strip().lower()
    use_omp = policy == "compact" and bind_env != "false" and (places_env or bind_env)
    if use_omp:
        if places_env:
            places = [[c for c in pl if c in allowed_ids] for pl in parse_places(places_env, machine)]
            places = [pl for pl in places if pl]
            if not places:
                raise BadValueError(f"OMP_PLACES={places_env!r}: no place holds a CPU this process may use")
        else:
            # OMP_PROC_BIND alone: one place per core, as OpenMP runtimes commonly default to.
            places = [[c for c in pl if c in allowed_ids] for pl in parse_places("cores", machine)]
            places = [pl for pl in places if pl]
        total = sum(len(pl) for pl in places)
        if n is None:
            n = total if bind_env not in ("master", "primary") else len(places[0])
        _check_count(n, total, oversubscribe, f"the {total} CPUs in OMP_PLACES")
        return _bind(places, n, bind_env or "close")

    if policy == "compact":
        order = compact_order(cpus)
    elif policy == "scatter":
        order = scatter_order(machine, cpus)
    else:
        m = re.fullmatch(r"node:(\d+)", policy)
        if not m:
            raise BadValueError(f"placement {policy!r}: unknown (compact, scatter or node:N)")
        node = int(m.group(1))
        sub = [c for c in cpus if c.node == node]
        if not sub:
            nodes = sorted({c.node for c in cpus})
            raise BadValueError(f"placement node:{node}: no CPU of NUMA node {node} is available "
                                f"(nodes with CPUs here: {', '.join(map(str, nodes))})")
        order = compact_order(sub)
    if n is None:
        n = len(order)
    _check_count(n, len(order), oversubscribe, f"the {len(order)} CPUs this process may use"
                 + (f" on {policy}" if policy.startswith("node:") else ""))
    return [order[i % len(order)] for i in range(n)]


def _check_count(n: int, available: int, oversubscribe: bool, what: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise BadValueError(f"thread count {n!r}: must be at least 1")
    if n > available and not oversubscribe:
        raise BadValueError(f"{n} threads is more than {what} (allow it with --oversubscribe)")
