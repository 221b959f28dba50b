"""Storage with several MPI processes: ``mpirun -n N ceiling bench storage --dir DIR``.

Every rank runs the measurements a process alone runs (bench/storage.py),
with its own threads (one per rank unless --threads, IOR's one task per
process), and the ranks make each measurement together:

- Directories. Rank 0 makes the run's ``ceiling-io-*`` directory and leaves a
  token in it. Ranks that cannot read the token (a node-local --dir or
  $TMPDIR) make one directory per node instead, by the first such rank of
  the node. Ranks sharing a directory share its files: one shared file, one
  shared metadata directory; each is a "group" and every group measures at
  the same time. Free space is checked by each group's first rank for what
  the whole group writes.
- Agreement. io.c calls back before each timed phase and wherever its
  threads agree to go on or stop; the callback is the stop agreement's
  MAX-allreduce over every rank (cluster/stop.py): a barrier, and an error
  on one rank (a full disk) stops all of them at the same point, so none
  waits forever. The error reported is the first failing rank's, on every
  rank.
- Figures. Each rank's phase runs from the common start to its own end; the
  phase's time is the longest of them (IOR: first start to last end), its
  amount the sum over ranks; latency samples are pooled (about 64 Ki per
  phase in all); a read is valid when every rank's data checked.
- Page cache. As alone (O_DIRECT or fadvise, checked with mincore), and with
  ranks on several nodes each rank reads back what the rank of the same
  local index on the next node wrote (IOR -C, task reordering), so the
  writer's cache cannot serve the read.
- Ctrl-C and SIGTERM do not raise on the spot (a rank leaving a collective
  early would leave the others waiting in it): cluster/stop.DeferredStop
  records them and asks the running I/O call to stop, or the next one to
  stop at once; the stop spreads at the next agreement point and every rank
  raises KeyboardInterrupt at the same place.
- Sizes. --size and the default are data per node and measurement (the
  default writes what one process alone writes, on every node); each
  thread's share is the node's data over the threads of the node with the
  most ranks, the same on every rank.
- Pinning. When the launcher bound the ranks of a node to disjoint CPUs
  (mpirun --bind-to core, srun --cpu-bind), each rank pins its threads inside
  its own CPUs; when ranks share CPUs, threads are left to the scheduler (I/O
  waits, it does not compute) and the context says so
  (cluster/placement.bound_cpus).

``prepare_parallel`` sets all this up and yields what ``storage.bench_storage``
measures with; this module uses bench/storage.py, never the other way round.
"""
from __future__ import annotations

import contextlib
import functools
import os
import secrets
import socket
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..cluster.comm import world
from ..cluster.gather import gather_to_root, rank_facts
from ..cluster.launch import launcher_in_use
from ..cluster.library import library
from ..cluster.placement import bound_cpus
from ..cluster import watchdog
from ..cluster.stop import DeferredStop, agree_max, raise_agreed
from ..cluster.watchdog import allowance
from ..core.io import E_EPEER, IoRaw, cancel
from ..errors import CeilingError, PathError
from ..machine.storage import FileSystem, combine_fs, describe_fs
from ..results.measure import Context
from .storage import Plan, check_space, plan
from .storage_dir import RunDir, remove_abandoned

TOKEN_FILE = ".ceiling-group"


@dataclass
class Parallel:
    """This rank's part in a measurement several processes make together."""

    world: Any                      # MPI.COMM_WORLD: every agreement point
    group: Any                      # the ranks sharing this rank's run directory
    nodes: List[str]                # every rank's node, by rank
    threads: int                    # per rank, the same on every rank
    cpus: Optional[List[int]]       # this rank's threads' CPUs; None: not pinned
    gbase: int = 0
    gthreads: int = 0
    rbase: int = 0
    notes: Dict[str, str] = field(default_factory=dict)
    stop: Optional[DeferredStop] = None     # Ctrl-C and SIGTERM, held to an agreement point
    wait_s: Optional[float] = None          # the longest an agreement point waits for the others (watchdog)

    @property
    def interrupted(self) -> bool:
        """A signal arrived: the next agreement point stops every rank."""
        return self.stop is not None and self.stop.interrupted

    @property
    def stop_reason(self) -> str:
        return self.stop.stop_reason if self.stop is not None else "interrupted"

    @property
    def rank(self) -> int:
        return self.world.Get_rank()

    @property
    def size(self) -> int:
        return self.world.Get_size()

    @property
    def max_ranks_per_node(self) -> int:
        return max(self.nodes.count(n) for n in set(self.nodes))

    def sync(self, stop: int) -> int:
        """io.c's agreement point: a barrier over every rank; 1 when any of them stopped."""
        with watchdog.waiting("the agreement point after a phase", self.wait_s):
            return agree_max(self.world, 1 if stop else 0)

    def context(self) -> Dict[str, Any]:
        nodes = list(dict.fromkeys(self.nodes))
        out: Dict[str, Any] = {"processes": self.size, "nodes": len(nodes), "threads_per_process": self.threads,
                               "node_names": nodes[:16]}
        out.update(self.notes)
        return out

    def combine(self, rc: int, err: int, msg: str, raw: Any) -> Tuple[int, int, str, Any]:
        """Every rank's outcome of one call made into one: the first failing rank's error
        (CEIL_EPEER is a follower's), or one IoRaw of all ranks."""
        outcomes = self.world.allgather((rc, err, msg))
        for r, (rc_r, err_r, msg_r) in enumerate(outcomes):
            if rc_r not in (0, E_EPEER):
                return rc_r, err_r, f"rank {r} ({self.nodes[r]}): {msg_r}", None
        if any(o[0] != 0 for o in outcomes):     # followers without a leader: cannot happen, say so
            return E_EPEER, 0, "a rank stopped without an error of its own", None
        head = self.world.allgather((raw.phase_s, raw.amount, raw.valid, raw.msg, raw.bad_offset, raw.resident,
                                     raw.direct, raw.nthreads))
        lats = gather_to_root(self.world, raw.lat_s)
        reps, nph = len(raw.phase_s), len(raw.phase_s[0]) if raw.phase_s else 0
        phase_s = tuple(tuple(max(h[0][i][k] for h in head) for k in range(nph)) for i in range(reps))
        amount = tuple(tuple(sum(h[1][i][k] for h in head) for k in range(nph)) for i in range(reps))
        if lats is not None:
            lat_s = tuple(tuple(tuple(v for one in lats for v in one[i][k]) for k in range(nph))
                          for i in range(reps))
        else:
            lat_s = raw.lat_s
        bad = next((r for r, h in enumerate(head) if not h[2]), None)
        res = [h[5] for h in head]
        out = IoRaw(raw.kind, phase_s, amount, lat_s,
                    valid=bad is None,
                    msg="" if bad is None else f"rank {bad} ({self.nodes[bad]}): {head[bad][3]}",
                    bad_offset=-1 if bad is None else head[bad][4],
                    resident=None if any(x is None for x in res) else max(res),
                    direct=all(h[6] for h in head), nthreads=sum(h[7] for h in head))
        return 0, 0, "", out

    def file_system(self, path: str) -> FileSystem:
        """Collective: each group's first rank describes its directory; every rank gets the combination."""
        members = self.group.allgather(self.rank)
        mine = None
        if self.group.Get_rank() == 0:
            fs = describe_fs(path)
            fs.dir = os.path.dirname(path)
            mine = (socket.gethostname(), list(dict.fromkeys(self.nodes[r] for r in members)), fs)
        return combine_fs([x for x in self.world.allgather(mine) if x is not None])


def _visible(path: str, token: str) -> bool:
    try:
        with open(os.path.join(path, TOKEN_FILE)) as f:
            return f.read().strip() == token
    except OSError:
        return False


def _reorder(group_ranks: List[int], nodes: List[str], rank: int) -> Tuple[int, str]:
    """(the group index of the rank whose data this rank reads back, how) - IOR -C."""
    order = list(dict.fromkeys(nodes[r] for r in group_ranks))
    me = group_ranks.index(rank)
    if len(order) < 2:
        return me, "none: one node (each rank reads its own data; O_DIRECT or fadvise defeats the cache)"
    by_node = {n: [i for i, r in enumerate(group_ranks) if nodes[r] == n] for n in order}
    here = by_node[nodes[rank]]
    nxt = by_node[order[(order.index(nodes[rank]) + 1) % len(order)]]
    k = here.index(me)
    target = nxt[k] if k < len(nxt) else me
    return target, ("each rank reads back what the rank of the same local index on the next node wrote "
                    "(IOR -C, task reordering): the writer's page cache cannot serve it")


@contextlib.contextmanager
def parallel_run(ctx: Context, parent: Optional[str]):
    """Set up the ranks' directories and indices; yields (Parallel, run_dir).
    Every directory made is removed on the way out, by the rank that made it."""
    comm = world("serialized")
    rank = comm.Get_rank()
    ranks = rank_facts(comm)
    node, nodes = ranks.node, ranks.nodes
    threads = ctx.opts.threads or 1          # the CLI has checked it is at least 1
    with contextlib.ExitStack() as stack:
        # rank 0's directory, and who can see it
        made, err, token = None, None, secrets.token_hex(16)
        if rank == 0:
            try:
                made = stack.enter_context(RunDir(parent))
                stack.enter_context(watchdog.cleaning(functools.partial(remove_abandoned, made.path)))
                with open(os.path.join(made.path, TOKEN_FILE), "w") as f:
                    f.write(token)
            except (CeilingError, OSError) as e:
                err = e if isinstance(e, CeilingError) else PathError(f"--dir: {e}")
        raise_agreed(comm, err)
        path0, token = comm.bcast((made.path, token) if rank == 0 else None, root=0)
        sees = comm.allgather(_visible(path0, token))
        order = list(dict.fromkeys(nodes))
        color = 0 if sees[rank] else 1 + order.index(node)
        group = comm.Split(color, rank)
        stack.callback(group.Free)
        group_ranks = group.allgather(rank)
        # a directory per node for the ranks that cannot see rank 0's
        err, path = None, path0
        if not sees[rank] and group.Get_rank() == 0:
            try:
                path = stack.enter_context(RunDir(parent)).path
                stack.enter_context(watchdog.cleaning(functools.partial(remove_abandoned, path)))
            except CeilingError as e:
                err = e
        raise_agreed(comm, err)
        path = group.bcast(path, root=0)
        cpus, pin_note = bound_cpus(ranks.facts, rank, threads)
        target, how = _reorder(group_ranks, nodes, rank)
        me = group.Get_rank()
        par = Parallel(world=comm, group=group, nodes=nodes, threads=threads, cpus=cpus,
                       gbase=me * threads, gthreads=group.Get_size() * threads, rbase=target * threads)
        n_groups = len(set(comm.allgather(color)))
        # a signal asks the running I/O call to stop
        par.stop = stack.enter_context(DeferredStop(comm, on_signal=lambda: cancel(True)))
        lib = library()
        par.notes = {
            "launcher": launcher_in_use(),
            "mpi_library": lib.first_line,
            "run_directory": ("one shared by all ranks" if n_groups == 1 and all(sees) else
                          f"{n_groups} directories: ranks on nodes that cannot see rank 0's (a node-local "
                          "--dir) use one per node"),
            "task_reordering": how,
            "pinning": pin_note,
        }
        yield par, path


def _plan_parallel(ctx: Context, parent: Optional[str], par: Parallel, path: str) -> Plan:
    """The plan on every rank, and the free space of each group's directory, or every rank's error."""
    err = None
    try:
        p = plan(ctx, par)
    except CeilingError as e:
        err = e
    raise_agreed(par.world, err)
    if par.group.Get_rank() == 0:        # what the whole group writes at once, in its directory
        try:
            check_space(p, path, parent or os.path.dirname(path), processes=par.group.Get_size())
        except CeilingError as e:
            err = e
    raise_agreed(par.world, err)
    # The others may wait at an agreement point while a rank writes its share, or runs its
    # metadata or timed random phase: the deadline covers the largest of them, generously.
    par.wait_s = allowance(messages=p.threads * p.md_files, nbytes=p.bytes_at_once()) + p.rand_seconds
    return p


@contextlib.contextmanager
def prepare_parallel(ctx: Context):
    """Every MPI rank together: directories, indices and the plan, with each rank's error
    (bad --dir, size or space) raised on all of them before anything is measured. Yields what
    ``storage.bench_storage(ctx, parallel=...)`` measures with; the directories go on leaving."""
    parent = getattr(ctx.opts, "storage_dir", None)
    with parallel_run(ctx, parent) as (par, path):
        yield par, path, _plan_parallel(ctx, parent, par, path)
