"""MPI wait states and phases on the trace's time line (issue 29): pure functions from
``results.events.Events`` chunks (+ this node's measured MPI ceilings where the history has them)
to ``Finding``s. Entry point: ``wait_findings``.

Scalasca's definitions (Geimer et al., "The Scalasca performance toolset architecture", 2010;
its pattern reference, "Late Sender", "Late Receiver", "Wait at Barrier", "Wait at N x N"):

- late sender: a blocking receive entered before the matching send began; time lost = the
  send's enter - the receive's enter (at most the receive's own time).
- late receiver: a blocking send (MPI_Ssend, or a rendezvous MPI_Send) that waited for its
  receive to be posted; time lost = the receive's enter (or its MPI_Irecv's) - the send's enter
  (at most the send's own time). An eager send never waits: its time caps the loss near zero.
- wait at barrier, wait at N x N (MPI_Allreduce, Allgather(v), Alltoall(v, w),
  Reduce_scatter(_block)): each rank's time from its enter to the last member's enter (at
  most its own time in the call).

Messages pair as MPI matches them (non-overtaking): the k-th send from rank s to rank d with one
tag on one communicator is the k-th receive at d from s with that tag there. A channel whose sends
and receives do not count the same (a receive posted with MPI_ANY_SOURCE or MPI_ANY_TAG, whose
source the recording learns only from a blocking receive's status; an MPI_Sendrecv's receive
side, an MPI_Mrecv) is not paired: said as unpaired messages. A collective's instances pair by
order on their communicator (every member calls them in one order); its members are the ranks
that called collectives on it (the recording names a communicator by an id the members share,
csrc/interpose/mpi_comm.c, not by its members). A late sender is also met in the MPI_Wait that
completes an MPI_Irecv posted from a rank with a tag: the interposer names that wait's message
(source, tag, communicator) as it names a blocking receive's, and the k-th such wait on a channel
completes its k-th MPI_Irecv (time lost: the send's enter - the wait's enter). Not tied to their
requests: MPI_Waitall, _any, _some and the tests, waits on receives posted with MPI_ANY_SOURCE or
MPI_ANY_TAG, persistent receives, and Fortran's under Open MPI.

Phases: the spans between consecutive blocking collectives on one communicator (each rank from
its leave of one to its enter of the next), and user regions (the k-th instance of one name on
each rank). A rank's compute time in a phase is the phase's span less its MPI calls in it; the
phase's imbalance is max/mean of it, its time lost what the others wait for the slowest
(sum of max - each). Said where a phase loses ``MIN_SHARE`` of the run and its imbalance is at
least ``IMBALANCE``; the waits at the collective that closes a phase said are that phase's
cost, so they are not said again as a wait at a barrier or N x N.

A wait or phase at least half (``COVERED``) inside the windows of an I/O finding of the same time
line (analysis/trace_patterns.py: the others waiting at a barrier for a single writer) is that
finding's time, said there once.

Thresholds: a pattern is said when its time lost, summed over the ranks, is at least
``MIN_SHARE`` (5%, trace_patterns') of the ranks' run (first to last event of any rank, one
rank's wall time): shorter, the wait costs less than finding it; per rank and call at most
``MAX_SITES`` rows, the largest.

Each finding is set against this node's ping-pong curve (``ceiling bench network``: the one-way
latency and the bandwidth plateau, the time of a message of n bytes taken as latency +
n / bandwidth): a receive that waits many times what the message takes is the sender's
lateness, imbalance, not the network. Where the history has no curve, said.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ..results.events import MPI_KINDS, REGION, Events
from ..results.model import WARN, Finding

MIN_SHARE = 0.05
IMBALANCE = 1.2          # a phase's max/mean compute time from which it is said: 20% over the mean
MAX_SITES = 16
MAX_WINDOWS = 20
COVERED = 0.5            # a wait at least half inside an I/O finding's windows is that finding's time
NXN = frozenset({"MPI_Allreduce", "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall", "MPI_Alltoallv",
                 "MPI_Alltoallw", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block"})
BLOCKING_RECV = frozenset({"MPI_Recv"})
# sends that may block until the receive is posted (MPI_Bsend copies, never waits)
BLOCKING_SEND = frozenset({"MPI_Send", "MPI_Ssend", "MPI_Rsend"})
SENDS = frozenset({"MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Isend", "MPI_Issend", "MPI_Ibsend",
                   "MPI_Irsend", "MPI_Sendrecv", "MPI_Sendrecv_replace"})
RECVS = frozenset({"MPI_Recv", "MPI_Irecv"})


@dataclass
class NetworkCeilings:
    """This node's ping-pong curve (history: ``ceiling bench network``), None unknown."""
    latency_us: Optional[float] = None      # one-way time of a small message, µs
    bandwidth_mbs: Optional[float] = None   # the ping-pong bandwidth plateau, MB/s
    source: str = ""

    def message_us(self, nbytes: float) -> Optional[float]:
        """A message of nbytes on the curve: latency + size / bandwidth (µs); None unknown."""
        if self.latency_us is None:
            return None
        return self.latency_us + (nbytes / self.bandwidth_mbs if self.bandwidth_mbs else 0.0)


@dataclass
class Call:
    """One MPI call of a rank, as the wait states read it."""
    rank: int
    fn: str           # without MPI 4's _c
    ts: int           # ns since the trace's start
    dur: int
    peer: int
    tag: int
    comm: int
    nbytes: int


@dataclass
class Wait:
    """One wait state: who lost time where, from when."""
    pattern: str      # late_sender | late_receiver | barrier | nxn
    rank: int
    fn: str
    comm: int
    peer: int         # the partner (late sender / receiver), else -1
    start_ns: int
    lost_ns: int
    nbytes: int = 0
    instance: int = -1    # a collective's instance on its communicator


@dataclass
class Phase:
    """A phase: between instances k and k+1 of the collectives on a communicator, or a user region's
    k-th instance; each rank's compute time in it (ns)."""
    what: str                   # "between MPI_Barrier #3 and #4 on MPI_COMM_WORLD" / "region 'solve' #2"
    start_ns: int
    end_ns: int
    compute_ns: Dict[int, int] = field(default_factory=dict)
    comm: int = -1
    closes: int = -1            # the collective instance that ends it, -1 for a region
    waited_ns: Optional[int] = None     # the members' waits at that collective (set by wait_findings)

    @property
    def imbalance(self) -> float:
        v = list(self.compute_ns.values())
        mean = sum(v) / len(v) if v else 0.0
        return max(v) / mean if mean > 0 else 1.0

    @property
    def lost_ns(self) -> int:
        """What the imbalance cost: the waits at the collective that closes it (a phase whose
        imbalance was already waited for inside it, a late sender's, costs nothing there), or for a
        region the others' time short of the slowest."""
        if self.waited_ns is not None:
            return self.waited_ns
        v = list(self.compute_ns.values())
        return sum(max(v) - x for x in v) if v else 0


def _fn(name: str) -> str:
    return name[:-2] if name.endswith("_c") else name


def mpi_calls(chunks: Iterable[Events]) -> Tuple[List[Call], List[Tuple[int, str, int, int]], Tuple[int, int], list]:
    """(the ranks' MPI calls by start, their regions (rank, name, ts, end), the ranks' span (ns), comm names)."""
    calls: List[Call] = []
    regions: List[Tuple[int, str, int, int]] = []
    lo, hi, comms = None, None, []
    for ev in chunks:
        ev = ev.select((ev.rank >= 0) & (ev.dur >= 0))
        if not len(ev):
            continue
        comms = ev.comms
        a, b = int(ev.ts.min()), int((ev.ts + ev.dur).max())
        lo, hi = (a, b) if lo is None else (min(lo, a), max(hi, b))
        names = [c.fn for c in ev.calls]
        mpi = np.flatnonzero(np.isin(ev.kind, MPI_KINDS))
        for i in mpi.tolist():
            c = int(ev.call[i])
            calls.append(Call(int(ev.rank[i]), _fn(names[c]) if c < len(names) else "?", int(ev.ts[i]),
                              int(ev.dur[i]), int(ev.peer[i]), int(ev.tag[i]), int(ev.comm[i]), int(ev.nbytes[i])))
        for i in np.flatnonzero(ev.kind == REGION).tolist():
            c = int(ev.call[i])
            name = ev.regions[c] if c < len(ev.regions) else f"region {c}"
            regions.append((int(ev.rank[i]), name, int(ev.ts[i]), int(ev.ts[i] + ev.dur[i])))
    calls.sort(key=lambda c: (c.ts, c.rank))
    return calls, regions, (lo or 0, hi or 0), list(comms)


def p2p_waits(calls: Sequence[Call]) -> Tuple[List[Wait], int]:
    """Late senders and late receivers of the paired messages, and how many messages were not paired."""
    sends: Dict[Tuple[int, int, int, int], List[Call]] = {}
    recvs: Dict[Tuple[int, int, int, int], List[Call]] = {}
    waits: Dict[Tuple[int, int, int, int], List[Call]] = {}     # MPI_Waits that name the receive they completed
    unpaired = 0
    for c in calls:
        if c.fn in SENDS and c.peer >= 0 and c.tag >= 0 and c.comm >= 0:
            sends.setdefault((c.comm, c.rank, c.peer, c.tag), []).append(c)
        elif c.fn in RECVS and c.peer >= 0 and c.tag >= 0 and c.comm >= 0:
            recvs.setdefault((c.comm, c.peer, c.rank, c.tag), []).append(c)
        elif c.fn == "MPI_Wait" and c.peer >= 0 and c.tag >= 0 and c.comm >= 0:
            waits.setdefault((c.comm, c.peer, c.rank, c.tag), []).append(c)
        elif c.fn in SENDS or c.fn in RECVS:
            unpaired += 1
    out: List[Wait] = []
    for key in set(sends) | set(recvs):
        s, r = sends.get(key, []), recvs.get(key, [])
        if len(s) != len(r):
            unpaired += len(s) + len(r)
            continue
        # the k-th MPI_Wait naming this channel completes its k-th MPI_Irecv (the interposer names only the wait
        # of a receive posted from a rank with a tag: a channel's posts complete in their order)
        w = iter(waits.get(key, []))
        for snd, rcv in zip(s, r):
            done = next(w, None) if rcv.fn == "MPI_Irecv" else None
            if done is not None and done.ts < rcv.ts:
                done = None                                     # not its wait: the recording lost one
            if rcv.fn in BLOCKING_RECV or done is not None:
                at = rcv if done is None else done
                lost = min(snd.ts - at.ts, at.dur)
                if lost > 0:
                    out.append(Wait("late_sender", at.rank, at.fn, at.comm, snd.rank, at.ts, lost,
                                    max(snd.nbytes, 0)))
            if snd.fn in BLOCKING_SEND and rcv.ts > snd.ts:
                lost = min(rcv.ts - snd.ts, snd.dur)
                if lost > 0:
                    out.append(Wait("late_receiver", snd.rank, snd.fn, snd.comm, rcv.rank, snd.ts, lost,
                                    max(snd.nbytes, 0)))
    return out, unpaired


def collective_instances(calls: Sequence[Call]) -> Dict[int, List[Dict[int, Call]]]:
    """comm -> its blocking collectives' instances in order, each {rank: its call}; an instance whose
    members called different functions (a program that does not call them in one order, or calls
    the trace lost) ends that communicator's list."""
    per: Dict[int, Dict[int, List[Call]]] = {}
    for c in calls:
        if c.comm >= 0 and c.fn in COLLECTIVES:
            per.setdefault(c.comm, {}).setdefault(c.rank, []).append(c)
    out: Dict[int, List[Dict[int, Call]]] = {}
    for comm, ranks in per.items():
        n = min(len(v) for v in ranks.values())
        inst = []
        for k in range(n):
            one = {r: v[k] for r, v in ranks.items()}
            if len({c.fn for c in one.values()}) != 1:
                break
            inst.append(one)
        out[comm] = inst
    return out


COLLECTIVES = frozenset({"MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Gather", "MPI_Gatherv", "MPI_Scatter",
                         "MPI_Scatterv", "MPI_Scan", "MPI_Exscan"}) | NXN


def collective_waits(instances: Dict[int, List[Dict[int, Call]]], every: bool = False) -> List[Wait]:
    """Wait at barrier and at N x N: each member's enter to the last member's enter, at most its time in it;
    with ``every``, the same of the other collectives too (pattern "": what closes a phase)."""
    out = []
    for comm, inst in instances.items():
        for k, one in enumerate(inst):
            fn = next(iter(one.values())).fn
            pattern = "barrier" if fn == "MPI_Barrier" else "nxn" if fn in NXN else ""
            if (not pattern and not every) or len(one) < 2:
                continue
            last = max(c.ts for c in one.values())
            for r, c in one.items():
                lost = min(last - c.ts, c.dur)
                if lost > 0:
                    out.append(Wait(pattern, r, fn, comm, -1, c.ts, lost, max(c.nbytes, 0), k))
    return out


def _mpi_time(calls_of: Dict[int, Tuple[np.ndarray, np.ndarray]], rank: int, lo: int, hi: int) -> int:
    """A rank's time in MPI calls within [lo, hi) (calls starting there, clipped at hi)."""
    ts, end = calls_of.get(rank, (np.empty(0, np.int64), np.empty(0, np.int64)))
    a, b = np.searchsorted(ts, lo), np.searchsorted(ts, hi)
    return int(np.sum(np.minimum(end[a:b], hi) - ts[a:b])) if b > a else 0


def phases(calls: Sequence[Call], instances: Dict[int, List[Dict[int, Call]]],
           regions: Sequence[Tuple[int, str, int, int]], comm_names: Sequence) -> List[Phase]:
    """The phases between consecutive collectives on each communicator, and the user regions' instances."""
    by_rank: Dict[int, List[Call]] = {}
    for c in calls:
        by_rank.setdefault(c.rank, []).append(c)
    calls_of = {}
    for r, v in by_rank.items():
        v = sorted(v, key=lambda c: c.ts)
        calls_of[r] = (np.array([c.ts for c in v], np.int64), np.array([c.ts + c.dur for c in v], np.int64))
    out: List[Phase] = []
    for comm, inst in instances.items():
        name = _comm_name(comm, comm_names)
        for k in range(len(inst) - 1):
            a, b = inst[k], inst[k + 1]
            fa, fb = next(iter(a.values())).fn, next(iter(b.values())).fn
            p = Phase(f"between {fa} #{k + 1} and {fb} #{k + 2} on {name}",
                      min(c.ts + c.dur for c in a.values()), max(c.ts for c in b.values()), comm=comm, closes=k + 1)
            for r in a:
                lo, hi = a[r].ts + a[r].dur, b[r].ts
                p.compute_ns[r] = max(0, hi - lo - _mpi_time(calls_of, r, lo, hi))
            out.append(p)
    inst_of: Dict[Tuple[str, int], List[Tuple[int, int]]] = {}
    for r, name, ts, end in sorted(regions, key=lambda x: x[2]):
        inst_of.setdefault((name, r), []).append((ts, end))
    names = sorted({n for n, _ in inst_of})
    for name in names:
        ranks = {r: v for (n, r), v in inst_of.items() if n == name}
        if len(ranks) < 2:
            continue
        for k in range(min(len(v) for v in ranks.values())):
            p = Phase(f"region '{name}' #{k + 1}", min(v[k][0] for v in ranks.values()),
                      max(v[k][1] for v in ranks.values()))
            for r, v in ranks.items():
                ts, end = v[k]
                p.compute_ns[r] = max(0, end - ts - _mpi_time(calls_of, r, ts, end))
            out.append(p)
    return out


def _comm_name(comm: int, comm_names: Sequence) -> str:
    return comm_names[comm].name if 0 <= comm < len(comm_names) else f"communicator {comm}"


def _merge(windows: List[Tuple[int, int]]) -> List[List[float]]:
    out: List[List[int]] = []
    for a, b in sorted(windows):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [[a / 1e9, b / 1e9] for a, b in out]


TITLES = {
    "late_sender": ("Late sender", "receives waited for a send that had not begun"),
    "late_receiver": ("Late receiver", "sends waited for their receive to be posted"),
    "barrier": ("Wait at barrier", "ranks waited in MPI_Barrier for the last rank to enter"),
    "nxn": ("Wait at N x N collective", "ranks waited in an all-to-all collective for the last rank to enter"),
}


def _against(pattern: str, waits: Sequence[Wait], net: NetworkCeilings, members: int) -> Tuple[str, dict]:
    """The waits set against this node's ping-pong curve: (words, data)."""
    if net.latency_us is None:
        return ("; this node's MPI latency and bandwidth are unknown (no `mpirun -n 2 ceiling bench network` in "
                "the history): the waits cannot be set against the network", {"network_us": None})
    mean_lost_us = sum(w.lost_ns for w in waits) / len(waits) / 1e3
    if pattern in ("late_sender", "late_receiver"):
        nbytes = float(np.median([w.nbytes for w in waits]))
        expect = net.message_us(nbytes)
        what = f"a message of {nbytes:.0f} bytes takes {expect:.3g} µs on this node's ping-pong curve"
    else:
        steps = max(1, int(np.ceil(np.log2(max(members, 2)))))
        expect = steps * net.message_us(float(np.median([w.nbytes for w in waits])))
        what = (f"{steps} message step(s) of the collective take {expect:.3g} µs on this node's ping-pong curve")
    ratio = mean_lost_us / expect if expect else None
    verdict = (": the waits are the partner's lateness (imbalance), not the network" if ratio and ratio >= 3 else
               ": the waits are of the network's order")
    return (f"; {what} ({net.source}), each wait is {mean_lost_us:.4g} µs on average, {ratio:.3g}x it{verdict}",
            {"network_us": expect, "wait_over_network": ratio})


def _finding(pattern: str, waits: List[Wait], net: NetworkCeilings, comm_names: Sequence, members: int) -> Finding:
    title, what = TITLES[pattern]
    sites: Dict[Tuple[int, str, int, int], List[Wait]] = {}
    for w in waits:
        sites.setdefault((w.rank, w.fn, w.comm, w.peer), []).append(w)
    rows = []
    for (rank, fn, comm, peer), ws in sites.items():
        rows.append({"rank": rank, "call": fn, "comm": _comm_name(comm, comm_names), "peer": peer,
                     "count": len(ws), "time_lost_s": sum(w.lost_ns for w in ws) / 1e9,
                     "start_s": min(w.start_ns for w in ws) / 1e9,
                     "end_s": max(w.start_ns + w.lost_ns for w in ws) / 1e9})
    rows.sort(key=lambda r: -r["time_lost_s"])
    lost = sum(w.lost_ns for w in waits) / 1e9
    windows = _merge([(w.start_ns, w.start_ns + w.lost_ns) for w in waits])
    words, tie = _against(pattern, waits, net, members)
    top = rows[0]
    site = f"rank {top['rank']} in {top['call']} on {top['comm']}" + (
        f" from rank {top['peer']}" if pattern == "late_sender" else f" to rank {top['peer']}"
        if pattern == "late_receiver" else "")
    why = {"late_sender": "A receive that waits for its sender is the sender's work arriving late: the time is "
                          "load imbalance (or a serial step on the sender), not communication.",
           "late_receiver": "A synchronous (or rendezvous) send cannot finish before its receive is posted: the "
                            "sender idles while the receiver works.",
           "barrier": "Every rank waits at a barrier for the slowest one: the time is the imbalance before it.",
           "nxn": "An all-to-all collective cannot finish before every rank has entered: the early ones wait for "
                  "the last."}[pattern]
    fix = {"late_sender": "Balance the work before the send, post the receive later (MPI_Irecv early, MPI_Wait "
                          "late) and compute meanwhile, or send earlier.",
           "late_receiver": "Post the receive earlier (MPI_Irecv), or send with MPI_Isend and complete later; "
                            "MPI_Ssend only where the handshake is needed.",
           "barrier": "Remove the barrier if nothing needs it; balance the work before it.",
           "nxn": "Balance the work before the collective, or overlap it (MPI_Iallreduce ... MPI_Wait)."}[pattern]
    return Finding(
        id=f"trace.mpi.{pattern}", status=WARN,
        title=f"{title}: {lost:.3g} s lost in {len(waits)} call(s), most by {site}",
        evidence=f"{what}: {len(rows)} rank/call site(s), first window {windows[0][0]:.3g}-{windows[0][1]:.3g} s, "
                 f"the largest {top['time_lost_s']:.3g} s ({top['count']} call(s), {top['start_s']:.3g}-"
                 f"{top['end_s']:.3g} s){words}. By rank and call site (the call and communicator: the recording "
                 f"keeps no caller address): {site_lines(rows, pattern)}",
        why=why, fix=fix,
        data=dict(start_s=windows[0][0], end_s=windows[-1][1], windows=windows[:MAX_WINDOWS], time_lost_s=lost,
                  calls=len(waits), sites=rows[:MAX_SITES], **tie))


def site_lines(rows: Sequence[dict], pattern: str, most: int = 4) -> str:
    """The largest rows as one line each, joined: "rank 1 MPI_Recv on MPI_COMM_WORLD from rank 0: 0.3 s ..."."""
    words = []
    for r in rows[:most]:
        peer = (f" from rank {r['peer']}" if pattern == "late_sender" else f" to rank {r['peer']}"
                if pattern == "late_receiver" else "")
        words.append(f"rank {r['rank']} {r['call']} on {r['comm']}{peer}: {r['time_lost_s']:.3g} s in {r['count']} "
                     f"call(s), {r['start_s']:.4g}-{r['end_s']:.4g} s")
    more = f"; and {len(rows) - most} more" if len(rows) > most else ""
    return "; ".join(words) + more


def _phase_finding(said: List[Phase], comm_names: Sequence, net: NetworkCeilings) -> Finding:
    worst = max(said, key=lambda p: p.lost_ns)
    lost = sum(p.lost_ns for p in said) / 1e9
    slow = max(worst.compute_ns, key=worst.compute_ns.get)
    rows = [{"phase": p.what, "start_s": p.start_ns / 1e9, "end_s": p.end_ns / 1e9, "imbalance": p.imbalance,
             "time_lost_s": p.lost_ns / 1e9, "slowest_rank": max(p.compute_ns, key=p.compute_ns.get),
             "compute_s": {str(r): v / 1e9 for r, v in sorted(p.compute_ns.items())}} for p in said]
    windows = _merge([(p.start_ns, p.end_ns) for p in said])
    net_words = (f"; this node's MPI latency is {net.latency_us:.3g} µs ({net.source}): the waits are the compute "
                 "imbalance, not the network" if net.latency_us is not None else
                 "; this node's MPI latency is unknown (no `mpirun -n 2 ceiling bench network` in the history)")
    return Finding(
        id="trace.mpi.phase_imbalance", status=WARN,
        title=f"Imbalanced phase(s): {lost:.3g} s lost; the most in {worst.what} "
              f"(max/mean compute {worst.imbalance:.3g}, rank {slow} the slowest)",
        evidence=f"{len(said)} phase(s) lose {MIN_SHARE:.0%} of the run or more with a compute imbalance of "
                 f"{IMBALANCE:g} or more; {worst.what}: {worst.start_ns / 1e9:.3g}-{worst.end_ns / 1e9:.3g} s, "
                 f"rank {slow} computes {worst.compute_ns[slow] / 1e9:.3g} s, the mean "
                 f"{sum(worst.compute_ns.values()) / len(worst.compute_ns) / 1e9:.3g} s; the waits at the "
                 f"collective that closes it are this imbalance (not said again){net_words}. Phases said: "
                 + "; ".join(f"{r['phase']}, {r['start_s']:.4g}-{r['end_s']:.4g} s, max/mean {r['imbalance']:.3g}, "
                             f"{r['time_lost_s']:.3g} s lost, rank {r['slowest_rank']} the slowest" for r in rows[:4])
                 + (f"; and {len(rows) - 4} more" if len(rows) > 4 else ""),
        why="In a phase that ends in a collective, every rank waits for the slowest: the imbalance is time lost "
            "on every other rank.",
        fix="Balance the work of that phase across the ranks (domain decomposition, dynamic load balancing), or "
            "give the slowest rank less.",
        data=dict(start_s=windows[0][0], end_s=windows[-1][1], windows=windows[:MAX_WINDOWS], time_lost_s=lost,
                  worst=worst.what, imbalance=worst.imbalance, phases=rows[:MAX_SITES]))


def wait_findings(chunks: Iterable[Events], net: Optional[NetworkCeilings] = None,
                  said_before: Sequence[Finding] = ()) -> List[Finding]:
    """Every wait state and imbalanced phase the trace shows, each with its windows and time lost; [] on a
    clean run or one without MPI. ``said_before``: the I/O findings of the same time line
    (trace_patterns): a wait or phase mostly (``COVERED``) inside their windows is their time (the
    others' wait for a single writer), said once, there."""
    net = net or NetworkCeilings()
    before = [(a * 1e9, b * 1e9) for f in said_before for a, b in (f.data or {}).get("windows", ())]

    def fresh(a: int, b: int) -> bool:
        inside = sum(max(0.0, min(b, y) - max(a, x)) for x, y in before)
        return b <= a or inside < COVERED * (b - a)

    calls, regions, (lo, hi), comm_names = mpi_calls(chunks)
    if not calls and not regions:
        return []
    floor = MIN_SHARE * (hi - lo)
    instances = collective_instances(calls)
    found: List[Finding] = []
    coll = collective_waits(instances, every=True)
    at: Dict[Tuple[int, int], int] = {}
    for w in coll:
        at[(w.comm, w.instance)] = at.get((w.comm, w.instance), 0) + w.lost_ns
    every = phases(calls, instances, regions, comm_names)
    for p in every:
        if p.closes >= 0:
            p.waited_ns = at.get((p.comm, p.closes), 0)
    said = [p for p in every if p.lost_ns >= floor and p.imbalance >= IMBALANCE and fresh(p.start_ns, p.end_ns)]
    explained = {(p.comm, p.closes) for p in said if p.closes >= 0}
    waits, _unpaired = p2p_waits(calls)
    waits += [w for w in coll if w.pattern and (w.comm, w.instance) not in explained]
    waits = [w for w in waits if fresh(w.start_ns, w.start_ns + w.lost_ns)]
    for pattern in ("late_sender", "late_receiver", "barrier", "nxn"):
        ws = [w for w in waits if w.pattern == pattern]
        if ws and sum(w.lost_ns for w in ws) >= floor:
            members = max((len(i[0]) for c, i in instances.items() if i), default=2)
            found.append(_finding(pattern, ws, net, comm_names, members))
    if said:
        found.append(_phase_finding(said, comm_names, net))
    return found


def network_ceilings(history) -> NetworkCeilings:
    """This node's ping-pong latency (the lowest) and bandwidth (the highest) of the newest run that
    measured them (history(prefix) -> rows (name, value, unit, when, run))."""
    from .profile_ceilings import TO_MBS, _best
    lat = _best(history("net.pingpong.latency."), lowest=True)
    bw = _best(history("net.pingpong.bandwidth."))
    if lat is None:
        return NetworkCeilings()
    mbs = bw[1] * TO_MBS.get(bw[2], 0.0) if bw is not None and bw[2] in TO_MBS else None
    return NetworkCeilings(float(lat[1]), mbs, f"{lat[0]} = {lat[1]:.3g} {lat[2]}, measured {str(lat[3])[:10]}"
                           " (ceiling bench network)")


__all__ = ["NetworkCeilings", "wait_findings", "network_ceilings", "p2p_waits", "collective_waits", "phases",
           "mpi_calls"]
