"""Competing-load detection against small fixture /proc trees, and one live busy child."""
import os
import subprocess
import sys
import time

import pytest

from ceiling.checks import load
from ceiling.results.model import OK, SKIPPED, WARN

HZ = os.sysconf("SC_CLK_TCK")
OWN = 1000            # the pid playing "this process" in the fixture trees


def write_proc(root, *, uptime=100.0, loadavg=(0.1, 0.2, 0.3), busy=0, steal=0, ncpus=4,
               procs=None, running=1, tasks=100):
    """A fixture /proc: procs maps pid -> (comm, utime+stime ticks, start ticks[, waited-for
    children's cutime+cstime ticks])."""
    proc = root / "proc"
    proc.mkdir(parents=True, exist_ok=True)
    # user nice system idle iowait irq softirq steal guest guest_nice; busy all in user
    lines = [f"cpu  {busy} 0 0 99999 7 0 0 {steal} 0 0"]
    lines += [f"cpu{i} 0 0 0 0 0 0 0 0 0 0" for i in range(ncpus)]
    lines += ["intr 1 2 3", "ctxt 42", f"procs_running {running}"]
    (proc / "stat").write_text("\n".join(lines) + "\n")
    (proc / "uptime").write_text(f"{uptime:.2f} 1234.56\n")
    (proc / "loadavg").write_text(" ".join(f"{x:.2f}" for x in loadavg) + f" {running}/{tasks} 4242\n")
    for pid, (comm, ticks, start, *child) in (procs or {}).items():
        kids = child[0] if child else 0
        d = proc / str(pid)
        d.mkdir(exist_ok=True)
        # fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        #              utime stime cutime cstime prio nice threads itreal starttime vsize rss
        rest = ["R", 1, pid, pid, 0, -1, 4194304, 10, 0, 0, 0, ticks - ticks // 3, ticks // 3,
                kids - kids // 2, kids // 2, 20, 0, 1, 0, start, 123456, 789]
        (d / "stat").write_text(f"{pid} ({comm}) " + " ".join(map(str, rest)) + "\n")
    return str(root)


def two_samples(tmp_path, before, after, **kw):
    return (load.sample(write_proc(tmp_path / "a", **before), pid=OWN),
            load.sample(write_proc(tmp_path / "b", **after), pid=OWN))


def test_sample_parses_the_tree(tmp_path):
    root = write_proc(tmp_path, uptime=12.5, loadavg=(1.5, 0.75, 0.25), busy=800, steal=30, ncpus=8,
                      running=3, tasks=321,
                      procs={OWN: ("ceiling", 77, 5), 7: ("my (odd) name) x", 40, 9), 8: ("kworker/0:1", 3, 1)})
    (tmp_path / "proc" / "99").mkdir()           # listed but unreadable (as under hidepid)
    s = load.sample(root, pid=OWN)
    assert s.available and s.uptime_s == 12.5 and s.loadavg == (1.5, 0.75, 0.25)
    assert (s.running, s.tasks, s.ncpus, s.busy_ticks, s.steal_ticks) == (3, 321, 8, 800, 30)
    assert s.own_ticks == 77 and OWN not in s.procs
    p7 = s.procs[7]
    assert (p7.pid, p7.comm, p7.cpu_ticks, p7.start_ticks) == (7, "my (odd) name) x", 40, 9)
    assert p7.uid == os.getuid() and p7.rss_pages == 789     # the owner of the fixture's /proc/7
    assert s.procs[8].comm == "kworker/0:1"
    assert s.unreadable == 1


def test_no_proc_is_skipped_not_fatal(tmp_path):
    s = load.sample(str(tmp_path), pid=OWN)
    assert not s.available and "stat" in s.reason
    f = load.compare(s, s, 4)
    assert len(f) == 1 and f[0].status == SKIPPED and f[0].id == "load.competing"


def test_idle_interval_is_ok(tmp_path):
    procs = {OWN: ("ceiling", 0, 5), 10: ("sshd", 100, 1)}
    b, a = two_samples(tmp_path, dict(procs=procs, uptime=100.0, busy=1000),
                       dict(procs={OWN: ("ceiling", 2 * HZ, 5), 10: ("sshd", 101, 1)},
                            uptime=102.0, busy=1000 + 2 * HZ + 1))
    [f] = load.compare(b, a, 4)
    assert f.status == OK and f.fix == "" and "other processes used 0.0" in f.evidence
    assert "sshd" not in f.evidence         # 1 tick in 2 s is under the 1% naming floor


def test_busy_process_is_named(tmp_path):
    b, a = two_samples(tmp_path,
                       dict(procs={OWN: ("ceiling", 0, 5), 4242: ("stress", 1000, 50), 11: ("rsyslogd", 5, 1)},
                            uptime=100.0, busy=0),
                       dict(procs={OWN: ("ceiling", 4 * HZ, 5), 4242: ("stress", 1000 + int(1.5 * HZ), 50),
                                   11: ("rsyslogd", 5 + HZ // 5, 1)},
                            uptime=102.0, busy=4 * HZ + int(1.5 * HZ) + HZ // 5))
    [f] = load.compare(b, a, 4)
    assert f.status == WARN
    assert f.title == "Other processes used 0.85 CPUs during the measurement"
    assert "top: pid 4242 (stress) 75% of a CPU, pid 11 (rsyslogd) 10% of a CPU" in f.evidence
    assert f.why == "they take cycles and memory bandwidth from the benchmark: results are lower and noisier"
    assert f.data["cause"] == load.COMPETING and f.data["processes"][0] == {"pid": 4242, "comm": "stress",
                                                                            "cpu_share": pytest.approx(0.75)}
    assert f.fix == ("stop or move the processes named in the evidence if they are yours, or run on an idle node / "
                     "exclusive allocation, e.g. srun --exclusive")
    # the same processes, declared part of this measurement: nothing competes
    [g] = load.compare(b, a, 4, own_pids=(4242, 11))
    assert g.status == OK and "stress" not in g.evidence


@pytest.mark.parametrize("ticks_in_10s,status", [(HZ, WARN), (HZ - 10, OK)])
def test_threshold_is_a_tenth_of_a_cpu(tmp_path, ticks_in_10s, status):
    b, a = two_samples(tmp_path, dict(procs={5: ("cron", 0, 1)}, uptime=10.0, busy=0),
                       dict(procs={5: ("cron", ticks_in_10s, 1)}, uptime=20.0, busy=ticks_in_10s))
    assert load.compare(b, a, 4)[0].status == status


def test_reused_pid_and_new_process(tmp_path):
    hz = HZ
    b, a = two_samples(tmp_path,
                       dict(procs={20: ("old", 5000, 10)}, uptime=50.0),
                       # pid 20 is now another process started inside the interval;
                       # pid 21 is new; pid 22 existed before the interval but was not seen then.
                       dict(procs={20: ("new", hz // 2, int(50.5 * hz)), 21: ("make", hz // 4, int(51 * hz)),
                                   22: ("hidden", 50 * hz, 1)},
                            uptime=52.0, busy=hz))
    c = load.consumers(b, a)
    assert [(pid, comm) for pid, comm, _ in c] == [(20, "new"), (21, "make")]
    assert c[0][2] == pytest.approx(0.25) and c[1][2] == pytest.approx(0.125)


def test_node_busy_without_visible_processes(tmp_path):
    # another container, or short-lived processes: only /proc/stat sees them
    b, a = two_samples(tmp_path, dict(procs={OWN: ("ceiling", 0, 5)}, uptime=10.0, busy=0),
                       dict(procs={OWN: ("ceiling", HZ, 5)}, uptime=11.0, busy=HZ + HZ // 2))
    [f] = load.compare(b, a, 4)
    assert f.status == WARN and "0.50 CPUs of it in processes not visible here" in f.evidence


def test_busy_time_not_visible_is_not_counted_where_the_programs_own_tasks_may_be_it(tmp_path):
    # srun's tasks run under slurmstepd, outside the tree: the node's busy time beyond the processes
    # named may be the program itself, so it is said and not counted (a real srun run was told 1.7 CPUs
    # of other load that were its own triad)
    b, a = two_samples(tmp_path, dict(procs={OWN: ("ceiling", 0, 5)}, uptime=10.0, busy=0),
                       dict(procs={OWN: ("ceiling", HZ, 5)}, uptime=11.0, busy=HZ + HZ // 2))
    [f] = load.compare(b, a, 4, hidden_own="srun started them")
    assert f.status == OK and "0.50 CPUs in processes not visible here, not counted: srun started them" in f.evidence


def test_children_waited_for_are_ours(tmp_path):
    # The MPI compiler wrapper a rank ran (and waited for) inside the interval is gone from
    # /proc by the end; its time is in the rank's cutime/cstime, so it is not "invisible" load.
    b, a = two_samples(tmp_path, dict(procs={OWN: ("ceiling", 0, 5, 7), 30: ("rank1", 0, 6, 0)},
                                      uptime=10.0, busy=0),
                       dict(procs={OWN: ("ceiling", HZ, 5, 7 + HZ // 4), 30: ("rank1", HZ // 2, 6, HZ // 4)},
                            uptime=11.0, busy=2 * HZ))
    assert b.own_ticks == 7 and a.own_ticks == HZ + 7 + HZ // 4
    [f] = load.compare(b, a, 4, own_pids=(30,))
    assert f.status == OK, f.evidence
    # Without rank 1 counted as ours, its own time and its child's are other load.
    [g] = load.compare(b, a, 4)
    assert g.status == WARN and "0.75 CPUs" in g.title


def test_high_load_average_before_start(tmp_path):
    b, a = two_samples(tmp_path, dict(loadavg=(2.0, 1.0, 0.5), uptime=1.0),
                       dict(loadavg=(2.0, 1.0, 0.5), uptime=2.0))
    [f] = load.compare(b, a, 4)
    assert f.status == WARN and f.title == "Load average 2.00 on 4 CPUs before the start"
    assert f.data["cause"] == load.BUSY_BEFORE and f.fix == load.FIX
    assert "load average before 2.00 1.00 0.50 (4 CPUs)" in f.evidence
    assert load.compare(b, a, 5)[0].status == OK
    assert load.compare(b, a, 4, check_loadavg=False)[0].status == OK


def test_steal_time_in_a_vm(tmp_path):
    b, a = two_samples(tmp_path, dict(uptime=1.0, steal=0), dict(uptime=3.0, steal=HZ))
    [f] = load.compare(b, a, 4)
    assert f.status == WARN and "steal time" in f.title and "steal 0.50 CPUs" in f.evidence
    # the host's doing: no exclusive allocation inside the VM changes it
    assert f.data["cause"] == load.STEAL and "dedicated (pinned) vCPUs" in f.fix and "srun" not in f.fix


def test_check_idle_on_fixture(tmp_path):
    root = write_proc(tmp_path / "busy", loadavg=(3.0, 2.0, 1.0))
    assert load.check_idle(4, interval_s=0.01, root=root).status == WARN
    root = write_proc(tmp_path / "idle", loadavg=(0.1, 0.1, 0.1))
    f = load.check_idle(4, interval_s=0.01, root=root)
    assert f.status == OK and f.title == "The node is idle"


def test_live_sample_excludes_this_process():
    s = load.sample()
    assert s.available and s.own_pid == os.getpid() and os.getpid() not in s.procs
    assert s.own_ticks is not None and s.procs and s.ncpus >= 1


BUSY = "import time\nt = time.time()\nwhile time.time() - t < 20:\n    pass\n"


def test_live_busy_child_is_named():
    child = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        time.sleep(0.2)                      # let it get past interpreter start-up
        before = load.sample()
        time.sleep(1.0)
        after = load.sample()
    finally:
        child.kill()
        child.wait()
    shares = {pid: share for pid, _, share in load.consumers(before, after)}
    # Not a timing assertion: even on a crowded 2-core machine a spinning child gets far
    # more than the 10% that makes the finding warn.
    assert shares.get(child.pid, 0.0) >= 0.10
    [f] = load.compare(before, after, os.cpu_count() or 1, check_loadavg=False)
    assert f.status == WARN and f"pid {child.pid} (python" in f.evidence
    [g] = load.compare(before, after, os.cpu_count() or 1, own_pids=(child.pid,), check_loadavg=False)
    assert f"pid {child.pid} " not in g.evidence


SPIN_CPU = "import time\nwhile time.process_time() < 0.3:\n    pass\n"


def test_live_child_waited_for_counts_as_own_time():
    before = load.sample()
    subprocess.run([sys.executable, "-c", SPIN_CPU], check=True)
    after = load.sample()
    # CPU time, not wall time: the child used at least 0.3 s of it, however busy the machine.
    assert after.own_ticks - before.own_ticks >= 0.3 * HZ - 1


def test_several_problems_read_as_one_sentence(tmp_path):
    b, a = two_samples(tmp_path, dict(loadavg=(2.0, 1.0, 0.5), uptime=1.0, steal=0),
                       dict(loadavg=(2.0, 1.0, 0.5), uptime=3.0, steal=HZ))
    [f] = load.compare(b, a, 4)
    assert f.title == ("Load average 2.00 on 4 CPUs before the start; the hypervisor took 0.50 CPUs from this VM "
                       "(steal time)")
