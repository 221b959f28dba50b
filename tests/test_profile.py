"""ceiling profile -- CMD, run as a user runs it (a real child process, real /proc):
the program's output and exit status pass through, the report goes to stderr and
the JSON, bad commands are one line with the shell's codes, Ctrl-C still reports,
and the time split names the bound of programs built to have one. No timings are
asserted: only which class dominates a program that can only be in one."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ceiling.analysis.profile import Rusage, conclude, splits
from ceiling.probes.interpose_record import from_dicts, parse
from ceiling.probes.proc_sampler import ProcessSample, Sampled, ThreadSample
from ceiling.results import jsonio
from ceiling.verbs.profile import preload_refused

SH = shutil.which("sh")
BUSY = f"{sys.executable} -c 'import time; t = time.time()\nwhile time.time() - t < 1.5: pass'"


def profile(tmp_path: Path, *cmd: str, opts=(), timeout=120, **kw):
    out = tmp_path / "p.json"
    env = dict(os.environ, NO_COLOR="1")
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--save-json", str(out), *opts,
                        "--", *cmd], capture_output=True, text=True, timeout=timeout, env=env, **kw)
    doc = json.loads(out.read_text()) if out.exists() else None
    return r, doc


def assert_interposed(doc):
    """A dynamic program profiled with the library built is interposed: where it was not (a broken
    build, a refused preload), the I/O checks after this would have nothing to check."""
    ip = doc["application"]["profile"]["interposer"]
    assert ip["used"] is True, ip


def bound_kinds(doc):
    return [b["bound"] for b in doc["analysis"]["bounds"]]


def test_output_and_exit_status_pass_through_and_the_report_goes_to_stderr(tmp_path):
    r, doc = profile(tmp_path, SH, "-c", "printf 'a\\nb'; echo err >&2; exit 3")
    assert r.returncode == 3
    assert r.stdout == "a\nb"                            # untouched: nothing of ceiling's on stdout
    assert r.stderr.startswith("err\n") and "Ended     exit 3" in r.stderr
    assert doc["application"]["exit_status"] == 3 and doc["application"]["command"][0] == SH
    jsonio.loads(json.dumps(doc))                        # a valid document of the current schema


def test_the_html_report_has_the_application_section_and_no_node_plots(tmp_path):
    page = tmp_path / "p.html"
    r, doc = profile(tmp_path, "sleep", "0.3", opts=["--out", str(page)])
    text = page.read_text()
    assert r.returncode == 0 and 'id="application"' in text and "Where the time went" in text
    assert "Bound: waiting" in text and "Cost of profiling" in text
    assert "not part of this run" not in text and "No headline metric" not in text


@pytest.mark.parametrize("status", [0, 3])
def test_a_full_disk_under_stderr_costs_the_report_not_the_programs_status(tmp_path, status):
    """2>/dev/full: ceiling's report cannot be written; the exit status is still the program's
    (it was a traceback's 1), and the files asked for are written."""
    out = tmp_path / "p.json"
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json",
                            str(out), "--", SH, "-c", f"exit {status}"], stdout=subprocess.PIPE, stderr=full,
                           timeout=120)
    assert r.returncode == status and r.stdout == b""
    assert json.loads(out.read_text())["application"]["exit_status"] == status


def test_a_program_killed_by_a_signal_gives_128_plus_n_and_is_reported(tmp_path):
    r, doc = profile(tmp_path, SH, "-c", "kill -SEGV $$")
    assert r.returncode == 128 + signal.SIGSEGV
    assert "killed by SIGSEGV" in r.stderr
    assert doc["application"]["signal"] == "SIGSEGV" and doc["application"]["exit_status"] is None


@pytest.mark.parametrize("cmd, code, text", [
    ([], 2, "no program given"),
    (["no-such-command-here"], 127, "no-such-command-here: command not found"),
    (["/etc/hostname"], 126, "/etc/hostname: "),       # not executable (as root: not a program)
    # the document would be mixed into the program's stdout (issue 26 item 12): refused, with the way out
    (["--json", "--", "touch", "{tmp}/ran"], 2, "--json would print the run's JSON into the program's own "
                                                 "standard output; write it to a file with --save-json"),
])
def test_a_bad_command_is_one_line_with_the_shells_code(tmp_path, cmd, code, text):
    opts = [c for c in cmd if c.startswith("--json")]
    cmd = [c.replace("{tmp}", str(tmp_path)) for c in cmd if c not in opts and c != "--"]
    r, doc = profile(tmp_path, *cmd, opts=opts)
    lines = [x for x in r.stderr.splitlines() if x]
    assert r.returncode == code and len(lines) == 1 and text in lines[0], r.stderr
    assert doc is None and r.stdout == "" and not (tmp_path / "ran").exists()


def test_a_bad_interval_is_refused_before_running(tmp_path):
    marker = tmp_path / "ran"
    r, _ = profile(tmp_path, SH, "-c", f"touch {marker}", opts=["--interval", "0"])
    assert r.returncode == 3 and "--interval 0" in r.stderr and not marker.exists()


def test_a_busy_program_is_on_a_cpu(tmp_path):
    r, doc = profile(tmp_path, "taskset", "-c", str(min(os.sched_getaffinity(0))), SH, "-c", BUSY)
    assert r.returncode == 0, r.stderr
    shares = doc["application"]["profile"]["shares"]
    # on its CPU or waiting for it (other load), never off it
    assert shares["off_cpu"] < 0.2, shares
    assert bound_kinds(doc)[0] in ("cpu", "oversubscribed"), doc["analysis"]["bounds"]
    assert {m["name"] for m in doc["metrics"]} >= {"app.wall", "app.cpu.user", "app.time.on_cpu"}


def test_a_sleeping_program_is_waiting(tmp_path):
    r, doc = profile(tmp_path, "sleep", "1")
    assert r.returncode == 0
    assert bound_kinds(doc)[0] == "waiting", doc["analysis"]["bounds"]
    assert doc["application"]["profile"]["shares"]["off_cpu"] > 0.8
    assert any(f["id"] == "profile.waiting" for f in doc["findings"])


def test_three_busy_processes_on_one_cpu_are_oversubscribed(tmp_path):
    """Children of the program (a shell's background jobs) are followed; three busy
    processes on one CPU each wait for it about two thirds of the time."""
    cpu = str(min(os.sched_getaffinity(0)))
    r, doc = profile(tmp_path, "taskset", "-c", cpu, SH, "-c", f"{BUSY} & {BUSY} & {BUSY} & wait")
    assert r.returncode == 0, r.stderr
    assert bound_kinds(doc)[0] == "oversubscribed", doc["analysis"]["bounds"]
    assert doc["application"]["profile"]["threads"] >= 3
    assert any(f["id"] == "profile.oversubscribed" for f in doc["findings"])


def test_a_program_in_small_io_calls_is_io_bound_with_small_requests(tmp_path):
    """dd spends its life in read and write: the interposer's clock says so whatever the disk."""
    r, doc = profile(tmp_path, "dd", "if=/dev/zero", f"of={tmp_path / 'f'}", "bs=512", "count=300000")
    assert r.returncode == 0, r.stderr
    assert_interposed(doc)
    io = doc["application"]["profile"]["io_calls"]
    assert io["write"]["calls"] >= 300000 and io["write"]["bytes"] >= 300000 * 512     # + its report, through stdio
    assert io["read"]["bytes"] == 0             # /dev/zero is a character device: not file I/O (other_read)
    assert bound_kinds(doc)[0] == "io", doc["analysis"]["bounds"]
    ids = {f["id"] for f in doc["findings"]}
    assert {"profile.io", "profile.io.small_writes"} <= ids and "profile.waiting" not in ids


@pytest.mark.parametrize("interpose", [True, False])
def test_the_cost_of_watching_is_in_every_report(tmp_path, interpose):
    """With the interposer (dd is dynamic and the library is built: it must be used) its calls and
    their cost; without it (--no-interpose) the sampler's cost alone, and why there is no more."""
    r, doc = profile(tmp_path, "dd", "if=/dev/zero", "of=/dev/null", "bs=4096", "count=1000",
                     opts=() if interpose else ("--no-interpose",))
    assert r.returncode == 0, r.stderr
    ov = doc["application"]["overhead"]
    said = " ".join(r.stderr.split())
    assert ov["sampler_cpu_s"] >= 0 and "Cost of profiling" in said
    if interpose:
        assert_interposed(doc)
        assert ov["calls"] >= 2000 and ov["per_call_ns"] is not None and ov["per_call_ns"] >= 0
        assert ov["fraction"] == pytest.approx(ov["per_call_ns"] * ov["calls"] / 1e9 / doc["application"]["wall_s"])
        # "N ns per call", or "under 1 ns per call (...)" on a noisy node
        assert "ns per call" in said and "(measured before the run:" in said
    else:
        assert doc["application"]["profile"]["interposer"] == {"used": False, "why": "--no-interpose", "records": 0,
                                                               "modules": [], "skipped": None}
        assert ov["calls"] == 0 and ov["per_call_ns"] is None and ov.get("fraction") is None
        assert "no interposer: --no-interpose" in said and "ns per call" not in said


def test_overhead_runs_the_program_again_alone_and_watched_interleaved(tmp_path):
    log = tmp_path / "log"
    r, doc = profile(tmp_path, SH, "-c", f"echo run >> {log}; echo out", opts=["--overhead"])
    assert r.returncode == 0 and r.stdout == "out\n"          # the reruns' output is discarded
    assert log.read_text() == "run\n" * 7                    # the profile, then 3 alone and 3 watched
    plain = doc["application"]["overhead"]["uninstrumented"]
    assert plain["exit_statuses"] == {"plain": [0, 0, 0], "profiled": [0, 0, 0]} and not plain["why"]
    assert len(plain["plain_s"]) == len(plain["profiled_s"]) == 3 and plain["wall_s"] > 0
    assert plain["spread"]["min"] <= plain["slowdown"] <= plain["spread"]["max"]
    said = " ".join(r.stderr.split())
    assert "--overhead: the program alone took" in said and "medians of 3 interleaved runs each" in said


def test_overhead_refuses_to_compare_runs_that_did_not_end_alike(tmp_path):
    """The issue's "+135,969.8%": a second run failed at once because the first left its output
    file. noclobber makes the shell do the same."""
    out = tmp_path / "result"
    r, doc = profile(tmp_path, SH, "-c", f"set -C; echo x > {out} && sleep 0.2", opts=["--overhead"])
    assert r.returncode == 0
    plain = doc["application"]["overhead"]["uninstrumented"]
    assert plain["slowdown"] is None and "did not end alike" in plain["why"]
    assert "--overhead: not measured (the runs did not end alike" in " ".join(r.stderr.split())


def test_ceilings_own_start_up_and_wrap_up_are_apart_from_the_programs_time(tmp_path):
    r, doc = profile(tmp_path, "true")
    own = doc["application"]["overhead"]["ceiling"]
    assert own["startup_s"] is not None and own["startup_s"] >= 0 and own["wrap_up_s"] >= 0
    assert own["quick_ceilings_s"] >= 0 and "start-up" in own["how"]


def test_stdio_calls_are_io_too(tmp_path):
    """Small unbuffered fwrites through stdio: the stdio module's counts enter the I/O classes."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    src, exe = tmp_path / "w.c", tmp_path / "w"
    src.write_text('#include <stdio.h>\nint main(int c, char **v) { FILE *f = fopen(v[1], "w");\n'
                   '  setvbuf(f, NULL, _IONBF, 0); char b[100] = {0};\n'
                   '  for (int i = 0; i < 100000; i++) fwrite(b, 1, sizeof b, f);\n  return fclose(f); }\n')
    subprocess.run([cc, "-O1", "-o", str(exe), str(src)], check=True)
    r, doc = profile(tmp_path, str(exe), str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert_interposed(doc)
    w = doc["application"]["profile"]["io_calls"]["write"]
    assert w["calls"] >= 100000 and w["bytes"] >= 100000 * 100
    assert "profile.io.small_writes" in {f["id"] for f in doc["findings"]}


def test_ctrl_c_stops_the_program_and_still_reports(tmp_path):
    out = tmp_path / "p.json"
    p = subprocess.Popen([sys.executable, "-m", "ceiling", "profile", "--no-store", "--save-json", str(out), "--",
                          "sleep", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env=dict(os.environ, NO_COLOR="1"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(
            c.name == "sleep" for c in _children(p.pid)):
        time.sleep(0.05)
    time.sleep(0.3)
    os.killpg(p.pid, signal.SIGINT)                     # what the terminal does on Ctrl-C
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGINT, err
    doc = json.loads(out.read_text())
    assert doc["partial"] and doc["partial_reason"].startswith("interrupted (Ctrl-C)")
    assert doc["application"]["signal"] == "SIGINT" and "PARTIAL" in err


class _Proc:
    def __init__(self, pid):
        self.pid = pid
        try:
            self.name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            self.name = ""


def _children(pid):
    """Every descendant of ``pid`` (the program is ceiling-launch's child, not ceiling's)."""
    try:
        kids = [_Proc(int(k)) for k in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []
    return kids + [d for k in kids for d in _children(k.pid)]


def test_preload_is_refused_for_setuid_and_static_programs(tmp_path):
    assert preload_refused(SH) == ""
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    assert preload_refused(str(script)) == ""           # its interpreter is what the loader runs
    suid = tmp_path / "suid"
    shutil.copy(shutil.which("true"), suid)
    os.chmod(suid, 0o4755)
    assert "setuid" in preload_refused(str(suid))
    static = static_program(tmp_path, "int main(void) { return 0; }\n")
    assert "statically linked" in preload_refused(str(static))


def static_program(tmp_path: Path, source: str) -> Path:
    """``source`` linked statically (skipped where there is no static C library)."""
    src = tmp_path / "s.c"
    src.write_text(source)
    cc = shutil.which("cc") or shutil.which("gcc")
    static = tmp_path / "static"
    if not cc or subprocess.run([cc, "-static", "-o", str(static), str(src)], capture_output=True).returncode:
        pytest.skip("no static C library to link a static program with")
    return static


def test_a_static_program_is_profiled_from_proc_and_says_why(tmp_path):
    static = static_program(tmp_path, "#include <unistd.h>\nint main(void) { usleep(300000); return 4; }\n")
    r, doc = profile(tmp_path, str(static))
    assert r.returncode == 4
    f = {x["id"]: x for x in doc["findings"]}["profile.interposer"]
    assert f["status"] == "skipped" and "statically linked" in f["title"]
    assert doc["application"]["profile"]["interposer"]["used"] is False


# ---- the analysis alone, on made-up samples -------------------------------------

def sampled(*threads, samples=10):
    s = Sampled(samples=samples, interval_s=0.1)
    for i, (on, runq, life) in enumerate(threads):
        s.threads[(1, 100 + i)] = ThreadSample(1, 100 + i, "t", on_cpu_s=on, runq_s=runq, first_s=0.0, last_s=life)
    return s


def test_shares_are_thread_seconds_over_every_thread():
    s = sampled((1.0, 0.0, 1.0), (0.2, 0.0, 1.0), (0.2, 0.0, 1.0), (0.2, 0.0, 1.0))
    _, bounds, _, b = conclude(s, None, 1.0, 4)
    assert b["shares"]["on_cpu"] == pytest.approx(0.4) and b["shares"]["off_cpu"] == pytest.approx(0.6)
    assert b["per_thread"]["on_cpu"] == pytest.approx({"min": 0.2, "mean": 0.4, "max": 1.0})
    assert bounds[0].bound == "waiting" and b["idle_threads"] == []


def test_threads_that_never_ran_are_idle_helpers_left_out_and_named():
    """An MPI library's progress thread, a runtime's event loop: blocked all their life. Counted,
    they would make a busy program look like one that waits."""
    s = sampled((1.0, 0.0, 1.0), (0.0, 0.0, 1.0), (0.005, 0.0, 1.0))
    s.threads[(1, 1)] = s.threads.pop((1, 100))              # the busy one is the process's first thread
    _, bounds, findings, b = conclude(s, None, 1.0, 2)
    assert b["idle_threads"] == ["1/101 t", "1/102 t"] and b["threads"] == 1
    assert bounds[0].bound == "cpu" and "profile.single_thread" in {f.id for f in findings}
    s.threads[(1, 1)].on_cpu_s = 0.0                         # a first thread is never a helper, even idle
    assert conclude(s, None, 1.0, 2)[1][0].bound == "waiting"


def test_cpu_time_the_sampler_missed_comes_from_rusage():
    s = sampled((0.5, 0.0, 1.0))
    _, _, _, b = conclude(s, Rusage(user_s=1.2, system_s=0.3, maxrss_bytes=1 << 20), 1.0, 2)
    assert b["unsampled_cpu_s"] == pytest.approx(1.0)
    assert b["shares"]["on_cpu"] == pytest.approx(1.5 / 2.0)


def test_a_program_that_ended_before_any_sample_is_unknown_not_guessed():
    _, bounds, findings, b = conclude(Sampled(samples=1), Rusage(0.0, 0.0, 0), 0.001, 2)
    assert [x.bound for x in bounds] == ["unknown"] and not findings and b["shares"] == {}


def test_a_parent_that_only_waits_for_its_children_is_left_out():
    s = sampled((0.01, 0.0, 2.0), (2.0, 0.0, 2.0))
    s.threads[(2, 200)] = s.threads.pop((1, 101))              # the busy thread is a child process
    s.threads[(2, 200)].pid, s.threads[(2, 200)].tid = 2, 200
    s.processes[1] = ProcessSample(1, 0, "sh", parent=True)
    s.processes[2] = ProcessSample(2, 1, "app")
    _, bounds, _, b = conclude(s, None, 2.0, 2)
    assert b["launchers"] == ["1 sh"] and b["threads"] == 1 and bounds[0].bound == "cpu"


def test_a_lifetime_is_never_shorter_than_the_time_it_accounts_for():
    [(_, sp)] = splits(sampled((0.9, 0.3, 1.0)), 1.0)
    assert sp.life_s == pytest.approx(1.2) and sp.off_s == 0.0


def test_a_rank_the_sampler_never_saw_is_split_from_its_records_proc_lines():
    """mpirun -n 2 ceiling profile -- ./app: rank 1's threads reach rank 0's report through its
    record (proc.c): a busy main thread, an idle helper left out, and CPU time of threads that
    ended before the record counted on a CPU."""
    from ceiling.analysis.profile import record_split, record_threads
    [rec] = from_dicts([{
        "process": {"pid": 50, "host": "n2", "utime_us": 2_500_000, "stime_us": 0, "start_ns": 10**9,
                    "end_ns": 3 * 10**9},
        "lines": {"proc": [{"task": 50, "life_ns": 2_000_000_000, "run_ns": 1_500_000_000, "runq_ns": 100_000_000},
                           {"task": 51, "life_ns": 1_900_000_000, "run_ns": 1_000_000, "runq_ns": 0},
                           {"tasks": 2, "shown": 2, "schedstat": 1, "clk_tck": 100, "maxrss_kb": 4096,
                            "rchar": 3_000_000, "wchar": 1_000_000}]}}])
    threads, idle, unseen = record_threads(rec)
    assert [n for n, _ in threads] == ["50/50"] and idle == ["50/51"]
    assert unseen == pytest.approx(2.5 - 1.501)
    sp = record_split(rec)
    assert sp.on_s == pytest.approx(1.5 + 0.999) and sp.runq_s == pytest.approx(0.1)
    assert record_split(from_dicts([{"process": {"pid": 1}, "lines": {}}])[0]) is None
    # rank 0 sampled on one CPU half the time; rank 1 from its record: both in the split
    s = sampled((0.5, 0.0, 1.0))
    s.processes[1] = ProcessSample(1, 0, "app")
    s.processes[1].io = {"rchar": 500_000, "wchar": 0}
    metrics, _, _, b = conclude(s, Rusage(0.5, 0.0, 1 << 20), 1.0, 2, others=[rec])
    assert b["threads"] == 2 and b["from_records"] == {"processes": 1, "threads": 1, "without_proc_lines": 0,
                                                        "earlier_images": 0}
    m = {x.name: x.value for x in metrics}            # its CPU time, memory and I/O in the totals too
    assert m["app.cpu.user"] == pytest.approx(3.0) and m["app.rss.peak"] == pytest.approx(4.0)
    assert m["app.cpu.used"] == pytest.approx(0.5 / 1.0 + 2.5 / 2.0)   # each over its own life
    assert m["app.io.read"] == pytest.approx(3.5) and m["app.io.write"] == pytest.approx(1.0)
    assert b["shares"]["on_cpu"] == pytest.approx((0.5 + 1.5 + 0.999) / (1.0 + 2.0 + 0.999))
    assert b["idle_threads"] == ["50/51 n2"]


def test_processes_outside_the_programs_tree_are_the_ones_taken_from_records():
    """ceiling profile -- mpiexec: a rank under Hydra's proxy is in the tree through the
    proxy's record, even though the proxy (a launcher) is left out of the program's records;
    a rank srun's slurmstepd started, or another node's, is not."""
    from ceiling.analysis.profile_run import unwatched
    here = os.uname().nodename

    def rec(pid, ppid, host=here):
        return from_dicts([{"process": {"pid": pid, "ppid": ppid, "host": host}, "lines": {}}])[0]
    mpiexec, proxy, rank0, rank1 = rec(10, 1), rec(11, 10), rec(12, 11), rec(13, 11)
    stepd_rank, remote = rec(20, 19), rec(12, 5, host="elsewhere")
    own = [rank0, rank1, stepd_rank, remote]
    everyone = own + [mpiexec, proxy]
    assert unwatched(own, 10, set(), everyone) == [stepd_rank, remote]
    assert unwatched(own, 10, {20}, everyone) == [remote]              # one the sampler saw
    assert unwatched(own, 10, set()) == own                           # without the proxy's record: cut off


def test_interposer_records_are_read_back_with_a_cut_record_kept():
    text = ("ceiling-interpose 1\nprocess pid=7 ppid=1 exe=/bin/x%20y reason=exit\nmodule name=null version=1\n"
            "null calls=3\nend pid=7 truncated=0\nceiling-interpose 1\nprocess pid=8\nnull calls=1\n")
    a, b = parse(text)
    assert a.process.exe == "/bin/x y" and a.as_dict()["lines"]["null"] == [{"calls": 3}] and a.end.pid == 7
    assert b.process.pid == 8 and b.end is None


# ---- against this node's ceilings -------------------------------------------------

def test_io_far_below_the_stored_storage_bandwidth_in_small_requests_is_named_with_both_numbers():
    from ceiling.analysis.profile_ceilings import compare
    rows = {"storage.seq.write.": [("storage.seq.write.fpp", 1000.0, "MiB/s", "2026-11-20T10:00:00", "r1" * 8),
                                   ("storage.seq.write.shared", 400.0, "MiB/s", "2026-11-20T10:00:00", "r1" * 8),
                                   ("storage.seq.write.fpp.old", 5000.0, "MiB/s", "2026-10-01T10:00:00", "r0" * 8)]}
    # 100 MB written in 200,000 calls of 500 B, 1 s inside them: 100 MB/s
    bd = {"io_calls": {"write": {"calls": 200000, "bytes": 100_000_000, "ns": 10**9}}}
    cmp, findings = compare(bd, lambda prefix: rows.get(prefix, []))
    (c,) = cmp
    assert c["program"] == pytest.approx(100.0)
    assert c["ceiling"] == pytest.approx(1048.576)        # the newest run's best layout, MiB/s in MB/s
    assert "storage.seq.write.fpp" in c["source"] and "2026-11-20" in c["source"]
    (f,) = findings
    assert f.id == "profile.ceiling.io_write" and f.status == "warn" and "0.488 KiB" in f.title
    assert "100 MB/s" in f.fix and "1.05e+03 MB/s" in f.fix


def test_small_messages_against_the_ping_pong_latency_tell_waiting_from_latency():
    from ceiling.analysis.profile_ceilings import compare
    lat = {"net.pingpong.latency.": [("net.pingpong.latency.same_l3", 0.4, "µs", "2026-11-20", "r" * 16),
                                     ("net.pingpong.latency.cross_socket", 0.9, "µs", "2026-11-20", "r" * 16)]}
    zeros = [0] * 18

    def bd(ns_per_call):
        calls = [1000] + zeros[1:]
        return {"mpi": {"hist": {"p2p": {"hist": calls, "hist_ns": [1000 * ns_per_call] + zeros[1:],
                                         "hist_bytes": [8000] + zeros[1:]}}}}
    cmp, findings = compare(bd(500), lambda p: lat.get(p, []))          # 0.5 us: 1.25x the best placement
    assert cmp[0]["ceiling"] == 0.4 and [f.id for f in findings] == ["profile.ceiling.mpi_latency"]
    cmp, findings = compare(bd(5000), lambda p: lat.get(p, []))         # 5 us: 12.5x
    assert [f.id for f in findings] == ["profile.ceiling.mpi_waiting"] and "12.5x" in findings[0].title


def test_a_time_against_its_ceiling_is_said_as_its_finding_says_it():
    """0.58 µs per small message against a 0.4 µs latency: the finding says "1.45x this node's
    MPI latency"; the comparison said "69% of it" (the latency's share of the time)."""
    from ceiling.analysis.profile_ceilings import compare
    from ceiling.report.terminal_profile import ceiling_text
    from ceiling.results.profile_run import Comparison
    lat = {"net.pingpong.latency.": [("net.pingpong.latency.same_l3", 0.4, "µs", "2026-11-20", "r" * 16)]}
    calls = [1000] + [0] * 17
    bd = {"mpi": {"hist": {"p2p": {"hist": calls, "hist_ns": [580_000] + [0] * 17, "hist_bytes": [8000] + [0] * 17}}}}
    (c,), (f,) = compare(bd, lambda p: lat.get(p, []))
    assert "1.45x this node's MPI latency" in f.title
    text = ceiling_text(Comparison.from_dict(c))
    assert "calls under 16 KiB), 1.45x this node's 0.4 µs (net.pingpong.latency.same_l3 = 0.4 µs" in text
    assert "%" not in text


def test_a_printf_is_not_compared_with_the_storage():
    from ceiling.analysis.profile_ceilings import compare
    rows = [("storage.seq.write.fpp", 1000.0, "MiB/s", "2026-11-20T10:00:00", "r" * 16)]
    cmp, findings = compare({"io_calls": {"write": {"calls": 1, "bytes": 2, "ns": 99_000}}}, lambda p: rows)
    assert cmp == [] and findings == []


def test_a_ceiling_the_history_lacks_is_said_with_the_command_that_measures_it():
    from ceiling.analysis.profile_ceilings import compare
    cmp, findings = compare({"io_calls": {"read": {"calls": 10, "bytes": 10 << 20, "ns": 10**8}}}, lambda p: [])
    assert cmp[0]["ceiling"] is None and "ceiling bench storage" in cmp[0]["why"] and findings == []


# ---- compute or memory by experiment ----------------------------------------------

def _arms(alone, spin, half, full, pirate, power=0.35, bandit_lost=0.0, spin_lost=0.0, cache_power=0.4):
    times = {"alone": [alone, alone * 1.01], "spin": [spin] * 2, "bandit_half": [half] * 2, "bandit": [full] * 2,
             "pirate": [pirate] * 2}
    rates = {"reference_alone": [20.0, 20.0], "reference_beside_bandit": [20.0 * (1 - power)] * 2,
             "resident_alone": [60.0, 60.0], "resident_beside_pirate": [60.0 * (1 - cache_power)] * 2,
             "bandit_alone": [10.0] * 2, "bandit": [10.0 * (1 - bandit_lost)] * 2,
             "spin_alone": [5.0] * 2, "spin": [5.0 * (1 - spin_lost)] * 2}
    return times, rates


@pytest.mark.parametrize("arms, bound, by", [
    (_arms(1.0, 1.05, 1.2, 1.4, 1.06), "memory", "bandwidth"),       # slows with traffic, more at full duty
    (_arms(1.0, 1.05, 1.05, 1.06, 1.2), "memory", "cache"),          # slows when the cache is taken
    (_arms(1.0, 1.05, 1.05, 1.06, 1.06), "compute", None),           # only what sharing the CPUs costs
    (_arms(1.0, 1.0, 1.0, 1.02, 1.0, bandit_lost=0.3), "memory", "bandwidth"),   # it takes bandwidth from the bandit
    (_arms(1.0, 1.0, 1.2, 1.4, 1.0, power=0.05), None, None),        # a node with bandwidth to spare: no power
    # the pirates cannot take the cache (a VM shown its host's, a cache they do not share):
    # a program slowed by the bandits is still memory-bound, but nothing is "compute" ...
    (_arms(1.0, 1.05, 1.2, 1.4, 1.06, cache_power=0.05), "memory", "bandwidth"),
    (_arms(1.0, 1.05, 1.05, 1.06, 1.06, cache_power=0.05), None, None),
    # ... and no bandwidth power: a slowdown beside the pirate still says the cache
    (_arms(1.0, 1.05, 1.05, 1.06, 1.3, power=0.05), "memory", "cache"),
    (_arms(1.0, 1.05, 1.05, 1.06, 1.06, power=0.05), None, None),
    # ... unless the bandits slowed it too: bandwidth the reference could not confirm, not the cache
    (_arms(1.0, 1.0, 1.3, 1.5, 1.2, power=0.05), None, None),
])
def test_the_experiments_tell_memory_from_compute_only_where_they_have_the_power_to(arms, bound, by):
    from ceiling.analysis.profile_experiments import classify
    r = classify(*arms)
    assert (r["bound"], r["by"]) == (bound, by), r["words"]
    if bound is None:
        assert r["why"].startswith("inconclusive") and "5%" in r["why"]
        assert ("not memory bandwidth" in r["why"]) == (r["power"] >= 0.2)
        assert ("not the last-level cache" in r["why"]) == (r["cache_power"] >= 0.2)
    # without the cache reference (a run with one CPU): a bandwidth verdict only
    old = classify(arms[0], {k: v for k, v in arms[1].items() if not k.startswith("resident")})
    assert (old["bound"], old["by"]) == ((bound, by) if by == "bandwidth" else (None, None))


def test_corunners_go_to_every_cache_domain_and_the_reference_beside_them():
    """A 2-socket node: co-runners only on the last socket would leave the program's threads
    on the first one their cache and memory; the reference must share a co-runner's cache."""
    from ceiling.probes.corunner import corunner_cpus, reference_cpu
    from ceiling.machine.model import Cpu, Machine
    m = Machine(cpus=[Cpu(id=i, core=i, socket=i // 8, node=i // 8, smt=0, l3=i // 8) for i in range(16)])
    cpus = corunner_cpus(range(16), m)
    assert cpus == [6, 7, 14, 15]
    assert reference_cpu(range(16), cpus, m) == 0
    # caches unknown: by NUMA node; nothing known: the last quarter of all
    m = Machine(cpus=[Cpu(id=i, core=i, socket=0, node=i % 2, smt=0) for i in range(12)])
    assert corunner_cpus(range(12), m) == [10, 11] and corunner_cpus(range(12)) == [9, 10, 11]
    assert reference_cpu([3], [3], m) is None and reference_cpu([0, 1], [1]) == 0
    # two CPUs on two sockets: not a co-runner on each (the program would keep none), the last quarter of all
    m = Machine(cpus=[Cpu(id=i, core=i, socket=i // 8, node=i // 8, smt=0, l3=i // 8) for i in range(16)])
    assert corunner_cpus([0, 8], m) == [8] and reference_cpu([0, 8], [8], m) is None


def test_the_pirates_of_one_cache_share_it_instead_of_overflowing_it():
    """Two pirates in one cache, each filling 3/4 of it, would stream from memory: a bandit,
    not a pirate; each takes its part of the 3/4 (and each bandit of the 4x)."""
    from ceiling.machine.model import Cpu, Machine
    from ceiling.probes.corunner import corunner_cpus, corunner_shares, elements_for
    m = Machine(cpus=[Cpu(id=i, core=i, socket=i // 8, node=i // 8, smt=0, l3=i // 8) for i in range(16)])
    cpus = corunner_cpus(range(16), m)
    shares = corunner_shares(cpus, m)
    assert shares == {6: 2, 7: 2, 14: 2, 15: 2}
    llc = 32 << 20
    pirates = sum(3 * 8 * elements_for("pirate", llc, shares[c]) for c in (6, 7))
    assert pirates <= 3 * llc // 4 < pirates + 2 * 3 * 8 * 4
    assert elements_for("pirate", llc) == 2 * elements_for("pirate", llc, 2)
    assert 3 * 8 * elements_for("resident", llc) <= llc // 2


@pytest.mark.parametrize("kind", ["spin", "pirate"])
def test_a_corunner_makes_its_arrays_once_and_runs_on_command(kind):
    """One set of co-runners serves every arm: each run gives its own rate, a run cut at once
    still one (its stop may arrive with its go), and closing leaves no process behind."""
    from ceiling.observe.companions import CoRunners
    cpu = sorted(os.sched_getaffinity(0))[-1]
    with CoRunners(kind, [cpu], 4 << 20) as co:
        procs = list(co.procs)
        runs = []
        for duty in (1.0, 0.5, 1.0):
            with co.running(duty):
                time.sleep(0.3)
            runs.append(co.rate())
        with co.running(1.0):
            pass
        runs.append(co.rate())
    assert all(r is not None and r > 0 for r in runs), runs
    assert co.procs == [] and all(p.poll() is not None for p in procs)


def test_the_verdict_replaces_the_undecided_cpu_bound_or_says_why_it_cannot():
    from ceiling.analysis.profile_experiments import apply, classify
    from ceiling.results.analysis import Bound
    cpu = [Bound("application", "cpu", 0.9, "on a CPU 90%", {})]
    bounds, findings = apply(classify(*_arms(1.0, 1.05, 1.2, 1.4, 1.06)), cpu, [])
    assert [b.bound for b in bounds] == ["memory"] and "memory bandwidth" in bounds[0].evidence
    assert findings[0].id == "profile.experiments" and findings[0].status == "warn"
    bounds, findings = apply(classify(*_arms(1.0, 1.0, 1.2, 1.4, 1.0, power=0.05)), cpu, [])
    assert [b.bound for b in bounds] == ["cpu"] and findings[0].status == "skipped"


@pytest.mark.slow      # 13 re-runs of the program: over 10 s
def test_experiments_run_the_program_again_and_say_what_they_cost(tmp_path):
    busy = f"{sys.executable} -c 'import time; t = time.time()\nwhile time.time() - t < 0.3: pass'"
    r, doc = profile(tmp_path, SH, "-c", busy, opts=["--experiments"])
    assert r.returncode == 0, r.stderr
    ex = doc["application"]["profile"]["experiments"]
    # the page-size arm where this node lets a user change it (ceiling.probes.rerun.page_setting)
    arms = ("alone", "spin", "bandit_half", "bandit", "pirate") + (() if ex["page_setting"].get("why") else ("pages",))
    assert sorted(ex["times_s"]) == sorted(arms) and all(len(ex["times_s"][a]) == 2 for a in arms), ex
    runs = 2 * len(arms) + 1                      # and once alone, its working set read
    assert ex["cost_s"] > 0 and f"--experiments: the program ran {runs} more times" in " ".join(r.stderr.split())
    # a loop in registers: compute where the node lets the experiment see memory, else undecided, said why
    assert ex["bound"] in ("compute", None) and (ex["bound"] or ex["why"].startswith("inconclusive"))
    assert "profile.experiments" in {f["id"] for f in doc["findings"]}
    sc = ex["scaling"]                            # and thread scaling, OMP_NUM_THREADS = 1, ..., every CPU
    if len(os.sched_getaffinity(0)) < 2:
        assert sc["why"].startswith("one CPU")
    else:
        assert sc["counts"][0] == 1 and sc["counts"][-1] == len(os.sched_getaffinity(0))
        assert all(len(v) == 2 for v in sc["times_s"].values()) and sc["cost_s"] > 0
        # judged, unless something else used the CPUs meanwhile (then said, as the next test checks)
        assert "profile.scaling" in {f["id"] for f in doc["findings"]} or sc["why"].startswith("not judged"), sc


@pytest.mark.slow      # 13 re-runs beside a competing process: over 10 s
def test_experiments_beside_a_competing_process_decide_nothing_and_say_why(tmp_path):
    """Slowdowns and stolen bandwidth beside another busy process say as much about it as about
    the program: a register loop once came out "memory" while a CI run shared the CPUs."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = f"{sys.executable} -c 'import time; t = time.time()\nwhile time.time() - t < 0.3: pass'"
        r, doc = profile(tmp_path, SH, "-c", busy, opts=["--experiments"])
    finally:
        hog.kill()
        hog.wait()
    assert r.returncode == 0, r.stderr
    ex = doc["application"]["profile"]["experiments"]
    # no slowdown decides; a working set inside the core's private caches (a time it is not) still may
    if ex["bound"] is None:
        assert ex["why"].startswith("inconclusive: the node was disturbed during the experiments (Other processes "
                                    "used"), ex
    else:
        assert ex["bound"] == "compute" and ex["working_set"]["fits"] and "Other processes used" in ex["words"], ex
    assert f"pid {hog.pid}" in ex["competing_load"], ex["competing_load"]
    sc = ex.get("scaling") or {}
    if len(os.sched_getaffinity(0)) >= 2:
        assert sc["why"].startswith("not judged: Other processes used"), sc
    f = {x["id"]: x for x in doc["findings"]}["profile.experiments"]
    assert f["status"] == ("skipped" if ex["bound"] is None else "ok") and "Other processes used" in f["evidence"]


def test_experiments_are_refused_for_one_rank_of_an_mpi_job(tmp_path):
    env = dict(os.environ, PMI_RANK="0", PMI_SIZE="2")
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--experiments", "--", "true"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and "--experiments reruns the program alone" in r.stderr


def test_experiments_after_a_failed_run_say_they_were_not_run(tmp_path):
    r, doc = profile(tmp_path, SH, "-c", "exit 3", opts=["--experiments", "--no-measure"])
    assert r.returncode == 3
    ex = doc["application"]["profile"]["experiments"]
    assert ex["why"] == "not run: the program exited 3" and not ex["times_s"] and ex["rounds"] is None
    text = " ".join(r.stderr.split())
    assert "--experiments: not run: the program exited 3" in text and "more times" not in text


def test_a_process_that_wrote_no_record_is_named_and_others_are_not(tmp_path):
    # the shell kills itself with SIGKILL after waiting for sleep: it writes no record, sleep does;
    # a static program is one the interposer never entered, and is not named
    static = static_program(tmp_path, "#include <unistd.h>\nint main(void) { usleep(300000); return 0; }\n")
    r, doc = profile(tmp_path, "sh", "-c", f"sleep 0.5; {static}; kill -KILL $$")
    assert r.returncode == 128 + 9
    f = {x["id"]: x for x in doc["findings"]}["profile.interposer.no_record"]
    assert len(f["data"]["processes"]) == 1 and f["data"]["processes"][0].endswith(" sh"), f
    assert "SIGKILL" in f["why"]


def test_no_record_finding_is_quiet_when_every_process_wrote_one_or_the_interposer_was_off(tmp_path):
    r, doc = profile(tmp_path, "sh", "-c", "sleep 0.5; sleep 0.3; true")
    assert r.returncode == 0, r.stderr
    assert "profile.interposer.no_record" not in {x["id"] for x in doc["findings"]}
    r, doc = profile(tmp_path, "sh", "-c", "sleep 0.5; kill -KILL $$", opts=("--no-interpose",))
    assert "profile.interposer.no_record" not in {x["id"] for x in doc["findings"]}


def test_the_help_says_json_is_refused_and_what_to_use():
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--help"], capture_output=True, text=True,
                       env=dict(os.environ, COLUMNS="200"))
    assert r.returncode == 0
    line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("--json"))
    assert "refused" in line and "--save-json" in line and "print the run" not in line, line
