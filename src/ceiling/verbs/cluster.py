"""Cluster mode (``--cluster``): one MPI rank per node measures its own node, all
nodes at once, and rank 0 gathers, compares and reports.

    mpirun -n N --map-by ppr:1:node ceiling run --cluster
    srun --ntasks-per-node=1 ceiling check --cluster

Every rank runs the verb's own measurement of its node (``node``: the checks, the
benchmarks, with the node's threads), then sends rank 0 two things: its digest
(analysis/cluster.NodeDigest: valid figures, warnings and failures, the
configuration inventory, machine/inventory.py) and its whole run, which rank 0
records in the history under the node's name (``ceiling history --host NODE``)
and drops. Rank 0 receives in the order the nodes finish and keeps only the
digests' figures, so its memory grows with the nodes, not with their reports.
The cluster's own run holds one metric per name (the median over the nodes,
every node's value in it), the uniformity of each metric, and the findings of
the cluster: outliers, configuration differences, checks that warn or fail on
some nodes.

A node that has not sent its results by the deadline (``--node-timeout``, or
its own measurement's time again, two minutes at least, after rank 0 finished
its own) is named, and the nodes gathered are analysed and reported, marked
partial; the job then ends (exit 11), as every MPI wait of ceiling does
(cluster/watchdog.py). Two ranks on one node would measure it twice, each with
half of it: a usage error, before anything is measured. A node whose message
rank 0 cannot read (not JSON, nested too deep, a newer schema) is "not
measured", as one whose measurement failed; a node is recorded under the name
its rank joined with, and names that do not add up are a finding (``_Names``).

Longer than 500 lines: the gathering's states (waves, deadline, rescue, interruption,
forged or extra messages) are one protocol with the nodes' side, kept in one place.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

from ..errors import CeilingError, StalledError, UsageError, interruption
from ..results.measure import NullProgress
from ..results.model import Job, Node, Run
from . import common

TAG = 7301                    # the results' messages
GO_TAG = 7302                 # rank 0 to a node of a later wave: start measuring
POLL_S = 0.01                 # rank 0's wait between looks for the next node's results
# Tests: a rank whose environment has this =1 stops itself (SIGSTOP) after measuring, as a hung node
# would; =kill[:S] kills itself (SIGKILL; S seconds later), as a node that dies does; =raise meets a bug
# instead of measuring.
STOP_FOR_TESTS = "CEILING_TEST_STOP_AFTER_MEASURING"
# Tests: a rank (not 0) whose environment has this sends rank 0 a document that cannot be read
# (=invalid: cut short; =deep: nested past any parser; =newer: of a later schema version), or its
# results under another node's name (=name:NODE), as a damaged or forged rank would.
SEND_FOR_TESTS = "CEILING_TEST_SEND"
NodeFn = Callable[[object], Tuple[Run, int]]


def configure(p: argparse.ArgumentParser, node_timeout: bool = True, pairs: bool = False) -> None:
    """The options every verb that measures a node takes for cluster mode (``node_timeout``:
    False where the verb has its own --node-timeout, bench's for its MPI suites; ``pairs``:
    whether the pairwise network is measured unless --no-pairs)."""
    g = p.add_argument_group("cluster (under mpirun / srun, one rank per node)")
    g.add_argument("--cluster", action="store_true", help="measure every node of the MPI job (one rank per node) "
                   "and compare them: the slow and the differently configured nodes are named")
    g.add_argument("--threshold", metavar="PCT", help="cluster: a node worse than the median by more than this "
                   "is an outlier (default per metric: 5%% compute and clock, 10%% memory, 20%% network, storage)")
    g.add_argument("--wave", metavar="K", help="cluster: measure K nodes at a time, wave after wave (nodes that share "
                   "a file system, a power budget or a switch); default: every node at once")
    g.add_argument("--pairs", action=argparse.BooleanOptionalAction, default=pairs,
                   help="cluster: measure latency and bandwidth between pairs of nodes, all pairs of a round at "
                        f"once (default: {'on' if pairs else 'off'} for this verb)")
    g.add_argument("--pair-rounds", metavar="N", help="cluster: rounds of pairs (each node meets N partners; "
                   "default 32, every pair up to 33 nodes)")
    if node_timeout:
        g.add_argument("--node-timeout", metavar="SECONDS", help="cluster: a node that has not reported this long "
                       "after rank 0 finished is named and left out (default: rank 0's own time, 2 minutes at least)")


def threshold(args: argparse.Namespace) -> Optional[float]:
    text = getattr(args, "threshold", None)
    if text is None:
        return None
    try:
        v = float(str(text).rstrip("%")) / 100
    except ValueError:
        raise UsageError(f"--threshold {text!r}: not a percentage (e.g. 5 or 5%)") from None
    if not 0 < v < 1:
        from ..errors import BadValueError
        raise BadValueError(f"--threshold {text}: must be above 0 and below 100 %")
    return v


def run_cluster(args: argparse.Namespace, node: NodeFn, report_html: bool,
                render: Optional[Callable[[Run], str]] = None,
                settle: Optional[Callable[[Run, int], int]] = None) -> int:
    """Measure every node (``node`` on each rank), gather to rank 0, compare, deliver
    (``render``: the terminal's text, the verb's own by default; ``settle``: the exit code
    from the delivered cluster run and the code so far, on rank 0)."""
    from ..cluster import watchdog
    from ..cluster.comm import world
    comm = world()
    dog = watchdog.start(comm)
    try:
        return _cluster(args, node, report_html, watchdog.wrap(comm), dog, render, settle)
    finally:
        watchdog.stop()


def _cluster(args: argparse.Namespace, node: NodeFn, report_html: bool, comm, dog, render, settle) -> int:
    from ..cluster.gather import rank_facts

    rank, size = comm.Get_rank(), comm.Get_size()
    leader = rank == 0
    opts = _Options.agreed(args, comm, leader, size, report_html)
    facts = rank_facts(comm)
    _one_rank_per_node(facts.nodes)
    dog.timeout = None       # --node-timeout is the gather's deadline only (below), not every wait's
    waves = ([list(range(i, min(i + opts.wave, size))) for i in range(0, size, opts.wave)] if opts.wave
             else [list(range(size))])
    if rank not in waves[0]:
        _wait_turn(getattr(comm, "raw", comm))        # rank 0 says when this node's wave starts
    t0 = time.monotonic()
    run, code = _measure_this_node(args, node, facts, leader)
    mine = _digest(args, run, facts.node)
    own_s = time.monotonic() - t0
    deadline = opts.timeout if opts.timeout else max(watchdog_floor(), own_s)
    _injected_stop()
    if not leader:
        return _send_results(comm, dog, run, mine, deadline + own_s, opts.pair_plan)
    g = _Gathering(args, facts, comm, dog, opts, size, waves, report_html, render, deadline, run)
    if opts.store is not None:
        opts.store.save(run)
    g.take(mine, run)
    dog.rescue = g.rescue
    stopped, interrupted = g.gather(own_s)
    code = interrupted if interrupted is not None else code
    pairs = run_pairs(comm, opts.pair_plan) if opts.pair_plan and not stopped else {}
    partial = "; ".join(f"{k}: {v}" for k, v in g.cl.partial.items())
    final = g.cluster_run("; ".join(filter(None, [stopped, f"nodes stopped before the end ({partial})"
                                                  if partial else ""])), pairs)
    final.findings += g.names.findings()
    if g.cl.partial and code == 0:    # nodes left out of the analysis: the job's own code, not an interruption's
        code = StalledError.exit_code
    dropped = dog.finding()           # forged datagrams on the watchdog's channel: said, not acted on
    if dropped is not None:
        final.findings.append(dropped)
    code = common.deliver(final, g.outputs(), code, g.say)
    if stopped:        # the ranks that did not report wait in their send: the job ends here
        getattr(comm, "raw", comm).Abort(code)
    return settle(final, code) if settle is not None else code


class _Options:
    """The cluster options every rank parses alike; rank 0 also opens its outputs."""

    def __init__(self):
        self.store = None
        self.pair_plan: Optional[int] = None
        self.wave = 0
        self.timeout: Optional[float] = None
        self.limit: Optional[float] = None

    @classmethod
    def agreed(cls, args: argparse.Namespace, comm, leader: bool, size: int, report_html: bool) -> "_Options":
        """Parse on every rank; a refusal on any rank stops all of them alike."""
        from ..cluster.stop import raise_agreed
        from ..units import parse_seconds

        o, err = cls(), None
        try:
            o.limit = threshold(args)
            common.options(args)
            common.config(args)
            o.timeout = parse_seconds(getattr(args, "node_timeout", None), what="--node-timeout")
            rounds = _pair_rounds(args)                     # checked even where it is not used
            o.wave = _count(args, "wave") or 0
            o.pair_plan = rounds if getattr(args, "pairs", False) and size > 1 else None
            if leader:
                common.check_outputs(args, html=report_html)
                o.store = common.open_store(args)
        except CeilingError as e:
            err = e
        raise_agreed(comm, err)
        return o


def _measure_this_node(args: argparse.Namespace, node: NodeFn, facts, leader: bool) -> Tuple[Run, int]:
    """This node's run and exit code; a node that fails is still a run, named with its error."""
    try:
        if os.environ.get(STOP_FOR_TESTS) == "raise":
            raise RuntimeError("injected by a test")
        run, code = node(common.progress(args) if leader else NullProgress())
    except CeilingError as e:        # this node could not be measured: the others still are, and it is named
        run, code = _failed_run(facts.node, e), e.exit_code
    except Exception as e:           # a bug met on one node must not take the cluster's report with it
        import traceback
        traceback.print_exc()
        run, code = _failed_run(facts.node, CeilingError(f"ceiling failed on this node ({type(e).__name__}: {e}); "
                                                          "its traceback is in the job's error output")), 1
    run.host = facts.node
    return run, code


def _digest(args: argparse.Namespace, run: Run, name: str):
    from ..analysis.cluster import digest
    return digest(run, name, _inventory(args))


def _injected_stop() -> None:
    """Tests stop or kill a rank here, after it measured and before it reports."""
    injected = os.environ.get(STOP_FOR_TESTS, "")
    if injected == "1" or injected.startswith("kill"):
        time.sleep(float(injected.partition(":")[2] or 0))
        os.kill(os.getpid(), signal.SIGSTOP if injected == "1" else signal.SIGKILL)


def _send_results(comm, dog, run: Run, mine, wait_s: float, pair_plan: Optional[int]) -> int:
    """A node other than rank 0: send its digest and run, then take part in the pairs."""
    from ..results import jsonio

    sent = (mine.to_dict(), jsonio.dumps(run))
    if os.environ.get(SEND_FOR_TESTS):
        sent = _sent_for_tests(os.environ[SEND_FOR_TESTS], run, mine)
    with _waiting(dog, "sending this node's results to rank 0", wait_s):
        getattr(comm, "raw", comm).send(sent, dest=0, tag=TAG)
    if pair_plan:
        run_pairs(comm, pair_plan)
    # This node's outcome travels in its results and rank 0's exit code speaks for the job: a
    # non-zero exit here would have the launcher (Hydra, Open MPI's mpirun) signal rank 0 while it
    # still gathers or writes the report.
    return 0


class _Gathering:
    """Rank 0 gathering the nodes' results, wave by wave, into the cluster's analysis; what
    it holds is also what the watchdog's rescue reports when the deadline passes."""

    def __init__(self, args, facts, comm, dog, opts: _Options, size: int, waves: List[List[int]],
                 report_html: bool, render, deadline: float, own: Run):
        from ..analysis.cluster import Cluster

        self.args, self.facts, self.comm, self.dog, self.opts = args, facts, comm, dog, opts
        self.size, self.waves, self.report_html, self.render, self.deadline = size, waves, report_html, render, deadline
        self.cl = Cluster(opts.limit)
        self.got: Dict[str, str] = {}              # node -> its run's id in the history ("" unsaved)
        self.nodes: List[Node] = []
        self.names = _Names(facts)
        self.current = 0                           # the wave being gathered (read by rescue)
        self.own = own                             # rank 0's own run
        self.say = common.say(args)

    def take(self, d, r: Run) -> None:
        self.cl.add(d)
        rid = r.run_id if self.opts.store is not None else ""       # a run not recorded cannot be shown later
        self.nodes.append(Node(d.name, _compact(r.machine), {"inventory": d.inventory, "run_id": rid}))
        self.got[d.name] = rid

    def cluster_run(self, partial: str = "", pairs: Optional[Dict] = None) -> Run:
        out = _cluster_run(self.args, self.facts, self.cl, self.nodes, self.own, self.size, pairs or {})
        if partial:
            out.partial, out.partial_reason = True, partial
        return out

    def outputs(self):
        return common.exporters(self.args, self.opts.store, html=self.report_html, render=self.render,
                                quiet_store=bool(getattr(self.args, "nhc", False)))

    def rescue(self, line: str) -> str:
        """The deadline passed (the watchdog's thread): report the nodes gathered, name the rest."""
        missing = [f["node"] for f in self.facts.facts if f["node"] not in self.got]
        unstarted = {r for members in self.waves[self.current + 1:] for r in members}    # their wave never came

        def state(n: str) -> str:
            r = self.facts.nodes.index(n)
            return "not started: an earlier wave did not finish" if r in unstarted else self.dog.where(r)
        text = (f"{len(missing)} of {self.size} nodes did not report within {self.deadline:.0f} s after rank 0 "
                "finished: " + ", ".join(f"{n} ({state(n)})" for n in missing[:8])
                + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
                + f"; the {len(self.got)} nodes that did are analysed and reported") if missing else \
            f"{line}; every node had reported, and is analysed and reported without the pairwise network"
        common.deliver(self.cluster_run(text), self.outputs(), StalledError.exit_code, self.say)
        return text

    def gather(self, own_s: float) -> Tuple[str, Optional[int]]:
        """Receive every wave's results; returns why gathering stopped early ("" when it did
        not) and the exit code of the interruption that stopped it (None when none did)."""
        raw = getattr(self.comm, "raw", self.comm)
        many = bool(self.opts.wave)
        try:
            for w, members in enumerate(self.waves):
                self.current = w
                for r in members if w else ():
                    raw.send(None, dest=r, tag=GO_TAG)       # small: sent eagerly, rank 0 does not wait
                # a later wave's nodes measure now: their own time again, as rank 0's was
                with _waiting(self.dog, f"gathering the nodes' results (wave {w + 1} of {len(self.waves)})" if many
                              else "gathering the nodes' results", self.deadline + (own_s if w else 0.0)):
                    self._receive_wave({r for r in members if r != 0}, raw)
        except KeyboardInterrupt as e:      # Ctrl-C or SIGTERM while gathering: what was gathered is reported
            why, code = interruption(e)
            missing = [f["node"] for f in self.facts.facts if f["node"] not in self.got]
            return (f"{why} while gathering: {len(self.got)} of {self.size} nodes reported" +
                    (f", not {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}" if missing else "")), code
        return "", None

    def _receive_wave(self, pending: set, raw) -> None:
        while pending:
            source, sent = _receive(raw, self.dog)
            if source not in pending:         # a second message from one rank: not its results
                self.names.extra.append(source)
                continue
            pending.discard(source)
            d, r = _read(sent, self.facts.nodes[source], self.names, source)
            if self.opts.store is not None:
                self.opts.store.save(r)
            self.take(d, r)
            del r, sent


def watchdog_floor() -> float:
    from ..cluster.watchdog import FLOOR_S
    return FLOOR_S


def _waiting(dog, what: str, seconds: float):
    return dog.waiting(what, seconds)


def _read(sent, node: str, names: "_Names", source: int):
    """(digest, run) of the message rank ``source`` (joined as ``node``) sent. What cannot be
    read (not JSON, nested too deep, a newer schema, no digest) makes that node "not measured"
    with the reason, as a node whose measurement raised, and the others are analysed. The
    node is recorded under the name it joined with, whatever name its message claims
    (``_Names`` says when they differ), under a run id of rank 0's: a rank's message never
    replaces another run in the history."""
    import uuid
    from ..analysis.cluster import NodeDigest, digest
    from ..results import jsonio
    try:
        d_dict, doc = sent
        r = jsonio.loads(doc, source=f"the results of rank {source} ({node})")
        d = NodeDigest.from_dict(d_dict)
    except (CeilingError, ValueError, TypeError) as e:
        r = _failed_run(node, CeilingError(f"its results could not be read on rank 0: {e}"))
        return digest(r, node, {}), r
    names.claimed(source, d.name, r.host)
    d.name = r.host = node
    r.run_id = uuid.uuid4().hex
    return d, r


class _Names:
    """The names the ranks' results claim, against the names they joined with (rank_facts):
    a name claimed by two ranks, a name that is not the one the rank joined with, or one
    that is not the rank's host where no CEILING_NODE_NAME gave it, each becomes a finding."""

    def __init__(self, facts):
        self.facts = facts.facts
        self.claims: Dict[str, List[int]] = {}
        self.odd: List[str] = []
        self.extra: List[int] = []
        for f in self.facts:
            if not f.get("named") and f["node"] != f["host"]:
                self.odd.append(f"rank {f['rank']} on host {f['host']} joined as node {f['node']} without "
                                "CEILING_NODE_NAME")
        self.claimed(0, self.facts[0]["node"], self.facts[0]["node"])

    def claimed(self, rank: int, name: str, host: str) -> None:
        f = self.facts[rank]
        for n in dict.fromkeys([name, host]):
            self.claims.setdefault(n, []).append(rank)
            if n != f["node"]:
                self.odd.append(f"rank {rank} (host {f['host']}, joined as {f['node']}) sent results as {n}"
                                + ("" if f.get("named") else ", which is not its host, and no CEILING_NODE_NAME "
                                   "was set"))

    def findings(self) -> List:
        from ..results.model import WARN, Finding
        twice = {n: rs for n, rs in self.claims.items() if len(set(rs)) > 1}
        words = [f"node {n} claimed by ranks {', '.join(map(str, sorted(set(rs))))}" for n, rs in twice.items()]
        words += self.odd + [f"rank {r} sent more than one message of results (the later ones were dropped)"
                             for r in dict.fromkeys(self.extra)]
        if not words:
            return []
        return [Finding(
            id="cluster.node_names", status=WARN,
            title=f"Node names do not add up: {words[0]}" + (f" (and {len(words) - 1} more)" if len(words) > 1 else ""),
            evidence="; ".join(words[:20]) + "; every node is recorded under the name its rank joined the job with",
            why="A node's results are recorded in the history under its name: a rank that reports under another "
                "node's name would put its figures in that node's history and hide its own node.",
            fix="Run the same ceiling on every node; set CEILING_NODE_NAME only to stand ranks of one machine in "
                "for nodes; look at what runs as the ranks named here.",
            data={"claimed_twice": {n: sorted(set(rs)) for n, rs in twice.items()}, "odd": self.odd,
                  "extra_messages": sorted(set(self.extra))})]


def _sent_for_tests(how: str, run: Run, mine) -> Tuple[Dict, str]:
    """SEND_FOR_TESTS: the message a damaged or forged rank sends instead of its results."""
    from ..results import jsonio
    from ..results.model import SCHEMA_VERSION
    doc = jsonio.dumps(run)
    if how == "invalid":
        return mine.to_dict(), doc[:len(doc) // 2]
    if how == "deep":
        return mine.to_dict(), "[" * 100_000 + "]" * 100_000
    if how == "newer":
        import json
        d = json.loads(doc)
        d["schema_version"] = SCHEMA_VERSION + 1
        return mine.to_dict(), json.dumps(d)
    if how.startswith("name:"):
        run.host = mine.name = how[5:]
        return mine.to_dict(), jsonio.dumps(run)
    raise ValueError(f"{SEND_FOR_TESTS}={how}: not a test's value")


def _receive(comm, dog):
    """The next node's results, from whichever rank sends first. Polled (Iprobe, then a
    sleep) rather than a blocking recv, so that Ctrl-C and SIGTERM reach rank 0 while a
    node keeps it waiting: a blocked MPI_Recv returns to Python only with a message.
    Once the watchdog is ending the job this thread makes no MPI call again (the
    watchdog's MPI_Abort must not meet one: MPI_THREAD_FUNNELED) and waits to be ended."""
    from mpi4py import MPI
    status = MPI.Status()
    while not comm.Iprobe(source=MPI.ANY_SOURCE, tag=TAG, status=status):
        if dog.ending():
            threading.Event().wait()
        time.sleep(POLL_S)
    return status.Get_source(), comm.recv(source=status.Get_source(), tag=TAG)


def _failed_run(node: str, e: CeilingError) -> Run:
    import sys
    from .. import __version__
    from ..results.model import utcnow
    return Run(tool_version=__version__, host=node, started=utcnow(), command=["ceiling", *sys.argv[1:]],
               partial=True, partial_reason=f"not measured: {e}")


def _one_rank_per_node(nodes: List[str]) -> None:
    seen: Dict[str, List[int]] = {}
    for r, n in enumerate(nodes):
        seen.setdefault(n, []).append(r)
    twice = {n: rs for n, rs in seen.items() if len(rs) > 1}
    if twice:
        from ..cluster.stop import everywhere
        n, rs = next(iter(twice.items()))
        raise everywhere(UsageError(
            f"--cluster measures each node once, with one rank: node {n} has {len(rs)} ranks "
            f"({', '.join(map(str, rs[:8]))}){f' and {len(twice) - 1} more nodes too' if len(twice) > 1 else ''}; "
            "launch one rank per node (mpirun --map-by ppr:1:node, srun --ntasks-per-node=1)"))


def _inventory(args: argparse.Namespace) -> Dict[str, str]:
    """This node's configuration facts, from the tree its run read (check --root DIR, else /)."""
    from .. import machine as machine_mod
    from ..machine.inventory import inventory
    root = getattr(args, "root", None) or "/"
    return inventory(machine_mod.detect(root, measure=False, config=common.config(args)), root, _mpi_library())


def _mpi_library() -> str:
    """"MPICH 5.0.2 (/path/libmpi.so.12)": what this node's rank loaded, which an image that
    differs from the others' shows first."""
    from ..cluster.library import library
    lib = library()
    return f"{lib.family} {lib.family_version}" + (f" ({lib.path})" if lib.path else "")


def _compact(machine: Dict) -> Dict:
    """The facts of a node the cluster run keeps (its whole machine is in its own run)."""
    keys = ("hostname", "arch", "vendor", "model_name", "microarch", "sockets", "cores", "threads", "smt",
            "mem_total_bytes", "virtualized")
    return {k: machine[k] for k in keys if k in machine}


def _count(args: argparse.Namespace, name: str) -> Optional[int]:
    """--NAME N: a whole number of at least 1, or None when not given."""
    text = getattr(args, name.replace("-", "_"), None)
    if text is None:
        return None
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--{name} {text!r}: not a whole number") from None
    if n < 1:
        from ..errors import BadValueError
        raise BadValueError(f"--{name} {n}: at least 1")
    return n


def _pair_rounds(args: argparse.Namespace) -> int:
    from ..cluster.pairs import DEFAULT_ROUNDS
    n = _count(args, "pair-rounds")
    return DEFAULT_ROUNDS if n is None else n


def _wait_turn(comm) -> None:
    """A node of a later wave waits for rank 0's word (polled: signals still reach it)."""
    while not comm.Iprobe(source=0, tag=GO_TAG):
        time.sleep(POLL_S)
    comm.recv(source=0, tag=GO_TAG)


def run_pairs(comm, rounds: int) -> Dict:
    from ..cluster.pairs import run_pairs as measure
    return measure(comm, rounds)


def _cluster_run(args: argparse.Namespace, facts, cl, nodes: List[Node], own: Run, size: int,
                 pairs: Dict) -> Run:
    from .. import __version__
    from ..analysis.analyse import analyse
    from ..cluster import library
    from ..cluster.launch import launcher_in_use
    from ..results.model import utcnow
    uni = cl.uniformity()
    run = Run(tool_version=__version__, host=facts.node, started=own.started, command=list(own.command),
              machine=own.machine, environment=own.environment, metrics=cl.metrics(),
              findings=cl.findings(uni), nodes=list(nodes))
    lib = library.library()
    run.job = Job(launcher=launcher_in_use(), mpi_library=lib.description, ranks=size, nodes=size,
                  ranks_per_node=1, node_names=list(facts.nodes))
    from ..cluster.installations import mpi_facts
    run.environment = dict(own.environment, mpi=mpi_facts(lib, look_for_others=bool(pairs.get("pairs"))),
                           cluster={"nodes": size, "reported": len(nodes),
                                                     "host_of_rank_0": socket.gethostname(),
                                                     "threshold": cl.threshold,
                                                     "wave": int(args.wave) if getattr(args, "wave", None) else None})
    if pairs.get("pairs"):
        from ..analysis.pairs import conclude
        series, metrics, findings = conclude(list(facts.nodes), pairs["pairs"], pairs["rounds"],
                                             pairs["all_rounds"], cl.threshold)
        run.series += series
        run.metrics += metrics
        run.findings += findings
    elif pairs.get("skipped"):
        from ..results.model import SKIPPED, Finding
        run.findings.append(Finding(id="cluster.pairs", status=SKIPPED, title="no pairwise network: the MPI timing "
                                    "loops could not be built or loaded", evidence=pairs["skipped"]))
    run.analysis = analyse(run)
    run.analysis.uniformity = uni
    run.finished = utcnow()
    return run
