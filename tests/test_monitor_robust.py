"""No file content crashes the monitor's readers: each file node_sampler and jobs read, replaced with random,
binary or truncated bytes (Hypothesis), gives figures or their absence, never a traceback."""
import shutil
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ceiling.probes import jobs  # noqa: E402
from ceiling.probes import node_sampler as ns  # noqa: E402

FIX = Path(__file__).parent / "fixtures" / "slurm_cgroups"
NODE_FILES = ["proc/stat", "proc/meminfo", "proc/diskstats", "proc/net/dev", "proc/loadavg", "proc/pressure/io"]
V2 = sorted(str(p.relative_to(FIX / "v2")) for p in (FIX / "v2").rglob("*") if p.is_file())
V1 = sorted(str(p.relative_to(FIX / "v1")) for p in (FIX / "v1").rglob("*") if p.is_file() and not p.is_symlink())
GARBAGE = st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode),
                    st.sampled_from([b"", b"\n", b"-1\n", b"99999999999999999999999999\n", b"cpu x y z\n",
                                     b"8:0 rbytes=x wbytes=\n", b"some total=abc\n", b"usage_usec\n"]))


def _node(root: Path) -> None:
    (root / "proc/net").mkdir(parents=True)
    (root / "proc/pressure").mkdir()
    (root / "sys/block/sda").mkdir(parents=True)
    (root / "proc/stat").write_text("cpu  1 2 3 4 5 6 7 8 0 0\n")
    (root / "proc/meminfo").write_text("MemTotal: 100 kB\nMemAvailable: 50 kB\n")
    (root / "proc/diskstats").write_text("   8 0 sda 1 0 2 0 3 0 4 0 0 5 0 0 0 0 0 0\n")
    (root / "proc/net/dev").write_text("h\nh\n eth0: 1 0 0 0 0 0 0 0 2 0 0 0 0 0 0 0\n")
    (root / "proc/loadavg").write_text("0.1 0.2 0.3 1/2 3\n")
    (root / "proc/pressure/io").write_text("some avg10=0 avg60=0 avg300=0 total=5\n")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(NODE_FILES), data=GARBAGE)
def test_node_files(which, data):
    with tempfile.TemporaryDirectory() as t:
        root = Path(t)
        _node(root)
        s = ns.NodeSampler(str(root))
        a = s.read()
        (root / which).write_bytes(data)
        b = s.read()
        b.t = a.t + 1
        r = ns.rates(a, b)
        assert all(isinstance(v, float) or isinstance(v, int) for v in r.values())


@settings(max_examples=150, deadline=None)
@given(tree=st.sampled_from(["v2", "v1"]), pick=st.integers(min_value=0), data=GARBAGE)
def test_cgroup_files(tree, pick, data):
    files = V2 if tree == "v2" else V1
    with tempfile.TemporaryDirectory() as t:
        root = Path(t) / tree
        shutil.copytree(FIX / tree, root, symlinks=True)
        (root / files[pick % len(files)]).write_bytes(data)
        got = jobs.slurm_jobs(str(root / "sys/fs/cgroup"), str(root / "proc"))
        assert {j.job_id for j in got} == ({"4242", "4243"} if tree == "v2" else {"777"})
