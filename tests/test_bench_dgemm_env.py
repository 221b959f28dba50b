"""DGEMM's figure against the peak of the ISA its BLAS runs (bench.compute.isa_context), on planted
CPUs and planted threadpoolctl reports: the same on any CPU that runs the tests."""
from ceiling.bench import compute
from ceiling.machine import blas
from ceiling.machine.model import Clocks, Cpu, Machine

AVX512 = ["sse2", "avx", "fma", "avx2", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"]


def skx() -> Machine:
    return Machine(arch="x86_64", vendor="GenuineIntel", cores=2, threads=2, isa=AVX512, microarch="Cascade Lake",
                   cpus=[Cpu(i, i, 0, 0, 0) for i in range(2)], affinity=[0, 1],
                   fma_units_by_bits={256: 2, 512: 2}, clocks=Clocks(measured_all_ghz=2.0, measured_single_ghz=3.0))


def lib(arch):
    return blas.Blas.of([{"user_api": "blas", "internal_api": "openblas", "num_threads": 2, "version": "0.3.31",
                          "threading_layer": "pthreads", "architecture": arch, "filepath": "/x/libopenblas.so"}])


def test_haswell_kernels_are_rated_against_both_peaks():
    m, b = skx(), lib("Haswell")
    caps = blas.env_caps({"OPENBLAS_CORETYPE": "Haswell"}, b, m)
    # 2 cores x 2.0 GHz: 128 Gflop/s at AVX-512, 64 at AVX2; the bench measured 38.4.
    ctx, note = compute.isa_context(m, b, caps, 38.4, 2, 38.4 / 128.0)
    assert (ctx["isa_node"], ctx["isa_run"]) == ("avx512", "avx2")
    assert ctx["peak_isa_run"]["value"] == 64.0 and abs(ctx["efficiency_isa_run"] - 0.6) < 1e-12
    assert [c["variable"] for c in ctx["env_caps"]] == ["OPENBLAS_CORETYPE"]
    assert note == ("30% of the node's AVX-512 peak, 60% of the AVX2 peak the library runs "
                    "(OpenBLAS core type Haswell, set by OPENBLAS_CORETYPE=Haswell)")


def test_the_library_default_is_rated_but_not_blamed_on_the_environment():
    m, b = skx(), lib("Haswell")                   # an OpenBLAS too old to know this CPU: no variable
    ctx, note = compute.isa_context(m, b, blas.env_caps({}, b, m), 38.4, 2, 0.3)
    assert ctx["isa_run"] == "avx2" and "env_caps" not in ctx
    assert note.endswith("60% of the AVX2 peak the library runs (OpenBLAS core type Haswell)")


def test_the_widest_kernels_add_nothing():
    m, b = skx(), lib("SkylakeX")
    ctx, note = compute.isa_context(m, b, blas.env_caps({}, b, m), 100.0, 2, 100 / 128.0)
    assert ctx == {"isa_node": "avx512", "isa_run": "avx512"} and note == ""


def test_sse_kernels_have_no_modelled_peak():
    m, b = skx(), lib("Nehalem")
    ctx, note = compute.isa_context(m, b, blas.env_caps({"OPENBLAS_CORETYPE": "Nehalem"}, b, m), 10.0, 2, 10 / 128)
    assert ctx["peak_isa_run"]["value"] is None and ctx["efficiency_isa_run"] is None
    assert "8% of the node's AVX-512 peak" in note and "SSE2 peak the library runs is unknown" in note
