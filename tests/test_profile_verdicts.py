"""The profile's CPU verdict (issue 26, items 8 and 9): waiting for a CPU is the program's
own oversubscription only where its runnable threads outnumbered its CPUs at the same
samples; other processes' load is named with its share of a CPU instead, and says the split
is disturbed. Idle pool threads (OpenBLAS beside a single-threaded numpy loop) do not turn a
busy program into a waiting one. A parent that waits while its children work (fio's main
process, make, a shell) is their supervisor: its waiting leaves the split, its own start-up
stays (the critical path), so fio's I/O is its bound. Made-up samples for the rules, real programs for the
user's case; no timings asserted."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ceiling.analysis.profile import conclude, idle_helpers
from ceiling.probes.proc_sampler import ProcessSample, Sampled, ThreadSample
from ceiling.results.model import WARN, Finding

SPIN = "import time\nt = time.time()\nwhile time.time() - t < {s}: pass\n"


def competing_load(*named):
    """checks/load.compare's warning, as the bench verbs get it."""
    return Finding("load.competing", WARN, "Other processes used 1.60 CPUs during the measurement",
                   evidence="other processes used 1.60 CPUs on average over 3.00 s; top: " +
                            ", ".join(f"pid {p} ({c}) {x:.0%} of a CPU" for p, c, x in named),
                   fix="stop or move the processes named in the evidence if they are yours",
                   data={"cause": "competing_process", "causes": ["competing_process"],
                         "processes": [{"pid": p, "comm": c, "cpu_share": x} for p, c, x in named]})


def make_j2(runnable):
    """make -j2 on 2 CPUs: make waiting, two compilers at a time (six over its life), each
    waiting for a CPU 40% of its life because something else ran; ``runnable``: the
    program's threads in state R at each sample."""
    s = Sampled(samples=len(runnable), interval_s=0.1, runnable=list(runnable))
    s.processes[10] = ProcessSample(10, 1, "make", parent=True, cpus_allowed=[0, 1])
    s.threads[(10, 10)] = ThreadSample(10, 10, "make", on_cpu_s=0.01, runq_s=0.0, first_s=0.0, last_s=3.0)
    for i in range(6):
        pid = 20 + i
        s.processes[pid] = ProcessSample(pid, 10, "cc1")
        s.threads[(pid, pid)] = ThreadSample(pid, pid, "cc1", on_cpu_s=0.6, runq_s=0.4, first_s=i // 2,
                                             last_s=i // 2 + 1.0)
    return s


def test_make_j2_under_someone_elses_load_is_not_oversubscribed_and_names_the_load():
    s = make_j2([2] * 30)
    _, bounds, findings, b = conclude(s, None, 3.0, 2, competing=[competing_load((4242, "stress", 0.95))])
    assert "oversubscribed" not in [x.bound for x in bounds], bounds
    assert bounds[0].bound == "cpu" and bounds[0].share == pytest.approx(1.0)
    f = {x.id: x for x in findings}
    assert "profile.oversubscribed" not in f
    assert f["profile.competing"].status == WARN and "pid 4242 (stress) 95% of a CPU" in f["profile.competing"].evidence
    assert "at most 2 runnable at once on 2 CPUs" in f["profile.competing"].evidence
    assert f["profile.competing"].data["processes"][0]["cpu_share"] == 0.95
    assert b["runnable"]["max"] == 2 and b["competing_load"][0]["processes"][0]["pid"] == 4242


def test_a_program_with_more_runnable_threads_than_cpus_is_oversubscribed_even_beside_other_load():
    s = make_j2([6] * 30)                                    # make -j6 on 2 CPUs: its own doing
    _, bounds, findings, _ = conclude(s, None, 3.0, 2, competing=[competing_load((4242, "stress", 0.3))])
    assert "oversubscribed" in [x.bound for x in bounds]
    f = {x.id: x for x in findings}
    assert "up to 6 on 2" in f["profile.oversubscribed"].title
    assert "profile.competing" in f                          # and the split is still said to be disturbed


def test_waiting_for_a_cpu_without_runnable_excess_and_no_load_named_is_not_called_oversubscribed():
    s = make_j2([2, 1, 2] * 10)
    _, bounds, findings, _ = conclude(s, None, 3.0, 2)
    assert bounds[0].bound == "cpu" and "oversubscribed" not in [x.bound for x in bounds]
    f = {x.id: x for x in findings}
    assert "were not named" in f["profile.competing"].evidence


def test_runnable_threads_are_counted_at_the_same_sample_against_the_cpus_allowed():
    from ceiling.analysis import profile_competing as analysis
    s = Sampled(samples=4, runnable=[3, 3, 1, 0])
    s.processes[1] = ProcessSample(1, 0, "sh", cpus_allowed=[0, 1])      # before taskset's exec, say
    s.processes[2] = ProcessSample(2, 1, "app", cpus_allowed=[0])
    assert analysis.concurrency(s, 8)["cpus"] == 2                        # either process's CPUs
    s.processes[1].cpus_allowed = [0]                                      # its latest sample's, not a union
    c = analysis.concurrency(s, 8)
    assert c == {"cpus": 1, "samples": 3, "max": 3, "mean": pytest.approx(7 / 3), "excess": pytest.approx(4 / 7)}


def numpy_loop(pool_on_s):
    """A single-threaded numpy loop: the main thread busy 87% of 3 s, two OpenBLAS pool threads
    that spun ``pool_on_s`` when made and then slept."""
    s = Sampled(samples=30, interval_s=0.1, runnable=[1] * 30)
    s.processes[7] = ProcessSample(7, 1, "python", cpus_allowed=[0, 1])
    s.threads[(7, 7)] = ThreadSample(7, 7, "python", on_cpu_s=2.6, runq_s=0.05, first_s=0.0, last_s=3.0)
    for tid in (8, 9):
        s.threads[(7, tid)] = ThreadSample(7, tid, "python", on_cpu_s=pool_on_s, runq_s=0.0, first_s=0.3, last_s=3.0)
    return s


def test_idle_openblas_threads_beside_a_busy_main_thread_leave_it_cpu_bound():
    s = numpy_loop(0.11)                                     # 4% of their life: not under 1%
    _, bounds, _, b = conclude(s, None, 3.0, 2)
    assert bounds[0].bound == "cpu", bounds
    assert b["idle_threads"] == ["7/8 python", "7/9 python"] and b["threads"] == 1


def test_pool_threads_that_shared_the_work_are_kept_however_little_they_ran():
    s = numpy_loop(0.26)                                     # 10% of the main thread's CPU: they worked
    assert idle_helpers(s) == []


# ---- real programs ---------------------------------------------------------------

def profile(tmp_path: Path, *cmd, env=None, timeout=180):
    out = tmp_path / "p.json"
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--no-interpose",
                        "--save-json", str(out), "--", *cmd], capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, NO_COLOR="1", **(env or {})), cwd=tmp_path)
    return r, json.loads(out.read_text()) if out.exists() else None


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or not os.path.exists("/usr/bin/make"),
                    reason="needs make and 2 CPUs")
def test_make_j2_beside_busy_processes_names_them_and_is_not_oversubscribed(tmp_path):
    """The issue's case: make -j2 never runs more than two jobs, while two processes that are
    not the program's keep both CPUs busy."""
    (tmp_path / "spin.py").write_text(SPIN.format(s=1.0))
    (tmp_path / "Makefile").write_text(f"all: a b c d\na b c d:\n\t@{sys.executable} spin.py\n")
    cpus = sorted(os.sched_getaffinity(0))[:2]
    hogs = [subprocess.Popen(["taskset", "-c", str(c), sys.executable, "-c", SPIN.format(s=60)]) for c in cpus]
    try:
        time.sleep(0.3)
        r, doc = profile(tmp_path, "taskset", "-c", ",".join(map(str, cpus)), "make", "-j2")
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert r.returncode == 0, r.stderr
    kinds = [x["bound"] for x in doc["analysis"]["bounds"]]
    assert "oversubscribed" not in kinds, doc["analysis"]["bounds"]
    assert doc["application"]["profile"]["runnable"]["max"] <= 3
    f = {x["id"]: x for x in doc["findings"]}["profile.competing"]
    # named with their share of a CPU (the five busiest: on a node shared with other work, the
    # hogs need not be among them)
    named = f["data"].get("processes", [])
    assert named and all(p["cpu_share"] > 0 and f"pid {p['pid']} ({p['comm']})" in f["evidence"] for p in named), f


def test_a_numpy_loop_with_idle_openblas_threads_is_cpu(tmp_path):
    pytest.importorskip("numpy")
    (tmp_path / "loop.py").write_text("import numpy as np, time\na = np.random.rand(100_000)\nt = time.time()\n"
                                      "while time.time() - t < 1.5:\n    a = np.sqrt(a * a + 1.0) - 0.5\n")
    r, doc = profile(tmp_path, sys.executable, "loop.py", env={"OPENBLAS_NUM_THREADS": "2"})
    assert r.returncode == 0, r.stderr
    p = doc["application"]["profile"]
    assert p["idle_threads"], p                              # the pool thread is there, and left out
    assert doc["analysis"]["bounds"][0]["bound"] == "cpu", (doc["analysis"]["bounds"], p["per_thread"])


# ---- supervisors: a parent that waits while its children work (fio, make, a shell) --------------

def fio_like(cpu_while_children=0.005):
    """fio --ioengine=psync --fsync=256: the main process starts up on a CPU 0.3 s, forks the
    job and polls for its end (wait4 WNOHANG, then a 10 ms sleep) for 0.7 s, its helper thread
    asleep; the job writes and fsyncs for 0.7 s."""
    s = Sampled(samples=10, interval_s=0.1, runnable=[1] * 10)
    s.processes[10] = ProcessSample(10, 1, "fio", parent=True, cpus_allowed=[0, 1])
    s.processes[11] = ProcessSample(11, 10, "fio", cpus_allowed=[0, 1])
    s.threads[(10, 10)] = ThreadSample(10, 10, "fio", on_cpu_s=0.25 + cpu_while_children, runq_s=0.05, first_s=0.0,
                                       last_s=1.0, with_children_s=0.7, with_children_on_s=cpu_while_children)
    s.threads[(10, 12)] = ThreadSample(10, 12, "fio", on_cpu_s=0.0, runq_s=0.0, first_s=0.3, last_s=1.0,
                                       with_children_s=0.7)
    s.threads[(11, 11)] = ThreadSample(11, 11, "fio", on_cpu_s=0.15, runq_s=0.0, first_s=0.3, last_s=1.0)
    return s


FIO_IO = {"write": dict(calls=2048, errors=0, bytes=8 << 20, ns=50_000_000, random=2048, library_calls=0,
                        estimated=0),
          "sync": dict(calls=8, errors=0, bytes=0, ns=400_000_000, random=0, library_calls=0, estimated=0)}


def test_a_parent_that_polls_while_its_child_writes_is_a_supervisor_and_the_bound_is_the_writers():
    """fio's pattern (issue 26, Goals): counted whole, the main process's 0.7 s of polling made
    the program "waiting" with I/O a quarter of the time. Left out, the split is the critical
    path (the main process's start-up, then the job), and the job's I/O is its bound."""
    _, bounds, _, b = conclude(fio_like(), None, 1.0, 2, io=FIO_IO)
    assert bounds[0].bound == "io" and bounds[0].share == pytest.approx(0.45), bounds
    assert "waiting" not in [x.bound for x in bounds]
    assert b["supervisors"] == [{"process": "10 fio", "waited_s": 0.7, "cpu_s": 0.005, "own_s": pytest.approx(0.3)}]
    assert b["launchers"] == [] and b["thread_seconds"] == pytest.approx(1.0)
    assert "the split is the critical path: 10 fio waited 0.7 s while its children ran" in bounds[0].evidence
    assert "by process, of the thread-seconds kept: 11 fio 70%, 10 fio 30%" in bounds[0].evidence


def test_a_parent_that_works_beside_its_children_is_no_supervisor():
    _, bounds, _, b = conclude(fio_like(cpu_while_children=0.2), None, 1.0, 2, io=FIO_IO)
    assert b["supervisors"] == [] and b["thread_seconds"] == pytest.approx(1.7)
    assert "critical path" not in bounds[0].evidence


SUPERVISE = """import os, sys, time
def spin(cpu_s):
    t = time.process_time() + cpu_s
    while time.process_time() < t:
        pass
spin(0.3)                                   # start-up, alone
pid = os.fork()
if pid == 0:
    spin(1.0)                               # the work
    os._exit(0)
while os.waitpid(pid, os.WNOHANG) == (0, 0):
    time.sleep(0.01)                        # polls, as fio's main process
"""


def test_a_polling_parent_is_timed_apart_from_its_own_start_up(tmp_path):
    """The sampler times the parent over the intervals that began with its child alive: that
    waiting leaves the split, its start-up stays. Both processes are on a CPU whenever they run,
    so what is off any CPU is the parent's polling, if counted (about 40% of the split: the old
    rule kept a parent on a CPU over a tenth of its life). CPU seconds, not wall seconds: the
    same under load."""
    (tmp_path / "sup.py").write_text(SUPERVISE)
    r, doc = profile(tmp_path, sys.executable, "sup.py")
    assert r.returncode == 0, r.stderr
    p = doc["application"]["profile"]
    [sup] = p["supervisors"]
    assert sup["waited_s"] >= 0.5 and sup["cpu_s"] < 0.1 * sup["waited_s"] and sup["own_s"] >= 0.2, p
    assert p["shares"]["off_cpu"] < 0.2, p
    assert doc["analysis"]["bounds"][0]["bound"] == "cpu"
    assert "the split is the critical path" in doc["analysis"]["bounds"][0]["evidence"]


def test_a_shell_that_execs_the_program_after_waiting_keeps_the_program_in_the_split(tmp_path):
    """sh -c 'sleep 4; exec app': the shell's pid waits for sleep, then is the program. Judged
    over its whole life it was a launcher (0.3 s on a CPU in 4.4 s, however loaded the node) and
    the program's threads left the split (their CPU time came back as unsampled); its waiting is
    left out, the program stays."""
    # The app's 0.3 s of CPU against the sampler's 0.1 s intervals: the interval in which the
    # shell's child (sleep) ends counts as supervised, and the app's last interval may end
    # unsampled (its CPU then comes from wait4), so each figure may be one interval short.
    (tmp_path / "spin.py").write_text("import time\nt = time.process_time() + 0.3\n"
                                      "while time.process_time() < t:\n    pass\n")
    r, doc = profile(tmp_path, "sh", "-c", f"sleep 4; exec {sys.executable} spin.py")
    assert r.returncode == 0, r.stderr
    p = doc["application"]["profile"]
    assert p["launchers"] == [], p
    [sup] = p["supervisors"]
    assert sup["waited_s"] >= 3.0 and sup["own_s"] >= 0.15, p
    assert p["shares"]["on_cpu"] * p["thread_seconds"] >= 0.15 and p["unsampled_cpu_s"] < 0.15, p


def test_the_pages_show_the_supervisors_and_the_signals_from_outside_the_run():
    from ceiling.report import html_profile, terminal_profile
    from ceiling.results.model import Application, Run
    from ceiling.results.profile import profile_from
    run = Run(tool_version="t", host="n1", started="2026-11-25T00:00:00", command=["ceiling", "profile"])
    run.application = Application(command=["fio"], exit_status=0, wall_s=1.0)
    run.application.profile = profile_from({
        "shares": {"on_cpu": 0.5, "runq": 0.0, "off_cpu": 0.5}, "threads": 2, "thread_seconds": 1.0,
        "supervisors": [{"process": "10 fio", "waited_s": 0.7, "cpu_s": 0.005, "own_s": 0.3}],
        "launch": {"signals": [{"signal": "SIGUSR1", "sent_to": "ceiling alone", "passed_on": True}],
                   "signals_outside": [{"signal": "SIGHUP", "when": "after the program ended"}]}})
    text = terminal_profile.render(run, width=300)
    assert "left out: 10 fio's 0.7 s waiting while its children ran" in text
    assert ("Signals   while it ran: SIGUSR1 (passed on to the program); outside its run, noted only (nothing was "
            "stopped): SIGHUP after the program ended") in text
    html = html_profile.application_section(run)
    assert "10 fio&#x27;s 0.7 s waiting" in html and "SIGHUP after the program ended" in html


# ---- ceiling's own start-up ---------------------------------------------------------

def test_only_what_starts_the_program_is_imported_before_it(tmp_path):
    """Item 14: the machine's detection, the analysis and the HTML exporter wait until the
    program ended. -X importtime writes each import to stderr as it happens, and the program
    writes its marker to the same stderr: the order is the order of events."""
    env = dict(os.environ, NO_COLOR="1", XDG_CONFIG_HOME=str(tmp_path / "no-config"))
    env.pop("CEILING_CONFIG", None)
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "ceiling", "profile", "--no-store", "--no-measure",
                        "--", "sh", "-c", "echo PROGRAM-STARTED >&2"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    before = r.stderr.split("PROGRAM-STARTED", 1)[0]
    for late in ("ceiling.machine.detect", "ceiling.analysis.profile_ceilings", "ceiling.report.exporters.html_file",
                 "ceiling.verbs.session"):
        assert f" {late}\n" not in before, late
    assert " ceiling.machine.detect\n" in r.stderr.split("PROGRAM-STARTED", 1)[1]


def test_a_bad_config_is_still_refused_before_the_program_runs(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("this is not toml [")
    marker = tmp_path / "ran"
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--config", str(bad), "--",
                        "touch", str(marker)], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "bad.toml" in r.stderr and not marker.exists()


def test_a_little_io_in_a_long_run_is_not_worth_a_storage_measurement_after_it(tmp_path):
    """A python reading 64 MiB in 1 KiB calls (tens of ms), then computing for 3 s: ceiling
    measured the storage for seconds after it; now the comparison says why it did not."""
    (tmp_path / "d").write_bytes(bytes(64 << 20))
    prog = ("import os, time\nfd = os.open('d', os.O_RDONLY)\nwhile os.read(fd, 1024): pass\n"
            "t = time.time()\nwhile time.time() - t < 3.0: pass\n")
    out = tmp_path / "p.json"
    env = dict(os.environ, NO_COLOR="1", XDG_DATA_HOME=str(tmp_path / "data"))
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--save-json", str(out), "--",
                        sys.executable, "-c", prog], capture_output=True, text=True, timeout=300, env=env,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    prof = json.loads(out.read_text())["application"]["profile"]
    assert prof["interposer"]["used"], prof["interposer"]       # a dynamic program, the library built
    assert "storage" not in (prof.get("quick_ceilings") or {})
    (c,) = [c for c in prof["ceilings"] if c["what"] == "I/O read"]
    # why no comparison: the measurement was not worth it, or (the file cached) nothing reached the device
    assert c["ceiling"] is None and ("not measured after the program" in c["why"] or "page cache" in c["why"])
