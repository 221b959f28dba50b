"""What the working-set runs of `ceiling profile --experiments` say (probes/rerun.Footprint: the
pages a program referenced, window by window, from smaps after clear_refs, no root needed), and
what the page-size arm says; analysis/profile_experiments.py weighs them with the slowdowns.

- The working set: within one core's private caches in FITS of the windows ("fits": it cannot
  be bound by the last-level cache or memory), or beyond the last-level cache ("beyond").
- The page size: how much faster it ran with huge pages, and whether its memory did change page.
- The working-set rate: how fast it goes through its data, the bytes of the pages it referenced
  per second of its CPU time, beside one core's streaming rate per second of CPU (the
  experiment's reference thread), read again with the other page size where its data lies beyond
  the last-level cache (one run more): what decides memory bandwidth on a node where the
  co-runners cannot show it (one core's stream limited by the core itself, not by the node's
  bandwidth another core could take). The windows' spans: a look walks every page twice, read
  then clear, so a page's window runs from the middle of one clear to the middle of the next
  read, and the CPU time it had there is its CPU time over the looks' span, pro rata.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional, Sequence

# The other page size changing the run's time by 15 % or more: its time goes to address translation,
# loads scattered over more memory than the TLB reaches. Above the co-runners' 10 % because streaming code gains
# a little from huge pages too (a hardware prefetcher stops at a 4 KiB page's end).
PAGES_SENSITIVE = 0.15
FITS = 0.9            # the share of working-set windows a claim about the working set must hold in
MIN_WINDOWS = 5       # fewer windows (a program shorter than 5 of them): no working set read
RAN = 0.5             # a window counts where the program had half a CPU in it at least
# The working-set rate (stream_rate): the bytes of the pages it referenced per second of its CPU
# time, beside one core's streaming rate per second of CPU (the experiment's reference thread, STREAM
# Add, whose 24 bytes an element are the three arrays' bytes a page count sees). Referenced counts
# whole pages, so the rate is an upper bound on the bytes touched: far above what one core can
# stream (STREAMS_MAX), the program touched part of each page, scattered, not streaming; a read-only
# sweep runs up to ~1.3 times an Add (no write-allocate), and the two are read at different moments
# of a shared node: 1.5. At STREAMS_MIN of it or more, with every page touched whole (its rate the
# same with huge pages, within PAGE_RATIO, and huge pages not making it PAGES_SENSITIVE faster) and data MANY
# times the last-level cache (a sweep over 4 of them finds at most a quarter of its bytes in the
# cache, whatever the replacement policy), at least STREAMS_MIN * 3/4 of its time on a CPU goes to
# moving data from memory at the best rate one core has: bound by one core's streaming rate.
STREAMS_MIN = 0.5
STREAMS_MAX = 1.5
# Its pages referenced PAGE_RATIO times as fast with huge pages as without: it touches part of each
# page. A program that touches its pages whole references them at the same rate whatever their
# size, but the watch slows it more on 4 KiB pages (its walks of every PTE, their TLB flushes): on
# the busy guest a triad's 4 KiB pages read at ~0.65 of its unwatched rate, its 2 MiB pages near
# it. A chase read 5.5 times as fast with 2 MiB pages (up to 512 times: a line a page).
PAGE_RATIO = 3.0
MANY = 4


def working_set(footprint: Optional[Dict[str, Any]], private_bytes: Optional[int], llc_bytes: Optional[int]
                ) -> Dict[str, Any]:
    """What the working-set run says: in FITS or more of its windows the program referenced no more
    than one core's private caches hold ("fits": it cannot be bound by the last-level cache, nor by
    memory, whatever the co-runners could show), or more than the last-level cache holds
    ("beyond": its data comes from memory). Referenced is counted by page, so it overstates what
    sparse accesses touch: "fits" errs towards never saying it, "beyond" towards saying it of a
    program that touches one line a page (which then still moves a line a page from memory)."""
    if not footprint or footprint.get("exit_status"):
        return {"why": "not measured" if not footprint else f"its run exited {footprint['exit_status']}"}
    w = list(footprint.get("referenced_bytes") or [])
    cpu = footprint.get("cpu_s")
    if cpu and len(cpu) == len(w):
        # a window in which it hardly ran (the node busy with others) says nothing of what it touches
        asked = footprint.get("interval_s") or [footprint["window_s"]] * len(w)
        w = [x for x, c, iv in zip(w, cpu, asked) if c >= RAN * iv]
    if len(w) < MIN_WINDOWS:
        return {"why": f"the program ran in {len(w)} window(s) of {footprint['window_s']:.3g} s "
                       f"({MIN_WINDOWS} needed to read its working set, each with {RAN:.0%} of a CPU at least)"}
    fit = sum(1 for x in w if private_bytes and x <= private_bytes) / len(w)
    beyond = sum(1 for x in w if llc_bytes and x > llc_bytes) / len(w)
    return {"windows": len(w), "window_s": footprint["window_s"], "median_bytes": statistics.median(w),
            "max_bytes": max(w), "private_bytes": private_bytes, "llc_bytes": llc_bytes,
            "share_fitting": fit, "share_beyond": beyond, "fits": fit >= FITS, "beyond": beyond >= FITS,
            "words": (f"its working set, read in {len(w)} windows of {footprint['window_s']:.3g} s on a CPU (pages "
                      f"referenced, smaps), was {_size(statistics.median(w))} (median; largest {_size(max(w))}): "
                      f"within one core's private caches ({_size(private_bytes)}) in {fit:.0%} of the windows, "
                      f"beyond the last-level cache ({_size(llc_bytes)}) in {beyond:.0%}")}


def wants_other_pages(footprint: Optional[Dict[str, Any]], caches: Optional[Dict[str, Optional[int]]]) -> bool:
    """Whether its working set is worth reading again with the other page size (one more run of the
    program): only where its data lies beyond the last-level cache, where the working-set rate may
    decide memory bandwidth and must know whether it touches its pages whole."""
    caches = caches or {}
    return bool(working_set(footprint, caches.get("private_bytes"), caches.get("llc_bytes")).get("beyond"))


def page_effect(times: Dict[str, Sequence[float]], pages: Optional[Dict[str, Any]],
                footprint: Optional[Dict[str, Any]], noise: Optional[float]) -> Dict[str, Any]:
    """What running it with the other page size did: "gain", how much faster it ran with huge pages
    than without (positive: huge pages helped), "taken" whether the page size did change
    (AnonHugePages of the program differing between the two settings), "sensitive" when both."""
    if not pages or pages.get("why"):
        return {"why": (pages or {}).get("why", "not measured")}
    other, alone = times.get("pages") or [], times.get("alone") or []
    if not other or not alone:
        return {"why": "its runs with the other page size did not finish"}
    t_other, t_alone = statistics.median(other), statistics.median(alone)
    # with huge pages over without: PR_SET_THP_DISABLE takes them away, the tunable gives them
    gain = 1 - t_alone / t_other if pages.get("no_thp") else 1 - t_other / t_alone
    huge_other = max(pages.get("anon_huge_bytes") or [0])
    huge_default = (footprint or {}).get("anon_huge_bytes")
    taken = None if huge_default is None else (huge_other != huge_default)
    sensitive = bool(taken) and abs(gain) >= PAGES_SENSITIVE and (noise is None or abs(gain) >= 2 * noise)
    return {"gain": gain, "how": pages.get("how"), "taken": taken, "sensitive": sensitive,
            "huge_bytes": {"default": huge_default, "other": huge_other},
            "words": (f"with {pages.get('how')} it took {t_other:.3g} s against {t_alone:.3g} s ("
                      f"huge pages {'faster' if gain >= 0 else 'slower'} by {abs(gain):.0%}; anonymous memory in huge "
                      f"pages {_size(huge_default)} by default, {_size(huge_other)} so)")}


def stream_rate(footprint: Optional[Dict[str, Any]], reference: Sequence[Optional[float]] = ()) -> Dict[str, Any]:
    """How fast it goes through its data: in each window in which it ran (RAN of a CPU over the
    interval asked for) and took in less than FULL of its resident data (else the window may
    hold a sweep and more: its bytes are then a lower bound on what it went through), the bytes of
    the pages it referenced over the CPU time it had in the pages' span of the window; the median
    over MIN_WINDOWS or more such windows. Beside one core's streaming rate per second of CPU
    (``reference``: the reference thread's, over the rounds), "share". {"why"} when short."""
    from ..probes.rerun import FULL, full as took_all
    if not footprint or footprint.get("exit_status"):
        return {"why": "not measured" if not footprint else f"its run exited {footprint['exit_status']}"}
    spans, cpu_spans = footprint.get("span_s"), footprint.get("cpu_span_s")
    if not spans:
        return {"why": "the windows' spans were not recorded"}
    w, cpu, rss = footprint["referenced_bytes"], footprint["cpu_s"], footprint["rss_bytes"]
    asked = footprint.get("interval_s") or [footprint["window_s"]] * len(w)
    rates, full, faulting = [], [], 0
    for i, (b, c, span, cspan, r, iv) in enumerate(zip(w, cpu, spans, cpu_spans, rss, asked)):
        if not i or not span or not cspan or span <= 0 or c < RAN * iv:
            continue
        if r - rss[i - 1] >= FULL * b:
            faulting += 1               # mostly new pages: the kernel's page faults, not its accesses, set the pace
            continue
        rate = b / (c * min(1.0, span / cspan))          # the CPU time it had in the pages' span
        (full if took_all(b, r, rss[i - 1]) else rates).append(rate)
    ref = [x for x in reference if x]
    out: Dict[str, Any] = {"windows": len(rates), "full_windows": len(full), "faulting_windows": faulting,
                           "look_s": footprint.get("look_s"), "reference_bps": statistics.median(ref) if ref else None}
    if len(rates) >= MIN_WINDOWS and len(full) <= (1 - FITS) * (len(rates) + len(full)):
        out["median_bps"] = statistics.median(rates)
    elif len(rates) + len(full) >= MIN_WINDOWS and full:
        # more than a tenth of its windows went through all its data: each of those gives a lower bound
        # on its rate, and the median of them all is a lower bound on the median rate (a chase with huge
        # pages references all of them in every window: its rate lies far above what this reads)
        out["lower_bps"] = statistics.median(rates + full)
    else:
        out["why"] = (f"{len(rates) + len(full)} window(s) in which it ran and did not mostly fault in new memory "
                      f"({MIN_WINDOWS} needed; {faulting} faulted in new memory)")
    if ref and out.get("median_bps"):
        out["share"] = out["median_bps"] / out["reference_bps"]
    elif ref and out.get("lower_bps"):
        out["share_at_least"] = out["lower_bps"] / out["reference_bps"]
    elif not ref:
        out["why"] = out.get("why") or "one core's streaming rate per second of CPU was not measured (no reference)"
    return out


def page_rate_ratio(default: Dict[str, Any], other: Dict[str, Any], footprint: Optional[Dict[str, Any]],
                    footprint_pages: Optional[Dict[str, Any]], pages: Optional[Dict[str, Any]]) -> Optional[float]:
    """Its pages' rate with huge pages over without (``default`` and ``other``: stream_rate of the
    working-set runs with the default and the other page size; a run that took in all its data in
    nearly every window counts with its lower bound): about 1 for a program that touches every byte
    of its pages, up to the page sizes' ratio for one that touches a line a page. None when either
    is missing or the page size did not change (AnonHugePages the same in both runs)."""
    a = default.get("median_bps") or default.get("lower_bps")
    b = other.get("median_bps") or other.get("lower_bps")
    if not a or not b or not pages or pages.get("why") or not footprint or not footprint_pages or \
            footprint.get("anon_huge_bytes") == footprint_pages.get("anon_huge_bytes"):
        return None
    ratio = a / b if pages.get("no_thp") else b / a
    huge = default if pages.get("no_thp") else other
    small = other if pages.get("no_thp") else default
    # a lower bound for the huge pages' rate (or an upper one for the small pages') shows only a large ratio
    if (not huge.get("median_bps") or not small.get("median_bps")) and ratio < PAGE_RATIO:
        return None
    return ratio


def streams(ws: Dict[str, Any], sr: Dict[str, Any], pg: Dict[str, Any], ratio: Optional[float]) -> Dict[str, Any]:
    """Whether the working-set rate says memory bandwidth (see STREAMS_MIN): {"ok", "words" (the
    figures), "against" (why not, each a phrase)}."""
    against: List[str] = []
    ref, share = sr.get("reference_bps"), sr.get("share")
    if share is not None:
        words = (f"it went through its data at {_gbs(sr['median_bps'])} on a CPU (pages referenced, median "
                 f"of {sr['windows']} windows" + (f"; {sr['faulting_windows']} in which it faulted in new memory "
                                                   "left out" if sr.get("faulting_windows") else "")
                 + f"), {share:.0%} of one core's streaming rate here ({_gbs(ref)} on a CPU, the reference "
                 "thread's STREAM Add)")
    elif sr.get("share_at_least") is not None:
        share = sr["share_at_least"]
        words = (f"it took in all its resident data in nearly every window, even the shortest: at least "
                 f"{_gbs(sr['lower_bps'])} on a CPU, {share:.0%} of one core's streaming rate here or more")
        if share <= STREAMS_MAX:
            against.append("only a lower bound on its rate was read: it went through all its data in nearly every "
                           "window, even the shortest")
    else:
        return {"ok": False, "words": "", "against": [f"it is unknown: {sr.get('why')}"]}
    if sr.get("look_s") is not None:
        words += f"; reading the pages took {sr['look_s']:.2g} s of the watch's time"
    if ratio is not None:
        words += f"; with huge pages its pages were referenced {ratio:.2g} times as fast as without"
    if share > STREAMS_MAX:
        against.append(f"it referenced pages at {share:.1f} times the rate one core streams memory: it touches part "
                       "of each page, scattered loads (latency or the TLB), not a stream")
    elif share < STREAMS_MIN:
        against.append(f"it went through its data at {share:.0%} of one core's streaming rate ({STREAMS_MIN:.0%} "
                       "needed to say most of its time moves data)")
    llc = ws.get("llc_bytes")
    if not ws.get("beyond") or not llc or ws.get("max_bytes", 0) < MANY * llc:
        against.append(f"its data was not {MANY} times the last-level cache ({_size(llc)}) or more in the windows "
                       f"(largest {_size(ws.get('max_bytes'))})")
    if ratio is not None and ratio >= PAGE_RATIO:
        against.append(f"with huge pages its pages were referenced {ratio:.2g} times as fast: it touches part of "
                       "each page")
    # faster with huge pages: its time goes to address translation. Slower with them says what making
    # them costs (a 2 s triad faulting in 768 MiB ran 17 % slower with them on the busy guest), not its loads.
    moved = pg.get("gain") is not None and pg.get("taken") and pg["gain"] >= PAGES_SENSITIVE
    if moved:
        against.append(f"huge pages made it {pg['gain']:.0%} faster: address translation, not a stream")
    if ratio is None:
        # the page size's time alone is not enough: a 1 GiB chase on the busy guest ran only 13 % faster
        # with huge pages (PAGES_SENSITIVE not reached) and referenced 4 KiB pages at 48 % of a stream's
        # rate, yet 2 MiB pages 5.5 times as fast
        against.append("its pages' rate with huge pages was not read, so nothing shows that it touches every byte "
                       "of its pages (" + (pg.get("why") or "the page size did not change for it: its anonymous "
                                                             "memory in huge pages was the same either way"
                                           if not pg.get("taken") else "its run with the other page size gave none: "
                                                                       "too few windows, or a lower bound") + ")")
    return {"ok": not against, "words": words, "against": against}


def _size(n: Optional[float]) -> str:
    if n is None:
        return "unknown"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _gbs(x: Optional[float]) -> str:
    """Bytes per second of CPU time, as "N GB/s" (read with "on a CPU": per second the program ran)."""
    return "unknown" if x is None else f"{x / 1e9:.3g} GB/s"
