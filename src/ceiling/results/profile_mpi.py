"""The application section (profile.py), part two: the program's MPI, per rank and per
call (analysis/profile_mpi.py writes it)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .base import Record
from .profile_run import Shares, Spread


# -- MPI ---------------------------------------------------------------------------

@dataclass
class CallCount(Record):
    """Calls of one kind, their time and bytes."""

    calls: int = 0                 # calls made
    ns: int = 0                    # time inside them, nanoseconds
    bytes: int = 0                 # bytes they moved


@dataclass
class PeerCount(Record):
    """Point-to-point traffic with one peer rank."""

    calls: int = 0                 # calls to or from the peer
    bytes: int = 0                 # bytes exchanged


@dataclass
class MpiRank(Record):
    """One MPI rank of the program."""

    rank: int                      # its rank in MPI_COMM_WORLD
    host: str = ""                 # node it ran on
    pid: Optional[int] = None      # its process id
    run_s: float = 0.0             # from MPI_Init's end to MPI_Finalize's start, seconds
    mpi_s: float = 0.0             # time inside MPI calls in that span, seconds
    groups: Dict[str, float] = field(default_factory=dict)       # seconds by group: p2p, wait, coll, io
    init_s: float = 0.0            # time in MPI_Init, seconds
    finalize_s: Optional[float] = None   # time in MPI_Finalize, seconds; null = not known
    life_s: float = 0.0            # the process's life, seconds
    classes: Dict[str, CallCount] = field(default_factory=dict)  # calls by class (send, recv, coll, ...)
    peers: Dict[str, PeerCount] = field(default_factory=dict)    # traffic by peer rank
    threads: int = 1               # threads of the process
    cpu: Optional[Shares] = None   # its threads' split from its record; null = no thread times


@dataclass
class MpiFunction(Record):
    """One MPI function over every rank."""

    fn: str                        # its name, e.g. "MPI_Allreduce"
    calls: int = 0                 # calls made
    ns: int = 0                    # time inside them, nanoseconds
    bytes: int = 0                 # bytes they moved


@dataclass
class MessageSizes(Record):
    """Calls by message size bucket (analysis/profile_mpi.BUCKETS), every rank summed."""

    hist: List[int] = field(default_factory=list)         # calls per bucket
    hist_ns: List[int] = field(default_factory=list)      # nanoseconds per bucket
    hist_bytes: List[int] = field(default_factory=list)   # bytes per bucket


@dataclass
class LifeShare(Record):
    """Shares of the ranks' lives."""

    mpi: Optional[Spread] = None       # inside MPI calls, fractions over ranks
    startup: Optional[Spread] = None   # in MPI_Init and MPI_Finalize, fractions over ranks


@dataclass
class FinalizeUnknown(Record):
    """Ranks whose MPI_Finalize time is not known."""

    ranks: List[int] = field(default_factory=list)   # the ranks
    why: str = ""                  # why their time is not known


@dataclass
class Mpi(Record):
    """The program's MPI: per rank and per call (analysis/profile_mpi.py)."""

    ranks: int = 0                 # ranks with a record
    size: int = -1                 # MPI_COMM_WORLD's size; -1 = not known
    family: str = ""               # "mpich", "openmpi", ...
    library: str = ""              # MPI_Get_library_version's text
    runtime_s: float = 0.0         # the longest rank's run and finalize, seconds
    share: Optional[Spread] = None            # time inside MPI over each rank's run, fractions
    groups_s: Dict[str, float] = field(default_factory=dict)   # seconds by group over every rank
    life_share: Optional[LifeShare] = None    # shares of the ranks' lives
    startup_s: Optional[Spread] = None        # MPI_Init + MPI_Finalize per rank, seconds
    load_balance: Optional[float] = None      # POP load balance, a fraction
    communication_efficiency: Optional[float] = None   # POP communication efficiency, a fraction
    parallel_efficiency: Optional[float] = None        # POP parallel efficiency, a fraction
    small_message_share: Optional[float] = None        # waiting time due to messages under 16 KiB, a fraction
    per_rank: List[MpiRank] = field(default_factory=list)          # every rank
    functions: List[MpiFunction] = field(default_factory=list)     # every function, by time
    hist: Dict[str, MessageSizes] = field(default_factory=dict)    # by kind: p2p, coll
    finalize_unknown: Optional[FinalizeUnknown] = None             # ranks whose MPI_Finalize time is unknown


