"""The one stop agreement of ranks measuring together.

A rank that stops on its own (an error, Ctrl-C, a scheduler's SIGTERM)
while the others wait for it in a collective would leave them waiting
until the launcher kills them, and nothing measured would be saved. So
every stop is agreed:

- ``agree_max``: the agreement point itself, a MAX-allreduce of one integer
  over every rank (a barrier too). Python calls it between measurements
  (``DeferredStop.agree``: the network bench after every timed call, the CLI
  after its set-up); the storage loops in C call it before each timed phase
  and wherever their threads decide to go on or stop (bench/storage_mpi.py
  passes it to csrc/kernels/io.c as its ``sync`` callback).
- ``DeferredStop``: Ctrl-C and SIGTERM recorded, not raised, until such a
  point; ``on_signal`` lets the running call learn of it (the storage loops
  are asked to stop at their next agreement point).
- ``raise_agreed``: an error on one rank raised on every rank, the first
  failing rank's; ``everywhere`` marks it so only rank 0 prints it.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

from ..errors import CeilingError, CoreError, MPIUnavailableError


def everywhere(e: CeilingError) -> CeilingError:
    """Mark an error every rank raises alike: only rank 0 prints it (cli.main)."""
    e.all_ranks = True          # type: ignore[attr-defined]
    return e


def raise_agreed(comm, err: Optional[BaseException]) -> None:
    """Every rank raises the first failing rank's error (its class and message), or none does."""
    from ..errors import BadValueError, PathError, UsageError
    mine = (type(err).__name__, str(err)) if err is not None else None
    classes = {c.__name__: c for c in (BadValueError, PathError, CoreError, UsageError, MPIUnavailableError)}
    for rank, e in enumerate(comm.allgather(mine)):
        if e is not None:
            msg = e[1] if rank == 0 or e[1].startswith("rank ") else f"rank {rank}: {e[1]}"
            raise everywhere(classes.get(e[0], CeilingError)(msg))


def agree_max(comm, value: int) -> int:
    """Collective: the largest ``value`` of every rank (0 when none stops). Buffers, not
    pickles: the storage loops call it right before starting their clock."""
    import numpy as np
    from mpi4py import MPI
    a = np.array([value], dtype=np.int32)
    b = np.zeros(1, dtype=np.int32)
    comm.Allreduce(a, b, op=MPI.MAX)
    return int(b[0])


class DeferredStop:
    """Ctrl-C and SIGTERM while ranks measure together.

    A rank that raised on the spot would leave the others waiting in the
    collective it left, until the launcher kills them and nothing is saved.
    Inside ``with``, the two signals are only recorded (``on_signal`` is also
    called, from the main thread); ``agree()``, collective, then makes every
    rank raise KeyboardInterrupt at the same point when any rank got one,
    with TERMINATED as its argument for a SIGTERM. A second Ctrl-C raises at
    once, for a rank stuck waiting on a peer that is gone.

    Nested, an inner one joins the outer (the CLI holds one from MPI's start,
    a bench holds its own when called as a library): one record of the
    signal, every ``on_signal`` called.
    """

    def __init__(self, comm, on_signal: Optional[Any] = None):
        self.comm, self.on_signal = comm, on_signal
        self._signum = 0
        self._outer: Optional["DeferredStop"] = None
        self._inner: List["DeferredStop"] = []
        self._old: List[Tuple[int, Any]] = []

    @property
    def signum(self) -> int:
        """The first signal recorded (0: none)."""
        return self._outer.signum if self._outer is not None else self._signum

    @property
    def interrupted(self) -> bool:
        """A signal arrived: the next agreement point stops every rank."""
        return self.signum != 0

    @property
    def stop_reason(self) -> str:
        """The argument of the KeyboardInterrupt a stop raises."""
        return self.reason(self.signum) if self.interrupted else "interrupted"

    def __enter__(self) -> "DeferredStop":
        import signal
        import threading
        if threading.current_thread() is not threading.main_thread():
            return self
        held = signal.getsignal(signal.SIGTERM)
        outer = getattr(held, "__self__", None)
        if isinstance(outer, DeferredStop):
            self._outer = outer
            outer._inner.append(self)
            return self
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old.append((sig, signal.signal(sig, self._record)))
            except (ValueError, OSError):
                pass
        return self

    def __exit__(self, *exc) -> None:
        import signal
        if self._outer is not None:
            self._outer._inner.remove(self)
            self._outer = None
        while self._old:
            signal.signal(*self._old.pop())

    def _record(self, signum, frame) -> None:
        import signal
        if self._signum and signum == signal.SIGINT:     # a second Ctrl-C: the user will not wait
            raise KeyboardInterrupt(self.reason(self._signum))
        self._signum = self._signum or signum
        for d in [self, *self._inner]:
            if d.on_signal is not None:
                d.on_signal()

    @staticmethod
    def reason(signum: int) -> str:
        import signal
        from ..errors import TERMINATED
        return TERMINATED if signum == signal.SIGTERM else "interrupted"

    def agree(self) -> None:
        """Collective: KeyboardInterrupt on every rank when any rank got a signal."""
        got = agree_max(self.comm, self.signum)
        if got:
            raise KeyboardInterrupt(self.reason(got))
