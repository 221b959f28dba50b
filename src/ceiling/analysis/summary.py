"""The verdict of a run: the subsystem furthest below its peak, or why no
efficiency can be given; how each figure a summary shows must be shown
(``figures``: disturbed, or unstable); and the problems a summary lists first.

A metric whose figure an environment variable lowered (``context["env_caps"]``,
written by the bench from machine.blas: OPENBLAS_CORETYPE=Haswell on an
AVX-512 CPU) rates the environment, not the node: it is never the node's
verdict, and when it would have been the lowest the verdict says so, naming
the variable.

Pure functions over a results.model.Run. ``verdict`` is computed once, stored
in ``Run.analysis`` (analysis.analyse), and only rendered afterwards: the
words for it are the report's (report/labels.py).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..machine.blas import ISA_TITLE, LIBRARY_TITLE
from ..results.analysis import DISTURBED, NO_VERDICT, UNSTABLE, Figure, Verdict
from ..results.machine_view import MachineFacts
from ..results.model import FAIL, HIGHER, WARN, Finding, Metric, Run
from ..units import figure as figure_value, pct

# Suffixes that name a kernel variant: such a metric measures the variant, not
# the subsystem (the widest variant carries the plain name).
ISA_SUFFIXES = frozenset({"scalar", "sse2", "avx", "avx2", "avx512", "neon", "sve"})

# Machine.peaks keys behind each metric, for when a metric carries no Peak itself.
MACHINE_PEAK = {
    "flops.dp.core": "flops.dp.core", "flops.sp.core": "flops.sp.core",
    "flops.dp.node": "flops.dp.node", "flops.sp.node": "flops.sp.node",
    "dgemm.node": "flops.dp.node", "stream.triad": "membw.node",
}


# A best-of whose repetitions spread this much is no headline (pyperf warns above a 10 %
# standard deviation; hyperfine when the fastest run is far from the rest): the median is shown.
UNSTABLE_CV = 0.10        # coefficient of variation above which the spread is large
UNSTABLE_BEST = 1.2       # best repetition this many times better than the median


def is_variant(name: str) -> bool:
    return name.rpartition(".")[2] in ISA_SUFFIXES


def _eligible(m: Metric) -> bool:
    # a NaN efficiency (a peak of NaN while measuring) would sort anywhere: it is no figure
    return (figure_value(m.efficiency) is not None and m.value is not None and m.valid
            and m.peak is not None and m.peak.known and not is_variant(m.name))


def env_caps(m: Metric) -> List[Dict]:
    """The environment variables that lowered ``m``'s figure (the bench's structured causes)."""
    caps = m.context.get("env_caps")
    return [c for c in caps if isinstance(c, dict) and c.get("variable")] if isinstance(caps, list) else []


def _cap_words(c: Dict) -> str:
    var = f"{c.get('variable')}={c.get('value', '')}"
    run, node = ISA_TITLE.get(str(c.get("isa_run"))), ISA_TITLE.get(str(c.get("isa_node")))
    if c.get("effect") == "isa" and run and node:
        lib = LIBRARY_TITLE.get(str(c.get("library")), str(c.get("library")))
        return f"{var} has {lib} run its {run} code on this {node} CPU"
    if c.get("effect") == "affinity":
        return f"{var} puts every thread on one CPU"
    return var


def env_sentence(m: Metric) -> str:
    """Why ``m`` rates the environment, in words: its variables and its efficiency against the
    peak of the ISA the library runs, when the bench recorded one."""
    caps = env_caps(m)
    text = "set by the environment, not the node: " + "; ".join(_cap_words(c) for c in caps)
    eff, run = figure_value(m.context.get("efficiency_isa_run")), ISA_TITLE.get(str(m.context.get("isa_run")))
    if eff is not None and run:
        text += f" ({pct(m.efficiency)} of the node's peak, {pct(eff)} of the {run} peak the library runs)"
    else:
        text += f" ({pct(m.efficiency)} of the node's peak)"
    names = ", ".join(dict.fromkeys(str(c.get("variable")) for c in caps))
    return text + f"; unset {names} and rerun (finding env.blas)"


def furthest_below_peak(run: Run) -> Optional[Metric]:
    """The valid metric with the lowest known efficiency; None when no metric has a known peak.

    Per-ISA variants are left out: they rate a kernel variant, not the node.
    STREAM copy/scale/add stand aside when the triad has a known efficiency.
    Metrics an environment variable lowered stand aside: they rate the environment.
    """
    cands = [m for m in run.metrics if _eligible(m) and not env_caps(m)]
    if any(m.name == "stream.triad" for m in cands):
        # STREAM's headline is the triad; copy and scale count no write-allocate
        # traffic, so they read lower without the memory being any slower.
        cands = [m for m in cands if m.name == "stream.triad" or not m.name.startswith("stream.")]
    if not cands:
        return None
    return min(cands, key=lambda x: (x.efficiency, x.name))


def unknown_peaks(run: Run) -> List[Tuple[str, str]]:
    """(metric name, reason) for headline metrics whose peak is unknown.

    The reason is the peak's provenance when the bench attached an unknown
    Peak, else the machine's peak of the same key, else "no theoretical peak
    was recorded for it".
    """
    facts = MachineFacts(run.machine)
    out = []
    for m in run.metrics:
        if m.value is None or is_variant(m.name) or (m.peak is not None and m.peak.known):
            continue
        if m.name not in MACHINE_PEAK and m.peak is None:
            continue     # latencies and the like have no peak by nature: nothing to explain
        reason = m.peak.provenance if m.peak is not None else ""
        if not reason:
            mp = facts.peak(MACHINE_PEAK.get(m.name, m.name))
            reason = mp.provenance if mp is not None and not mp.known else ""
        out.append((m.name, reason or "no theoretical peak was recorded for it"))
    return out


def verdict(run: Run) -> Verdict:
    """What a summary leads with, as data: the metric furthest below its peak, or why there is none.
    A metric measured under competing load (``context["disturbed"]``, set when a step met it twice)
    is never the verdict: "no verdict", with the load's evidence. A metric an environment variable
    lowered is never the verdict either; one that would have been lower than the verdict is said in
    its evidence, and when no other metric remains, the verdict is "no verdict" naming the variable."""
    m = furthest_below_peak(run)
    env = sorted((c for c in run.metrics if _eligible(c) and env_caps(c)
                  and (m is None or (c.efficiency, c.name) < (m.efficiency, m.name))),
                 key=lambda c: (c.efficiency, c.name))
    env_text = "; ".join(f"{c.name} is {env_sentence(c)}" for c in env)
    lower = f"lower still: {env_text}" if env_text else ""     # beside the node's verdict
    if m is not None and m.context.get("disturbed"):
        return Verdict(kind=NO_VERDICT, metric=m.name, node=m.node, value=m.value, unit=m.unit,
                       efficiency=m.efficiency, peak=m.peak,
                       evidence="; ".join(filter(None, [
                           f"{m.name} would be furthest below its peak, but it was measured while other "
                           f"processes were busy ({m.context['disturbed']}); rerun on an idle node", env_text])))
    fig = figure(m) if m is not None else None
    if m is not None and fig is not None and fig.shown is not None:
        # Unstable: the sentence quotes the median, as the headline does, and says why.
        return Verdict(kind="below_peak", metric=m.name, node=m.node, value=fig.shown, unit=m.unit,
                       efficiency=fig.efficiency, peak=m.peak,
                       evidence="; ".join(filter(None, [
                           f"unstable: the median of its repetitions; the best was {m.value:.6g} {m.unit}".rstrip(),
                           lower])))
    if m is not None:
        return Verdict(kind="below_peak", metric=m.name, node=m.node, value=m.value, unit=m.unit,
                       efficiency=m.efficiency, peak=m.peak, evidence=lower)
    if env:
        e = env[0]
        return Verdict(kind=NO_VERDICT, metric=e.name, node=e.node, value=e.value, unit=e.unit,
                       efficiency=e.efficiency, peak=e.peak,
                       evidence="; ".join([f"{e.name} would be furthest below its peak, but it is {env_sentence(e)}"]
                                          + [f"{c.name} is {env_sentence(c)}" for c in env[1:]]))
    unknown = unknown_peaks(run)
    if unknown:
        return Verdict(kind="unknown_peaks", unknown=[{"metric": n, "reason": why} for n, why in unknown])
    if not run.metrics:
        return Verdict(kind="nothing_measured")
    return Verdict(kind="no_peak")


def figures(run: Run) -> List[Figure]:
    """How each metric that is not the node's value as it stands is shown instead.

    Disturbed (``context["disturbed"]``: its step met competing load): no figure is the node's,
    the measured one is kept beside it. Unstable (its best repetition is the value, and the
    repetitions' CV is over UNSTABLE_CV or the best over UNSTABLE_BEST times the median): the
    median is shown. The metric's own value is never changed: comparisons and the cluster's
    ranking keep comparing best with best."""
    return [f for f in (figure(m) for m in run.metrics) if f is not None]


def figure(m: Metric) -> Optional[Figure]:
    """The Figure of one metric, or None when it is shown as it stands."""
    st = m.stats
    if figure_value(m.value) is None:
        return None
    median = figure_value(st.median) if st is not None else None
    cv = figure_value(st.cv) if st is not None else None
    if m.context.get("disturbed"):
        return Figure(metric=m.name, node=m.node, state=DISTURBED, shown=None, unit=m.unit, measured=m.value,
                      median=median, cv=cv,
                      evidence=f"measured while other processes were busy ({m.context['disturbed']}): not the "
                               "node's value; rerun on an idle node, or with --retry-disturbed N")
    if st is None or st.n < 2 or st.best != m.value or not median or median <= 0 or m.value <= 0:
        return None     # one repetition, or a metric whose value is not its best (a median already)
    ratio = m.value / median if m.better == HIGHER else median / m.value
    if not ((cv is not None and cv > UNSTABLE_CV) or ratio > UNSTABLE_BEST):
        return None
    eff = None
    if figure_value(m.efficiency) is not None:
        eff = m.efficiency * (median / m.value if m.better == HIGHER else m.value / median)
    spread = [f"best {m.value:.6g} is {ratio:.2f}x the median {median:.6g} {m.unit}".rstrip()]
    if cv is not None:
        spread.append(f"CV {cv:.0%} over {st.n} repetitions")
    return Figure(metric=m.name, node=m.node, state=UNSTABLE, shown=median, unit=m.unit, measured=m.value,
                  median=median, cv=cv, efficiency=eff,
                  evidence=f"unstable: {', '.join(spread)}; the median is shown, the metric keeps its best; "
                           "rerun on an idle node with more repetitions (--reps)")


def problems(run: Run) -> List[Tuple[Finding, int]]:
    """Fail and warn findings, fails first, each with how many more share its why and fix.

    The same cause met in several steps (competing load during each bench) is
    one problem to the reader: the first finding stands for the group.
    """
    groups: List[Tuple[Finding, int]] = []
    index: Dict[tuple, int] = {}
    for status in (FAIL, WARN):
        for f in run.findings:
            if f.status != status:
                continue
            key = (f.status, f.why, f.fix) if (f.why or f.fix) else (f.status, f.id, f.title)
            if key in index:
                first, n = groups[index[key]]
                groups[index[key]] = (first, n + 1)
            else:
                index[key] = len(groups)
                groups.append((f, 0))
    return groups
