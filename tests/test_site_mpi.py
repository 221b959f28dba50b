"""Which MPI a network run measured, the other MPI installations of the node, and
`ceiling bench network --site-mpi`, the one command that measures with one of them.

The library's device and origin are read from recorded version strings (the MPICH
wheel's, Debian's MPICH and Open MPI's); installations are found in a directory of
wrappers made for the test (an Intel MPI's mpi.h, which this machine lacks) and, where
installed, Debian's real /usr/bin/mpicc.mpich. The real measurement with the site's
MPI (tests at the end) needs the environment built once (pip builds mpi4py, minutes):
it runs when that environment exists in the user's cache, or with
CEILING_TEST_SITE_MPI=1, and says so when it skips.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ceiling.bench.network import other_mpi_finding
from ceiling.cluster import installations as inst_mod
from ceiling.cluster import site_mpi
from ceiling.cluster.installations import Installation, installations, is_measured, others
from ceiling.cluster.library import Library, header_identity, transport
from ceiling.errors import MPIUnavailableError, UsageError
from ceiling.report import _format as F
from ceiling.results.model import OK, WARN, Job, Metric, Run

from reporting import render_html, render_text, summary_text

WHEEL = ("MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25 20:45:26 UTC 2026\nMPICH ABI:          18:2:6\n"
         "MPICH Device:       ch4:ucx ofi\nMPICH configure:    --with-device=ch4:ucx,ofi --with-pm=hydra:gforker\n"
         "MPICH CC:           cc\nMPICH Custom Information:\thttps://pypi.org/p/mpich/5.0.2/\n")
DEBIAN_MPICH = ("MPICH Version:\t4.0.2\nMPICH Release date:\tThu May 26 10:45:44 CDT 2022\n"
                "MPICH ABI:\t14:2:2\nMPICH Device:\tch4:ofi\nMPICH configure:\t--with-device=ch4:ofi\n")
OPEN_MPI = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022"


def lib(version=WHEEL, family="MPICH", fv="5.0.2", path="/venv/lib/libmpi.so.12"):
    return Library(version=version, family=family, family_version=fv, standard="4.1", path=path)


# -- the library: device, origin, description ------------------------------------

def test_the_device_and_where_the_library_comes_from():
    wheel = lib()
    assert wheel.device == "ch4:ucx ofi"
    assert wheel.origin == "the PyPI wheel"
    assert wheel.description == "MPICH 5.0.2 (the PyPI wheel), device ch4:ucx ofi"
    deb = lib(DEBIAN_MPICH, fv="4.0.2", path="/usr/lib/x86_64-linux-gnu/libmpich.so.12")
    assert deb.device == "ch4:ofi" and deb.origin == "" and deb.description == "MPICH 4.0.2, device ch4:ofi"
    ompi = lib(OPEN_MPI, "Open MPI", "4.1.4", "/usr/lib/x86_64-linux-gnu/libmpi.so.40")
    assert ompi.device == "" and ompi.origin == "Debian OpenMPI"
    assert ompi.description == "Open MPI 4.1.4 (Debian OpenMPI)"


def test_the_transport_is_unknown_unless_the_environment_or_open_mpi_says():
    t = transport(lib(), env={}, mapped=["/venv/lib/libucp.so.0", "/venv/lib/libfabric.so.1"])
    assert t["text"].startswith("unknown: MPICH does not report the transport it chose")
    assert t["libraries"] == ["UCX", "libfabric (OFI)"] and "not necessarily used" in t["text"]
    t = transport(lib(), env={"FI_PROVIDER": "tcp", "UCX_TLS": "sm,self", "HOME": "/root"}, mapped=[])
    assert t["text"] == "set by the environment: FI_PROVIDER=tcp UCX_TLS=sm,self"
    assert t["environment"] == {"FI_PROVIDER": "tcp", "UCX_TLS": "sm,self"}
    t = transport(lib(OPEN_MPI, "Open MPI", "4.1.4"), env={},
                  mapped=["/usr/lib/openmpi/mca_pml_ob1.so", "/usr/lib/openmpi/mca_btl_vader.so",
                          "/usr/lib/openmpi/mca_btl_self.so"])
    assert t["components"] == {"pml": ["ob1"], "btl": ["vader", "self"]}
    assert "btl vader self; pml ob1" in t["text"] and not t["text"].startswith("unknown")


# -- other installations -----------------------------------------------------------

def wrapper(d: Path, name: str, macros: str) -> str:
    """A compiler wrapper whose mpi.h declares ``macros`` (what `mpicc -E -dM` prints)."""
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text("#!/bin/sh\ncat <<'EOF'\n" + macros + "\nEOF\n")
    p.chmod(0o755)
    return str(p)


def test_installations_are_found_where_sites_put_them(tmp_path):
    intel = wrapper(tmp_path / "intel" / "bin", "mpicc", '#define I_MPI_VERSION "2021.10.0"')
    ompi = wrapper(tmp_path / "mod" / "bin", "mpicc", "#define OMPI_MAJOR_VERSION 4\n#define OMPI_MINOR_VERSION 1\n"
                   "#define OMPI_RELEASE_VERSION 5")
    env = {"PATH": str(tmp_path / "mod" / "bin"), "LOADEDMODULES": "gcc/12:openmpi/4.1.5",
           "I_MPI_ROOT": str(tmp_path / "intel"), "MPI_HOME": str(tmp_path / "mod")}
    found = installations(env, distribution=[("/nonexistent/mpicc.mpich", "the distribution's MPICH package")])
    assert [(i.mpicc, i.family, i.version) for i in found] == [(ompi, "Open MPI", "4.1.5"),
                                                               (intel, "Intel MPI", "2021.10.0")]
    assert found[0].how == "mpicc on PATH (module openmpi/4.1.5 loaded)"     # $MPI_HOME's is the same file
    assert found[1].how == "$I_MPI_ROOT"
    assert found[1].command() == f"ceiling bench network --site-mpi {intel}"
    assert found[0].launcher == ""          # no mpirun beside it: the command says so when run


def test_the_measured_library_is_not_an_other():
    wheel = lib(path="/venv/lib/libmpi.so.12")
    deb = Installation("/usr/bin/mpicc.mpich", "the distribution's MPICH package", "MPICH", "4.0.2")
    same_version_elsewhere = Installation("/opt/mpich/bin/mpicc", "$MPI_HOME", "MPICH", "5.0.2")
    in_venv = Installation("/venv/bin/mpicc", "x", "MPICH", "5.0.2")
    assert not is_measured(deb, wheel) and not is_measured(same_version_elsewhere, wheel)
    assert is_measured(in_venv, wheel)
    deb_lib = lib(DEBIAN_MPICH, fv="4.0.2", path="/usr/lib/x86_64-linux-gnu/libmpich.so.12")
    assert is_measured(deb, deb_lib)
    assert others(wheel, [deb, in_venv, Installation("/x/mpicc", "y", "", "mpi.h names no known MPI family")]) == [deb]


def test_a_finding_names_the_others_with_the_command():
    deb = Installation("/usr/bin/mpicc.mpich", "the distribution's MPICH package", "MPICH", "4.0.2",
                       "/usr/bin/mpiexec.mpich")
    mpi = {"library": "MPICH 5.0.2 (the PyPI wheel), device ch4:ucx ofi", "origin": "the PyPI wheel",
           "path": "/venv/lib/libmpi.so.12", "others": [deb.to_dict()]}
    f = other_mpi_finding(mpi)
    assert f.status == WARN and f.id == "net.mpi.others"
    assert "MPICH 5.0.2 (the PyPI wheel), device ch4:ucx ofi" in f.title and "MPICH 4.0.2" in f.title
    assert f.fix.startswith("ceiling bench network --site-mpi /usr/bin/mpicc.mpich")
    assert other_mpi_finding(dict(mpi, origin="")).status == OK      # a site MPI measured: others are named only
    assert other_mpi_finding(dict(mpi, others=[])) is None


# -- reports name the MPI ----------------------------------------------------------

def network_run() -> Run:
    run = Run(tool_version="0", host="h", started="2026-11-27T19:00:00+00:00", command=["ceiling", "bench", "network"])
    run.metrics = [Metric.measured("net.pingpong.latency.same_l3", [1.08, 1.1], "µs", "lower")]
    run.job = Job(launcher="mpiexec (Hydra, PMI)", mpi_library="MPICH 5.0.2 (the PyPI wheel), device ch4:ucx ofi",
                  ranks=2, nodes=1, ranks_per_node=2, node_names=["h"])
    run.environment = {"mpi": {"library": run.job.mpi_library, "transport": "unknown: MPICH does not report it",
                               "path": "/venv/lib/libmpi.so.12"}}
    return run


def test_terminal_and_html_name_the_library_and_device():
    text = render_text(network_run(), width=200)
    line = next(x for x in text.splitlines() if x.strip().startswith("MPI "))
    assert "MPICH 5.0.2 (the PyPI wheel), device ch4:ucx ofi; mpiexec (Hydra, PMI), 2 ranks on 1 node" in line
    assert "transport: unknown: MPICH does not report it" in line
    summary = summary_text(network_run(), width=200)
    assert "MPI figures measured with MPICH 5.0.2 (the PyPI wheel), device ch4:ucx ofi" in summary
    page = render_html(network_run())
    assert page.count("MPICH 5.0.2 (the PyPI wheel), device ch4:ucx ofi") >= 2     # header and summary
    plain = Run(tool_version="0", host="h", started="2026-11-27T19:00:00+00:00", command=["ceiling", "run"])
    assert F.mpi_text(plain) == ""


# -- ceiling bench network --site-mpi ----------------------------------------------

def test_choose_names_the_installations_when_it_cannot_choose(tmp_path):
    a = Installation("/usr/bin/mpicc.mpich", "the distribution's MPICH package", "MPICH", "4.0.2")
    b = Installation("/usr/bin/mpicc.openmpi", "the distribution's Open MPI package", "Open MPI", "4.1.4")
    assert site_mpi.choose(None, [a]) == a
    several = r"several.*--site-mpi /usr/bin/mpicc.mpich.*--site-mpi /usr/bin/mpicc.openmpi"
    with pytest.raises(UsageError, match=several):
        site_mpi.choose(None, [a, b])
    with pytest.raises(MPIUnavailableError, match="no MPI installation found"):
        site_mpi.choose(None, [])
    with pytest.raises(UsageError, match="no such compiler wrapper"):
        site_mpi.choose(str(tmp_path / "mpicc"))
    intel = wrapper(tmp_path / "bin", "mpicc", '#define I_MPI_VERSION "2021.10.0"')
    assert site_mpi.choose(intel).family == "Intel MPI"


def test_one_environment_per_wrapper_reused_not_rebuilt(tmp_path):
    a = Installation("/usr/bin/mpicc.mpich", "d", "MPICH", "4.0.2")
    b = Installation("/usr/bin/mpicc.openmpi", "d", "Open MPI", "4.1.4")
    da, db = site_mpi.env_dir(a, tmp_path), site_mpi.env_dir(b, tmp_path)
    assert da == site_mpi.env_dir(a, tmp_path) and da != db
    assert da.parent == tmp_path / "site-mpi"
    assert da.name.startswith("mpich-4.0.2-") and db.name.startswith("openmpi-4.1.4-")
    # A complete environment is used as it is: nothing is built (no python -m venv, no pip), the
    # link to the running ceiling is made.
    da.mkdir(parents=True)
    (da / site_mpi.READY).write_text("x")
    assert site_mpi.prepare(a, say=lambda text: pytest.fail(f"rebuilt: {text}"), root=tmp_path) == da
    assert (da / "ceiling-link" / "ceiling" / "cli.py").is_file()
    assert not (da / "bin").exists()
    # Its bin/ links to the installation's wrapper and launcher, made when missing (an environment
    # built before, or /usr/bin/mpicc switched to another MPI since): ceiling finds them there.
    (da / "bin").mkdir()
    b = Installation("/usr/bin/mpicc.mpich", "d", "MPICH", "4.0.2", launcher="/usr/bin/mpiexec.mpich")
    site_mpi.prepare(b, say=lambda text: pytest.fail(f"rebuilt: {text}"), root=tmp_path)
    assert os.readlink(da / "bin" / "mpicc") == "/usr/bin/mpicc.mpich"
    assert os.readlink(da / "bin" / "mpiexec") == "/usr/bin/mpiexec.mpich"


def test_the_command_the_ranks_get(tmp_path):
    assert site_mpi.without_site_mpi(["bench", "network", "--site-mpi", "--quick"]) == ["bench", "network", "--quick"]
    assert site_mpi.without_site_mpi(["bench", "network", "--site-mpi", "/usr/bin/mpicc.mpich", "--reps", "3"]) == \
        ["bench", "network", "--reps", "3"]
    assert site_mpi.without_site_mpi(["bench", "--site-mpi=mpicc.mpich", "network"]) == ["bench", "network"]
    a = Installation("/usr/bin/mpicc.mpich", "d", "MPICH", "4.0.2", launcher="/usr/bin/mpiexec.mpich")
    assert site_mpi.launch_argv(a, tmp_path, ["bench", "network"]) == \
        ["/usr/bin/mpiexec.mpich", "-n", "2", str(tmp_path / "bin" / "ceiling"), "bench", "network"]
    with pytest.raises(MPIUnavailableError, match="no launcher"):
        site_mpi.launch_argv(Installation("/x/mpicc", "d", "MPICH", "4.0.2"), tmp_path, [])


def test_site_mpi_is_refused_under_a_launcher_and_with_other_suites():
    env = dict(os.environ, PMI_RANK="0", PMI_SIZE="2")
    r = subprocess.run([sys.executable, "-m", "ceiling", "bench", "network", "--site-mpi"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "starts its own launcher" in r.stderr
    r = subprocess.run([sys.executable, "-m", "ceiling", "bench", "memory", "--site-mpi"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "measures the network alone" in r.stderr


# -- the real thing: Debian's MPICH ------------------------------------------------

DEBIAN_MPICC = "/usr/bin/mpicc.mpich"


def _debian_mpich():
    if not os.access(DEBIAN_MPICC, os.X_OK):
        pytest.skip(f"no {DEBIAN_MPICC}: apt-get install mpich libmpich-dev to test the site-MPI path")
    fam, ver = header_identity(DEBIAN_MPICC)
    inst = Installation(DEBIAN_MPICC, "d", fam, ver, inst_mod.launcher_beside(DEBIAN_MPICC, fam, ver))
    ready = (site_mpi.env_dir(inst) / site_mpi.READY).is_file()
    if not ready and os.environ.get("CEILING_TEST_SITE_MPI") != "1":
        pytest.skip(f"the site-MPI environment for {inst.name} is not built ({site_mpi.env_dir(inst)}; pip "
                    "builds mpi4py, minutes): run `ceiling bench network --site-mpi` once, or set "
                    "CEILING_TEST_SITE_MPI=1")
    return inst


def test_debian_mpich_is_named_as_another_installation():
    if not os.access(DEBIAN_MPICC, os.X_OK):
        pytest.skip(f"no {DEBIAN_MPICC}: apt-get install mpich libmpich-dev")
    found = {i.mpicc: i for i in installations()}
    i = found[DEBIAN_MPICC]
    assert i.family == "MPICH" and i.launcher.endswith("mpiexec.mpich")
    assert i in others(lib(), list(found.values()))


@pytest.mark.slow
def test_site_mpi_measures_with_debian_mpich(tmp_path):
    inst = _debian_mpich()
    env = dict(os.environ, CEILING_PROGRESS="none")
    r = subprocess.run([sys.executable, "-m", "ceiling", "bench", "network", "--site-mpi", DEBIAN_MPICC, "--quick",
                        "--size", "4KiB", "--reps", "2", "--no-store", "--save-json", str(tmp_path / "run.json")],
                       env=env, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"measuring with {inst.name}" in r.stderr and "mpiexec.mpich -n 2" in r.stderr
    doc = json.loads((tmp_path / "run.json").read_text())
    mpi = doc["environment"]["mpi"]
    assert mpi["family"] == "MPICH" and mpi["version"] == inst.version
    assert mpi["path"].startswith("/usr/lib/") and mpi["origin"] != "the PyPI wheel"
    assert doc["job"]["mpi_library"] == mpi["library"] and doc["job"]["ranks"] == 2
    lat = [m for m in doc["metrics"] if m["name"].startswith("net.pingpong.latency.")]
    assert lat and all(m["context"]["mpi_library"] == mpi["library"] for m in lat)
    assert "MPI figures measured with MPICH " + inst.version in r.stdout + r.stderr
