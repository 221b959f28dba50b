"""env.blas on planted environments and planted threadpoolctl reports, on planted CPUs.

Nothing here depends on the CPU or BLAS that runs the tests: the check's judge
takes the environment, threadpoolctl's list (the shape threadpool_info()
returns) and the machine model as inputs.
"""
import pytest

from ceiling.checks import env  # noqa: F401  (registers the checks)
from ceiling.checks import base
from ceiling.machine import blas
from ceiling.machine.model import Clocks, Cpu, Machine
from ceiling.results.model import OK, WARN

X86 = ["sse2", "sse3", "sse4_1", "sse4_2", "avx", "fma", "avx2"]
AVX512 = X86 + ["avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"]


def cpu(vendor="GenuineIntel", isa=AVX512, fma=None, width=None, n=2, microarch="Cascade Lake") -> Machine:
    return Machine(arch="x86_64", vendor=vendor, cores=n, threads=n, isa=list(isa), microarch=microarch,
                   cpus=[Cpu(i, i, 0, 0, 0) for i in range(n)], affinity=list(range(n)),
                   fma_units_by_bits=fma if fma is not None else {256: 2, 512: 2}, fma_width_bits=width,
                   clocks=Clocks(measured_all_ghz=2.0, measured_single_ghz=3.0))


def zen3():
    return cpu("AuthenticAMD", X86, {256: 2}, microarch="Zen 3")


def zen4():
    return cpu("AuthenticAMD", AVX512, {256: 2}, microarch="Zen 4")


def openblas(arch="SkylakeX", threads=2, layer="pthreads", path="/site/numpy.libs/libscipy_openblas64_.so"):
    return [{"user_api": "blas", "internal_api": "openblas", "num_threads": threads, "prefix": "libscipy_openblas",
             "filepath": path, "version": "0.3.31", "threading_layer": layer, "architecture": arch}]


def mkl(version="2024.2-Product", layer="intel"):
    return [{"user_api": "blas", "internal_api": "mkl", "num_threads": 2, "prefix": "libmkl_rt",
             "filepath": "/opt/intel/lib/libmkl_rt.so.2", "version": version, "threading_layer": layer},
            {"user_api": "openmp", "internal_api": "openmp", "num_threads": 2, "prefix": "libiomp",
             "filepath": "/opt/intel/lib/libiomp5.so", "version": None}]


def judge(environ, info, machine=None):
    return env.judge_blas(environ, blas.Blas.of(info), machine or cpu())


def test_coretype_haswell_on_avx512_names_the_variable_and_its_fix():
    f = judge({"OPENBLAS_CORETYPE": "Haswell"}, openblas("Haswell"))
    assert f.status == WARN
    d = f.data
    assert {k: d[k] for k in ("cause", "variable", "value", "library", "effect", "isa_run", "isa_node", "dgemm")} == {
        "cause": "env", "variable": "OPENBLAS_CORETYPE", "value": "Haswell", "library": "openblas",
        "effect": "isa", "isa_run": "avx2", "isa_node": "avx512", "dgemm": "capped"}
    # 2 cores x 2.0 GHz x 16 (AVX2) against x 32 (AVX-512): the peaks come from the machine model.
    assert (d["peak_run_gflops"], d["peak_node_gflops"]) == (64.0, 128.0)
    assert "OPENBLAS_CORETYPE=Haswell" in f.title and "AVX2" in f.title and "AVX-512" in f.title
    assert f.fix.startswith("unset OPENBLAS_CORETYPE") and "SkylakeX" in f.fix
    assert "core type Haswell" in f.evidence


def test_the_library_report_decides_what_runs():
    # The variable names Haswell but OpenBLAS loaded SkylakeX kernels (set after load, or overruled): no cap.
    assert judge({"OPENBLAS_CORETYPE": "Haswell"}, openblas("SkylakeX")).status == OK
    # Without a loaded OpenBLAS the table places the value, for the programs that will load one.
    f = judge({"OPENBLAS_CORETYPE": "sandybridge"}, mkl())
    assert f.status == WARN and f.data["isa_run"] == "avx" and f.data["dgemm"] == "not_used"


@pytest.mark.parametrize("name,isa", [("Zen", "avx2"), ("Nehalem", "sse2"), ("Core2", "sse2"),
                                      ("Piledriver", "avx"), ("Cooperlake", "avx512"), ("SapphireRapids", "avx512")])
def test_coretype_table(name, isa):
    assert blas.OPENBLAS_CORETYPE_ISA[name.lower()] == isa


def test_no_variable_is_ok_and_the_default_thread_count_is_not_flagged():
    f = judge({}, openblas("SkylakeX", threads=1))        # a build capped at 1 thread: the library's default
    assert f.status == OK and f.data["causes"] == []
    assert "OpenBLAS 0.3.31, core type SkylakeX, 1 thread" in f.evidence


def test_no_numpy_blas_is_said():
    f = env.judge_blas({}, blas.Blas.of([], "numpy is not installed"), cpu())
    assert f.status == OK and "numpy is not installed" in f.evidence


def test_haswell_is_no_cap_where_avx2_is_the_widest():
    assert judge({"OPENBLAS_CORETYPE": "Haswell"}, openblas("Haswell"), zen3()).status == OK


def test_haswell_on_zen4_costs_no_peak():
    f = judge({"OPENBLAS_CORETYPE": "Haswell"}, openblas("Haswell"), zen4())
    assert f.status == OK
    (c,) = f.data["causes"]
    assert c["severity"] == "info" and c["peak_run_gflops"] == c["peak_node_gflops"] == 64.0


def test_thread_counts_say_what_ceiling_does_with_them():
    f = judge({"OMP_NUM_THREADS": "1"}, openblas())
    assert f.status == WARN and f.data["variable"] == "OMP_NUM_THREADS" and f.data["dgemm"] == "ran_with"
    assert (f.data["threads"], f.data["cpus"]) == (1, 2) and "honours it" in f.evidence
    # ceiling's DGEMM raises OpenBLAS's count through threadpoolctl: said, not blamed.
    f = judge({"OPENBLAS_NUM_THREADS": "1"}, openblas(threads=1))
    assert f.status == WARN and f.data["dgemm"] == "overridden" and "not capped" in f.evidence
    assert judge({"MKL_NUM_THREADS": "1"}, openblas()).data["dgemm"] == "not_used"
    # At or above the CPUs, or not a count: nothing.
    assert judge({"OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "4"}, openblas()).status == OK
    assert judge({"OMP_NUM_THREADS": "1"}, openblas(), cpu(n=1)).status == OK


def test_one_cpu_affinity_caps_an_openmp_blas_only():
    info = openblas(layer="openmp") + [{"user_api": "openmp", "internal_api": "openmp", "prefix": "libgomp",
                                         "num_threads": 2, "filepath": "/usr/lib/libgomp.so.1", "version": None}]
    f = judge({"GOMP_CPU_AFFINITY": "3"}, info)
    assert f.status == WARN and f.data["effect"] == "affinity" and f.data["dgemm"] == "capped"
    assert judge({"GOMP_CPU_AFFINITY": "3"}, openblas()).data["dgemm"] == "not_used"
    assert judge({"GOMP_CPU_AFFINITY": "0-3"}, info).status == OK
    assert judge({"GOMP_CPU_AFFINITY": "0 2-6:2"}, info).status == OK
    f = judge({"KMP_AFFINITY": "granularity=fine,explicit,proclist=[5],verbose"}, mkl())
    assert f.data["variable"] == "KMP_AFFINITY" and f.data["dgemm"] == "capped"
    assert judge({"KMP_AFFINITY": "compact"}, mkl()).status == OK


@pytest.mark.parametrize("var,value,isa", [("MKL_ENABLE_INSTRUCTIONS", "AVX2", "avx2"),
                                           ("MKL_ENABLE_INSTRUCTIONS", "sse4_2", "sse2"),
                                           ("MKL_CBWR", "COMPATIBLE", "sse2"),
                                           ("MKL_CBWR", "BRANCH=AVX2,STRICT", "avx2"),
                                           ("MKL_DEBUG_CPU_TYPE", "5", "avx2")])
def test_mkl_code_paths(var, value, isa):
    f = judge({var: value}, mkl("2019.0.5"))
    assert f.status == WARN and (f.data["variable"], f.data["isa_run"], f.data["dgemm"]) == (var, isa, "capped")
    assert f.fix.startswith(f"unset {var}")


def test_mkl_variables_it_ignores_are_no_cap():
    assert judge({"MKL_CBWR": "AUTO"}, mkl()).status == OK
    assert judge({"MKL_CBWR": "AVX512"}, mkl()).status == OK                  # the widest: nothing narrower
    assert judge({"MKL_DEBUG_CPU_TYPE": "5"}, mkl("2024.2-Product")).status == OK   # ignored since 2020 Update 1
    amd = cpu("AuthenticAMD", AVX512, {256: 2}, microarch="Zen 4")
    assert judge({"MKL_ENABLE_INSTRUCTIONS": "AVX"}, mkl(), amd).status == OK   # Intel processors only


def test_runtime_policies_and_a_preloaded_blas():
    f = judge({"OMP_DYNAMIC": "true", "OMP_WAIT_POLICY": "PASSIVE"}, openblas())
    assert f.status == WARN and [c["variable"] for c in f.data["causes"]] == ["OMP_DYNAMIC", "OMP_WAIT_POLICY"]
    f = judge({"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libblas.so.3"}, openblas())
    assert f.status == WARN and f.data["effect"] == "preload" and f.data["dgemm"] == "not_used"
    f = judge({"LD_PRELOAD": "/opt/libopenblas.so.0"}, openblas(path="/opt/libopenblas.so.0"))
    assert f.data["dgemm"] == "ran_with"
    assert judge({"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}, openblas()).status == OK


def test_capping_causes_lead_and_all_are_kept():
    f = judge({"OMP_NUM_THREADS": "1", "OPENBLAS_CORETYPE": "Haswell"}, openblas("Haswell"))
    assert f.data["variable"] == "OPENBLAS_CORETYPE"
    assert [c["variable"] for c in f.data["causes"]] == ["OPENBLAS_CORETYPE", "OMP_NUM_THREADS"]
    assert "(and 1 more setting)" in f.title and "OMP_NUM_THREADS" in f.fix


def test_the_check_is_live_and_skipped_on_a_recorded_tree(tmp_path):
    c = base.REGISTRY["env.blas"]
    assert c.live
    f = base.run_one(c, base.Probe(tmp_path, cpu(), live=False), strict=True)
    assert f.status == "skipped"


from hypothesis import given, settings, strategies as st  # noqa: E402

VARS = ["OPENBLAS_CORETYPE", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "MKL_DEBUG_CPU_TYPE", "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_DYNAMIC", "OMP_WAIT_POLICY", "GOMP_CPU_AFFINITY",
        "KMP_AFFINITY", "LD_PRELOAD"]


@settings(max_examples=300, deadline=None)
@given(environ=st.dictionaries(st.sampled_from(VARS), st.text(max_size=40)),
       arch=st.text(max_size=12), version=st.text(max_size=12))
def test_no_value_crashes_the_judge(environ, arch, version):
    for info in (openblas(arch), mkl(version), []):
        f = judge(environ, info)
        assert f.status in (OK, WARN) and f.title
