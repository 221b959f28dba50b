"""JSON interchange: canonical text, round trips, NaN handling, atomic writes, bad input."""
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from ceiling.errors import PathError, StoreError
from ceiling.results import jsonio
from ceiling.results import migrate
from ceiling.results.profile_cost import Overhead
from ceiling.results.model import (SCHEMA_VERSION, LOWER, Analysis, Bound, Finding, Job, Metric, Peak, Roof,
                                   RooflinePoint, Run, Series, Uniformity)

GOLDEN = Path(__file__).parent / "golden"
GOLDEN_FILES = sorted(GOLDEN.glob("run_v*.json"))
# Files of older versions must still load (after migration) but need not round-trip.
CURRENT = [p for p in GOLDEN_FILES if json.loads(p.read_text(encoding="utf-8"))["schema_version"] == SCHEMA_VERSION]


def small_run(**kw) -> Run:
    peak = Peak(409.6, "GB/s", "2 sockets × 8 channels × 3200 MT/s × 8 bytes")
    run = Run(tool_version="0.1.0", host="n1", started="2025-01-02T03:04:05Z", command=["ceiling", "run"],
              metrics=[Metric.measured("stream.triad", [300.5, 301.25, 299.0], "GB/s", peak=peak,
                                       context={"threads": 32}),
                       Metric.measured("latency.dram", [90.0, 91.5], "ns", LOWER)],
              findings=[Finding("cpu.governor", "ok", "governor is performance")],
              series=[Series("c2c.matrix", "matrix", labels=["0", "1"], matrix=[[None, 50.0], [51.0, None]])])
    for k, v in kw.items():
        setattr(run, k, v)
    return run


def test_golden_files_exist():
    names = {p.name for p in GOLDEN_FILES}
    assert {"run_v1.json", "run_v1_partial.json", "run_v2.json", "run_v2_partial.json",
            "run_v2_from_v1_partial.json"} <= names
    assert len(CURRENT) >= 2, f"add golden files for schema_version {SCHEMA_VERSION}"


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: p.name)
def test_every_golden_version_still_loads(path):
    assert jsonio.load(path).schema_version <= SCHEMA_VERSION


@pytest.mark.parametrize("path", CURRENT, ids=lambda p: p.name)
def test_golden_round_trip_is_byte_identical(path, tmp_path):
    text = path.read_text(encoding="utf-8")
    run = jsonio.load(path)
    assert jsonio.dumps(run) == text
    out = tmp_path / "again.json"
    jsonio.dump(run, out)
    assert out.read_bytes() == path.read_bytes()


def test_golden_content_is_what_the_model_reads():
    run = jsonio.load(GOLDEN / "run_v1.json")
    assert run.schema_version == SCHEMA_VERSION and not run.partial
    triad = run.metric("stream.triad")
    assert triad.value == triad.stats.best == max(triad.values)
    assert triad.efficiency == pytest.approx(triad.value / triad.peak.value)
    unknown = [m for m in run.metrics if m.peak is not None and not m.peak.known]
    assert unknown and all(m.efficiency is None for m in unknown)
    assert {f.status for f in run.findings} == {"ok", "warn", "fail", "skipped"}
    assert {s.kind for s in run.series} == {"xy", "matrix"}
    part = jsonio.load(GOLDEN / "run_v1_partial.json")
    assert part.partial and part.partial_reason
    assert part.metric("stream.copy").value is None and part.metric("stream.copy").stats is None


def test_v1_documents_load_as_one_node_runs():
    run = jsonio.load(GOLDEN / "run_v1.json")
    assert run.nodes == [] and run.job is None and run.application is None
    assert run.analysis.empty and run.analysis == Analysis()
    assert all(m.node == "" for m in run.metrics) and all(s.node == "" for s in run.series)
    assert all(f.node == "" and f.data == {} for f in run.findings)
    assert run.node_names() == ["cn042"]
    assert run.machine_of("") is run.machine_of("cn042") is run.machine
    assert run.metrics_of("cn042") == run.metrics_of("") == run.metrics
    with pytest.raises(KeyError, match="no node 'cn999'"):
        run.machine_of("cn999")


def test_v2_golden_content_is_what_the_model_reads():
    run = jsonio.load(GOLDEN / "run_v2.json")
    assert run.node_names() == ["cn101", "cn102"] == run.job.node_names
    assert run.job == Job("mpiexec", "MPICH 4.1.2", 8, 2, 4, ["cn101", "cn102"])
    assert run.machine_of("cn102")["hostname"] == "cn102" and run.machine_of("")["hostname"] == "cn101"
    assert [m.value for m in run.metrics_of("cn102")] == [351.75, 61.25, 90.5]
    # "" is the host: a job-wide metric (node "") belongs to cn101's list, as in a one-node run.
    assert [m.name for m in run.metrics_of("cn101")] == ["flops.dp.node", "stream.triad", "latency.dram",
                                                          "net.latency.inter_node"]
    assert run.findings[1].data == {"channels": 4, "populated": 3, "empty": ["C"]}
    app = run.application
    assert app.exit_status == 0 and app.signal == "" and app.overhead == Overhead(per_call_ns=85.0, fraction=0.0125)
    assert [(f.kind, f.bytes) for f in app.files] == [("trace-perfetto", 1834512), ("trace-otf2", None),
                                                       ("log", 2048)]
    a = run.analysis
    assert not a.empty
    assert a.verdict.kind == "below_peak" and a.verdict.peak == Peak(102.4, "GB/s", a.verdict.peak.provenance)
    assert a.verdict.efficiency == pytest.approx(a.verdict.value / a.verdict.peak.value)
    assert isinstance(a.roofline.roofs[0], Roof) and [r.kind for r in a.roofline.roofs] == [
        "compute", "compute", "bandwidth"]
    assert a.roofline.ridges[0].intensity == pytest.approx(352.5 / 81.5, rel=1e-3)
    assert isinstance(a.roofline.points[0], RooflinePoint)
    assert [b.subject for b in a.bounds] == ["application", "rank 3"] and isinstance(a.bounds[0], Bound)
    u = a.uniformity[0]
    assert isinstance(u, Uniformity) and u.spread == pytest.approx((u.max - u.min) / u.median)
    assert u.outliers[0]["node"] == "cn102"
    assert a.notes
    part = jsonio.load(GOLDEN / "run_v2_partial.json")
    assert part.partial and part.nodes == [] and part.job is None and part.node_names() == ["ws7"]
    assert part.application.exit_status is None and part.application.signal == "SIGINT"
    assert part.analysis.verdict.kind == "nothing_measured" and not part.analysis.empty


@pytest.mark.parametrize("old,new", [("run_v1_partial.json", "run_v3_from_v1_partial.json"),
                                     ("run_v2_profile_mpi.json", "run_v3_profile.json")])
def test_an_upgraded_file_equals_its_current_form(old, new):
    # run_v3_from_v1_partial.json is run_v1_partial.json as this ceiling writes it (and the profile likewise).
    assert jsonio.load(GOLDEN / old) == jsonio.load(GOLDEN / new)
    assert jsonio.dumps(jsonio.load(GOLDEN / old)) == (GOLDEN / new).read_text(encoding="utf-8")


@pytest.mark.parametrize("path", [p for p in GOLDEN_FILES if p not in CURRENT], ids=lambda p: p.name)
def test_older_golden_files_upgrade_to_what_the_current_loader_reads(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    run = jsonio.load(path)
    assert run == Run.from_dict(migrate.upgrade(doc))
    assert jsonio.loads(jsonio.dumps(run)) == run          # written as current, read back the same


def test_round_trip_equals_model():
    run = small_run()
    assert jsonio.loads(jsonio.dumps(run)) == run


def test_canonical_format():
    text = jsonio.dumps(small_run())
    assert text.endswith("}\n")
    assert '\n  "tool_version": "0.1.0",\n' in text        # two-space indent, model order
    assert '"values": [300.5, 301.25, 299.0]' in text       # plain lists on one line
    assert "[null, 50.0]" in text
    assert "×" in text                                      # UTF-8, not \u escapes
    assert list(json.loads(text)) == list(small_run().to_dict())


def test_non_finite_numbers_become_null():
    run = small_run()
    m = run.metrics[0]
    m.values = [1.0, float("nan"), float("inf")]
    m.efficiency = float("-inf")
    run.series[0].matrix = [[float("nan"), 1.0]]
    text = jsonio.dumps(run)
    # Strict parse: any NaN/Infinity token would raise here.
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} written"))
    assert doc["metrics"][0]["values"] == [1.0, None, None]
    assert doc["metrics"][0]["efficiency"] is None
    assert doc["series"][0]["matrix"] == [[None, 1.0]]
    back = jsonio.loads(text)
    assert back.metrics[0].values == [1.0, None, None]


def test_nan_from_other_writers_is_read_as_unknown():
    doc = jsonio.dumps(small_run()).replace('"efficiency": null', '"efficiency": NaN', 1)
    assert "NaN" in doc
    assert jsonio.loads(doc).metrics[1].efficiency is None


def test_numpy_values_and_int_keys_are_plain():
    run = small_run()
    run.metrics[0].context = {"threads": np.int64(4), "ok": np.bool_(True), "size": np.float32(0.5),
                              "cpus": np.arange(3), "per_cpu": {0: 1.5, 16: 2.5}}
    doc = json.loads(jsonio.dumps(run))
    assert doc["metrics"][0]["context"] == {"threads": 4, "ok": True, "size": 0.5, "cpus": [0, 1, 2],
                                            "per_cpu": {"0": 1.5, "16": 2.5}}


def test_unstorable_value_is_a_clear_type_error():
    run = small_run()
    run.environment = {"x": object()}
    with pytest.raises(TypeError, match="cannot store a object"):
        jsonio.dumps(run)


def test_dump_replaces_atomically_and_leaves_no_temp(tmp_path):
    out = tmp_path / "r.json"
    out.write_text("old")
    jsonio.dump(small_run(), out)
    assert out.read_text(encoding="utf-8") == jsonio.dumps(small_run())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_dump_mode_follows_umask(tmp_path):
    old = os.umask(0o027)
    try:
        jsonio.dump(small_run(), tmp_path / "r.json")
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o640


def test_failed_dump_keeps_old_file(tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    out.write_text("old")

    def boom(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(PathError, match="No space left"):
        jsonio.dump(small_run(), out)
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


@pytest.mark.parametrize("where", ["dir", "missing/r.json", "file/r.json"])
def test_dump_to_bad_path_is_one_line_path_error(tmp_path, where):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(PathError) as e:
        jsonio.dump(small_run(), tmp_path / where)
    assert "\n" not in str(e.value) and str(tmp_path / where) in str(e.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_dump_to_unwritable_dir(tmp_path):
    d = tmp_path / "ro"
    d.mkdir(mode=0o500)
    with pytest.raises(PathError):
        jsonio.dump(small_run(), d / "r.json")


def test_corrupt_json_names_the_position():
    text = jsonio.dumps(small_run())
    with pytest.raises(StoreError, match=r"not valid JSON \(line \d+, column \d+, char \d+\)"):
        jsonio.loads(text[: len(text) // 2])
    with pytest.raises(StoreError, match="not valid JSON"):
        jsonio.loads(b"\xff\xfe{}")


def test_newer_schema_is_refused():
    doc = jsonio.to_doc(small_run())
    doc["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(StoreError, match=rf"^x.json was written by a newer ceiling \(schema {SCHEMA_VERSION + 1}\); "
                                         rf"this one reads up to {SCHEMA_VERSION}: upgrade ceiling$"):
        jsonio.loads(json.dumps(doc), source="x.json")


@pytest.mark.parametrize("text", ["[1, 2]", '{"host": "x"}', '{"schema_version": "1"}',
                                  '{"schema_version": 0}', '{"schema_version": 1, "host": "x"}',
                                  '{"schema_version": 1, "tool_version": "0", "host": "x", "started": "",'
                                  ' "command": [], "metrics": [{"name": "a"}]}'])
def test_not_a_run_is_a_store_error(text):
    with pytest.raises(StoreError):
        jsonio.loads(text)


def test_load_errors(tmp_path):
    with pytest.raises(PathError, match="cannot read"):
        jsonio.load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(StoreError, match=str(bad)):
        jsonio.load(bad)


def test_efficiency_survives_as_float():
    run = jsonio.loads(jsonio.dumps(small_run()))
    assert math.isclose(run.metrics[0].efficiency, 301.25 / 409.6)


def test_a_v2_document_written_before_figures_existed_still_reads():
    """Analysis.figures was added to schema 2 after documents of it were written (issue 34):
    one without it reads, with no figures, and is written back with them."""
    doc = json.loads((GOLDEN / "run_v2.json").read_text(encoding="utf-8"))
    assert doc["analysis"].pop("figures")
    run = jsonio.loads(json.dumps(doc))
    assert run.analysis.figures == [] and run.analysis.verdict is not None
    assert '"figures": []' in jsonio.dumps(run)


def _typed(v):
    """``v`` with every leaf's type beside it: equal documents of other leaf types (1 and 1.0,
    True and 1) then differ."""
    if isinstance(v, dict):
        return {k: _typed(x) for k, x in v.items()}, list(v)
    if isinstance(v, list):
        return [_typed(x) for x in v]
    return type(v).__name__, v


def test_the_document_in_one_walk_is_the_two_walks_one():
    """base.document (to_doc's one walk) gives what plain(run.to_dict()) gave, leaf types and key
    order included, for golden runs of every version and for values only a program puts there."""
    import enum
    from collections import namedtuple
    from ceiling.results.base import document, plain
    golden = Path(__file__).resolve().parent / "golden"
    runs = [jsonio.load(p) for p in sorted(golden.glob("run_v*.json"))]
    assert len(runs) >= 4
    odd = small_run()
    Pair = namedtuple("Pair", "a b")
    odd.metrics[0].context = {"nan": float("nan"), "inf": -math.inf, "np": np.float64(2.5), "npi": np.int32(3),
                              "arr": np.arange(3), "enum": enum.IntEnum("E", "x y").y, "tuple": (1, 2.0),
                              "pair": Pair(1, None), "set": {3, 1}, 7: "int key", True: "bool key",
                              None: "none key", "path": Path("/x")}
    for run in runs + [odd]:
        assert _typed(document(run)) == _typed(plain(run.to_dict()))
