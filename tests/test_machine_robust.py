"""No file content crashes the machine model: the same one reader the checks use
(sysfs.Root) is fed random, binary, truncated or out-of-range bytes in place of
any file the model read on a recorded 2-socket node, and detect() still returns
a Machine (figures it cannot read become unknown, with a reason)."""
from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ceiling.machine import detect  # noqa: E402
from ceiling.machine.model import Machine  # noqa: E402
from ceiling.sysfs import Root  # noqa: E402
from machine_fixtures import Recording, fsroot  # noqa: E402

pytestmark = pytest.mark.slow      # 80 examples on each of two large trees: over 20 s

TREES = ("32em64t-2n8c+dax+nvme+mic+dimms", "128arm-2pa2n8cluster4co")


class Recorder(Recording, Root):
    """The one reader, remembering what it read and able to swap one file's bytes."""


@pytest.fixture(scope="module", params=TREES)
def tree(request, tmp_path_factory):
    root = fsroot(request.param, tmp_path_factory)
    rec = Recorder(root)
    detect(rec, measure=False, config=False)
    assert "proc/cpuinfo" in rec.seen and any("cache/index" in r for r in rec.seen)
    return root, rec.seen


GARBAGE = st.one_of(
    st.just(b""), st.none(), st.binary(max_size=200),
    st.text(max_size=200).map(lambda t: t.encode("utf-8")),
    st.sampled_from([b"-1\n", b"99999999999999999999999\n", b"nan\n", b"0\n", b"\x00\x00", b"0-999999\n",
                     b"4294967295-0\n", b"ffffffff,ffffffff\n", b"1K\n", b"-5K\n", b"cpu MHz : nan\n"]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_file_content_crashes_the_machine_model(tree, data):
    root, seen = tree
    rel = data.draw(st.sampled_from(seen))
    m = detect(Recorder(root, swap={rel: data.draw(GARBAGE)}), measure=False, config=False)
    assert isinstance(m, Machine)
    m.to_dict()


@pytest.mark.parametrize("text, why", [
    (b"MemTotal:       -16384 kB\nMemFree: 1 kB\n", "MemTotal is not a size in kB: 'MemTotal:       -16384 kB'"),
    (b"MemTotal:       0 kB\n", "MemTotal is not a size in kB"),
    (b"MemFree: 1 kB\n", "no MemTotal line"),
    (None, "missing or unreadable"),
])
def test_a_bad_mem_total_says_what_it_is(tree, text, why):
    """A negative or zero MemTotal is not reported as a missing file (issue 11, item 12)."""
    root, _ = tree
    m = detect(Recorder(root, swap={"proc/meminfo": text}), measure=False, config=False)
    assert m.mem_total_bytes is None and why in m.unknowns["mem_total_bytes"]
