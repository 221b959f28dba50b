"""``ceiling history --changes``: the steps and drifts of every series in the history, each with
what changed on the node at that moment.

A series is one metric on one node with one context key (results/history_keys.py): a 1-thread
and a 2-thread triad are never one series. Each run gives it one value: the median of the run's
repetitions where it kept two or more, else its headline figure (the repetitions inside one run
understate the run-to-run spread, so the test is on the runs, changepoints.py). A row that cannot
be a value (not a finite number, no start, a unit other than the series') is skipped and counted;
one the kernel marked invalid is left out and counted apart.

Each step says the run after it and the run before it, its size in the metric's own direction
(Metric.better), its p-value and the level it passed, and the configuration fields that differ
between the inventories of those two runs (history_keys.inventory; a hash change up to one run
either side counts, as the step's place is known within a run). Equal inventories: "none
recorded: likely outside the node" (a firmware or driver the inventory does not hold, the
network, a neighbour). Across the nodes of a cluster, steps of one metric and context whose
intervals overlap are one event: on every node that had runs on both sides it is said as
site-wide, on some of them as such, else as this node's only.

The newest run is also set against a rolling baseline, the N runs before it: its change from their
median, and its distance from their mean in prediction standard deviations (changepoints.baseline),
outside beyond BASELINE_Z: a change that needs no three runs after it to be seen.

``--since``: the series' results are kept in the history (results/store_changes.py); a look
examines only the series with runs added since the last look, and in them only the runs from
their last step on, at most WINDOW of them; it reports the changes whose run is newer than the
last look (a series the history holds no result of is examined whole). A full look recomputes
every series from its first run and writes nothing. ``--since`` takes no ``--from/--to``: its
window is the history's, and the look it records is where the next one starts.

An acknowledgement (``--ack RUN:METRIC``) names a change by its first run. A step's stays where it
is; a drift's first run is where the examined runs begin, which moves (``--since``'s window,
``--from``): the kept result of a series remembers its acknowledged drift, and a drift the same
way with no step between its start and the remembered one's is that drift (``mark_acked``).
"""
from __future__ import annotations

import math
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from ..results.history_keys import flat
from ..results import store_changes as sc
from . import changepoints as cp
from . import significance as sig

WINDOW = 100            # --since: at most this many runs examined per series
BASELINE_RUNS = 10      # the rolling baseline: the newest run against the N before it
BASELINE_Z = 5.0        # z (changepoints.baseline) beyond which the newest run is outside the baseline's noise
OUTSIDE = "none recorded: likely outside the node"
NOT_RECORDED = "not recorded (no inventory kept for one of the runs)"


@dataclass(frozen=True)
class ConfigField:
    """One configuration field that differs between the runs on either side of a change."""

    field: str
    before: Any
    after: Any


@dataclass(frozen=True)
class Change:
    """A step or a drift of one series."""

    kind: str               # "step" | "drift"
    metric: str
    host: str
    context: str            # the context key
    unit: str
    better: str             # "higher" | "lower"
    run_id: str             # step: the first run after it; drift: its first run
    started: str            # that run's start
    before_run: str         # step: the last run before it; drift: its last run
    before_started: str
    before: float           # step: the median before; drift: the fitted level at its start
    after: float            # step: the median after; drift: the fitted level at its end
    change: float           # after / before - 1 (a fraction)
    direction: str          # "better" | "worse", from ``better``
    p_value: float
    alpha: float            # the level the test passed
    runs: int = 0           # drift: runs it spans; step: runs after it up to the next step
    config: Tuple[ConfigField, ...] = ()
    config_note: str = ""   # OUTSIDE, NOT_RECORDED, or "" when ``config`` names the fields
    scope: str = ""         # "" (one node), "this node only of N", "site-wide: all N nodes", "K of N nodes"
    nodes: Tuple[str, ...] = ()   # the nodes the same event was seen on (this one included)
    acked: bool = False


@dataclass(frozen=True)
class Baseline:
    """The newest run of a series against the median of the runs before it."""

    runs: int
    median: float
    latest: float
    run_id: str
    started: str
    change: float           # latest / median - 1
    z: float                # prediction standard deviations (inf: the baseline runs were all equal)
    direction: str          # "better" | "worse" | "same"
    outside: bool           # |z| > BASELINE_Z and |change| >= the step threshold


@dataclass
class Series:
    """One series and what it holds."""

    metric: str
    host: str
    context: str
    unit: str
    better: str
    n: int                                     # runs examined (all of them on a full look)
    changes: List[Change] = field(default_factory=list)
    baseline: Optional[Baseline] = None
    points: List[Tuple[str, str, float, str]] = field(default_factory=list)   # (started, run, value, hash)
    first: str = ""
    last: str = ""


@dataclass
class Report:
    """A look at the history's changes."""

    series: List[Series]
    skipped: Dict[str, int]                    # why -> rows skipped
    since: Optional[str] = None                # --since: the last look's newest run (None: first look)
    through: str = ""                          # the newest run examined
    examined: int = 0                          # series examined (the others' results came from the cache)
    kept: bool = False                         # the results were written to the history
    new_drifts: set = field(default_factory=set)   # --since: series whose drift the last look did not report
    notes: List[str] = field(default_factory=list)

    def changes(self, new_only: bool = False, acked: bool = False) -> List[Change]:
        out = [c for s in self.series for c in s.changes if acked or not c.acked]
        if new_only and self.since is not None:
            out = [c for c in out if (c.started > self.since if c.kind == "step" else
                                      (c.metric, c.host, c.context) in self.new_drifts)]
        return sorted(out, key=lambda c: (c.direction != "worse", c.started, c.metric, c.host))


@dataclass(frozen=True)
class Options:
    alpha: float = cp.ALPHA
    min_step: float = cp.MIN_STEP
    baseline: int = BASELINE_RUNS
    start: Optional[str] = None        # --from: runs started at or after
    end: Optional[str] = None          # --to: runs started at or before
    points: bool = False               # keep the values (the HTML plots them)


# -- one series --------------------------------------------------------------------------------

def _value(row: Sequence) -> Optional[float]:
    _, _, _, _, _, value, median, n, *_ = row
    v = median if isinstance(n, int) and n >= 2 and isinstance(median, (int, float)) else value
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def clean(rows: Sequence[Sequence], skipped: Dict[str, int]) -> List[Tuple[Sequence, float]]:
    """The rows that are values, each with its value; the others counted in ``skipped`` by reason."""
    out: List[Tuple[Sequence, float]] = []
    unit = None
    for row in rows:
        v = _value(row)
        why = None
        if row[11] == 0:
            why = "invalid kernel output"
        elif v is None:
            why = "not measured" if row[5] is None and row[6] is None else "not a finite number"
        elif not isinstance(row[3], str) or len(row[3]) < 10:
            why = "no start time"
        elif unit is not None and row[8] != unit:
            why = "unit differs from the series'"
        if why is not None:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        unit = row[8] if unit is None else unit
        out.append((row, v))     # type: ignore[arg-type]
    return out


def _finite(x: float) -> float:
    return x if math.isfinite(x) else (math.copysign(1e308, x) if x == x else 0.0)


class Inventories:
    """Inventories by hash, read once each."""

    def __init__(self, store) -> None:
        self.store = store
        self.seen: Dict[str, Optional[Dict[str, Any]]] = {}

    def get(self, h: str) -> Optional[Dict[str, Any]]:
        if h not in self.seen:
            self.seen[h] = self.store.inventory(h) if h else None
        return self.seen[h]

    def diff(self, a: str, b: str) -> Tuple[ConfigField, ...]:
        before, after = flat(self.get(a) or {}), flat(self.get(b) or {})
        return tuple(ConfigField(k, before.get(k), after.get(k)) for k in sorted(set(before) | set(after))
                     if before.get(k) != after.get(k))


def _config(rows: Sequence[Sequence], i: int, inv: Inventories) -> Tuple[Tuple[ConfigField, ...], str]:
    """The configuration change at a step before row ``i``: the hash change at i, else one run either side."""
    hashes = [r[10] for r in rows]
    for j in (i, i - 1, i + 1):
        if 1 <= j < len(rows) and hashes[j - 1] and hashes[j] and hashes[j - 1] != hashes[j]:
            fields = inv.diff(hashes[j - 1], hashes[j])
            if fields:
                return fields, ""
    if not hashes[i - 1] or not hashes[i]:
        return (), NOT_RECORDED
    return (), OUTSIDE


def analyse_rows(key: sc.Key, data: List[Tuple[Sequence, float]], opts: Options, inv: Inventories,
                 baseline: bool = True) -> Tuple[List[Change], Optional[Baseline]]:
    """The changes of one series' values (``data``: clean rows, oldest first) and its baseline."""
    metric, host, context = key
    rows = [r for r, _ in data]
    values = [v for _, v in data]
    if not rows:
        return [], None
    unit, better = rows[0][8], rows[0][9]
    seed = zlib.crc32("\x1f".join(key).encode("utf-8", "replace"))
    found = cp.analyse(values, alpha=opts.alpha, min_step=opts.min_step, seed=seed)
    out: List[Change] = []
    cuts = [s.index for s in found.steps] + [len(rows)]
    for s, nxt in zip(found.steps, cuts[1:]):
        fields, note = _config(rows, s.index, inv)
        b, a = rows[s.index - 1], rows[s.index]
        out.append(Change("step", metric, host, context, unit, better, a[4], a[3], b[4], b[3], s.before, s.after,
                          _finite(s.change), sig.direction(s.change, better), s.p_value, s.alpha, nxt - s.index,
                          fields, note))
    d = found.drift
    if d is not None:
        a, b = rows[d.start], rows[d.end]
        fields = inv.diff(a[10], b[10]) if a[10] and b[10] and a[10] != b[10] else ()
        out.append(Change("drift", metric, host, context, unit, better, a[4], a[3], b[4], b[3], d.level,
                          d.level * (1 + d.change), _finite(d.change), sig.direction(d.change, better), d.p_value,
                          opts.alpha, d.end - d.start + 1, fields,
                          "" if fields else (OUTSIDE if a[10] and b[10] else NOT_RECORDED)))
    return out, _baseline(rows, values, opts) if baseline else None


def _baseline(rows: Sequence[Sequence], values: Sequence[float], opts: Options) -> Optional[Baseline]:
    b = cp.baseline(values, opts.baseline)
    if b is None:
        return None
    med, change, z = b
    last = rows[-1]
    return Baseline(opts.baseline, med, values[-1], last[4], last[3], _finite(change), _finite(z),
                    sig.direction(change, rows[0][9]), abs(z) > BASELINE_Z and abs(change) >= opts.min_step)


# -- the cluster -------------------------------------------------------------------------------

def scopes(series: List[Series]) -> None:
    """Say of each step whether the other nodes of its metric and context changed at the same time."""
    groups: Dict[Tuple[str, str], List[Series]] = {}
    for s in series:
        groups.setdefault((s.metric, s.context), []).append(s)
    for group in groups.values():
        hosts = {s.host for s in group}
        if len(hosts) < 2:
            continue
        steps = [(s, c) for s in group for c in s.changes if c.kind == "step"]
        for s, c in steps:
            lo, hi = c.before_started, c.started
            spanning = {t.host for t in group if t.first <= lo and t.last >= hi}
            same = sorted({t.host for t, d in steps if d.before_started <= hi and lo <= d.started and
                           d.direction == c.direction})
            k, n = len(same), len(spanning | {s.host})
            scope = (f"site-wide: all {n} nodes" if k >= n and n > 1 else
                     f"{k} of {n} nodes" if k > 1 else f"this node only of {n}")
            i = s.changes.index(c)
            s.changes[i] = _replace(c, scope=scope, nodes=tuple(same))


def _replace(c: Change, **kw) -> Change:
    d = {f: getattr(c, f) for f in Change.__dataclass_fields__}
    d.update(kw)
    return Change(**d)


# -- the history -------------------------------------------------------------------------------

def _keys(store, metric: Optional[str], family: Optional[str], host: Optional[str]):
    prefix = sig.family_prefix(family) if family and not metric else None
    return sc.series_keys(store, name=metric, prefix=prefix, host=host)


def _series(key: sc.Key, data: List[Tuple[Sequence, float]], opts: Options) -> Series:
    rows = [r for r, _ in data]
    s = Series(*key, unit=rows[0][8] if rows else "", better=rows[0][9] if rows else "higher", n=len(rows),
               first=rows[0][3] if rows else "", last=rows[-1][3] if rows else "")
    if opts.points:
        s.points = [(r[3], r[4], v, r[10]) for r, v in data]
    return s


def full(store, opts: Options, metric: Optional[str] = None, family: Optional[str] = None,
         host: Optional[str] = None) -> Report:
    """Every series from its first run (writes nothing)."""
    inv = Inventories(store)
    acked = sc.acks(store)
    cache = sc.cached(store)             # read only for the drifts acknowledged (a full look writes nothing)
    skipped: Dict[str, int] = {}
    out: List[Series] = []
    through = ""
    for name, h, context, *_ in _keys(store, metric, family, host):
        key = (name, h, context)
        data = clean(sc.points(store, key, opts.start, opts.end), skipped)
        if not data:
            continue
        s = _series(key, data, opts)
        s.changes, s.baseline = analyse_rows(key, data, opts, inv)
        s.changes = mark_acked(s.changes, acked, acked_drift(cache.get(key), acked))
        through = max(through, s.last)
        out.append(s)
    scopes(out)
    return Report(out, skipped, through=through, examined=len(out))


# -- acknowledgements ----------------------------------------------------------------------------

def acked_drift(entry: Optional[Tuple[str, str, dict]], acked: Set[Tuple[str, str]]) -> Optional[Change]:
    """The acknowledged drift a series' kept result remembers (sc.cached's entry), if any: its drift as
    the last look found it, acknowledged by its run, or one an earlier look carried as acknowledged."""
    if entry is None:
        return None
    docs = list(entry[2].get("drift", ())) + [d for d in (entry[2].get("acked_drift"),) if isinstance(d, dict)]
    for c in (_from_doc(d) for d in docs if isinstance(d, dict)):
        if c is not None and c.kind == "drift" and (c.acked or (c.run_id, c.metric) in acked):
            return c
    return None


def same_drift(c: Change, known: Change, steps: Sequence[Change]) -> bool:
    """``c`` is the drift ``known`` was, its start moved (``--since`` examines a series from its last step,
    at most WINDOW runs; ``--from`` cuts it): the same way, with no step of the series between their starts
    (after a step it is a new segment, and a drift there a new change)."""
    if c.kind != "drift" or known.kind != "drift" or c.direction != known.direction:
        return False
    lo, hi = sorted((c.started, known.started))
    return not any(lo < st.started <= hi for st in steps if st.kind == "step")


def mark_acked(changes: Sequence[Change], acked: Set[Tuple[str, str]], known: Optional[Change]) -> List[Change]:
    """Each change with ``acked`` set: a step by its run (the first run after it, stable); a drift by its run
    too, or as the acknowledged drift ``known`` (acked_drift) continued, whose first run was another."""
    steps = [c for c in changes if c.kind == "step"]
    return [_replace(c, acked=(c.run_id, c.metric) in acked or
                     (c.kind == "drift" and known is not None and same_drift(c, known, steps))) for c in changes]


def _to_doc(c: Change) -> dict:
    return asdict(c)


def _from_doc(d: dict) -> Optional[Change]:
    try:
        d = dict(d)
        d["config"] = tuple(ConfigField(**f) for f in d.get("config", ()))
        d["nodes"] = tuple(d.get("nodes", ()))
        return Change(**d)
    except (TypeError, ValueError):
        return None


def since(store, opts: Options, metric: Optional[str] = None, family: Optional[str] = None,
          host: Optional[str] = None, when: str = "") -> Report:
    """The changes new since the last look: only the series with new runs examined, from their last
    step on; the results kept when the store can be written (module docstring)."""
    inv = Inventories(store)
    acked = sc.acks(store)
    last = sc.last_look(store)
    cache = sc.cached(store)
    if last is None:           # the first look: every series, from the index
        listed = _keys(store, metric, family, host)
        keys = [tuple(k[:3]) for k in listed]
        spans = {tuple(k[:3]): (k[4], k[5]) for k in listed}
        touched = set(keys)
    else:                      # the series kept and those with new runs: no walk over the whole index

        def wanted(k) -> bool:
            return ((metric is None or k[0] == metric) and (family is None or sig.in_family(k[0], family))
                    and (host is None or k[1] == host))
        touched = {k for k in sc.touched_since(store, last) if wanted(k)}
        keys = sorted({k for k in cache if wanted(k)} | touched)
        spans = {k: (str(cache[k][2].get("first", "")), cache[k][0]) for k in keys if k in cache}
    skipped: Dict[str, int] = {}
    out: List[Series] = []
    kept: Dict[sc.Key, Tuple[str, str, dict]] = {}
    through = last or ""
    examined = 0
    for key in keys:
        entry = cache.get(key)   # type: ignore[call-overload]
        if key in touched or entry is None:
            examined += 1
            open_from = entry[1] if entry is not None else None
            earlier = [c for c in (_from_doc(d) for d in entry[2].get("steps", ())) if c] if entry else []
            # a series seen for the first time is examined whole, as a full look does
            window = sc.points(store, key) if entry is None else sc.newest(store, key, max(WINDOW, opts.baseline + 1))
            data = clean(window if entry is None else [r for r in window[-WINDOW:] if r[3] >= open_from], skipped)
            if not data:
                continue
            base = clean(window[-(opts.baseline + 1):], {})
            s = _series(key, data, opts)
            s.n = len(data)
            first = spans[key][0] if key in spans and spans[key][0] else data[0][0][3]
            s.first, s.last = first, window[-1][3]
            new, _ = analyse_rows(key, data, opts, inv, baseline=False)
            s.baseline = _baseline([r for r, _ in base], [v for _, v in base], opts)
            steps = earlier + [c for c in new if c.kind == "step"]
            known = acked_drift(entry, acked)
            s.changes = mark_acked(steps + [c for c in new if c.kind == "drift"], acked, known)
            last_step = max((c.started for c in steps), default=open_from or data[0][0][3])
            drifts = [c for c in s.changes if c.kind == "drift"]
            # the acknowledged drift is remembered while no step ends its segment, also through a look
            # that finds it too weak: when it comes back, with another first run, it is still known
            remember = next((c for c in drifts if c.acked), None) or (
                known if known is not None and not any(st.started > known.started for st in steps) else None)
            doc = {"first": s.first, "steps": [_to_doc(c) for c in steps], "drift": [_to_doc(c) for c in drifts]}
            if remember is not None:
                doc["acked_drift"] = _to_doc(_replace(remember, acked=True))
            kept[key] = (s.last, last_step, doc)
        else:
            s = Series(*key, unit="", better="higher", n=0, first=spans[key][0], last=spans[key][1])
            docs = list(entry[2].get("steps", ())) + list(entry[2].get("drift", ()))
            s.changes = mark_acked([c for c in (_from_doc(d) for d in docs) if c], acked, acked_drift(entry, acked))
            if s.changes:
                s.unit, s.better = s.changes[0].unit, s.changes[0].better
        through = max(through, s.last)
        out.append(s)
    scopes(out)
    report = Report(out, skipped, since=last, through=through, examined=examined)
    # a drift is new when the series was examined now and the last look saw none in it
    report.new_drifts = {k for k, (_, _, doc) in kept.items() if doc["drift"] and
                         not (k in cache and cache[k][2].get("drift"))}
    if not store.readonly:
        sc.keep(store, kept, through, when)
        report.kept = True
    elif store.path.exists():            # a file this user may not write (a missing one has nothing to keep)
        report.notes.append(f"{store.path} is read-only here: this look was not recorded, the next --since "
                            f"starts from the same point")
    return report


def ack(store, items: Iterable[Tuple[str, str]], when: str) -> List[Tuple[str, str]]:
    """Acknowledge each (run id or prefix, metric); the full run ids written."""
    pairs = [(store.resolve(r), m) for r, m in items]
    sc.ack(store, pairs, when)
    return pairs
