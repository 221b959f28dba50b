"""Deadlines for every MPI wait: a rank that stops answering ends the job with
its name, and what was measured before it is kept.

An MPI call has no timeout: when one rank stops (SIGSTOP, a debugger, a node
that hangs, a file system that never answers), every other rank waits in its
next collective, spinning at 100% of a CPU, until someone kills the job. So
every wait of ceiling's ranks is watched:

- ``waiting(what, seconds)`` arms a deadline around a wait (a timed C loop,
  an agreement point, a Python collective through ``wrap``'s communicator).
  The deadline is sized from the work the wait covers (``allowance``: a
  floor, plus a pessimistic time per message and per byte), or is
  ``--node-timeout`` when the user gives one. An inner wait of a thread
  already waiting does not shorten the outer one.
- One thread per rank, ``Watchdog``, makes no MPI call until the job ends.
  It wakes about once a second (nothing while no deadline is near).
- A rank other than 0 whose deadline passes reports it to rank 0 on a side
  channel (UDP, one datagram per report; rank 0's address, a key and a job
  nonce were exchanged over MPI when the job started) and keeps waiting: the
  call may still return, and it says so. Every datagram, the acknowledgement
  too, carries an HMAC under the key and a sequence number (channel.py);
  one that fails either is dropped, counted, and never acted on: rank 0
  says the count (a finding, and in the line that ends a job).
- When rank 0's own deadline passes, it collects the reports for a few
  seconds (``GRACE_S``). The ranks that did not report are the ones that
  stopped answering; for those on rank 0's host /proc/PID/stat says how
  (stopped, in uninterruptible I/O, gone). Rank 0 then delivers what was
  measured, marked partial with that reason (``rescue``, from this thread:
  the main thread is blocked in MPI and stays so), prints one line naming
  the ranks and nodes, and ends the job with MPI_Abort and exit code 11
  (a second after the line, so that the launcher passes it on before its kill).
- When rank 0 itself is the one that stopped, nothing can be saved (rank 0
  holds the results). A rank whose report is not acknowledged waits
  up to ``ROOT_WAIT_S`` more for rank 0 to end the job itself; then rank 1 prints
  the line naming rank 0, and every waiting rank aborts.
- When rank 0 is busy with its own work (not waiting) while others report,
  and stays so for ``ROOT_WAIT_S``, it is the slow rank: it says so and
  ends the job without saving (its results are mid-update).

The side channel is IPv4 UDP to the addresses rank 0's host has (the
loopback for ranks on its host); rank 0 listens on those addresses only, one
socket each, not on every address. Where a firewall drops it, rank 0 cannot
tell waiting ranks from stopped ones and names every other rank as not
answering; the job still ends, and what was measured is still kept.

Longer than 500 lines: the deadlines, the side channel and the job's end are
one protocol (a report, its acknowledgement, the abort) whose parts share the
rank's state; split, each half would have to export that state to the other.
"""
from __future__ import annotations

import contextlib
import os
import select
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import StalledError
from .channel import MAX_DATAGRAM, Channel, new_secret

FLOOR_S = 120.0          # no wait is given up sooner by default
SETUP_S = 300.0          # gathering the ranks' facts and compiling the timing loops
PER_MESSAGE_S = 0.01     # a message on an oversubscribed CPU (a scheduler time slice)
MIN_RATE = 10e6          # bytes/s: slower than any fabric or file system worth measuring
GRACE_S = 3.0            # rank 0 collects the others' reports this long after its own deadline
ROOT_WAIT_S = 30.0       # a rank waits this long for rank 0 to end the job after its own deadline
ACK_S = 3.0              # a report is resent each second until rank 0 acknowledges it, this long
TICK_S = 1.0             # the watchdog thread's wake-up
LINGER_S = 1.0           # between the line and MPI_Abort: the launcher forwards the line before its kill


def allowance(messages: float = 0, nbytes: float = 0, floor: float = FLOOR_S) -> float:
    """Seconds a wait covering ``messages`` messages and ``nbytes`` bytes may take before it
    counts as stalled: generous (a floor, 10 ms per message, 10 MB/s) so that only a rank
    that stopped answering, not a slow or shared machine, ever meets it."""
    return floor + messages * PER_MESSAGE_S + nbytes / MIN_RATE


def process_state(pid: int) -> str:
    """How a process on this host is, in words, from /proc/PID/stat ("" when it is running normally)."""
    from ..sysfs import stat_fields
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = stat_fields(f.read(4096))
    except (OSError, ValueError):
        return "gone: the process has exited"
    state = fields[0].decode(errors="replace") if fields else "?"
    return {"T": "stopped by SIGSTOP or a debugger", "t": "stopped by a debugger",
            "D": "in uninterruptible sleep: I/O that does not complete", "Z": "exited, a zombie",
            "X": "exited"}.get(state, "")


def local_addresses() -> List[str]:
    """This host's IPv4 addresses other than the loopback, from /proc/net/fib_trie."""
    found: List[str] = []
    try:
        with open("/proc/net/fib_trie") as f:
            lines = f.read(1 << 20).splitlines()
    except OSError:
        lines = []
    for prev, line in zip(lines, lines[1:]):
        if "/32 host LOCAL" in line:
            addr = prev.strip().lstrip("|-+` ").strip()
            if addr and not addr.startswith("127.") and addr not in found:
                found.append(addr)
    try:
        for addr in socket.gethostbyname_ex(socket.gethostname())[2]:
            if not addr.startswith("127.") and addr not in found:
                found.append(addr)
    except OSError:
        pass
    return found[:16]


@dataclass
class _Arm:
    what: str
    seconds: float
    deadline: float
    peers: Tuple[int, ...]
    reported: bool = False


@dataclass
class _Rank:
    node: str
    host: str
    pid: int


@dataclass
class Watchdog:
    """One rank's watch over its MPI waits (see the module doc). Made collectively by ``start``."""

    rank: int
    size: int
    ranks: List[_Rank]
    sock: Optional[socket.socket]
    targets: List[Tuple[str, int]] = field(default_factory=list)     # rank 0's address(es), from a non-root rank
    timeout: Optional[float] = None          # --node-timeout: every deadline, when given
    rescue: Optional[Callable[[str], Optional[str]]] = None   # rank 0: deliver what was measured, marked
    #                                                           partial; may return a better line to print
    abort: Optional[Callable[[int], None]] = None     # ends the job (MPI_Abort); os._exit when unset
    phase: str = ""                          # what the ranks are doing, for the message
    default_s: float = FLOOR_S               # a wait's deadline when the caller gives none (a Python collective)
    channel: Optional[Channel] = None        # the job's key: what is sent is sealed, what arrives checked
    listening: List[socket.socket] = field(default_factory=list)   # rank 0: one socket per address it gave

    def __post_init__(self) -> None:
        if self.channel is None:
            self.channel = Channel(*new_secret(), self.rank)
        self._cv = threading.Condition()
        self._arms: Dict[int, _Arm] = {}
        self._next = 0
        self._local = threading.local()
        self._holders: List[Callable[[], Any]] = []
        self._cleanups: List[Callable[[], None]] = []
        self._reports: Dict[int, Tuple[str, float]] = {}     # rank -> (what it waits in, when it said so)
        self._ending = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ceiling-watchdog", daemon=True)

    # -- the main thread's side -----------------------------------------------------
    @contextlib.contextmanager
    def waiting(self, what: str, seconds: Optional[float] = None, peers: Sequence[int] = ()) -> Iterator[None]:
        """Arm a deadline around a wait for other ranks (see the module doc)."""
        if getattr(self._local, "armed", False):
            yield                       # the outer wait's deadline governs
            return
        limit = self.timeout if self.timeout else (seconds if seconds is not None else self.default_s)
        label = f"{self.phase}: {what}" if self.phase and what else (what or self.phase or "an MPI call")
        arm = _Arm(label, limit, time.monotonic() + limit, tuple(peers))
        with self._cv:
            key = self._next
            self._next += 1
            self._arms[key] = arm
        self._local.armed = True
        try:
            yield
        finally:
            self._local.armed = False
            with self._cv:
                del self._arms[key]
            if self._ending.is_set() and self.rank == 0:
                threading.Event().wait()    # the watchdog is saving the run and ends the job
            if arm.reported:
                self._send({"t": "resumed"})

    @contextlib.contextmanager
    def holding(self, snapshot: Callable[[], Any]) -> Iterator[None]:
        """While inside, ``snapshot()`` gives what the running step has measured (rank 0's rescue)."""
        self._holders.append(snapshot)
        try:
            yield
        finally:
            self._holders.remove(snapshot)

    @contextlib.contextmanager
    def cleaning(self, fn: Callable[[], None]) -> Iterator[None]:
        """While inside, ``fn()`` runs if this rank ends the job (a run directory to remove)."""
        self._cleanups.append(fn)
        try:
            yield
        finally:
            self._cleanups.remove(fn)

    def held(self) -> List[Any]:
        """What the running steps have measured so far (their snapshots, outermost first)."""
        return [s() for s in list(self._holders)]

    # -- the thread -----------------------------------------------------------------
    def _loop(self) -> None:
        try:
            self._watch()
        except Exception as e:      # noqa: BLE001 - a watchdog that died would let the job hang
            self._say(f"the MPI watchdog failed ({type(e).__name__}: {e}); ending the job")
            self._end()

    def _watch(self) -> None:
        while not self._ending.is_set():
            due = self._due()
            now = time.monotonic()
            if due is not None and due.deadline <= now:
                if self.rank == 0:
                    self._end_job(due)
                    return
                self._report(due)
                continue
            wait = TICK_S if due is None else min(TICK_S, due.deadline - now)
            if self.rank == 0:
                self._listen(wait)
                self._check_root_busy()
            else:
                with self._cv:
                    self._cv.wait(wait)

    def _due(self) -> Optional[_Arm]:
        with self._cv:
            live = [a for a in self._arms.values() if not a.reported]
        return min(live, key=lambda a: a.deadline) if live else None

    def _listen(self, wait: float) -> None:
        """Rank 0: read reports for up to ``wait`` seconds, acknowledging each."""
        end = time.monotonic() + max(0.0, wait)
        socks = self.listening or [self.sock]
        while True:
            left = end - time.monotonic()
            try:
                ready, _, _ = select.select(socks, [], [], max(0.0, left))
            except (OSError, ValueError, TypeError):
                return
            if not ready:
                return
            for sock in ready:
                try:
                    data, addr = sock.recvfrom(MAX_DATAGRAM + 1)
                except OSError:
                    continue
                got = self.channel.open(data, range(1, self.size))     # type: ignore[union-attr]
                if got is None:
                    continue            # not from a rank of this job: counted, not acted on
                r, seq, msg = got
                if msg["t"] == "stall":
                    self._reports.setdefault(r, (str(msg.get("what", ""))[:200], time.monotonic()))
                    ack, _ = self.channel.seal({"t": "ack", "to": r, "re": seq})     # type: ignore[union-attr]
                    with contextlib.suppress(OSError):
                        sock.sendto(ack, addr)
                elif msg["t"] == "resumed":
                    self._reports.pop(r, None)
            if time.monotonic() >= end:
                return          # a flood keeps the sockets ready: the deadlines still come first

    def _check_root_busy(self) -> None:
        """Rank 0, not waiting, while others have waited for it past their deadlines."""
        if not self._reports or self._due() is not None:
            return
        first = min(t for _, t in self._reports.values())
        if time.monotonic() - first < ROOT_WAIT_S:
            return
        self._ending.set()
        n = len(self._reports)
        what = next(iter(self._reports.values()))[0]
        self._say(f"rank 0 ({self._where(0)}) is still busy with its own work while {n} other rank"
                  f"{'s' if n > 1 else ''} waited for it past the deadline ({what}); the job ends without "
                  f"saving, as rank 0's results are being changed" + self._dropped_clause())
        self._end()

    def _send(self, msg: Dict[str, Any]) -> int:
        """Send ``msg`` to rank 0, sealed; its sequence number."""
        data, seq = self.channel.seal(msg)     # type: ignore[union-attr]
        for t in self.targets:
            with contextlib.suppress(OSError, AttributeError):
                self.sock.sendto(data, t)     # type: ignore[union-attr]
        return seq

    def _acked(self, wait: float, seqs: Sequence[int]) -> bool:
        """Whether rank 0 acknowledges one of the reports ``seqs`` within ``wait`` seconds; whatever
        else arrives is dropped (counted) and the wait goes on."""
        end = time.monotonic() + wait
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return False
            try:
                ready, _, _ = select.select([self.sock], [], [], left)
                if not ready:
                    return False
                data, _ = self.sock.recvfrom(MAX_DATAGRAM + 1)     # type: ignore[union-attr]
            except (OSError, ValueError, TypeError, AttributeError):
                return False
            got = self.channel.open(data, (0,))     # type: ignore[union-attr]
            if got is not None and got[2]["t"] == "ack" and got[2].get("to") == self.rank \
                    and got[2].get("re") in seqs:
                return True

    def _report(self, arm: _Arm) -> None:
        """A rank other than 0 past its deadline: tell rank 0, and end the job if rank 0 does not."""
        arm.reported = True
        acked = False
        sent: List[int] = []        # each resend is a new datagram: rank 0 drops a copy as a replay
        for _ in range(int(ACK_S)):
            sent.append(self._send({"t": "stall", "what": arm.what[:200]}))
            if self._acked(1.0, sent):
                acked = True
                break
        root_wait = min(ROOT_WAIT_S, max(10.0, arm.seconds))    # rank 0's own deadline, its delivery
        end = time.monotonic() + root_wait + (GRACE_S + 60.0 if acked else 0.0)
        with self._cv:
            while self._still_armed(arm) and time.monotonic() < end:
                self._cv.wait(TICK_S)
            if not self._still_armed(arm):
                return                  # the call returned: the wait was long, not stalled
        self._ending.set()
        if self.rank == 1 and not acked:
            self._say(f"rank 0 ({self._where(0)}) did not answer for {arm.seconds + root_wait:.0f} s while "
                      f"rank 1 waited in {arm.what}; rank 0 holds the results, so nothing could be saved")
        elif acked:
            self._say(f"rank {self.rank}: rank 0 acknowledged the stall but did not end the job; ending it")
        self._end()

    def _still_armed(self, arm: _Arm) -> bool:
        return any(a is arm for a in self._arms.values())

    def _end_job(self, arm: _Arm) -> None:
        """Rank 0 past its own deadline: name the silent ranks, save what was measured, end the job."""
        self._ending.set()
        self._listen(GRACE_S)
        silent = [r for r in range(1, self.size) if r not in self._reports]
        line = self.describe(arm, silent)
        if self.rescue is not None:
            try:
                line = self.rescue(line) or line     # the rescue may know better who is missing
            except BaseException as e:      # noqa: BLE001 - the job must still end
                self._say(f"what was measured could not be saved: {e}")
        self._say(line + self._dropped_clause())
        self._end()

    def _dropped_clause(self) -> str:
        text = self.channel.dropped_text() if self.channel is not None else ""
        return f" ({text})" if text else ""

    def dropped(self) -> Dict[str, int]:
        """Datagrams the side channel dropped as not from this job's ranks, by reason."""
        return self.channel.drops() if self.channel is not None else {}

    def finding(self):
        """Rank 0: a finding saying what the side channel dropped; None when nothing was."""
        from ..results.model import WARN, Finding
        text = self.channel.dropped_text() if self.channel is not None else ""
        if not text or self.rank != 0:
            return None
        where = ", ".join(f"{a}:{p}" for a, p in self.addresses())
        return Finding(
            id="mpi.side_channel.dropped", status=WARN, title=text[0].upper() + text[1:],
            evidence=f"UDP datagrams to rank 0's watchdog ({where}) dropped, by reason: "
                     + ", ".join(f"{r} {c}" for r, c in self.dropped().items()),
            why="Only the job's ranks hold the key their reports are signed with; these came from something "
                "else on the network or this host (another user, a port scanner, a copy of an older "
                "datagram). They were not acted on and the results are not affected.",
            fix="If it repeats, find the sender (ss -uap on rank 0's node, the site's network monitoring); "
                "nothing is needed for this run.",
            data={"dropped": self.dropped(), "addresses": [f"{a}:{p}" for a, p in self.addresses()]})

    def addresses(self) -> List[Tuple[str, int]]:
        """Rank 0: the addresses and ports its side channel listens on."""
        out = []
        for sock in self.listening:
            with contextlib.suppress(OSError):
                out.append(sock.getsockname()[:2])
        return out

    def describe(self, arm: _Arm, silent: List[int]) -> str:
        """The one line naming what stopped, from rank 0's view."""
        waited = f"{arm.seconds:.0f} s"
        if not silent:
            return (f"every rank was still waiting in {arm.what} after {waited}, none of them stopped: "
                    "a deadlock or a lost message in the MPI library or the fabric")
        named = [r for r in arm.peers if r in silent] or silent
        shown = ", ".join(f"rank {r} ({self._where(r)})" for r in named[:8])
        more = f" and {len(named) - 8} more" if len(named) > 8 else ""
        if len(silent) == self.size - 1 and self.size > 2 and not self._reports:
            more += " (no rank reported waiting: the side channel to rank 0 may be blocked)"
        return (f"{shown}{more} did not answer within {waited} (rank 0 was waiting in {arm.what}); "
                "what was measured before is kept, marked partial")

    def ending(self) -> bool:
        """Whether this rank is ending the job (its deadline passed): make no MPI call after."""
        return self._ending.is_set()

    def where(self, r: int) -> str:
        """Rank ``r``'s node and pid, and how its process is when it runs on this host."""
        return self._where(r)

    def _where(self, r: int) -> str:
        me, it = self.ranks[self.rank], self.ranks[r]
        text = f"node {it.node}, pid {it.pid}"
        if it.host == me.host and r != self.rank:
            state = process_state(it.pid)
            if state:
                text += f", {state}"
        return text

    def _say(self, line: str) -> None:
        from ..units import printable
        with contextlib.suppress(OSError, ValueError):
            print(f"ceiling: {printable(line)}", file=sys.stderr, flush=True)

    def _end(self) -> None:
        for fn in list(self._cleanups):
            with contextlib.suppress(Exception):
                fn()
        code = StalledError.exit_code
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        # The line goes through the launcher (Hydra's proxy, Open MPI's prted), which tears
        # the job down when MPI_Abort reaches it, maybe before it has read and passed on what
        # this rank wrote just before: the line naming the stopped rank was lost that way once.
        time.sleep(LINGER_S)
        if self.abort is not None:
            with contextlib.suppress(BaseException):
                self.abort(code)
        os._exit(code)


# -- the one watchdog of this process ---------------------------------------------------

_DOG: Optional[Watchdog] = None


def start(comm, timeout: Optional[float] = None) -> Watchdog:
    """Collective: every rank's watchdog, started, with rank 0's side channel exchanged."""
    global _DOG
    from .gather import node_name
    me = (node_name(), socket.gethostname(), os.getpid())
    ranks = [_Rank(*r) for r in comm.allgather(me)]
    rank = comm.Get_rank()
    listening: List[socket.socket] = []
    offer = None
    if rank == 0:
        # Bound to the addresses the ranks send to, not to every address: the loopback for the
        # ranks on this host, this host's addresses for the ranks on others (they try each).
        near = any(r.host == ranks[0].host for r in ranks[1:])
        far = any(r.host != ranks[0].host for r in ranks[1:])
        loop = _bound("127.0.0.1") if near or not far else None
        remote = [s for s in (_bound(a) for a in local_addresses()) if s is not None] if far else []
        listening = [s for s in [loop, *remote] if s is not None]
        key, nonce = new_secret()
        offer = (key, nonce, loop.getsockname()[1] if loop is not None else 0,
                 [s.getsockname()[:2] for s in remote])
    key, nonce, port, remote_addrs = comm.bcast(offer, root=0)    # the key travels over MPI only
    if rank == 0:
        sock = listening[0] if listening else socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        targets: List[Tuple[str, int]] = []
    elif ranks[rank].host == ranks[0].host:
        sock = _bound("127.0.0.1") or socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        targets = [("127.0.0.1", port)] if port else []
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)     # the route picks its address
        targets = [(a, p) for a, p in remote_addrs]
    dog = Watchdog(rank, comm.Get_size(), ranks, sock, targets, timeout,
                   channel=Channel(key, nonce, rank), listening=listening)
    raw = getattr(comm, "raw", comm)
    dog.abort = lambda code: raw.Abort(code)
    dog._thread.start()
    _DOG = dog
    return dog


def _bound(addr: str) -> Optional[socket.socket]:
    """A UDP socket bound to ``addr`` on a free port; None where that address cannot be bound."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.bind((addr, 0))
    except OSError:
        sock.close()
        return None
    return sock


def stop() -> None:
    """Forget this process's watchdog (its thread ends with the process)."""
    global _DOG
    _DOG = None


def current() -> Optional[Watchdog]:
    return _DOG


@contextlib.contextmanager
def waiting(what: str, seconds: Optional[float] = None, peers: Sequence[int] = ()) -> Iterator[None]:
    """``Watchdog.waiting`` of this process's watchdog; nothing when there is none."""
    if _DOG is None:
        yield
        return
    with _DOG.waiting(what, seconds, peers):
        yield


@contextlib.contextmanager
def holding(snapshot: Callable[[], Any]) -> Iterator[None]:
    if _DOG is None:
        yield
        return
    with _DOG.holding(snapshot):
        yield


@contextlib.contextmanager
def cleaning(fn: Callable[[], None]) -> Iterator[None]:
    if _DOG is None:
        yield
        return
    with _DOG.cleaning(fn):
        yield


def set_phase(text: str) -> None:
    """Name what the ranks are doing from now on (see ``phase``)."""
    if _DOG is not None:
        _DOG.phase = text


@contextlib.contextmanager
def phase(text: str, seconds: Optional[float] = None) -> Iterator[None]:
    """Name what the ranks are doing, for the message of a stall; ``seconds``: the deadline of
    its waits that give none (default FLOOR_S)."""
    if _DOG is None:
        yield
        return
    dog = _DOG
    old = dog.phase, dog.default_s
    dog.phase, dog.default_s = text, seconds if seconds is not None else dog.default_s
    try:
        yield
    finally:
        dog.phase, dog.default_s = old


# Every call that waits for other ranks; the communicator ``wrap`` returns arms a deadline around each.
WAITS = frozenset({
    "allgather", "Allgather", "allreduce", "Allreduce", "bcast", "Bcast", "gather", "Gather", "scatter",
    "Scatter", "reduce", "Reduce", "alltoall", "Alltoall", "barrier", "Barrier", "Split", "Dup",
    "send", "Send", "recv", "Recv", "sendrecv", "Sendrecv", "exscan", "scan"})


class WatchedComm:
    """A communicator whose every waiting call is armed (``WAITS``); all else passes through."""

    def __init__(self, comm):
        self.raw = comm

    def __getattr__(self, name: str):
        attr = getattr(self.raw, name)
        if name not in WAITS or not callable(attr):
            return attr

        def call(*args, **kwargs):
            with waiting(f"MPI {name}"):
                got = attr(*args, **kwargs)
            return WatchedComm(got) if name in ("Split", "Dup") else got
        return call


def wrap(comm):
    """``comm`` with its waits watched, once a watchdog runs; ``comm`` itself before."""
    if _DOG is None or isinstance(comm, WatchedComm):
        return comm
    return WatchedComm(comm)
