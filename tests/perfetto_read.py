"""A reader of ceiling's Perfetto files for the tests, built on the protobuf classes the `perfetto`
package ships (not on ceiling's encoder): it replays each sequence's incremental state the way
Perfetto's trace processor does (interning cleared by SEQ_INCREMENTAL_STATE_CLEARED, defaults,
the incremental clock of a clock snapshot) and fails on anything it cannot resolve."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

CLEARED, NEEDS = 1, 2


class Broken(AssertionError):
    pass


@dataclass
class Slice:
    track: int
    ts: int
    dur: int            # -1: an instant
    name: str
    cat: str
    args: Dict[str, object]
    flows: Tuple[int, ...] = ()
    ends_flows: Tuple[int, ...] = ()


@dataclass
class Trace:
    tracks: Dict[int, object] = field(default_factory=dict)           # uuid -> TrackDescriptor
    slices: List[Slice] = field(default_factory=list)
    counters: Dict[int, List[Tuple[int, float]]] = field(default_factory=lambda: defaultdict(list))
    statement: List[Slice] = field(default_factory=list)             # events with inline names (ceiling's own)
    clocks: List[object] = field(default_factory=list)


@dataclass
class _Seq:
    valid: bool = False
    names: Dict[int, str] = field(default_factory=dict)
    cats: Dict[int, str] = field(default_factory=dict)
    anns: Dict[int, str] = field(default_factory=dict)
    strs: Dict[int, str] = field(default_factory=dict)
    defaults: object = None
    incr: Dict[int, int] = field(default_factory=dict)
    last_ts: int = -1


def _get(table: Dict[int, str], iid: int, what: str) -> str:
    if iid not in table:
        raise Broken(f"{what} iid {iid} is not interned on its sequence")
    return table[iid]


def read(path) -> Trace:
    data = open(path, "rb").read()
    t = pb.Trace()
    t.ParseFromString(data)
    out = Trace()
    seqs: Dict[int, _Seq] = defaultdict(_Seq)
    stacks: Dict[int, List[Slice]] = defaultdict(list)
    for p in t.packet:
        s = seqs[p.trusted_packet_sequence_id]
        if p.sequence_flags & CLEARED or p.incremental_state_cleared:
            seqs[p.trusted_packet_sequence_id] = s = _Seq(valid=True)
        if p.HasField("trace_packet_defaults"):
            s.defaults = p.trace_packet_defaults
        if p.HasField("clock_snapshot"):
            if p.clock_snapshot.HasField("primary_trace_clock"):
                out.clocks.append(p.clock_snapshot)
            for c in p.clock_snapshot.clocks:
                if c.is_incremental:
                    s.incr[c.clock_id] = c.timestamp
        if p.sequence_flags & NEEDS and not s.valid:
            raise Broken("a packet needs incremental state its sequence never cleared")
        if p.HasField("interned_data"):
            d = p.interned_data
            for tab, entries in ((s.names, d.event_names), (s.cats, d.event_categories),
                                 (s.anns, d.debug_annotation_names)):
                for e in entries:
                    tab[e.iid] = e.name
            for e in d.debug_annotation_string_values:
                s.strs[e.iid] = e.str.decode()
        if p.HasField("track_descriptor"):
            out.tracks[p.track_descriptor.uuid] = p.track_descriptor
        if not p.HasField("track_event"):
            continue
        clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else (
            s.defaults.timestamp_clock_id if s.defaults is not None else 0)
        if clock in s.incr:
            s.incr[clock] += p.timestamp
            ts = s.incr[clock]
        else:
            ts = p.timestamp
        if ts < s.last_ts:
            raise Broken(f"timestamps go back on sequence {p.trusted_packet_sequence_id}")
        s.last_ts = ts
        te = p.track_event
        track = te.track_uuid if te.HasField("track_uuid") else (
            s.defaults.track_event_defaults.track_uuid if s.defaults is not None else 0)
        if track not in out.tracks:
            raise Broken(f"an event on track {track}, which no descriptor declares (before it)")
        if te.type == pb.TrackEvent.TYPE_COUNTER:
            out.counters[track].append((ts, te.double_counter_value))
            continue
        args = {}
        for a in te.debug_annotations:
            name = a.name if a.HasField("name") else _get(s.anns, a.name_iid, "annotation name")
            if a.HasField("string_value_iid"):
                args[name] = _get(s.strs, a.string_value_iid, "string value")
            else:
                args[name] = getattr(a, a.WhichOneof("value"))
        name = te.name if te.HasField("name") else (_get(s.names, te.name_iid, "event name") if te.name_iid else "")
        cat = ",".join([_get(s.cats, c, "category") for c in te.category_iids] + list(te.categories))
        if te.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            sl = Slice(track, ts, -2, name, cat, args, tuple(te.flow_ids))
            stacks[track].append(sl)
        elif te.type == pb.TrackEvent.TYPE_SLICE_END:
            if not stacks[track]:
                raise Broken(f"an END on track {track} without its BEGIN")
            sl = stacks[track].pop()
            sl.dur = ts - sl.ts
            sl.ends_flows = tuple(te.terminating_flow_ids)
            out.slices.append(sl)
        elif te.type == pb.TrackEvent.TYPE_INSTANT:
            sl = Slice(track, ts, -1, name, cat, args, tuple(te.flow_ids))
            (out.statement if te.HasField("name") else out.slices).append(sl)
        else:
            raise Broken(f"unexpected event type {te.type}")
    for track, st in stacks.items():
        if st:
            raise Broken(f"{len(st)} slices on track {track} never end")
    return out


def check_nesting(tr: Trace) -> None:
    """Every slice lies within the slice that encloses it on its track."""
    by_track: Dict[int, List[Slice]] = defaultdict(list)
    for s in tr.slices:
        if s.dur >= 0:
            by_track[s.track].append(s)
    for track, sl in by_track.items():
        sl.sort(key=lambda s: (s.ts, -s.dur))
        open_: List[Slice] = []
        for s in sl:
            while open_ and open_[-1].ts + open_[-1].dur <= s.ts:
                open_.pop()
            if open_ and s.ts + s.dur > open_[-1].ts + open_[-1].dur:
                raise Broken(f"a slice on track {track} at {s.ts} ends after its enclosing slice")
            open_.append(s)
