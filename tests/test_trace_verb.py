"""`ceiling trace -- CMD` end to end (issue 28): the profile's run and page, plus a Perfetto trace
read back with the perfetto package's own protobuf classes (tests/perfetto_read.py), the
recording kept in the run (path, size, events, dropped, the time line's bins), the time line in
the HTML report (also re-rendered from the saved JSON), and bad options refused before the
program runs with one line and exit 2."""
from __future__ import annotations

import json
import os
import signal
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ceiling.analysis.trace_bins import CLASSES, Bins, bins_doc, bins_from_doc

perfetto_read = pytest.importorskip("perfetto_read", reason="needs the perfetto package (test extras)")

DD = shutil.which("dd")


def trace(tmp_path: Path, *cmd: str, opts=(), env=None, timeout=120):
    out, pf = tmp_path / "t.json", tmp_path / "t.pftrace"
    r = subprocess.run([sys.executable, "-m", "ceiling", "trace", "--no-store", "--no-measure", "--save-json",
                        str(out), "--trace", str(pf), *opts, "--", *cmd], capture_output=True, text=True,
                       timeout=timeout, env=dict(os.environ, NO_COLOR="1", **(env or {})))
    return r, (json.loads(out.read_text()) if out.exists() else None), pf


def _recorded(doc):
    (f,) = [f for f in doc["findings"] if f["id"] == "trace.recorded"]
    return f


def test_dd_is_traced_call_by_call_and_the_run_keeps_the_recording(tmp_path):
    r, doc, pf = trace(tmp_path, DD, "if=/dev/zero", f"of={tmp_path / 'out'}", "bs=64k", "count=50",
                       opts=["--out", str(tmp_path / "t.html")])
    assert r.returncode == 0, r.stderr
    assert doc["application"]["profile"]["interposer"]["used"]
    rec = _recorded(doc)
    assert rec["status"] == "ok" and rec["data"]["path"] == str(pf) and rec["data"]["bytes"] == pf.stat().st_size
    assert rec["data"]["dropped"] == 0 and "nothing dropped" in rec["evidence"]
    tr = perfetto_read.read(pf)
    perfetto_read.check_nesting(tr)
    writes = [s for s in tr.slices if s.name == "write" and s.cat == "io.write"]
    reads = [s for s in tr.slices if s.name == "read"]
    # the profile's own counts, call by call: 50 writes of 64 KiB to the file, 50 reads of /dev/zero
    io = doc["application"]["profile"]["io_calls"]
    assert len(writes) == io["write"]["calls"] == 50 and len(reads) >= 50
    assert sum(int(s.args.get("bytes", 0)) for s in writes) == 50 * 65536
    # the node's counters beside the calls, in the trace and in the run: this node's CPU at least (a share;
    # dd may be over in less than one of /proc/stat's 10 ms ticks, so its one interval may count it 0: the
    # sleeping-phase test below sees the node busy while dd computes for most of a second)
    kept = {t["name"]: t for t in rec["data"]["counters"]}
    assert "cpu busy" in kept and len(kept["cpu busy"]["ts_ns"]) == len(kept["cpu busy"]["value"]) >= 1
    assert all(0.0 <= v <= 1.0 for v in kept["cpu busy"]["value"]), kept["cpu busy"]
    assert tr.counters and len(tr.counters) >= len(kept)       # and the processes' own tracks, in the file alone
    # /dev/zero is no storage: its reads are no I/O on the time line, so no finding about them
    assert not [f for f in doc["findings"] if f["id"].startswith("trace.io.fluctuating_reads")]
    # the time line's bins are kept in the run, and drawn in its HTML report, and again from its JSON
    bins = bins_from_doc(rec["data"]["timeline"])
    assert bins.lanes and bins.of("io").max() > 0
    html = (tmp_path / "t.html").read_text()
    assert '<section id="timeline">' in html and "<svg" in html.split('<section id="timeline">')[1]
    again = subprocess.run([sys.executable, "-m", "ceiling", "show", str(tmp_path / "t.json"), "--out",
                            str(tmp_path / "again.html")], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert '<section id="timeline">' in (tmp_path / "again.html").read_text()
    # the recording's own cost, measured: events x the per-event cost of this node + the write-outs
    cost = rec["data"]["cost"]
    assert cost["events"] > 100 and cost["per_event_ns"] > 0 and "dd of" in cost["how"]
    assert cost["tracer_s"] == rec["data"]["tracer_s"]
    assert cost["total_s"] == pytest.approx(cost["events"] * cost["per_event_ns"] / 1e9 + cost["tracer_s"])
    assert cost["fraction"] == pytest.approx(cost["busiest_s"] / doc["application"]["wall_s"])
    assert "Recording cost: about" in rec["evidence"] and "Recording cost: about" in html
    assert any("Recording cost: about" in x.args.get("recording cost", "") for x in tr.statement)
    # the terminal page is the profile's, with the trace said
    assert "ceiling" in r.stderr.split("\n")[3] and " trace - " in r.stderr.split("\n")[3]   # the page's head
    assert "Where the time went" in r.stderr and "trace.recorded - Trace written:" in r.stderr


def test_the_recording_cost_is_unknown_with_its_reason_without_a_per_event_figure():
    from ceiling.analysis.trace_cost import cost_text, recording_cost
    per = {10: (1000, 2_000_000), 11: (3000, 1_000_000)}
    known = recording_cost(per, {"per_event_ns": 20.0, "how": "dd"}, 2.0)
    # the busiest process: 1000 x 20 ns + 2 ms (the other 3000 x 20 ns + 1 ms); the total: 4000 x 20 ns + 3 ms
    assert known["busiest_pid"] == 10 and known["busiest_s"] == pytest.approx(20e-6 + 2e-3)
    assert known["total_s"] == pytest.approx(80e-6 + 3e-3) and known["fraction"] == pytest.approx(2.02e-3 / 2)
    unknown = recording_cost(per, {"per_event_ns": None, "why": "dd is not installed"}, 2.0)
    assert "total_s" not in unknown and "fraction" not in unknown and unknown["tracer_s"] == pytest.approx(3e-3)
    text = cost_text(unknown)
    assert "unknown" in text and "dd is not installed" in text and "3 ms" in text
    assert "unknown" in cost_text(recording_cost(per, {}, 2.0))


@pytest.mark.serial    # off CPU includes waiting for a CPU: beside other tests dd's lane is drawn half waiting
@pytest.mark.alone     # and so beside the Open MPI pass (make test runs it next to the serial pass)
def test_a_sleeping_phase_is_drawn_waiting_and_a_computing_one_computing(tmp_path):
    # sleep's second: the shell waits for it, sleep sleeps: off CPU; then dd fills 1 MiB buffers from
    # /dev/zero (no storage I/O: on a CPU, in the kernel) for a good part of a second
    r, doc, pf = trace(tmp_path, "sh", "-c", f"sleep 1; {DD} if=/dev/zero of=/dev/null bs=1M count=6000",
                       opts=["--interval", "0.05", "--out", str(tmp_path / "t.html")])
    assert r.returncode == 0, r.stderr
    b = bins_from_doc(_recorded(doc)["data"]["timeline"])
    assert b.off_cpu is not None and b.off_cpu_interval_s == 0.05
    mid = (b.edges_ns[:-1] + b.edges_ns[1:]) / 2e9
    sleeping = (mid > 0.2) & (mid < 0.8)
    alive = b.alive if b.alive is not None else np.ones_like(b.compute)
    # every lane alive then (the shell, sleep) is drawn waiting, not computing
    lanes = [i for i in range(len(b.lanes)) if alive[i, sleeping].mean() > 0.9]
    assert lanes
    for i in lanes:
        assert b.waiting_off_cpu[i, sleeping].mean() > 0.8 and b.compute[i, sleeping].mean() < 0.2, b.labels[i]
    # dd's lane: it exists only after the sleep, and computes
    later = [i for i in range(len(b.lanes)) if alive[i, mid < 0.9].sum() == 0 and alive[i].sum() > 0]
    assert later
    busy = max(later, key=lambda i: alive[i].sum())
    on = alive[busy] > 0.9
    assert b.compute[busy, on].mean() > 0.6 and b.waiting_off_cpu[busy, on].mean() < 0.3
    assert "waiting off CPU outside calls" in (tmp_path / "t.html").read_text()
    # the node's CPU counter sees dd computing: at least half of one of this node's CPUs busy in some interval
    kept = {t["name"]: t for t in _recorded(doc)["data"]["counters"]}
    assert max(kept["cpu busy"]["value"]) >= 0.5 / os.cpu_count(), kept["cpu busy"]
    # and so do the program's own tracks: summed in the run, per process in the trace (dd's CPUs in use)
    assert max(kept["program cpu"]["value"]) >= 0.5 and max(kept["program rss"]["value"]) > 1 << 20, kept.keys()
    tr = perfetto_read.read(pf)
    mine = {u: tr.tracks[u] for u in tr.counters if tr.tracks[u].HasField("parent_uuid")}
    cpus = [max(v for _, v in tr.counters[u]) for u, d in mine.items() if d.name == "cpu"]
    assert len(cpus) >= 2 and max(cpus) >= 0.5, cpus                 # sh's and dd's (and sleep's), dd computing


def test_limits_drop_events_and_say_so_while_the_profile_counts_every_call(tmp_path):
    r, doc, pf = trace(tmp_path, DD, "if=/dev/zero", f"of={tmp_path / 'out'}", "bs=4k", "count=300",
                       opts=["--max-per-site", "10", "--exclude", "read"])
    assert r.returncode == 0, r.stderr
    rec = _recorded(doc)
    assert rec["data"]["dropped"] > 0 and "dropped by the limits" in rec["evidence"]
    tr = perfetto_read.read(pf)
    assert len([s for s in tr.slices if s.name == "write"]) == 10 and not [s for s in tr.slices if s.name == "read"]
    assert doc["application"]["profile"]["io_calls"]["write"]["calls"] == 300


@pytest.mark.parametrize("opts, code, words", [
    (["--window", "5"], 2, "--window '5': not START:END"),
    (["--window", "3:1"], 3, "its end must come after its start"),
    (["--min-duration", "fast"], 2, "--min-duration 'fast': not a time"),
    (["--calls", "write,nosuch"], 2, "nosuch: no such call or class"),
    (["--max-per-site", "0"], 3, "--max-per-site 0: must be at least 1"),
    (["--max-size", "1k"], 3, "at least 64 KiB"),
])
def test_a_bad_option_is_one_line_and_its_exit_code_before_the_program_runs(tmp_path, opts, code, words):
    # 2: not an option's form (a usage error); 3: a value out of range (errors.BadValueError)
    mark = tmp_path / "ran"
    r, doc, pf = trace(tmp_path, "sh", "-c", f"touch {mark}", opts=opts)
    assert r.returncode == code and words in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not mark.exists() and not pf.exists() and doc is None


def test_an_existing_trace_is_not_overwritten_and_a_missing_directory_is_said(tmp_path):
    pf = tmp_path / "t.pftrace"
    pf.write_text("keep")
    r, _, _ = trace(tmp_path, "true")
    assert r.returncode != 0 and "does not overwrite" in r.stderr and pf.read_text() == "keep"
    r = subprocess.run([sys.executable, "-m", "ceiling", "trace", "--no-store", "--trace",
                        str(tmp_path / "no" / "t.pftrace"), "--", "true"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "does not exist" in r.stderr


def test_a_wrapped_rank_other_than_0_writes_no_trace_and_says_its_events_did_not_reach_rank_0(tmp_path):
    # as Open MPI's mpirun starts rank 1 of 2, its program without MPI: it runs, and this rank's
    # ceiling neither writes the trace nor reports (rank 0's does), and says its events stayed here
    mark = tmp_path / "ran"
    ranked = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}
    r, doc, pf = trace(tmp_path, "sh", "-c", f"touch {mark}", env=ranked)
    assert r.returncode == 0 and mark.exists() and doc is None and not pf.exists(), r.stderr
    assert "Where the time went" not in r.stderr
    assert "ceiling: rank 1: its " in r.stderr and "did not reach rank 0's trace" in r.stderr, r.stderr
    # a bad option: rank 0 says it, the others exit with its status, silently
    mark.unlink()
    r, _, _ = trace(tmp_path, "sh", "-c", f"touch {mark}", opts=["--window", "5"], env=ranked)
    assert r.returncode == 2 and r.stderr == "" and not mark.exists(), r.stderr


def test_the_bins_the_run_keeps_round_trip_to_1_255th():
    rng = np.random.default_rng(3)
    share = rng.random((3, len(CLASSES), 40)).astype(np.float32) / 2
    b = Bins(np.linspace(0, 4e9, 41).astype(np.int64), [0, 1, -8], [1, 2, 1], share, ["rank 0", "rank 1", "pid 7"])
    back = bins_from_doc(json.loads(json.dumps(bins_doc(b))))
    assert back.lanes == b.lanes and back.labels == b.labels and back.threads == b.threads
    assert np.abs(back.share - share).max() <= 0.5 / 255 + 1e-6 and (back.edges_ns == b.edges_ns).all()
    broken = dict(bins_doc(b), nbins=41)
    with pytest.raises(ValueError):
        bins_from_doc(broken)


def test_the_off_cpu_split_round_trips_and_a_run_stored_before_it_still_draws():
    from ceiling.report.html_trace import render_timeline
    rng = np.random.default_rng(5)
    share = rng.random((2, len(CLASSES), 30)).astype(np.float32) / 8
    off = rng.random((2, 30)).astype(np.float32) / 4
    b = Bins(np.linspace(0, 3e9, 31).astype(np.int64), [0, 1], [1, 1], share, ["rank 0", "rank 1"], None, off, 0.1)
    doc = json.loads(json.dumps(bins_doc(b)))
    back = bins_from_doc(doc)
    assert np.abs(back.off_cpu - off).max() <= 0.5 / 255 + 1e-6 and back.off_cpu_interval_s == 0.1
    assert np.abs(back.compute - (back.outside - back.off_cpu)).max() < 1e-6
    # a run stored before the split: no off_cpu in its bins; read and drawn as then, all outside calls computing
    old = {k: v for k, v in doc.items() if not k.startswith("off_cpu")}
    was = bins_from_doc(old)
    assert was.off_cpu is None and np.abs(was.compute - was.outside).max() == 0
    html = render_timeline(was)
    assert "<svg" in html and "drawn as computing" in html and "#D4D4D4" not in html.split("</p>", 1)[1]


CC = shutil.which("cc") or shutil.which("gcc")


def test_a_static_program_gets_the_nodes_counters_alone_and_says_why(tmp_path):
    src, exe = tmp_path / "s.c", tmp_path / "s"
    src.write_text('#include <unistd.h>\nint main(void) { usleep(300000); return 0; }\n')
    if CC is None or subprocess.run([CC, "-static", "-o", str(exe), str(src)], capture_output=True).returncode:
        pytest.skip("no C compiler with a static libc")
    r, doc, pf = trace(tmp_path, str(exe))
    assert r.returncode == 0, r.stderr
    rec = _recorded(doc)
    assert rec["status"] == "ok" and rec["title"].endswith("the node's counters only"), rec
    assert "statically linked" in rec["evidence"] and rec["data"]["timeline"] is None
    tr = perfetto_read.read(pf)
    assert not [s for s in tr.slices if s.cat.startswith(("io.", "mpi"))] and tr.counters


def test_ctrl_c_keeps_a_readable_trace_of_what_was_recorded(tmp_path):
    out, pf = tmp_path / "t.json", tmp_path / "t.pftrace"
    # "go" from the process that then sleeps: with `echo go; sleep 60` a Ctrl-C landing between the
    # two (dash takes it, then starts sleep) left sleep running its 60 s in about one run in seven
    sleeper = f"{sys.executable} -c 'import time; print(\"go\", flush=True); time.sleep(60)'"
    script = f"dd if=/dev/zero of={tmp_path / 'out'} bs=4k count=100 2>/dev/null; exec {sleeper}"
    p = subprocess.Popen([sys.executable, "-m", "ceiling", "trace", "--no-store", "--no-measure", "--save-json",
                          str(out), "--trace", str(pf), "--", "sh", "-c", script], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env=dict(os.environ, NO_COLOR="1"))
    try:
        assert p.stdout.readline().strip() == "go"
        os.killpg(p.pid, signal.SIGINT)            # as Ctrl-C at a terminal: ceiling and the program
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, err
    doc = json.loads(out.read_text())
    assert doc["partial"] and _recorded(doc)["status"] == "ok"
    writes = [s for s in perfetto_read.read(pf).slices
              if s.name == "write" and s.args.get("file") == str(tmp_path / "out")]
    assert len(writes) == 100                     # dd had ended: every one of its writes is there


def test_the_counter_tracks_the_run_keeps_round_trip_and_are_thinned():
    from ceiling.results.events import Counters, Track
    t = Track("disk sda write bytes/s", "B/s", "node", np.arange(1000, dtype=np.int64) * 10, np.arange(1000.0),
              device="sda")
    kept = json.loads(json.dumps(Counters([t]).doc(points=100)))
    assert len(kept[0]["ts_ns"]) == 100 and kept[0]["value"][0] == pytest.approx(4.5)      # means of 10
    back = Counters.from_doc(kept + [{"name": "broken"}])                                   # a damaged one left out
    assert [x.name for x in back.tracks] == [t.name] and back.tracks[0].device == "sda"
    assert Counters.from_doc([]) is None
