"""The C core's parameter block and kernel registry, across families.

ceil_params has one named field per size (``elements`` for bandwidth, ``ws_bytes`` for
latency, ``threshold_ns`` for the noise probe; csrc/include/ceiling.h lists what each
family reads): a kernel refuses a size, a stride, a NUMA node or a flag it does not read
rather than ignoring it. The registry (csrc/kernels/registry.c) gathers the family
tables from a linker section and lists them in a fixed order. The per-family tests
(tests/test_kernels_*.py) cover each family's own fields.
"""
import ctypes
import os
import platform

import pytest

from ceiling import core
from ceiling.core import noise as core_noise
from ceiling.errors import CoreError

CPUS = sorted(os.sched_getaffinity(0))


def test_abi_version_is_2():
    assert core.ABI_VERSION == 2 == core._lib().ceil_abi_version()


# -- foreign fields are refused --------------------------------------------------

def _base(name):
    """Parameters this kernel runs with, and the kernel (skip when absent here)."""
    try:
        k = core.find(name)
    except CoreError as e:
        pytest.skip(str(e))
    if name == "c2c_pingpong":
        if len(CPUS) < 2:
            pytest.skip("c2c needs two CPUs")
        return k, dict(iters=10, reps=1, nthreads=2, cpus=CPUS[:2])
    return k, dict(iters=1000, reps=1, nthreads=1, cpus=CPUS[:1])


FOREIGN = [
    (dict(elements=1000), "elements = 1000 is not a parameter"),
    (dict(ws_bytes=4096), "ws_bytes = 4096 is not a parameter"),
    (dict(stride=64), "stride = 64 is not a parameter"),
    (dict(mem_node=0), "mem_node = 0 is not a parameter"),
    (dict(flags=core.F_HUGEPAGES), "unknown flags 0x2"),
    (dict(flags=core.F_NT_STORES), "unknown flags 0x1"),
]


@pytest.mark.parametrize("name", ["peak_fma_dp", "peak_fma_sp", "clock_add", "c2c_pingpong"])
@pytest.mark.parametrize("extra,words", FOREIGN, ids=[w.split(" ")[0] for _, w in FOREIGN])
def test_kernels_without_sizes_refuse_one(name, extra, words):
    k, args = _base(name)
    assert core.run(k, **args).valid           # the same call without the extra field runs
    with pytest.raises(CoreError, match=f"invalid parameter: .*{words}"):
        core.run(k, **args, **extra)


def _noise(**fields):
    """ceil_noise_detour with a hand-made parameter block, as noise.py calls it."""
    lib = core._lib()
    fn = lib.ceil_noise_detour
    fn.argtypes = [ctypes.POINTER(core._Params), ctypes.c_double, ctypes.POINTER(core_noise._NoiseGap),
                   ctypes.c_int32, ctypes.POINTER(core_noise._NoiseStats), ctypes.POINTER(core._Result)]
    fn.restype = ctypes.c_int
    cpus = (ctypes.c_int32 * 1)(CPUS[0])
    p = core._Params(**{"nthreads": 1, "mem_node": -1, "cpus": ctypes.cast(cpus, ctypes.POINTER(ctypes.c_int32)),
                        **fields})
    stats, gaps, r = (core_noise._NoiseStats * 1)(), (core_noise._NoiseGap * 1)(), core._Result()
    rc = fn(ctypes.byref(p), 0.01, gaps, 1, stats, ctypes.byref(r))
    return rc, r.msg.decode()


@pytest.mark.parametrize("extra,words", [
    (dict(elements=5), "elements = 5"), (dict(ws_bytes=4096), "ws_bytes = 4096"), (dict(stride=8), "stride = 8"),
    (dict(mem_node=0), "mem_node = 0"), (dict(flags=core.F_HUGEPAGES), "unknown flags"),
])
def test_the_noise_probe_refuses_fields_it_does_not_read(extra, words):
    assert _noise(threshold_ns=1000)[0] == 0     # the same call without the extra field runs
    rc, msg = _noise(threshold_ns=1000, **extra)
    assert rc == -1 and words in msg, msg


def test_the_noise_probe_reads_its_threshold_from_threshold_ns():
    # With a 1 ns threshold every gap between two clock reads is a detour; with the
    # default (1000 ns) only the rare long ones are. A probe that read its threshold
    # from another field would fall back to the default and count few.
    r = core.noise_detour(CPUS[:1], 0.02, threshold_ns=1, top=1)
    assert r.threshold_ns == 1
    c = r.cpus[0]
    assert c.reads > 100 and c.detours > c.reads // 2, (c.reads, c.detours)


# -- the registry ------------------------------------------------------------------

FAMILY_ORDER = ["clock", "flops", "bandwidth", "latency", "c2c"]
ISA_ORDER = ["scalar", "sse2", "avx2", "avx512", "neon", "sve"]


def test_kernels_are_listed_by_family_then_isa_in_table_order():
    ks = core.kernels()
    keys = [(FAMILY_ORDER.index(k.family), ISA_ORDER.index(k.isa)) for k in ks]
    assert keys == sorted(keys)
    assert [k.index for k in ks] == list(range(len(ks)))
    bw = [k.name for k in ks if k.family == "bandwidth" and k.isa == "scalar"]
    assert bw == ["stream_copy", "stream_scale", "stream_add", "stream_triad", "load_sum"]


def test_every_kernel_is_listed_once_and_the_list_ends():
    ks = core.kernels()
    pairs = [(k.name, k.isa) for k in ks]
    assert len(pairs) == len(set(pairs))
    lib = core._lib()
    assert not lib.ceil_kernel_get(len(ks)) and not lib.ceil_kernel_get(-1)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="kernels of other ISAs are not written")
def test_every_family_registered_its_tables_on_this_architecture():
    ks = core.kernels()
    assert {k.family for k in ks} == set(FAMILY_ORDER)
    isas = {k.isa for k in ks if k.family in ("flops", "bandwidth")}
    want = {"scalar", "avx2", "avx512"} if platform.machine() == "x86_64" else {"scalar", "neon", "sve"}
    assert isas == want
