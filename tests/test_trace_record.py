"""The trace's recording (issue 28, part 1): the interposer's per-thread event files, read back by
probes/interpose_events.py into results/events.Events. Real interposer, real programs compiled here
with gcc; each event checked against the program's own calls and the record's counts."""
import os
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest

from ceiling.errors import StoreError
from ceiling.probes import interpose_events as IE
from ceiling.probes.interpose_names import names
from ceiling.results import events as E
from test_interpose import LIB, NEEDS_LIB, module_lines, parse

pytestmark = [NEEDS_LIB, pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")]

CALL = {c.fn: c.id for c in names().calls}

WRITES = r"""
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    const char *mode = argc > 2 ? argv[2] : "";
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0600);
    for (int i = 0; i < 10; i++)
        write(fd, buf, 100);
    pwrite(fd, buf, 50, 5000);
    lseek(fd, 300, SEEK_SET);
    write(fd, buf, 7);
    if (!strcmp(mode, "fork")) {
        pid_t c = fork();
        if (c == 0) {
            pwrite(fd, buf, 11, 7000);
            _exit(0);
        }
        waitpid(c, NULL, 0);
    }
    if (!strcmp(mode, "exec")) {
        close(fd);
        execl("/bin/true", "true", (char *)0);
        return 1;
    }
    if (!strcmp(mode, "many")) {              /* several buffers' worth, then a crash */
        for (int i = 0; i < 200; i++)
            pwrite(fd, buf, 1, i);
        if (argc > 3 && !strcmp(argv[3], "segv"))
            raise(SIGSEGV);
        if (argc > 3 && !strcmp(argv[3], "kill")) {
            write(1, "k\n", 2);
            pause();
        }
    }
    close(fd);
    return 0;
}
"""


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    d = tmp_path_factory.mktemp("prog")
    (d / "w.c").write_text(WRITES)
    subprocess.run(["gcc", "-O1", "-o", str(d / "w"), str(d / "w.c")], check=True)
    return d / "w"


def run(prog, tmp_path, *args, env=None, **kw):
    out = tmp_path / "rec"
    out.mkdir(exist_ok=True)
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONFAULTHANDLER", "LD_PRELOAD")}
    e.update(LD_PRELOAD=str(LIB), CEILING_INTERPOSE_OUT=str(out / "rec.%p"), CEILING_TRACE_DIR=str(out))
    e.update(env or {})
    p = subprocess.run([str(prog), str(tmp_path / "f.dat"), *args], env=e, capture_output=True, timeout=60, **kw)
    return p, out


def calls_of(ev, pid=None):
    m = ev.kind != E.INSTANT
    if pid is not None:
        m &= ev.pid == pid
    return ev.select(m)


def test_without_the_trace_dir_no_event_file_is_written(prog, tmp_path):
    p, out = run(prog, tmp_path, env={"CEILING_TRACE_DIR": ""})
    assert p.returncode == 0
    assert IE.event_files(str(out)) == []


def test_each_counted_call_is_one_event_with_its_file_offset_and_bytes(prog, tmp_path):
    p, out = run(prog, tmp_path)
    assert p.returncode == 0, p.stderr
    ev, reading = IE.read_dir(str(out))
    assert reading.files == 1 and reading.torn_events == 0
    c = calls_of(ev)
    # the record's counts per call equal the events per call
    rec = [r for r in parse((next(out.glob("rec.*"))).read_text())][-1]
    fn_calls = module_lines(rec, "posix")["fn"]
    got = {names().calls[i].fn: int(n) for i, n in zip(*np.unique(c.call, return_counts=True))}
    assert got == {k: int(v) for k, v in fn_calls.items()}
    data = c.select(np.isin(c.call, [CALL["write"], CALL["pwrite"], CALL["pwrite64"]]))
    assert list(data.offset) == [0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 5000, 300]
    assert list(data.nbytes) == [100] * 10 + [50, 7]
    assert list(data.result) == [100] * 10 + [50, 7]
    assert set(data.kind) == {E.IO_WRITE}
    assert {ev.files[i] for i in data.file} == {str(tmp_path / "f.dat")}
    seek = c.select(c.call == CALL["lseek"])
    assert list(seek.result) == [300] and ev.files[seek.file[0]] == str(tmp_path / "f.dat")
    opn = c.select(c.call == CALL["open"])
    assert opn.result[0] >= 3 and opn.kind[0] == E.IO_META
    assert np.all(np.diff(ev.ts) >= 0) and np.all(c.dur >= 0)
    inst = ev.select(ev.kind == E.INSTANT)
    assert list(inst.call) == [E.INSTANT_PROCESS_START, E.INSTANT_PROCESS_END]
    assert ev.processes[p_pid(ev)].start_ns <= int(c.ts[0])


def p_pid(ev):
    return int(ev.pid[0])


def test_a_forked_child_that_ends_with__exit_keeps_its_own_events(prog, tmp_path):
    p, out = run(prog, tmp_path, "fork")
    assert p.returncode == 0, p.stderr
    ev, _ = IE.read_dir(str(out))
    pids = sorted(set(int(x) for x in ev.pid))
    assert len(pids) == 2
    child = max(pids, key=lambda q: ev.processes[q].ppid == min(pids))
    cc = calls_of(ev, child)
    assert list(cc.call) == [CALL["pwrite"]] or list(cc.call) == [CALL["pwrite64"]]
    assert list(cc.offset) == [7000] and list(cc.nbytes) == [11]
    parent = [q for q in pids if q != child][0]
    fork = ev.select((ev.pid == parent) & (ev.kind == E.INSTANT) & (ev.call == E.INSTANT_FORK))
    assert len(fork) == 1
    assert 7000 not in list(calls_of(ev, parent).offset)


def test_an_exec_writes_the_old_images_events_first(prog, tmp_path):
    p, out = run(prog, tmp_path, "exec")
    assert p.returncode == 0, p.stderr
    ev, reading = IE.read_dir(str(out))
    assert reading.files >= 1
    c = calls_of(ev)
    assert CALL["close"] in set(c.call) and int(np.sum(c.call == CALL["write"])) == 11
    assert E.INSTANT_EXEC in set(ev.select(ev.kind == E.INSTANT).call)


def test_full_buffers_are_written_out_and_a_segv_keeps_everything_counted(prog, tmp_path):
    p, out = run(prog, tmp_path, "many", "segv", env={"CEILING_TRACE_BUFFER": "16"})
    assert p.returncode == -signal.SIGSEGV
    ev, reading = IE.read_dir(str(out))
    c = calls_of(ev)
    assert int(np.sum(np.isin(c.call, [CALL["pwrite"], CALL["pwrite64"]]))) == 201
    assert ev.tracer_ns > 0           # the write-outs' own time is in the file


def test_sigkill_after_write_outs_leaves_a_readable_file_of_what_was_written(prog, tmp_path):
    out = tmp_path / "rec"
    out.mkdir()
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONFAULTHANDLER", "LD_PRELOAD")}
    e.update(LD_PRELOAD=str(LIB), CEILING_INTERPOSE_OUT=str(out / "rec.%p"), CEILING_TRACE_DIR=str(out),
             CEILING_TRACE_BUFFER="16")
    proc = subprocess.Popen([str(prog), str(tmp_path / "f.dat"), "many", "kill"], env=e, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"k\n"
    proc.kill()
    proc.wait()
    ev, reading = IE.read_dir(str(out))
    n = int(np.sum(np.isin(ev.call, [CALL["pwrite"], CALL["pwrite64"]]) & (ev.kind != E.INSTANT)))
    assert 150 < n <= 201 and n % 1 == 0


def test_a_torn_last_event_is_skipped_and_counted_and_another_call_table_is_refused(prog, tmp_path):
    p, out = run(prog, tmp_path)
    f = IE.event_files(str(out))[0]
    whole, _ = IE.read_dir(str(out))
    with open(f, "ab") as fh:
        fh.write(b"\1" * 20)
    ev, reading = IE.read_dir(str(out))
    assert reading.torn_events == 1 and len(ev) == len(whole)
    raw = bytearray(open(f, "rb").read())
    raw[16:24] = b"\0" * 8
    open(f, "wb").write(bytes(raw))
    with pytest.raises(StoreError, match="another call table"):
        IE.read_dir(str(out))


@pytest.mark.parametrize("env,reason,kept", [
    ({"CEILING_TRACE_MAX_PER_CALL": "5"}, "max-per-site", 5),
    ({"CEILING_TRACE_EXCLUDE": "pwrite,pwrite64"}, "exclude", 0),
    ({"CEILING_TRACE_CALLS": "open,META"}, "calls", 0),
    ({"CEILING_TRACE_MIN_NS": "1000000000"}, "min-duration", 0),
    ({"CEILING_TRACE_WINDOW": "1000:2000"}, "window", 0),
    # a window that ended before this process started (the run began 10 s before the parameters were made)
    ({"CEILING_TRACE_WINDOW": f"0:5@{time.time_ns() - 10 * 10**9}"}, "window", 0),
    ({"CEILING_TRACE_MAX_BYTES": str(48 * 40)}, "max-size", None),
])
def test_a_limit_hit_keeps_the_counts_and_says_how_many_were_dropped_and_from_when(prog, tmp_path, env, reason,
                                                                                    kept):
    p, out = run(prog, tmp_path, "many", env={"CEILING_TRACE_BUFFER": "16", **env})
    assert p.returncode == 0, p.stderr
    ev, _ = IE.read_dir(str(out))
    rec = [r for r in parse((next(out.glob("rec.*"))).read_text())][-1]
    counted = sum(int(v) for k, v in module_lines(rec, "posix")["fn"].items() if k.startswith("pwrite"))
    assert counted == 201                                    # the record's counts are untouched
    c = calls_of(ev)
    got = int(np.sum(np.isin(c.call, [CALL["pwrite"], CALL["pwrite64"]])))
    if kept is not None:
        assert got == kept
    assert ev.dropped.events[reason] > 0 and 0 <= ev.dropped.first_ns[reason] <= ev.end_ns + 10**9
    if reason == "max-size":
        assert len(c) + int(np.sum(ev.kind == E.INSTANT)) <= 40 and got + ev.dropped.events[reason] >= 201
    if reason == "max-per-site":
        assert ev.dropped.events == {reason: (201 - 5) + (11 - 5)}      # pwrite 201 calls, write 11: 5 kept each


def test_the_window_counts_from_the_runs_start_not_each_processs(prog, tmp_path):
    """A process started 1000 s into the run, with the window from 999 s: every call of it is inside
    (counted from its own start, the window would not open for 999 s)."""
    env = {"CEILING_TRACE_BUFFER": "16", "CEILING_TRACE_WINDOW": f"999:100000@{time.time_ns() - 1000 * 10**9}"}
    p, out = run(prog, tmp_path, "many", env=env)
    assert p.returncode == 0, p.stderr
    ev, _ = IE.read_dir(str(out))
    c = calls_of(ev)
    assert int(np.sum(np.isin(c.call, [CALL["pwrite"], CALL["pwrite64"]]))) == 201 and "window" not in ev.dropped.events


STREAMS = r"""
#include <stdio.h>
#include <sys/sendfile.h>
#include <fcntl.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    FILE *f = fopen(argv[1], "w");
    for (int i = 0; i < 5; i++)
        fwrite("abcdefgh", 1, 8, f);
    fclose(f);
    int in = open(argv[1], O_RDONLY), out = open("/dev/null", O_WRONLY);
    off_t off = 8;
    sendfile(out, in, &off, 16);
    return 0;
}
"""


def test_stdio_and_copy_calls_are_events_too(tmp_path):
    (tmp_path / "s.c").write_text(STREAMS)
    subprocess.run(["gcc", "-O0", "-o", str(tmp_path / "s"), str(tmp_path / "s.c")], check=True)
    p, out = run(tmp_path / "s", tmp_path)
    assert p.returncode == 0, p.stderr
    ev, _ = IE.read_dir(str(out))
    c = calls_of(ev)
    fw = c.select(c.call == CALL["fwrite"])
    assert list(fw.nbytes) == [8] * 5 and {ev.files[i] for i in fw.file} == {str(tmp_path / "f.dat")}
    assert int(np.sum(c.call == CALL["fopen"])) == 1 and int(np.sum(c.call == CALL["fclose"])) == 1
    sf = c.select(np.isin(c.call, [CALL["sendfile"], CALL["sendfile64"]]))
    assert list(sf.nbytes) == [16] and list(sf.offset) == [8] and ev.files[sf.file[0]] == str(tmp_path / "f.dat")


REGIONS = r"""
#include <ceiling/region.h>
#include <unistd.h>
int main(void)
{
    ceiling_region_begin("checkpoint");
    ceiling_region_begin("inner");
    close(-1);
    ceiling_region_end("inner");
    ceiling_region_end("checkpoint");
    ceiling_region_begin("checkpoint");
    ceiling_region_end("checkpoint");
    return 0;
}
"""


def test_c_regions_are_spans_and_the_program_runs_without_the_interposer(tmp_path):
    from ceiling.region import include_dir
    (tmp_path / "r.c").write_text(REGIONS)
    subprocess.run(["gcc", "-O1", "-I", str(include_dir()), "-o", str(tmp_path / "r"), str(tmp_path / "r.c")],
                   check=True)
    plain = subprocess.run([str(tmp_path / "r")], capture_output=True, timeout=30)
    assert plain.returncode == 0 and plain.stderr == b""
    p, out = run(tmp_path / "r", tmp_path)
    assert p.returncode == 0, p.stderr
    _nested_regions(*IE.read_dir(str(out)))


def _nested_regions(ev, _reading):
    """The region programs' three regions: "inner" inside the first "checkpoint", a close inside "inner"."""
    r = ev.select(ev.kind == E.REGION)
    assert sorted(ev.regions[i] for i in r.call) == ["checkpoint", "checkpoint", "inner"]
    inner = r.select(r.call == ev.regions.index("inner"))
    outer = r.select(r.call == ev.regions.index("checkpoint"))
    close = ev.select(ev.call == CALL["close"])
    assert outer.ts[0] <= inner.ts[0] <= close.ts[0]
    assert close.ts[0] + close.dur[0] <= inner.ts[0] + inner.dur[0] <= outer.ts[0] + outer.dur[0]


FORTRAN_REGIONS = """
program r
    use ceiling_region
    implicit none
    integer :: u
    call ceiling_region_begin("checkpoint")
    call ceiling_region_begin("inner   ")
    open(newunit=u, file="/dev/null", action="write")
    close(u)
    call ceiling_region_end("inner")
    call ceiling_region_end("checkpoint")
    call ceiling_region_begin("checkpoint")
    call ceiling_region_end("checkpoint")
end program r
"""


@pytest.mark.skipif(shutil.which("gfortran") is None, reason="no gfortran (Debian: apt-get install gfortran)")
def test_fortran_regions_are_spans_and_the_program_runs_without_the_interposer(tmp_path):
    from ceiling.region import include_dir
    (tmp_path / "r.f90").write_text(FORTRAN_REGIONS)
    module = include_dir() / "ceiling" / "ceiling_region.f90"
    subprocess.run(["gfortran", "-O1", "-std=f2008", "-J", str(tmp_path), "-o", str(tmp_path / "r"), str(module),
                    str(tmp_path / "r.f90")], check=True, cwd=tmp_path)
    plain = subprocess.run([str(tmp_path / "r")], capture_output=True, timeout=30)
    assert plain.returncode == 0 and plain.stderr == b""
    p, out = run(tmp_path / "r", tmp_path)
    assert p.returncode == 0, p.stderr
    _nested_regions(*IE.read_dir(str(out)))         # the names' trailing blanks trimmed


def test_python_regions_as_context_manager_and_decorator(tmp_path):
    import sys
    code = ("import os\nfrom ceiling.region import region\n"
            "@region('solve')\ndef solve():\n    os.close(os.open('/dev/null', os.O_RDONLY))\n"
            "with region('io'):\n    solve()\n")
    out = tmp_path / "rec"
    out.mkdir()
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONFAULTHANDLER", "LD_PRELOAD")}
    plain = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, timeout=60)
    assert plain.returncode == 0, plain.stderr
    e.update(LD_PRELOAD=str(LIB), CEILING_INTERPOSE_OUT=str(out / "rec.%p"), CEILING_TRACE_DIR=str(out))
    p = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    ev, _ = IE.read_dir(str(out))
    r = ev.select(ev.kind == E.REGION)
    assert sorted(ev.regions[i] for i in r.call) == ["io", "solve"]


def test_observe_with_trace_limits_gives_the_event_files_and_a_reader(prog, tmp_path):
    from ceiling.observe import Instruments, TraceLimits, observe
    d = tmp_path / "events"
    d.mkdir(mode=0o700)
    exe = str(prog)
    obs = observe([exe, str(tmp_path / "f.dat")], exe,
                  Instruments(interval_s=0, counters=False, cost="", competing=False,
                              trace=TraceLimits(directory=str(d), max_per_call=3)))
    assert obs.returncode == 0
    assert obs.interposer.trace_dir == str(d)
    ev, reading = obs.interposer.events()
    c = calls_of(ev)
    assert int(np.sum(c.call == CALL["write"])) == 3 and ev.dropped.events == {"max-per-site": 11 - 3}
    assert {ev.files[i] for i in c.file if i >= 0} == {str(tmp_path / "f.dat")}
    untraced = observe([exe, str(tmp_path / "f.dat")], exe,
                       Instruments(interval_s=0, counters=False, cost="", competing=False))
    assert untraced.interposer.trace_dir == "" and untraced.interposer.records


def test_a_call_from_a_signal_handler_written_before_the_call_it_interrupted_reads_in_time_order(tmp_path):
    """Events are written as calls end: a write from a signal handler inside a read comes first in
    the file, and the reader gives the thread's events by start time (the Perfetto writer needs it)."""
    import numpy as np

    from ceiling.probes import interpose_events as IE
    from ceiling.probes.interpose_names import names
    calls = names().calls
    ids = {c.fn: i for i, c in enumerate(calls)}
    h = np.zeros(1, IE.HEADER)
    h["magic"], h["version"], h["event_bytes"] = IE.MAGIC, IE.VERSION, IE.EVENT.itemsize
    h["calls_hash"], h["ns_per_tick"], h["t0_ns"], h["t0_ticks"] = IE.calls_hash(names()), 1.0, 1000, 1000
    h["pid"] = h["tid"] = 77
    h["rank"], h["host"] = -1, b"here"
    ev = np.zeros(2, IE.EVENT)
    ev["kind"] = IE.EV_CALL
    ev["call"] = [ids["write"], ids["read"]]          # the handler's write ends (and is written) first
    ev["t0"], ev["dur"] = [1120, 1100], [5, 50]
    (tmp_path / "trace-77-77-1000.bin").write_bytes(h.tobytes() + ev.tobytes())
    ((chunk, _),) = list(IE.iter_chunks(str(tmp_path)))
    assert chunk.ts.tolist() == [100, 120]
    assert [calls[c].fn for c in chunk.call] == ["read", "write"]


def test_the_event_source_reads_the_files_again_at_each_pass_with_no_events_kept_between(prog, tmp_path):
    # verbs/trace_output.conclude's passes (Perfetto, OTF2, anti-patterns, wait states, bins) over an
    # EventSource: the same chunks each time as iter_chunks gives, the plan holding no file's events
    p, out = run(prog, tmp_path, "fork")
    assert p.returncode == 0, p.stderr
    once = [ev for ev, _ in IE.iter_chunks(str(out))]
    src = IE.EventSource(str(out))
    assert src and all(t.events is None for t in src.plan.threads) and len(src.plan.threads) == len(once) == 2
    for _ in range(2):
        again = list(src)
        assert len(again) == len(once)
        for a, b in zip(again, once):
            assert all(np.array_equal(a.columns[k], b.columns[k]) for k in E.COLUMNS)
            assert (a.files, a.t0_ns, a.t0_unix_ns, a.tracer_ns) == (b.files, b.t0_ns, b.t0_unix_ns, b.tracer_ns)
    assert src.t0_ns == once[0].t0_ns
    assert src.per_process() == {int(ev.pid[0]): (len(ev), int(ev.tracer_ns)) for ev in once}
    empty = tmp_path / "none"
    empty.mkdir()
    assert not IE.EventSource(str(empty)) and list(IE.EventSource(str(empty))) == []
