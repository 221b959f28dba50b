"""probes/perf_counters.py: the real perf_event_open on real children, and the figures apart.

The development VM has no virtual PMU (cycles: ENOENT) and perf_event_paranoid=2,
so software events count and hardware ones do not; every test that touches
hardware passes either way: where the counters exist it asserts that they count.
Nothing here is a timing test: CPU time is compared with wait4's rusage within a
factor, on loops of a few tens of milliseconds. The struct layout and constants
are include/uapi/linux/perf_event.h's.
"""
from __future__ import annotations

import errno
import gc
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ceiling.probes import perf_counters as pc
from ceiling.sysfs import Root

SRC = str(Path(__file__).resolve().parents[1] / "src")
LOOP = "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done"     # about 30 ms of one CPU in dash


def open_fds() -> int:
    # earlier tests' unclosed files are closed by the collector at its own time: collected first, so
    # that a count compares this test's descriptors alone
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


def run(argv, **kw):
    """Spawn, reap, read: (result dict, rusage CPU seconds, exit status, wall seconds)."""
    t0 = time.monotonic()
    s = pc.spawn(argv, **kw)
    e = s.wait()
    wall = time.monotonic() - t0
    return s.finish(wall), e.user_s + e.system_s, e.status, wall


def assert_hardware_either_way(r: dict) -> None:
    """No PMU: available False, the reason names cycles and its errno. A PMU: cycles counted."""
    cycles = r["events"]["cycles"]
    if cycles["errno"]:
        assert r["available"] is False
        assert r["why"].startswith("no hardware counters: the cycles event cannot be opened (" + cycles["errno"])
        assert "compute and memory cannot be told apart" in r["why"] and "ipc" in r["not_derived"]
    else:
        assert r["available"] is True and r["why"] == ""
        assert cycles["value"] > 0 and 0 < cycles["scaled"] <= 1


# ---- the binding -----------------------------------------------------------------------

def test_attr_layout_and_flag_bits_match_the_uapi_header():
    A = pc.PerfEventAttr
    assert pc.ATTR_SIZE == 128 >= 112                      # PERF_ATTR_SIZE_VER7 (VER5 is 112)
    assert (A.type.offset, A.size.offset, A.config.offset, A.read_format.offset, A.flags.offset) == (0, 4, 8, 32, 40)
    assert (A.config1.offset, A.sample_regs_intr.offset, A.sig_data.offset) == (56, 96, 120)
    assert pc.ATTR_DISABLED == 1 and pc.ATTR_INHERIT == 2 and pc.ATTR_EXCLUDE_KERNEL == 32
    assert pc.ATTR_EXCLUDE_HV == 64 and pc.ATTR_ENABLE_ON_EXEC == 1 << 12
    assert pc.FORMAT_TOTAL_TIME_ENABLED | pc.FORMAT_TOTAL_TIME_RUNNING == 3
    assert dict((n, c) for n, _, c in pc.EVENTS)["LLC-load-misses"] == 0x10002   # LL | READ << 8 | MISS << 16
    assert pc.SYSCALL_NR["x86_64"] == 298 and pc.SYSCALL_NR["aarch64"] == 241
    with pytest.raises(OSError) as e:
        pc.perf_event_open(pc.PerfEventAttr(), 0, machine="sparc64")
    assert e.value.errno == errno.ENOSYS


# ---- real children -----------------------------------------------------------------------

def test_task_clock_follows_rusage_and_page_faults_count():
    fds = open_fds()
    r, cpu, status, wall = run(["/bin/sh", "-c", LOOP])
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert open_fds() == fds                               # every counter closed
    clock = r["events"]["task-clock"]
    assert clock["errno"] is None and clock["scaled"] == 1.0
    assert 0.5 <= clock["value"] / 1e9 / cpu <= 1.5, (clock, cpu)
    assert r["events"]["page-faults"]["value"] > 0
    assert r["user_only"] == (r["paranoid"] is None or r["paranoid"] >= 2)
    util = r["derived"]["cpu_utilisation"]["value"]
    assert 0 < util <= os.cpu_count() + 0.5
    assert_hardware_either_way(r)
    json.dumps(r)                                          # a plain JSON document


@pytest.mark.parametrize("launcher", [None, ""], ids=["from-ceiling-launch", "forked-from-python"])
def test_counts_of_a_forked_child_are_included(launcher):
    # The work is in a subshell the shell forks and waits for: without inherit the
    # shell's own millisecond would be all that was counted. Started from ceiling-launch
    # (the counters opened on its child, the program) or forked from here.
    r, cpu, status, _ = run(["/bin/sh", "-c", f"( {LOOP} ) & wait"], launcher=launcher)
    assert os.WEXITSTATUS(status) == 0 and cpu > 0.005
    assert 0.5 <= r["events"]["task-clock"]["value"] / 1e9 / cpu <= 1.5, (r["events"]["task-clock"], cpu)


def test_exec_failures_raise_the_errno_and_leave_nothing_behind(tmp_path):
    fds = open_fds()
    with pytest.raises(OSError) as e:
        pc.spawn(["/nonexistent/program"])
    assert e.value.errno == errno.ENOENT and e.value.filename == "/nonexistent/program"
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(OSError) as e:
        pc.spawn([str(script)])
    assert e.value.errno == errno.EACCES
    assert open_fds() == fds


def test_a_name_without_a_slash_is_found_in_path_and_the_exit_status_is_the_programs():
    s = pc.spawn(["sh", "-c", "exit 3"], env={"PATH": os.environ.get("PATH", "/bin:/usr/bin")})
    status = s.wait().status
    s.close()
    assert os.WEXITSTATUS(status) == 3


def test_a_launcher_that_does_not_run_is_done_without():
    # /bin/true says nothing and exits: the program is forked from here instead, and still runs
    s = pc.spawn(["sh", "-c", "exit 3"], launcher="/bin/true")
    e = s.wait()
    s.close()
    assert s.launched is None and os.WEXITSTATUS(e.status) == 3 and e.how.startswith("forked from ceiling's Python")


def test_turned_off_by_the_environment_or_the_caller(monkeypatch):
    monkeypatch.setenv("CEILING_NO_COUNTERS", "1")
    r, _, status, _ = run(["/bin/true"])
    assert os.WEXITSTATUS(status) == 0
    assert r["available"] is False and r["why"] == "hardware counters turned off (CEILING_NO_COUNTERS)"
    assert r["events"] == {} and r["derived"] == {}
    monkeypatch.setenv("CEILING_NO_COUNTERS", "0")
    s = pc.spawn(["/bin/true"], counters=False)
    s.wait()
    assert s.counters is None and s.why == "hardware counters turned off (counters=False)"
    assert s.finish()["why"] == s.why
    assert pc.turned_off(True, {"CEILING_NO_COUNTERS": "yes"}) and not pc.turned_off(True, {})


CHILD = textwrap.dedent("""
    import os, signal, sys
    from ceiling.probes.perf_counters import spawn
    r, w = os.pipe()
    os.set_inheritable(w, True)
    s = spawn(["/bin/sh", "-c", 'read x; echo "out $x"; echo err >&2; echo "fd" >&%d' % w])
    s.wait()
    s.finish()
    os.close(w)
    print("pipe", os.read(r, 100).decode().strip(), flush=True)
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN        # Python's, in the parent
    s = spawn(["grep", "SigIgn", "/proc/self/status"])
    s.wait()
    s.close()
""")


def test_the_child_has_the_parents_streams_fds_and_default_signals():
    env = dict(os.environ, PYTHONPATH=SRC)
    p = subprocess.run([sys.executable, "-c", CHILD], input="in\n", capture_output=True, text=True, env=env,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[:2] == ["out in", "pipe fd"] and p.stderr == "err\n"
    ignored = int(lines[2].split()[1], 16)
    assert not ignored >> (13 - 1) & 1                     # SIGPIPE back at its default, as subprocess does


# ---- the figures, from given counts ------------------------------------------------------

def counted(**values) -> dict:
    return {n.replace("_", "-"): {"value": v, "errno": None, "why": "", "scaled": 1.0} for n, v in values.items()}


def test_derived_figures_from_their_inputs_only():
    ev = counted(task_clock=2_000_000_000, cycles=4_000_000_000, instructions=6_000_000_000,
                 stalled_cycles_backend=1_000_000_000)
    ev["LLC-load-misses"] = {"value": 3_000_000, "errno": None, "why": "", "scaled": 0.5}
    done, missing = pc.derive(ev, 1.0, (64, "sysfs"))
    assert done["ipc"]["value"] == 1.5 and done["backend_stall_share"]["value"] == 0.25
    assert done["llc_load_misses_per_kilo_instruction"]["value"] == 0.5
    assert done["cpu_utilisation"]["value"] == 2.0
    traffic = done["memory_traffic_min_bytes"]
    assert traffic["value"] == 192_000_000 and "lower bound: counts read misses only" in traffic["note"]
    assert done["memory_bandwidth_min_bytes_per_s"]["value"] == 192_000_000 and not missing


def test_figures_whose_inputs_are_missing_say_why():
    ev = counted(task_clock=1_000_000, cycles=0)
    ev["instructions"] = {"value": None, "errno": "ENOENT", "why": "no such counter", "scaled": None}
    done, missing = pc.derive(ev, None, (None, "no cache-line size"))
    assert not done
    assert missing["ipc"] == "instructions not counted (ENOENT): no such counter"
    assert missing["backend_stall_share"] == "stalled-cycles-backend not asked for"
    assert missing["cpu_utilisation"] == "no wall time given"
    done, missing = pc.derive(counted(cycles=0, instructions=5), 1.0)
    assert missing["ipc"] == "cycles counted 0"


def test_multiplexed_counts_are_scaled_and_say_so():
    ev = pc.Event("cycles", pc.PERF_TYPE_HARDWARE, 0)
    rec = pc.record(ev, (1000, 400, 100), user_only=True)
    assert rec["value"] == 4000 and rec["raw"] == 1000 and rec["scaled"] == 0.25 and "multiplexed" in rec["why"]
    rec = pc.record(ev, (0, 400, 0), user_only=True)
    assert rec["value"] is None and "never on the PMU" in rec["why"]
    failed = pc.Event("cycles", pc.PERF_TYPE_HARDWARE, 0, errno=errno.ENOENT, why="x")
    assert pc.record(failed, None, True)["errno"] == "ENOENT"


def test_the_reasons_name_the_cause():
    assert "virtual PMU" in pc.reason(errno.ENOENT, 2) and "virtual PMU" in pc.reason(errno.EOPNOTSUPP, 2)
    why = pc.reason(errno.EACCES, 3)
    assert "perf_event_paranoid=3" in why and "CAP_PERFMON" in why
    assert "seccomp" in pc.reason(errno.EPERM, 2) and "ulimit -n" in pc.reason(errno.EMFILE, 2)
    ev = {"cycles": {"value": None, "errno": "ENOENT", "why": pc.reason(errno.ENOENT, 2)}}
    assert pc.hardware_verdict(ev, "KVM") == (False, "no hardware counters: the cycles event cannot be opened "
                                                     "(ENOENT): this KVM guest has no virtual PMU; compute and memory "
                                                     "cannot be told apart from counters")
    ev = {"cycles": {"value": None, "errno": "EACCES", "why": pc.reason(errno.EACCES, 3)}}
    assert "perf_event_paranoid=3" in pc.hardware_verdict(ev)[1]
    assert pc.hardware_verdict({"cycles": {"value": 0, "errno": None}})[1].startswith(
        "no hardware counters: cycles opened but counted nothing")


def test_cache_line_size_is_the_last_levels(tmp_path):
    base = tmp_path / "sys/devices/system/cpu/cpu0/cache"
    for idx, level, line in (("index0", 1, 64), ("index3", 3, 128)):
        (base / idx).mkdir(parents=True)
        (base / idx / "level").write_text(f"{level}\n")
        (base / idx / "coherency_line_size").write_text(f"{line}\n")
    assert pc.line_bytes(Root(tmp_path)) == (128, "/sys/devices/system/cpu/cpu0/cache: L3 coherency_line_size")
    size, source = pc.line_bytes(Root("/"))
    assert size is None or size in (32, 64, 128, 256), source
