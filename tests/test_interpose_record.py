"""No record file crashes a profile: the interposer's records (probes/interpose_record.py)
are the one place checked, so a value that does not fit its key (letters, nan, 5,000 digits,
a bad %XX, past 2^64, a negative count) is skipped and counted, never passed on.

Hypothesis takes a valid set of records (a process doing file I/O, mpiexec, and two MPI
ranks on two nodes, every line the interposer writes) and replaces fields, words or whole
lines with hostile text; the reader and every analysis that reads records run on the
result (as verbs/profile.py runs them), and the report is rendered.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ceiling.analysis import profile_files  # noqa: E402
from ceiling.analysis.profile import Rusage, conclude, intercepted_calls, io_calls  # noqa: E402
from ceiling.analysis.profile_mpi import conclude as mpi_conclude, launcher_pids  # noqa: E402
from ceiling.probes import interpose_names, interpose_record as ir  # noqa: E402
from ceiling.probes.proc_sampler import Sampled, ThreadSample  # noqa: E402
from ceiling.report.terminal_profile import render  # noqa: E402
from ceiling.results.model import Application, Run  # noqa: E402
from ceiling.analysis.profile_run import unwatched  # noqa: E402
from ceiling.results.profile import profile_from  # noqa: E402

HERE = os.uname().nodename
CSRC = Path(__file__).resolve().parents[1] / "csrc" / "interpose"
BUCKETS = " ".join(f"{b}={i}" for i, b in enumerate(("lt1k", "1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k",
                                                      "256k", "512k", "1m", "2m", "4m", "8m", "16m", "32m", "ge64m")))


def _process(pid, ppid, host, exe, end_ns=3_000_000_000):
    return (f"ceiling-interpose 1\nprocess pid={pid} ppid={ppid} forked=0 host={host} exe={exe} reason=exit "
            f"signal=0 threads=2 threads_lost=0 start_ns=1000000000 end_ns={end_ns} "
            f"start_unix_ns=1795805351414046031 utime_us=1500000 stime_us=200000\n")


def _io(pid, written=2097152):
    return (
        "module name=file version=1 enabled=1\nfile files=1 lost=0 max=512\n"
        "file id=1 dev=65024 ino=9978611 blksize=4096 api=5 opens=4 meta_ns=127306 reads=300 read_bytes=1228800 "
        "read_ns=400000000 writes=200 write_bytes=2097152 write_ns=500000000 random=250 unaligned=180 syncs=2 "
        "sync_ns=1000 extent=2097152 path=/scratch/r%C3%A9sultat%20final.dat\n"
        "module name=posix version=1 enabled=1\n"
        "posix class=read calls=300 errors=0 bytes=1228800 ns=400000000 random=250\n"
        f"posix class=write calls=200 errors=1 bytes={written} ns=500000000 random=0\n"
        "posix class=meta calls=7 errors=0 ns=136075\nposix class=sync calls=2 errors=0 ns=1000\n"
        f"posix hist=read {BUCKETS}\nposix hist=write {BUCKETS}\n"
        "posix fn=open calls=4\nposix fn=read calls=300\nposix fn=write calls=200\n"
        "module name=proc version=1 enabled=1\n"
        f"proc task={pid} life_ns=2000000000 run_ns=1500000000 runq_ns=5009 utime_ticks=150 stime_ticks=2\n"
        f"proc task={pid + 1} life_ns=1900000000 run_ns=1000 runq_ns=0 utime_ticks=0 stime_ticks=0\n"
        "proc tasks=2 shown=2 schedstat=1 clk_tck=100 maxrss_kb=2372 rchar=49091 wchar=41052 read_bytes=90112 "
        "write_bytes=57344\n"
        "module name=stdio version=1 enabled=1\n"
        "stdio class=write calls=2 errors=0 bytes=91 ns=11233\nstdio class=flush calls=1 errors=0 ns=198\n"
        "stdio fn=fflush calls=1\n")


def _mpi(rank, size):
    return (
        "module name=mpi version=1 enabled=1\n"
        f"mpi rank={rank} size={size} family=mpich world=1 thread_level=-1 init_ns=1100000000 "
        "finalize_ns=2900000000 library=MPICH%20Version:%204.1\n"
        "mpi class=send calls=1000 ns=300000000 bytes=4096000\nmpi class=wait calls=10 ns=200000000 bytes=0\n"
        "mpi class=coll calls=10 ns=100000000 bytes=800\nmpi class=io_write calls=2 ns=1000 bytes=4096\n"
        "mpi fn=MPI_Init calls=1 ns=90000000 bytes=0\nmpi fn=MPI_Send calls=1000 ns=300000000 bytes=4096000\n"
        "mpi fn=MPI_Finalize calls=1 ns=50000000 bytes=0\n"
        f"mpi hist=p2p {BUCKETS}\nmpi hist_ns=p2p {BUCKETS}\nmpi hist_bytes=p2p {BUCKETS}\nmpi hist=post {BUCKETS}\n"
        f"mpi peer={1 - rank} calls=1000 bytes=4096000 ns=300000000\nmpi peer=other calls=0 bytes=0\n")


def _end(pid):
    return f"end pid={pid} truncated=0\n"


# A process doing file I/O; mpiexec; rank 0 under it here, a single writer; rank 1 on another node.
VALID = (_process(100, 1, HERE, "/usr/bin/dd") + _io(100) + _end(100)
         + _process(90, 1, HERE, "/usr/bin/mpiexec") + _end(90)
         + _process(101, 90, HERE, "/home/u/app") + _io(101, 1 << 30) + _mpi(0, 2) + _end(101)
         + _process(200, 5, "n2", "/home/u/app") + _io(200) + _mpi(1, 2) + _end(200))

# Not a number any key takes (the fuzz cases: letters, nan, 5,000 digits, %ZZ; and what int() takes
# but the interposer never writes: "+5", "1_000", " 5", Arabic-Indic digits).
HOSTILE = ["abc", "nan", "NaN", "inf", "-inf", "1e5", "0x10", "1.5", "9" * 5000, "%ZZ", "%", "%4", "%zz%",
           "18446744073709551616", "99999999999999999999999", "", "+5", "1_000", "\u0661\u0662", "5\r", "\x00",
           "=", "a=b", "%00", "%FF%FE", "\udcff", "caf\u00e9", "-2147483649", "-" + "9" * 5000]
EDGES = ["-1", "-0", "2147483648", "18446744073709551615", "0", "other"]   # numbers for some keys only


def analyse(records):
    """What verbs/profile.py does with the records after the program ended, report included."""
    recs = ir.latest(records)
    waiters = set(launcher_pids(recs))
    own = [r for r in recs if r.process.pid not in waiters]
    s = Sampled(samples=10, interval_s=0.1)
    s.threads[(100, 100)] = ThreadSample(100, 100, "dd", on_cpu_s=1.0, runq_s=0.0, first_s=0.0, last_s=2.0)
    others = unwatched(own, 100, {100}, recs)
    files = profile_files.summarise(own)
    metrics, bounds, findings, breakdown = conclude(s, Rusage(1.0, 0.1, 1 << 20), 2.0, 2, io_calls(own),
                                                    mpi_conclude(own), None, sorted(waiters), others, (), files)
    breakdown["interposer"] = {"used": True, "records": len(recs), "modules": sorted({n for r in recs
                                                                                      for n in r.modules}),
                               "skipped": recs.counts()}
    if files:
        breakdown["files"] = files
    findings += profile_files.conclude(files, breakdown.get("io_calls") or {}, own)
    more = ir.finding(recs)
    if more:
        findings.append(more)
    assert intercepted_calls(recs) >= 0 and intercepted_calls(recs, ("mpi",)) >= 0
    run = Run(tool_version="0", host=HERE, started="2026-01-01T00:00:00Z", command=["ceiling", "profile"],
              metrics=metrics, findings=findings,
              application=Application(command=["app"], exit_status=0, wall_s=2.0, profile=profile_from(breakdown)))
    run.analysis.bounds = bounds
    json.dumps(run.to_dict(), allow_nan=False)
    return recs, breakdown, render(run)


def _typed(recs):
    """Every value an int or a str, as the analysis trusts."""
    for r in recs:
        d = r.as_dict()
        for f in [d["process"], d["end"], *d["modules"].values(), *(ln for v in d["lines"].values() for ln in v)]:
            for k, v in f.items():
                name = k in ir.STRINGS or (k == "peer" and v == "other")
                assert isinstance(v, str) if name else type(v) is int, (k, v)
                if type(v) is int:
                    assert (ir.I32_MIN <= v <= ir.I32_MAX) if k in ir.SIGNED else 0 <= v <= ir.U64_MAX


def test_the_valid_records_are_read_whole_and_analysed():
    recs, breakdown, text = analyse(ir.parse(VALID))
    assert recs.counts() == {"records": 0, "lines": 0, "fields": 0} and len(recs) == 4
    _typed(recs)
    assert breakdown["mpi"]["ranks"] == 2 and breakdown["files"]["count"] == 2
    assert "malformed" not in text


def test_names_are_utf8_and_an_escape_that_is_not_one_is_skipped():
    """A path is UTF-8 bytes, escaped byte by byte; they were decoded one byte a character
    (Latin-1: "rÃ©sultat"). A '%' not followed by two hex digits is no escape the
    interposer writes."""
    f = ir.fields(["path=/scratch/r%C3%A9sultat%20final.dat", "exe=%FF%FEx", "host=%ZZ", "by=a%", "name=a%3"])
    assert f == {"path": "/scratch/résultat final.dat", "exe": "\ufffd\ufffdx"}


@pytest.mark.parametrize("key,text", [(k, v) for k in ("calls", "pid", "task", "init_ns", "rank", "peer")
                                      for v in HOSTILE])
def test_a_number_that_does_not_fit_its_key_is_skipped_and_counted(key, text):
    out = ir.Records()
    assert ir.fields([f"{key}={text}", "ns=5"], out) == {"ns": 5} and out.skipped_fields == 1


@pytest.mark.parametrize("key,text,bad", [("calls", "-1", True), ("rank", "-1", False), ("rank", "2147483648", True),
                                          ("calls", "2147483648", False), ("bytes", "18446744073709551615", False),
                                          ("peer", "other", False), ("calls", "other", True), ("pid", "-0", True)])
def test_the_range_of_a_number_is_its_c_types(key, text, bad):
    assert _bad_for(key, text) is bad
    out = ir.Records()
    assert (ir.fields([f"{key}={text}"], out) == {}) is bad and out.skipped_fields == bad


def test_the_largest_values_the_interposer_writes_are_read():
    out = ir.Records()
    assert ir.fields([f"bytes={(1 << 64) - 1}", "rank=-1", f"size={(1 << 31) - 1}", "peer=other", "signal=0",
                      f"thread_level={-(1 << 31)}"], out) == {
        "bytes": (1 << 64) - 1, "rank": -1, "size": (1 << 31) - 1, "peer": "other", "signal": 0,
        "thread_level": -(1 << 31)}
    assert out.skipped_fields == 0


@pytest.mark.parametrize("line", ["posix class=future calls=3 errors=0 ns=1", "mpi fn=MPI_Future calls=1 ns=1 bytes=0",
                                  "posix class=%ZZ calls=3", "mpi peer=-1 calls=1 bytes=1 ns=1", "later x=1"])
def test_a_line_of_no_kind_the_table_has_is_skipped_counted_and_named(line):
    """A line whose kind the value of its lead key (class, fn, peer) or its word does not
    name in the table: none of its counts is taken into another kind's, and it is said."""
    recs = ir.parse(_process(7, 1, HERE, "/x") + line + "\n" + _end(7))
    assert recs.counts() == {"records": 0, "lines": 1, "fields": 0} and not recs[0].lines
    f = ir.finding(recs)
    assert f and "1 malformed line" in f.title
    if "%ZZ" not in line and "-1" not in line:
        assert "not in this ceiling's table" in f.evidence


def test_records_of_another_version_lines_outside_records_and_records_without_a_pid_are_counted():
    text = ("garbage before\n" + _process(7, 1, "n", "/x") + _end(7) + "appended by the program\n"
            + "ceiling-interpose 2\nprocess pid=8 future=x\nend pid=8\n"
            + "ceiling-interpose 1\nprocess pid=abc\nend pid=9\n"
            + _process(10, 1, "n", "/x") + "Not-A-Word x=1\nnull calls=1 calls\n")
    recs = ir.parse(text)
    assert [r.process.pid for r in recs] == [7, 10] and recs[1].as_dict()["lines"]["null"] == [{"calls": 1}]
    assert recs.counts() == {"records": 2, "lines": 3, "fields": 2}
    f = ir.finding(ir.latest(recs))
    assert f.title == ("2 malformed fields, 3 malformed lines and 2 records of another format version or without "
                       "a process id in the interposer's records were skipped")


def test_a_rank_whose_timestamps_are_out_of_order_has_a_run_of_zero_not_a_division_by_it():
    text = VALID.replace("thread_level=-1 init_ns=1100000000", f"thread_level=-1 init_ns={(1 << 64) - 1}", 1)
    recs, breakdown, text = analyse(ir.parse(text))
    assert recs.counts() == {"records": 0, "lines": 0, "fields": 0}
    assert [r["run_s"] for r in breakdown["mpi"]["per_rank"]] == [0.0, 1.8] and "single writer" in text.lower()


FIELD = re.compile(r"(?<= )([a-z0-9_]+)=(\S*)")
# the keys that tell a module's kinds of line apart (class, fn, hist, peer ...): a value there that
# is not one of the table's names makes the line one of no kind, skipped whole (tested below)
_N = interpose_names.names()
LEADS = {ln.lead for ln in _N.lines if len(_N.line_kinds(ln.word)) > 1}
SPOTS = [(m.start(2), m.end(2), m.group(1)) for m in FIELD.finditer(VALID) if m.group(1) not in LEADS]


def _bad_for(key, text):
    """The format's rule (interpose.h), written out independently of the reader."""
    if key in ir.STRINGS:
        i = 0
        while i < len(text):
            c = text[i]
            if c == "%":
                if len(text) < i + 3 or any(h not in "0123456789abcdefABCDEF" for h in text[i + 1:i + 3]):
                    return True
                i += 3
                continue
            if not "!" <= c <= "~" or c == "=":
                return True
            i += 1
        return False
    if key == "peer" and text == "other":
        return False
    neg = key in ir.SIGNED and text.startswith("-")
    digits = text[1:] if neg else text
    if not digits or len(digits) > 30 or any(c not in "0123456789" for c in digits):
        return True
    v = -int(digits) if neg else int(digits)
    return not (-(1 << 31) <= v < (1 << 31) if key in ir.SIGNED else 0 <= v < (1 << 64))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(SPOTS) - 1), st.sampled_from(HOSTILE + EDGES)), min_size=1, max_size=6,
                unique_by=lambda t: t[0]))
def test_hostile_values_are_skipped_and_counted_and_the_report_is_made(changes):
    text, bad = VALID, 0
    for i, hostile in sorted(changes, reverse=True):
        start, end, key = SPOTS[i]
        text = text[:start] + hostile + text[end:]
    recs = ir.parse(text)
    pids = re.findall(r"^process pid=([^ \n]*)", text, re.M)
    # a value that fits its key stays; one that does not is counted once, or its record is gone
    for i, hostile in changes:
        bad += _bad_for(SPOTS[i][2], hostile)
    assert recs.skipped_records == sum(1 for p in pids if _bad_for("pid", p))
    assert recs.skipped_fields == bad and recs.skipped_lines == 0
    _typed(recs)
    assert (ir.finding(recs) is not None) == bool(bad)
    analyse(recs)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, VALID.count("\n")), st.sampled_from(["replace", "insert", "cut"]),
                          st.text(max_size=80) | st.sampled_from(HOSTILE)), min_size=1, max_size=5))
def test_any_text_in_the_record_file_is_read_without_an_error(changes):
    lines = VALID.split("\n")
    for i, how, text in changes:
        i = min(i, len(lines) - 1)
        if how == "replace":
            lines[i] = text
        elif how == "insert":
            lines.insert(i, text)
        else:
            lines[i] = lines[i][:len(text)]
    recs = ir.parse("\n".join(lines))
    _typed(recs)
    analyse(recs)


def test_bytes_that_are_not_utf8_in_the_file_are_read_without_an_error(tmp_path):
    (tmp_path / "interpose.1").write_bytes(VALID.encode() + b"\xff\xfe garbage\n")
    (tmp_path / "interpose.2").write_bytes(_process(5, 1, "n", "/x").encode() + b"null calls=\xff1\n")
    recs = ir.read_dir(str(tmp_path))
    assert len(recs) == 5 and recs.counts() == {"records": 0, "lines": 1, "fields": 1}
    analyse(recs)


DAMAGE = ("garbage the program wrote\n" + _process(999999, 1, HERE, "/x").replace("utime_us=1500000", "utime_us=nan")
          + "posix class=read calls=abc bytes=" + "9" * 5000 + " ns=-5\n"
          + "file id=1 dev=1 ino=2 reads=%ZZ path=%ZZ\nend pid=999999 truncated=0\n")


def test_a_program_that_damages_its_record_is_still_reported_with_its_exit_status(tmp_path):
    """ceiling profile of a program that writes hostile lines beside its own record (into the
    directory CEILING_INTERPOSE_OUT names): the program's exit status, the report with one line
    saying what was skipped, and no temporary directory left behind."""
    import subprocess
    import sys
    (tmp_path / "damage").write_text(DAMAGE)
    script = ('d=$(dirname "${CEILING_INTERPOSE_OUT:?}"); cat "$1" > "$d/interpose.999999"; '
              'cat "$1" >> "$d/interpose.$$"; exit 3')
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "p.json"
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json",
                        str(out), "--", "sh", "-c", script, "sh", str(tmp_path / "damage")],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, NO_COLOR="1", TMPDIR=str(tmp)))
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr and "Ended" in r.stderr
    doc = json.loads(out.read_text())
    f = [x for x in doc["findings"] if x["id"] == "profile.interposer.malformed"]
    # each copy: 1 line outside a record, and utime_us, calls, bytes, ns, reads, path
    assert f and f[0]["data"] == {"records": 0, "lines": 2, "fields": 12}, f
    assert ("12 malformed fields and 2 malformed lines in the interposer's records were skipped"
            in " ".join(r.stderr.split()))
    assert doc["application"]["profile"]["interposer"]["skipped"] == f[0]["data"]
    assert list(tmp.iterdir()) == []


# -- issue 25 item 7: the reader takes every record, and says what it could not ----------------

def test_rank_0s_own_record_after_tens_of_mib_of_gathered_ones_is_read(tmp_path):
    """In a wrapped launch rank 0's file holds every other rank's record first, then its own:
    the reader took the first 16 MiB and lost rank 0 (80 ranks x 600 files: "76 of 80 ranks")."""
    other = "".join(_process(1000 + i, 1, "n2", "/app") + _io(1000 + i) + _mpi(1, 2) + _end(1000 + i)
                    for i in range(4))
    copies = (17 << 20) // len(other) + 1                     # past the old 16 MiB
    with open(tmp_path / "interpose.42", "w") as f:
        for _ in range(copies):
            f.write(other)
        f.write(_process(42, 1, HERE, "/app") + _mpi(0, 2) + _end(42))
    assert (tmp_path / "interpose.42").stat().st_size > 17 << 20
    recs = ir.read_dir(str(tmp_path))
    assert recs[-1].process.pid == 42 and recs[-1].lines["mpi"][0].rank == 0
    assert len(recs) == 4 * copies + 1 and not recs.unread and ir.findings(ir.latest(recs)) == []


def test_a_file_that_cannot_be_read_and_a_line_too_long_are_said_not_passed_over(tmp_path):
    (tmp_path / "interpose.1").write_text(_process(1, 0, HERE, "/app") + "x" * (ir.LINE_BYTES + 10) + "\n"
                                          + _mpi(0, 1) + _end(1))
    os.symlink("/etc/hostname", tmp_path / "interpose.2")      # never followed: not the interposer's
    recs = ir.latest(ir.read_dir(str(tmp_path)))
    assert [r.process.pid for r in recs] == [1] and recs[0].end      # the record around it kept
    assert recs.counts()["lines"] == 1
    assert [name for name, _ in recs.unread] == ["interpose.2"]
    ids = [f.id for f in ir.findings(recs)]
    assert ids == ["profile.interposer.unread", "profile.interposer.malformed"]
    (unread,) = [f for f in ir.findings(recs) if f.id == "profile.interposer.unread"]
    assert "interpose.2: " in unread.evidence and unread.title.startswith("1 of the interposer's record file")


def test_threads_past_the_interposers_slots_are_a_finding():
    text = _process(7, 1, HERE, "/app").replace("threads=2 threads_lost=0", "threads=1024 threads_lost=37") + _end(7)
    (f,) = ir.findings(ir.latest(ir.parse(text)))
    assert f.id == "profile.interposer.threads_lost" and f.data["threads_lost"] == 37
    assert f.title.startswith("37 threads were not counted: the interposer's 1024 thread slots ran out")
    assert "CEILING_INTERPOSE_THREADS=2048" in f.fix


def test_a_program_that_removes_its_record_directory_is_reported_with_its_exit_status(tmp_path):
    """rm -rf $TMPDIR/* in a job script takes ceiling's record directory with it."""
    import subprocess
    import sys
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "p.json"
    r = subprocess.run([sys.executable, "-m", "ceiling", "profile", "--no-store", "--no-measure", "--save-json",
                        str(out), "--", "sh", "-c", 'rm -rf "$TMPDIR"/*; exit 3'],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, NO_COLOR="1", TMPDIR=str(tmp)))
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr and "Ended     exit 3" in r.stderr
    doc = json.loads(out.read_text())
    (f,) = [x for x in doc["findings"] if x["id"] == "profile.interposer.removed"]
    assert f["data"]["path"].startswith(str(tmp) + "/ceiling-profile-")
    assert "were removed while the program ran" in " ".join(r.stderr.split())
