"""The typed record reader (probes/interpose_record.py, interpose_lines.py) on damaged and odd
records: a file cut in the middle of its last line, keys and names the table does not have, a key
given twice, names that are digits or bytes that are not UTF-8, and thousands of ranks in one
file. Each is checked through what the analysis makes of it (io_calls, profile_files, the
malformed finding), so the same test reads the reader before it was typed: the first four failed
there (a cut number was taken whole, unknown keys and repeated ones passed unsaid, and two paths
that differ in bytes that are not UTF-8 were one file)."""
from __future__ import annotations

from ceiling.analysis import profile_files
from ceiling.analysis.profile import io_calls
from ceiling.analysis.profile_mpi import ranks
from ceiling.probes import interpose_record as ir


def _record(pid, body, host="n1", exe="/app"):
    return (f"ceiling-interpose 1\nprocess pid={pid} ppid=1 forked=0 host={host} exe={exe} reason=exit signal=0 "
            f"threads=1 start_ns=1000 end_ns=2000000000\n{body}end pid={pid} truncated=0\n")


def _file(i, path):
    return (f"file id={i} dev=1 ino={100 + i} blksize=4096 api=1 opens=1 meta_ns=10 reads=0 read_bytes=0 read_ns=0 "
            f"writes=3 write_bytes=300 write_ns=1000 random=0 unaligned=0 syncs=0 sync_ns=0 extent=300 path={path}\n")


def test_a_last_line_cut_in_the_middle_is_skipped_and_counted_not_read_as_a_smaller_number(tmp_path):
    """A process killed while its record was written: the file ends inside a number
    (bytes=2097152 cut to bytes=209). That number is no measurement."""
    whole = _record(7, "module name=posix version=1 enabled=1\n"
                       "posix class=write calls=2 errors=0 bytes=4096 ns=100 random=0\n")
    cut = "ceiling-interpose 1\nprocess pid=8 ppid=1 host=n1 start_ns=5\nposix class=write calls=200 errors=0 bytes=209"
    for recs in (ir.parse(whole + cut), _read(tmp_path, whole + cut)):
        assert io_calls(recs)["write"]["bytes"] == 4096            # not 4096 + 209
        assert recs.counts()["lines"] == 1
        f = ir.finding(recs)
        assert f is not None and "cut short" in f.evidence


def _read(tmp_path, text):
    p = tmp_path / "interpose.1"
    p.write_text(text)
    return ir.read([str(p)])


def test_keys_the_table_does_not_have_are_skipped_counted_and_named():
    """A key this ceiling's interposer never writes (another version's, or damage) is not
    silently taken as a count of something: it is left out, counted, and named."""
    recs = ir.parse(_record(7, "module name=posix version=1 enabled=1\n"
                               "posix class=read calls=3 errors=0 bytes=10 ns=5 random=0 future_key=7\n"))
    assert io_calls(recs)["read"]["calls"] == 3
    assert recs.counts()["fields"] == 1
    f = ir.finding(recs)
    assert f is not None and "future_key" in f.evidence


def test_a_key_given_twice_is_a_malformed_field_and_the_first_value_stands():
    recs = ir.parse(_record(7, "module name=posix version=1 enabled=1\n"
                               "posix class=read calls=3 calls=3000000 errors=0 bytes=10 ns=5 random=0\n"))
    assert io_calls(recs)["read"]["calls"] == 3
    assert recs.counts()["fields"] == 1


def test_digits_are_names_where_names_are_and_paths_keep_their_bytes():
    """A file called "123", one with a space and a newline in its name, and two whose names
    differ only in a byte that is not UTF-8 (0xFF, 0xFE): four files, each with its name; before,
    the last two became one ("\\ufffd") and their counts were summed."""
    body = ("module name=file version=1 enabled=1\nfile files=4 lost=0 max=512\n" + _file(1, "123") +
            _file(2, "/d/a%20b%0Ac") + _file(3, "/d/%FF") + _file(4, "/d/%FE"))
    recs = ir.parse(_record(7, body, host="42", exe="007"))
    s = profile_files.summarise(recs)
    assert s["count"] == 4 and recs.counts() == {"records": 0, "lines": 0, "fields": 0}
    paths = sorted(f["path"] for f in s["shown"])
    assert paths == sorted(["123", "/d/a b\nc", "/d/\ufffd", "/d/\ufffd"])
    assert all(type(p) is str for p in paths) and {f["host"] for f in s["shown"]} == {"42"}
    assert all(f["write_bytes"] == 300 for f in s["shown"])


def test_thousands_of_ranks_in_one_file_are_all_read():
    """Rank 0's file in a wrapped launch holds every rank's record: none is dropped for size
    (this one passed before too: the reader had no size cap left to drop ranks)."""
    n = 3000
    text = "".join(_record(1000 + r, "module name=mpi version=1 enabled=1\n"
                                     f"mpi rank={r} size={n} family=mpich world=1 thread_level=-1 init_ns=2000 "
                                     f"finalize_ns=1000000 library=x\nmpi class=coll calls=1 ns=10 bytes=8\n",
                           host=f"node{r // 64}") for r in range(n))
    recs = ir.latest(ir.parse(text))
    assert [r["rank"] for r in ranks(recs)] == list(range(n))
    assert recs.counts() == {"records": 0, "lines": 0, "fields": 0}
