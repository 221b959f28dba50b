"""Who waited while others worked: the parents of a profiled program whose waiting for their
children is not the program's waiting (analysis/profile.py leaves it out of the split).

A process that waits while its children run (blocked in wait4 or waitid, or polling with
sleeps: a shell, make, mpirun, fio's main process while its job writes) is their supervisor
for that time; what it did alone (its start-up before its first child, its work between and
after them) is its own, so the split that remains is the program's critical path. The sampler
times each thread over the intervals that began with a child of its process alive
(probes/proc_sampler.py, ``with_children_*``); where it never did, the old rule over a
process's whole life stands (``launchers``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from ..probes.proc_sampler import Sampled

LAUNCHER_ON = 0.10          # a parent on a CPU under this share of the time its children ran only waited for them


def launchers(s: Sampled, wall_s: float) -> List[int]:
    """Processes left out whole, as only starting and waiting for others (a shell running a
    script, mpirun): they had children and were on a CPU under LAUNCHER_ON of their life, and the
    sampler never timed them over an interval that began with a child alive (made-up samples, a
    child shorter than an interval), so their waiting cannot be told from their own work. Where
    it did, ``supervisors`` leaves out only their waiting. Their own I/O (a launcher's control
    messages) is not the program's either (verbs/profile.py)."""
    out = []
    for pid, p in s.processes.items():
        if not p.parent:
            continue
        ts = [t for (tp, _), t in s.threads.items() if tp == pid]
        life = sum(max(t.last_s - t.first_s, 1e-9) for t in ts)
        on = sum(t.on_cpu_s if t.on_cpu_s is not None else t.user_s + t.system_s for t in ts)
        if ts and on < LAUNCHER_ON * life and not any(t.with_children_s > 0 for t in ts):
            out.append(pid)
    return sorted(out)


def supervisors(s: Sampled) -> Dict[int, Dict[str, float]]:
    """Processes that waited while their children ran: over the sampler's intervals that began
    with a child of theirs alive, their threads together were on a CPU under LAUNCHER_ON of that
    time (blocked in wait4 or waitid, or a polling loop of sleeps: a shell, make between its
    jobs' ends, mpirun, fio's main process while its job writes). That time is their children's
    running, not the program's waiting: it leaves the split, and their time alone (start-up
    before the first child, work between and after) stays. A parent that worked beside its
    children stays whole. pid -> {"waited_s": seconds with a child alive, "cpu_s": its CPU
    time then, "own_s": the rest of its main thread's life}."""
    out = {}
    for pid, p in s.processes.items():
        ts = [(tid, t) for (tp, tid), t in s.threads.items() if tp == pid]
        waited = max((t.with_children_s for _, t in ts), default=0.0)
        if not p.parent or waited <= 0:
            continue
        cpu = sum(t.with_children_on_s for _, t in ts)
        if cpu < LAUNCHER_ON * waited:
            main = next((t for tid, t in ts if tid == pid), ts[0][1])
            out[pid] = {"waited_s": round(waited, 6), "cpu_s": round(cpu, 6),
                        "own_s": round(max(0.0, main.last_s - main.first_s - main.with_children_s), 6)}
    return out


def critical_path(s: Sampled, sup: Dict[int, Dict[str, float]], per: Sequence[Tuple[str, Any]]) -> str:
    """The bound's words where supervisors' waiting was left out: who waited, and each process's
    share of the thread-seconds the split kept (the critical path: what ran while the others
    waited)."""
    waited = [f"{pid} {s.processes[pid].comm} waited {x['waited_s']:.3g} s while its children ran (on a CPU "
              f"{x['cpu_s'] / x['waited_s']:.0%} of it) and ran {x['own_s']:.3g} s itself" for pid, x in sup.items()]
    by: Dict[str, float] = {}
    for name, sp in per:
        pid, _, rest = name.partition(" ")
        key = f"{pid.split('/')[0]} {rest}".rstrip()
        by[key] = by.get(key, 0.0) + sp.life_s
    total = sum(by.values()) or 1.0
    top = sorted(by.items(), key=lambda kv: -kv[1])
    shares = ", ".join(f"{k} {v / total:.0%}" for k, v in top[:6]) + (
        f" and {len(top) - 6} more" if len(top) > 6 else "")
    return (f"; the split is the critical path: {'; '.join(waited[:4])}{' and more' if len(waited) > 4 else ''} "
            f"({'its' if len(waited) == 1 else 'their'} waiting is left out); by process, of the thread-seconds "
            f"kept: {shares}")
