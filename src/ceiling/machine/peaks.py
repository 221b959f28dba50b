"""Theoretical peaks, each with the formula and inputs it came from.

    flop/s  = cores x clock x flop/cycle/core
    flop/cycle/core = FMAs per cycle at the ISA's vector width x 2 x lanes
    memory  = channels x MT/s x 8 bytes

The clock is the measured one (all cores busy for many cores, one core busy
for one); without a measurement, the highest clock cpufreq or cpuid report,
said so; otherwise unknown. FMA pipes and memory channels come from the CPU
families data file, DIMM records or the user's config. Any missing input
makes the peak ``Peak(None, unit, "unknown: <why>")`` - never a guess.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..results.model import Peak
from .isa import kernel_isas
from .model import Machine

GFLOPS = "Gflop/s"
GBS = "GB/s"
ELEM_BITS = {"dp": 64, "sp": 32}
ISA_BITS = {"sse2": 128, "avx2": 256, "avx512": 512, "neon": 128}
ISA_PREFERENCE = ("avx512", "sve", "avx2", "neon", "sse2", "scalar")
HINT_FMA = "set [cpu] fma_units and fma_width_bits in the config file"
HINT_MEM = "set [memory] mts (and channels) or peak_bandwidth_gbs in the config file"


def _fmt(x: float) -> str:
    return f"{x:.2f}" if x < 100 else f"{x:.1f}" if x < 10000 else f"{x:.0f}"


def widest_isa(machine: Machine) -> str:
    have = kernel_isas(machine.isa, machine.arch, machine.sve_vector_bits)
    return next(i for i in ISA_PREFERENCE if i in have or i == "scalar")


def _cpu_label(machine: Machine) -> str:
    return machine.microarch or machine.model_name or "this CPU"


def flop_per_cycle(machine: Machine, precision: str, isa: str) -> Tuple[Optional[float], str]:
    """(flop/cycle/core, explanation) for one precision and ISA; (None, reason) when unknown."""
    elem = ELEM_BITS[precision]
    fma = {int(k): v for k, v in (machine.fma_units_by_bits or {}).items()}
    width = machine.fma_width_bits
    if not fma:
        where = (f"the CPU families data file gives none for {machine.microarch}" if machine.microarch
                 else f"{machine.model_name or 'this CPU'} is not in the CPU families data file")
        return None, f"FMA pipes per core unknown: {where} ({HINT_FMA})"
    if isa == "scalar":
        bits = elem
    elif isa == "sve":
        bits = machine.sve_vector_bits
        if not bits:
            return None, "SVE vector length unknown (/proc/sys/abi/sve_default_vector_length not readable)"
    elif isa in ISA_BITS:
        bits = ISA_BITS[isa]
    else:
        return None, f"unknown ISA {isa!r}"
    width = width or max(fma)
    fitting = [k for k in sorted(fma) if k >= bits and k <= width]
    src = machine.sources.get("fma_units", "CPU families data file")
    if fitting:
        k = fitting[0]
        units, lanes = fma[k], bits // elem
        how = f"{units} × {k}-bit FMA pipes" if bits == k else f"{units} × {bits}-bit FMA per cycle"
    elif bits > width and width in fma:
        units, lanes = fma[width], width // elem
        how = f"{units} × {width}-bit FMA pipes, {bits}-bit vectors in {bits // width} passes"
    else:
        return None, (f"how many {bits}-bit FMAs per cycle {_cpu_label(machine)} runs depends on the SKU and is "
                      f"not in the data file for {machine.model_name or 'this model'} ({HINT_FMA})")
    per_cycle = units * 2 * lanes
    return float(per_cycle), f"{how}, {_cpu_label(machine)}, {isa}; {src}"


def _clock(machine: Machine, cores: int) -> Tuple[Optional[float], str]:
    """The clock for a peak on ``cores`` cores, and how it was chosen. A measured clock whose
    threads shared their CPUs with other processes says so: it was taken over the threads' own
    CPU time, so the sharing did not lower it, and the reader learns why to look twice."""
    ghz, how = _chosen_clock(machine, cores)
    if machine.clocks.measured_disturbed and how.startswith("measured"):
        how += ("; other processes shared the CPUs while it was measured (taken over the threads' own "
                "CPU time, which that does not lower)")
    return ghz, how


def _chosen_clock(machine: Machine, cores: int) -> Tuple[Optional[float], str]:
    c = machine.clocks
    cfg = (machine.config or {}).get("cpu", {})
    all_cpus = len(machine.affinity) >= machine.threads if machine.affinity else True
    busy = "all cores busy" if all_cpus else f"the {len(machine.affinity)} CPUs this process may use busy"
    if cores == 1 and c.measured_single_ghz:
        return c.measured_single_ghz, "measured, one core busy"
    if cfg.get("all_core_ghz"):
        return float(cfg["all_core_ghz"]), f"all-core clock from config file {machine.config.get('path')}"
    domain_cores = _domain(machine)[1]
    if c.measured_domain_ghz and cores == domain_cores and cores < machine.cores:
        return c.measured_domain_ghz, "measured, one NUMA domain busy"
    if c.measured_all_ghz:
        note = "" if cores >= machine.cores else "; fewer busy cores may clock higher"
        return c.measured_all_ghz, f"measured, {busy}{note}"
    if c.max_ghz:
        return c.max_ghz, f"max clock from {c.max_source}, not measured: the clock under load may be lower"
    return None, "clock unknown: not measured (run with measurement) and no max clock from cpufreq or cpuid"


def _cores_on(machine: Machine, cpus: List[int]) -> int:
    s = set(cpus)
    return len({c.core for c in machine.cpus if c.online and c.id in s})


def _domain(machine: Machine) -> Tuple[Optional[int], int]:
    """(node id, cores) of the NUMA domain with the most cores."""
    best = (None, 0)
    for n in machine.nodes:
        k = _cores_on(machine, n.cpus)
        if k > best[1]:
            best = (n.id, k)
    return best


def _config_peak(machine: Machine, key: str) -> Optional[Peak]:
    from .config import PEAK_KEYS
    peaks = (machine.config or {}).get("peaks", {})
    for ckey, pkey in PEAK_KEYS.items():
        if pkey == key and ckey in peaks:
            unit = GBS if key.startswith("membw") else GFLOPS
            return Peak(float(peaks[ckey]), unit, f"config file {machine.config.get('path')} ([peaks] {ckey})")
    return None


def flop_peak(machine: Machine, precision: str = "dp", cores: Optional[int] = None,
              isa: Optional[str] = None) -> Peak:
    """Peak Gflop/s of ``cores`` cores (default all) running the ``isa`` variant (default: widest)."""
    if precision not in ELEM_BITS:
        raise ValueError(f"precision must be 'dp' or 'sp', not {precision!r}")
    n = machine.cores if cores is None else cores
    if cores is None or n == machine.cores:
        over = _config_peak(machine, f"flops.{precision}.node")
    elif n == 1:
        over = _config_peak(machine, f"flops.{precision}.core")
    else:
        over = None
    if over is not None and isa in (None, widest_isa(machine)):
        return over
    if n < 1:
        return Peak(None, GFLOPS, "unknown: no cores")
    isa = isa or widest_isa(machine)
    if machine.isa and isa not in kernel_isas(machine.isa, machine.arch, machine.sve_vector_bits):
        return Peak(None, GFLOPS, f"unknown: this CPU does not run {isa} code")
    fpc, why = flop_per_cycle(machine, precision, isa)
    if fpc is None:
        return Peak(None, GFLOPS, f"unknown: {why}")
    ghz, how = _clock(machine, n)
    if ghz is None:
        return Peak(None, GFLOPS, f"unknown: {how}")
    value = n * ghz * fpc
    p = precision.upper()
    text = f"{n} core{'s' if n != 1 else ''} × {ghz:.2f} GHz ({how}) × {fpc:g} {p} flop/cycle ({why})"
    note = (machine.cpu_facts or {}).get("avx512_note") if isa == "avx512" else ""
    if note:
        text += f"; AVX-512: {note}"
    return Peak(round(value, 3), GFLOPS, text)


def _channels(machine: Machine) -> Tuple[Optional[int], str]:
    """Total memory channels on the node, and where the figure came from."""
    sockets = max(1, machine.sockets)
    src = machine.sources.get("memory_channels", "")
    if machine.memory_channels_populated and not src.startswith("config"):
        how = machine.sources.get("memory_channels_populated", "DIMM records")
        return machine.memory_channels_populated, f"{machine.memory_channels_populated} populated channels ({how})"
    if machine.memory_channels:
        assumed = "" if src.startswith("config") else "; DIMM population unknown, every channel assumed populated"
        return machine.memory_channels * sockets, (f"{sockets} socket{'s' if sockets > 1 else ''} × "
                                                   f"{machine.memory_channels} channels "
                                                   f"({src or 'CPU families data file'}{assumed})")
    return None, "memory channels per socket unknown"


def memory_peaks(machine: Machine) -> Dict[str, Peak]:
    """"membw.node" and "membw.domain" in GB/s (decimal)."""
    out: Dict[str, Peak] = {}
    for key in ("membw.node", "membw.domain"):
        p = _config_peak(machine, key)
        if p:
            out[key] = p
    domains = [n for n in machine.nodes if n.cpus] or machine.nodes
    nd = max(1, len(domains))
    cfg_mem = (machine.config or {}).get("memory", {})
    node: Optional[Peak] = None
    if "membw.node" in out:
        node = out["membw.node"]
    elif cfg_mem.get("peak_bandwidth_gbs"):
        node = Peak(float(cfg_mem["peak_bandwidth_gbs"]), GBS,
                    f"config file {machine.config.get('path')} ([memory] peak_bandwidth_gbs)")
    elif (machine.cpu_facts or {}).get("peak_bandwidth_gbs_per_socket"):
        per = float(machine.cpu_facts["peak_bandwidth_gbs_per_socket"])
        s = max(1, machine.sockets)
        node = Peak(per * s, GBS, f"{s} socket{'s' if s > 1 else ''} × {per:g} GB/s "
                                  f"({machine.cpu_facts.get('memory', 'memory')}, CPU families data file: "
                                  f"{machine.cpu_facts.get('name')})")
    else:
        ch, ch_how = _channels(machine)
        mts = machine.memory_mts
        why = machine.unknowns.get("memory_mts") or machine.unknowns.get("dimms") or "DIMM speed unknown"
        if ch is None:      # both facts named when both are missing: the user needs both
            speed = f"; DIMM speed (MT/s) not known: {why}" if mts is None else ""
            node = Peak(None, GBS, f"unknown: {ch_how}{speed} ({HINT_MEM})")
        elif mts is None:
            node = Peak(None, GBS, f"unknown: DIMM speed (MT/s) not known: {why} ({HINT_MEM})")
        else:
            v = ch * mts * 8 / 1000.0
            node = Peak(round(v, 3), GBS,
                        f"{ch_how} × {mts} MT/s ({machine.sources.get('memory_mts', 'DIMM records')}) "
                                          f"× 8 B = {_fmt(v)} GB/s")
    out["membw.node"] = node
    if "membw.domain" not in out:
        if not node.known:
            out["membw.domain"] = Peak(None, GBS, node.provenance)
        elif nd == 1:
            out["membw.domain"] = Peak(node.value, GBS, f"one NUMA domain: the node's peak ({node.provenance})")
        else:
            ch, _ = _channels(machine)
            even = ch is None or ch % nd == 0
            if even:
                out["membw.domain"] = Peak(round(node.value / nd, 3), GBS,
                                           f"node peak / {nd} NUMA domains, channels split evenly ({node.provenance})")
            else:
                out["membw.domain"] = Peak(None, GBS, f"unknown: {ch} channels do not split evenly over {nd} NUMA "
                                                      "domains")
    return out


def compute_peaks(machine: Machine) -> Dict[str, Peak]:
    """Every peak ceiling knows, filled into ``machine.peaks`` and returned."""
    peaks: Dict[str, Peak] = {}
    dom_id, dom_cores = _domain(machine)
    for p in ("dp", "sp"):
        peaks[f"flops.{p}.core"] = flop_peak(machine, p, 1)
        peaks[f"flops.{p}.node"] = flop_peak(machine, p, machine.cores)
        over = _config_peak(machine, f"flops.{p}.domain")
        if over is not None:
            peaks[f"flops.{p}.domain"] = over
        elif dom_id is None or dom_cores == 0:
            peaks[f"flops.{p}.domain"] = Peak(None, GFLOPS, "unknown: no NUMA domain with CPUs")
        else:
            d = flop_peak(machine, p, dom_cores)
            text = d.provenance if not d.known else f"NUMA node {dom_id}: {d.provenance}"
            peaks[f"flops.{p}.domain"] = Peak(d.value, GFLOPS, text)
    peaks.update(memory_peaks(machine))
    machine.peaks = peaks
    return peaks
