"""The interposer's names are one contract: csrc/interpose/calls.def defines the calls, their
classes, the record's lines and keys; the build writes them as interpose_names.json, which
the Python reader reads (probes/interpose_names.py). Here: the installed file is the sources'
table, no module writes a key outside it (a key that is not there does not compile), and the
records real programs write (and the recorded ones in the fixtures) have only the table's
lines, keys and names, all read by the reader without a field skipped.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ceiling import core
from ceiling.probes import interpose_names, interpose_record as ir

ROOT = Path(__file__).resolve().parents[1]
CSRC = ROOT / "csrc" / "interpose"
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
N = interpose_names.names()


def _build_names(tmp_path) -> dict:
    exe, out = tmp_path / "names", tmp_path / "names.json"
    subprocess.run([CC, "-Wall", "-Werror", "-o", str(exe), str(ROOT / "csrc" / "tools" / "interpose_names.c")],
                   check=True, capture_output=True)
    subprocess.run([str(exe), str(out)], check=True)
    return json.loads(out.read_text())


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_the_installed_names_are_the_sources_table(tmp_path):
    """A build that is older than calls.def (or a hand-edited JSON) is caught."""
    assert json.loads(interpose_names.path().read_text()) == _build_names(tmp_path)


def test_the_reader_takes_its_types_and_version_from_the_table():
    assert N.format_version == ir.FORMAT_VERSION
    assert ir.STRINGS == {k for k, t in N.keys.items() if t == "str"} >= {"path", "exe", "host", "fn", "class"}
    assert ir.SIGNED == {"signal", "rank", "size", "thread_level"}
    assert set(ir.WORDS) == {"peer"}


def test_every_line_names_keys_of_the_table_and_every_key_is_on_a_line():
    on_lines = {k for ln in N.lines for k in ln.all_keys(N.buckets)}
    assert on_lines - set(N.buckets) == set(N.keys)
    for ln in N.lines:
        assert ln.set is None or ln.set in N.sets, ln
    assert [c.id for c in N.calls] == list(range(len(N.calls)))          # the event channel's numbers
    assert {c.cls for c in N.calls if c.module == "mpi"} <= set(N.sets["mpi_classes"])
    assert N.classes("posix")["pwrite64"] == "write" and N.classes("mpi")["MPI_Allreduce_c"] == "coll"


def test_no_module_writes_a_key_by_hand():
    """Every key a module writes goes through CEIL_IP_PUT_* (checked against calls.def when it
    compiles) or comes from calls.def's own lists: no string literal as a key."""
    src = {p.name: p.read_text() for p in CSRC.glob("*.c")}
    literal = [(n, m.group(0)) for n, s in src.items()
               for m in re.finditer(r'ceil_ip_put_(?:u64|i64|str)\(\s*&?\w+,\s*"', s)]
    assert literal == []
    named = {m.group(1) for s in src.values() for m in re.finditer(r"CEIL_IP_PUT_\w+\(\s*&?\w+,\s*(\w+),", s)}
    assert named and named <= set(N.keys)


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("put, ok", [("CEIL_IP_PUT_U64(o, calls, 1)", True),
                                     ("CEIL_IP_PUT_STR(o, path, \"x\")", True),
                                     ("CEIL_IP_PUT_U64(o, callz, 1)", False),       # not in the table
                                     ("CEIL_IP_PUT_STR(o, calls, \"x\")", False),   # not its type
                                     ("CEIL_IP_PUT_I64(o, pid, 1)", False)])
def test_a_key_outside_the_table_does_not_compile(tmp_path, put, ok):
    c = tmp_path / "m.c"
    c.write_text('#include "interpose.h"\nvoid f(ceil_ip_out *o);\nvoid f(ceil_ip_out *o) { %s; }\n' % put)
    p = subprocess.run([CC, "-fsyntax-only", "-Wall", "-I", str(CSRC), str(c)], capture_output=True, text=True)
    assert (p.returncode == 0) == ok, p.stderr


def check_record(rec) -> list:
    """What in one parsed record is not the table's: [(line word, problem)]."""
    bad = []
    for name in rec["modules"]:
        if not N.line_kinds(name):
            bad.append((name, "module without lines in the table"))
    for key in rec["process"]:
        if key not in N.line_kinds("process")[0].all_keys(N.buckets):
            bad.append(("process", key))
    for key in rec["end"]:
        if key not in N.line_kinds("end")[0].all_keys(N.buckets):
            bad.append(("end", key))
    for word, lines in rec["lines"].items():
        kinds = N.line_kinds(word)
        for f in lines:
            kind = next((k for k in kinds if k.lead in f and (k.set is None or f[k.lead] in N.sets[k.set])), None)
            if kind is None:
                bad.append((word, f"no line kind for {sorted(f)}"))
                continue
            extra = set(f) - set(kind.all_keys(N.buckets))
            if extra:
                bad.append((word, f"{kind.kind}: keys {sorted(extra)}"))
            if kind.buckets and not set(N.buckets) <= set(f):
                bad.append((word, f"{kind.kind}: buckets missing"))
    return bad


SCRIPT = r"""
set -e
cd "$1"
head -c 300000 /dev/urandom > a
cp a b
cat a > /dev/null
awk '{n += length($0)} END {print n}' a > c
sort c > d
python3 -c '
import ctypes, os
ctypes.CDLL(None).ceil_ip_null_touch()
fd = os.open("e", os.O_CREAT | os.O_WRONLY, 0o600); os.write(fd, b"x" * 5000); os.fsync(fd); os.close(fd)
os.stat("e"); os.rename("e", "f"); os.unlink("f")
with open("g", "w") as g: print("hello", file=g)
'
"""


@pytest.mark.usefixtures("interposer_library")
@pytest.mark.skipif(shutil.which("sh") is None or shutil.which("awk") is None, reason="no sh or awk")
def test_the_records_real_programs_write_have_only_the_tables_lines_keys_and_names(tmp_path):
    """posix, stdio, copy, file, proc and null lines from real programs: each is one of the
    table's line kinds, with its keys only, and the reader skips nothing in them."""
    work, recs = tmp_path / "w", tmp_path / "r"
    work.mkdir()
    recs.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD",)}
    env.update(LD_PRELOAD=str(core.interpose_library_path()), CEILING_INTERPOSE_OUT=str(recs / "%p"),
               PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))
    subprocess.run(["sh", "-c", SCRIPT, "sh", str(work)], env=env, check=True, timeout=120, capture_output=True)
    records = ir.read_dir(str(recs))
    assert records.counts() == {"records": 0, "lines": 0, "fields": 0} and records.unknown == {}
    docs = [r.as_dict() for r in records]
    words = {w for r in docs for w in r["lines"]}
    assert {"posix", "stdio", "copy", "file", "proc", "null"} <= words, words
    assert [b for r in docs for b in check_record(r)] == []
    fns = {(w, f["fn"]) for r in docs for w, lines in r["lines"].items() for f in lines if "fn" in f}
    for w, fn in fns:
        assert fn in N.sets[f"{w}_fns"], (w, fn)


def test_the_typed_reader_has_a_field_for_every_key_and_no_other():
    """Python's side of the contract: each line kind of the table has its dataclass
    (interpose_lines.KINDS), whose fields are the kind's keys (class as class_; a histogram's
    lead as ``of``, its buckets in ``buckets``). A key added to the table alone, or a field
    added to a dataclass alone, fails here."""
    from ceiling.probes import interpose_lines as il
    assert set(il.KINDS) == {(ln.word, ln.kind) for ln in N.lines}
    for ln in N.lines:
        t = il.KINDS[(ln.word, ln.kind)]
        if ln.buckets:
            assert t is il.Hist and ln.keys == (), ln
            continue
        keys = {il.field_of(k) for k in ln.all_keys(N.buckets)}
        fields = set(il.fields_of(t))
        if t in (il.StreamClass, il.MpiCounts):
            # one dataclass for two kinds: the union of their keys
            keys = {il.field_of(k) for other in N.lines if il.KINDS[(other.word, other.kind)] is t
                    for k in other.all_keys(N.buckets)}
        assert fields == keys, (ln.word, ln.kind, sorted(fields ^ keys))


GOLDEN = sorted((ROOT / "tests" / "fixtures" / "profile_golden").glob("*.json"))


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_the_recorded_records_are_the_tables(path):
    """The records of real runs kept as fixtures (MPI ranks among them) fit the table."""
    doc = json.loads(path.read_text())
    records = doc["inputs"]["records"]["records"]
    assert [b for r in records for b in check_record(r)] == []
