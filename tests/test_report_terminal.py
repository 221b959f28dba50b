"""report.terminal and report._format: content of the text report and the summary."""
import re

import pytest

from ceiling.report import _format as F
from ceiling.report import terminal
from ceiling.results.model import LOWER, Metric, Peak, Run

import sample_runs
from reporting import render_text, summary_text

ALLOWED = set("×µ")          # the only non-ASCII characters a pasteable report may hold


def _pasteable(text):
    assert "\033" not in text
    odd = {ch for ch in text if ord(ch) > 126 and ch not in ALLOWED}
    assert not odd, f"characters that break in e-mail: {odd}"
    assert all(ord(ch) >= 32 or ch == "\n" for ch in text)


def _row(text, name):
    return next(line for line in text.splitlines() if line.split()[:1] == [name])


@pytest.mark.parametrize("width", [60, 80, 100, 140])
@pytest.mark.parametrize("which", sorted(sample_runs.ALL))
def test_plain_and_within_width(which, width):
    text = render_text(sample_runs.ALL[which](), color=False, width=width)
    _pasteable(text)
    too_long = [line for line in text.splitlines() if len(line) > width]
    assert not too_long
    summary = summary_text(sample_runs.ALL[which](), width=width)
    _pasteable(summary)
    assert all(len(line) <= width for line in summary.splitlines())


def test_metrics_table_shows_efficiency_peak_and_spread():
    run = sample_runs.vm_run()
    text = render_text(run, color=False, width=120)
    row = _row(text, "dgemm.node").split()
    assert row[1:6] == ["88.9", "Gflop/s", "102.7", "87%", F.num(run.metric("dgemm.node").stats.median)]
    row = _row(text, "flops.dp.node.scalar").split()
    assert "77%" in row and "25.68" in row
    lat = _row(text, "latency.dram").split()
    assert lat[1:3] == ["96.4", "ns"] and lat[-1] == "1"           # threads
    assert "312 cycles" in text
    assert " 6%! " in _row(text, "stream.triad")                  # the high spread marked in its row
    assert "spread 6% (CV) is high" not in text                      # and said once, under the table
    assert text.count("CV above 5% (marked !) on 1 metric: stream.triad: other load or frequency changes") == 1


def test_unknown_peak_shows_unknown_and_its_reason_once():
    text = render_text(sample_runs.vm_run(), color=False, width=100)
    row = _row(text, "stream.triad").split()
    assert row[3:5] == ["unknown", "unknown"]
    flat = " ".join(text.split())
    assert ("peak unknown: memory channels and DIMM speed unknown: dmidecode needs root, "
            "and a KVM guest shows no DIMMs") in flat
    assert "peak unknown: same reason as stream.copy" in flat
    assert "membw.node unknown memory channels and DIMM speed unknown" in flat    # peaks section


def test_findings_grouped_with_evidence_why_fix():
    text = render_text(sample_runs.vm_run(), color=False, width=100)
    order = [text.index(f"\n  {s}\n") for s in ("FAIL", "WARN", "OK", "SKIPPED")]
    assert order == sorted(order)
    flat = " ".join(text.split())
    assert "mem.thp - Transparent huge pages are disabled" in flat
    assert "fix: echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (needs root)" in flat
    assert "evidence: 0.9 CPUs busy outside ceiling" in flat
    assert "why: A VM has no cpufreq interface" in flat
    assert "Findings (1 fail, 2 warn, 1 ok, 1 skipped)" in flat


def test_header_facts():
    text = render_text(sample_runs.epyc_run(), color=False, width=160)
    assert "cn0421.hpc.example.org" in text
    assert "2 sockets × 64 cores × 1 thread = 128 CPUs, 8 NUMA nodes" in text
    assert "base 2.45 GHz (cpufreq base_frequency)" in text
    assert "measured 3.49 GHz one core busy, 2.80 GHz all cores busy" in text
    assert "L1d 32 KiB ×128, L2 512 KiB ×128, L3 32 MiB ×16" in text
    assert "512 GiB, 8 channels × 3200 MT/s per socket" in text
    assert "OMP_NUM_THREADS=128" in text
    vm = render_text(sample_runs.vm_run(), color=False, width=160)
    assert "base unknown (no cpufreq in this VM)" in vm and "KVM" in vm


def test_partial_and_empty_runs():
    text = render_text(sample_runs.bare_run(), color=False, width=80)
    assert "PARTIAL RUN: interrupted (SIGINT) during bench memory" in text
    assert "Findings  (none)" in text
    empty = Run(tool_version="0", host="", started="", command=[])
    text = render_text(empty, color=False, width=80)
    assert "nothing was measured" in text and "not recorded" in text
    assert "Nothing was measured in this run." in summary_text(empty)


def test_invalid_metric_is_marked():
    m = Metric.measured("stream.triad", [50.0], "GB/s", peak=Peak(100.0, "GB/s", "p"))
    m.valid = False
    run = Run(tool_version="0", host="h", started="", command=[], metrics=[m])
    text = render_text(run, color=False, width=100)
    assert "50.0!" in _row(text, "stream.triad") and "INVALID" in text
    assert "INVALID" in summary_text(run)
    # An invalid number is never the verdict.
    assert "Furthest below peak" not in summary_text(run)


def test_long_latency_is_shown_in_microseconds():
    m = Metric.measured("latency.numa_remote", [1500.0, 1600.0], "ns", LOWER)
    run = Run(tool_version="0", host="h", started="", command=[], metrics=[m])
    row = _row(render_text(run, color=False, width=100), "latency.numa_remote").split()
    assert row[1:3] == ["1.50", "µs"] and row[3:5] == ["-", "-"] and row[5] == "1.55"


def test_narrow_width_drops_columns_not_rows():
    run = sample_runs.vm_run()
    narrow = terminal.metrics_table(run, width=60)
    assert all(len(line) <= 60 for line in narrow.splitlines())
    for m in run.metrics:
        assert _row(narrow, m.name)
    head = _row(narrow, "metric").split()
    assert head[:4] == ["metric", "value", "unit", "peak"] and "reps" not in head


@pytest.mark.parametrize("width", [60, 65, 69, 70, 100])
def test_the_spread_note_promises_a_mark_only_where_the_cv_column_is_shown(width):
    """At 60-69 columns the CV column is dropped: the note still names the metrics of high
    spread, but cannot point at a "!" that is not on the screen."""
    text = terminal.metrics_table(sample_runs.vm_run(), width=width)
    flat = " ".join(text.split())
    shown = "CV" in _row(text, "metric").split()
    assert shown == (width >= 70)
    assert ("CV above 5% (marked !) on 1 metric: stream.triad" in flat) == shown
    assert ("CV above 5% on 1 metric: stream.triad" in flat) != shown
    assert ("6%!" in _row(text, "stream.triad")) == shown


def test_color_is_ansi_only_when_asked():
    run = sample_runs.vm_run()
    assert "\033[" in render_text(run, color=True, width=100)
    assert "\033[" in summary_text(run, color=True)
    plain = re.sub(r"\033\[[0-9;]*m", "", render_text(run, color=True, width=100))
    assert plain == render_text(run, color=False, width=100)


def test_summary_names_the_subsystem_and_problems():
    text = summary_text(sample_runs.epyc_run())
    flat = " ".join(text.split())
    assert "Furthest below peak - Memory bandwidth: STREAM triad 290 GB/s is 71% of the 409.6 GB/s peak" in flat
    assert "STREAM triad 290 GB/s 71% of 409.6 GB/s peak" in flat
    assert "WARN Automatic NUMA balancing is on - fix: sysctl kernel.numa_balancing=0" in flat
    assert len(text.splitlines()) <= 24
    vm = " ".join(summary_text(sample_runs.vm_run()).split())
    assert "Compute: DGEMM (all cores) 88.9 Gflop/s is 87%" in vm and "FAIL Transparent huge pages" in vm
    bare = " ".join(summary_text(sample_runs.bare_run()).split())
    assert "STREAM triad 38.1 GB/s peak unknown" in bare and "every peak is unknown" in bare


@pytest.mark.parametrize("value,text", [(38.14, "38.1"), (0.9123, "0.912"), (409.6, "410"), (9.996, "10.0"),
                                        (5734.4, "5734"), (0, "0"), (None, "-"), (-2.5, "-2.50"), (4e-4, "4.00e-04")])
def test_num(value, text):
    assert F.num(value) == text


def test_units():
    assert F.num(409.6, 4) == "409.6" and F.num(62.4, 4) == "62.4" and F.num(102.72, 4) == "102.7"
    assert F.pct(0.6106) == "61%" and F.pct(0.004) == "0.4%" and F.pct(1.03) == "103%" and F.pct(None) == "-"
    assert [F.size(x) for x in (512, 32 << 10, 3 << 19, 24 << 30)] == ["512 B", "32 KiB", "1.5 MiB", "24 GiB"]
    assert [F.size_tick(x) for x in (4096, 1 << 20, 3 << 29)] == ["4K", "1M", "1.50G"]
    assert F.with_unit(2500.0, "ns") == "2.50 µs" and F.with_unit(2.5e6, "ns") == "2.50 ms"
    assert F.with_unit(None, "GB/s") == "-"
    assert F.duration(4.24) == "4.2 s" and F.duration(65) == "1 min 05 s" and F.duration(3720) == "1 h 02 min"


def test_render_machine_lists_peaks_and_unknowns():
    text = terminal.render_machine(sample_runs.vm_run(), width=100)
    _pasteable(text)
    flat = " ".join(text.split())
    assert "Theoretical peaks" in flat and "flops.dp.node 102.7 Gflop/s 2 cores × 3.21 GHz" in flat
    assert "Not known" in flat and "clocks.base_ghz no cpufreq in this VM" in flat
    assert "Metrics" not in text


def test_render_history_runs_and_one_metric():
    from types import SimpleNamespace
    runs = [SimpleNamespace(run_id="a41c07d2", host="cn0421", started="2024-05-03T22:01:12Z", finished="",
                            tool_version="0.1.0", partial=True, n_metrics=22, verb="bench memory",
                            headline={"stream.triad": (290.0, "GB/s"), "latency.dram": (108.0, "ns")}),
            SimpleNamespace(run_id="3f2a9c1e", host="ci", started="2024-05-02T09:14:03Z", finished="",
                            tool_version="0.1.0", partial=False, n_metrics=5, verb="check", headline={})]
    text = terminal.render_history(runs)
    lines = text.splitlines()
    assert lines[0].split() == ["run", "started", "host", "verb", "version", "metrics", "triad", "DRAM", "lat"]
    assert "22 partial" in lines[1] and "290 GB/s" in lines[1] and "108 ns" in lines[1]
    assert " bench memory " in lines[1] and " check " in lines[2]
    assert lines[2].split()[-2:] == ["-", "-"]
    from ceiling.results.store import Point
    point = Point("2024-05-02T09:14:03Z", "ci", "3f2a9c1e", 2500.0, "ns", "lower", '{"threads":1}', "0123456789abcdef",
                  True, 3, 2500.0, 2600.0, 2600.0, 2500.0, 2700.0, 100.0, 100 / 2600, (2500.0, 2600.0, 2700.0))
    one = terminal.render_history([point], metric="latency.x")
    assert one.splitlines()[0] == "latency.x: 1 value, oldest first; measured with threads=1"
    assert one.splitlines()[1] == "configuration 01234567 throughout"
    assert one.splitlines()[3].split() == ["2024-05-02", "09:14:03", "UTC", "ci", "2.50", "2.60", "µs", "3", "4%",
                                           "3f2a9c1e"]
    assert terminal.render_history([]) == "No runs are recorded."
    assert terminal.render_history([], metric="m") == "No value of m is recorded."


def test_when():
    assert F.when("2024-05-02T09:14:03Z") == "2024-05-02 09:14:03 UTC"
    assert F.when("2026-11-21T12:44:24.123456+00:00") == "2026-11-21 12:44:24 UTC"
    assert F.when("") == "time unknown"


def test_figures_not_read_from_this_node_say_so_and_the_process_limits_are_shown():
    run = sample_runs.vm_run()
    m = dict(run.machine)
    m["sources"] = {"memory_channels": "CPU families data file: Zen 3 (Milan)", "fma_units": "CPU families data file",
                    "affinity": "sched_getaffinity"}
    m.update(memory_channels=8, memory_mts=None, fma_units=2, affinity=[0, 1], threads=2,
             cgroup={"version": "v2", "cpu_quota_cpus": 1.5, "memory_limit_bytes": 8 << 30, "cpuset": "0-1"})
    run.machine = m
    flat = " ".join(terminal.render_machine(run, width=100).split())
    assert "8 channels per socket (assumed from the CPU family table, not read from this node)" in flat
    assert "2 FMA pipes/core (assumed from the CPU family table, not read from this node)" in flat
    assert "Affinity CPUs 0-1 (2 of 2 online), sched_getaffinity" in flat
    assert "Limits cgroup v2: CPU quota 1.50 CPUs, cpuset 0-1, memory limit 8 GiB" in flat
    m["sources"]["memory_channels"] = "config file /etc/ceiling.toml"
    m["cgroup"] = {"version": "v1"}
    flat = " ".join(terminal.render_machine(run, width=100).split())
    assert "8 channels per socket (config file /etc/ceiling.toml)" in flat
    assert "Limits cgroup v1: no CPU quota, no memory limit" in flat


def test_machine_json_is_the_run_document(tmp_path):
    import json
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "ceiling", "machine", "--no-measure", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema_version"] >= 1 and doc["machine"]["threads"] >= 1 and "Affinity" in r.stderr


def test_topology_never_shows_a_product_that_does_not_hold():
    assert F.topology({"sockets": 2, "cores": 128, "threads": 256,
                       "smt": 2}) == "2 sockets × 64 cores × 2 threads = 256 CPUs"
    # every CPU listed as a sibling of every other (a garbled tree): 1 core over 2 sockets
    assert F.topology({"sockets": 2, "cores": 1, "threads": 10000,
                       "smt": 10000}) == "2 sockets, 1 core, 10000 CPUs (uneven)"
    # offline CPUs: 2 × 4 × 2 would be 16
    assert F.topology({"sockets": 2, "cores": 8, "threads": 14, "smt": 2}) == "2 sockets, 8 cores, 14 CPUs (uneven)"
