"""The application section of an HTML report (a run of ``ceiling profile``): how the
program ended, where its threads' time went (a bar split three ways, min / mean /
max over threads), its I/O calls by class, its MPI time per rank with the calls
and message sizes that took it, and what profiling cost."""
from __future__ import annotations

from html import escape as esc
from typing import Dict, List

from ..results.model import Run
from ..results.profile import Profile
from ..results.profile_mpi import Mpi
from ..results.profile_run import Files, IoClass
from .terminal_profile import (FILE_HEADS, _n, ceiling_text, cost_text, file_cells, file_notes, mpi_headline,
                               mpi_rank_rows, rank_cpu, regions_text, signals_text, supervisors_text,
                               wrapped_text)

SPLIT = (("on_cpu", "on a CPU", "#1f77b4"), ("runq", "waiting for a CPU", "#d62728"),
         ("off_cpu", "off any CPU", "#bdbdbd"))


def bound_lead(run: Run) -> str:
    """The summary's lead for a profiled program: its first bound, or "" when none."""
    if not run.application or not run.analysis.bounds:
        return ""
    b = run.analysis.bounds[0]
    share = f" ({b.share:.0%} of the time)" if b.share is not None else ""
    return f"<strong>Bound: {esc(b.bound)}{esc(share)}</strong> - {esc(b.evidence)}"


def application_section(run: Run) -> str:
    """The section, or "" for a run that profiled no program."""
    app = run.application
    if app is None:
        return ""
    prof = app.profile or Profile()
    ended = (f"killed by {app.signal}" if app.signal else
             f"exit {app.exit_status}" if app.exit_status is not None else "did not finish")
    wall = f" after {app.wall_s:.3g} s" if app.wall_s is not None else ""
    facts = [("Command", " ".join(app.command)), ("Ended", ended + wall)]
    if signals_text(prof.launch):
        facts.append(("Signals", signals_text(prof.launch)))
    if prof.launchers:
        facts.append(("Left out", ", ".join(prof.launchers) + " (only started and waited for the others)"))
    if prof.supervisors:
        facts.append(("Left out", supervisors_text(prof.supervisors)))
    parts: List[str] = ['<dl class="facts">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
                        + "</dl>"]
    parts.append(_split(prof))
    parts.append(_io_table(prof))
    parts.append(_files(prof.files))
    parts.append(_mpi(prof.mpi))
    if prof.regions or prof.regions_lost:
        parts.append("<h3>Regions (ceiling_region_begin/end)</h3><ul>"
                     + "".join(f"<li>{esc(t)}</li>" for t in regions_text(prof)) + "</ul>")
    if prof.wrapped:
        parts.append(f'<p class="hint">{esc(wrapped_text(prof))}</p>')
    if prof.ceilings:
        parts.append("<h3>Against this node's ceilings</h3><ul>"
                     + "".join(f"<li>{esc(ceiling_text(c))}</li>" for c in prof.ceilings) + "</ul>")
    if len(run.analysis.bounds) > 1:
        parts.append("<h3>Bounds</h3><ul>" + "".join(
            f"<li><strong>{esc(b.bound)}</strong>"
            + (f" ({b.share:.0%})" if b.share is not None else "") + f" - {esc(b.evidence)}</li>"
            for b in run.analysis.bounds) + "</ul>")
    parts.append(f'<p class="hint">{esc(cost_text(run, prof))}</p>')
    from .html_trace import timeline_section          # ceiling trace's time line, from what its run keeps
    return f'<section id="application"><h2>Application</h2>{"".join(parts)}</section>' + timeline_section(run)


def _split(prof: Profile) -> str:
    shares = prof.shares
    if not shares:
        return "<p>Where the time went: unknown (the program ended before the first sample of /proc).</p>"
    bar = "".join(f'<span title="{esc(words)} {_n(getattr(shares, k), ".1%")}" style="display:inline-block;'
                  f'height:18px;width:{max(0.0, getattr(shares, k) or 0.0) * 100:.2f}%;background:{color}"></span>'
                  for k, words, color in SPLIT)
    per = prof.per_thread

    def spread(k: str, s: str) -> float:
        p = getattr(per, k) if per else None
        return getattr(p, s) if p else 0

    rows = "".join(
        f'<tr><td><span style="display:inline-block;width:10px;height:10px;background:{color}"></span> '
        f'{esc(words)}</td><td class="n">{_n(getattr(shares, k), ".0%")}</td>'
        + "".join(f'<td class="n">{_n(spread(k, s), ".0%")}</td>' for s in ("min", "mean", "max"))
        + "</tr>" for k, words, color in SPLIT)
    n = prof.threads or 0
    return (f"<h3>Where the time went</h3><p>{prof.thread_seconds or 0:.3g} thread-seconds over {n} "
            f"thread{'s' if n != 1 else ''}.</p>"
            f'<div style="width:100%;max-width:720px;border:1px solid #9e9e9e;line-height:0">{bar}</div>'
            '<table><thead><tr><th></th><th class="n">share</th><th class="n">thread min</th>'
            f'<th class="n">mean</th><th class="n">max</th></tr></thead><tbody>{rows}</tbody></table>')


# the classes of analysis/profile_io.io_calls, in order: storage (copy: copy_file_range and sendfile
# between files), then the calls on pipes, terminals, sockets and /dev/null, which are not storage
IO_ROWS = (("read", "read"), ("write", "write"), ("meta", "meta"), ("sync", "sync"), ("copy", "copy"),
           ("other", "other (pipes, terminals, sockets, /dev/null: not storage)"))


def _io_table(prof: Profile) -> str:
    io: Dict[str, IoClass] = prof.io_calls
    if not io:
        ip = prof.interposer
        return (f"<p>I/O calls were not counted: {esc(str(ip.why))}.</p>" if ip and not ip.used
                else "")
    rows = []
    for cls, label in IO_ROWS:
        x = io.get(cls)
        if not x or not x.calls:
            continue
        size = f"{x.bytes / x.calls / 1024:.3g} KiB" if cls in ("read", "write", "copy") and x.calls else "-"
        rows.append(f'<tr><td>{esc(label)}</td><td class="n">{x.calls}</td><td class="n">{x.errors}</td>'
                    f'<td class="n">{x.bytes / 1e6:.4g}</td><td class="n">{size}</td>'
                    f'<td class="n">{x.ns / 1e9:.3g}</td></tr>')
    if not rows:
        return "<h3>I/O calls (POSIX and stdio)</h3><p>No file I/O calls were made.</p>"
    return ('<h3>I/O calls (POSIX and stdio)</h3><table><thead><tr><th>class</th><th class="n">calls</th>'
            '<th class="n">errors</th><th class="n">MB</th><th class="n">per call</th><th class="n">seconds</th>'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _files(files: "Files | None") -> str:
    shown = files.shown if files else []
    if not shown:
        return ""
    rows = "".join("<tr>" + "".join(f'<td class="n">{esc(c)}</td>' for c in file_cells(f))
                   + f'<td style="word-break:break-all">{esc(f.path)}</td></tr>' for f in shown)
    notes = "".join(f'<p class="hint">{esc(n)}.</p>' for n in file_notes(files, len(shown)))
    return ("<h3>Files</h3><p>By time inside their open, read, write, fsync and close calls, all processes of a node "
            "together. "
            "Calls: the program's read and write calls (POSIX and stdio); requests: those that reached the kernel "
            "(what a stdio stream's buffer sent, estimated from the buffer), KiB/req their mean size. "
            "Random: calls that did not start where the previous one ended; unaligned: calls that started "
            "off the file system's block (st_blksize).</p><table><thead><tr>"
            + "".join(f'<th class="n">{esc(h)}</th>' for h in FILE_HEADS)
            + f"<th>path</th></tr></thead><tbody>{rows}</tbody></table>{notes}")


def _mpi(mpi: "Mpi | None") -> str:
    if not mpi:
        return ""
    rows = []
    for r in mpi_rank_rows(mpi):
        g = r.groups
        share = r.mpi_s / r.run_s if r.run_s and r.mpi_s is not None else None
        rows.append(f'<tr><td class="n">{r.rank}</td><td>{esc(str(r.host))}</td>'
                    f'<td class="n">{_n(r.run_s, ".3g")}</td><td class="n">{_n(share, ".0%")}</td>'
                    + "".join(f'<td class="n">{_n(g.get(k, 0), ".3g")}</td>' for k in ("p2p", "wait", "coll", "io"))
                    + "".join(f'<td class="n">{v}</td>' for v in rank_cpu(r)) + "</tr>")
    fns = "".join(f'<tr><td>{esc(f.fn)}</td><td class="n">{f.calls}</td><td class="n">{f.ns / 1e9:.3g}</td>'
                  f'<td class="n">{(f.bytes / f.calls / 1024 if f.calls else 0):.3g}</td></tr>'
                  for f in mpi.functions[:12])
    return (f"<h3>MPI</h3><p>{esc(mpi_headline(mpi))}.</p>"
            '<table><thead><tr><th class="n">rank</th><th>host</th><th class="n">run s</th><th class="n">in MPI</th>'
            '<th class="n">point-to-point s</th><th class="n">waiting s</th><th class="n">collectives s</th>'
            '<th class="n">MPI-IO s</th><th class="n">on a CPU</th><th class="n">waiting for a CPU</th>'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            '<table><thead><tr><th>call (all ranks)</th><th class="n">calls</th><th class="n">seconds</th>'
            f'<th class="n">KiB per call</th></tr></thead><tbody>{fns}</tbody></table>' + _sizes(mpi))


def _sizes(mpi: Mpi) -> str:
    """Calls and time by message size, for blocking point-to-point and collectives."""
    from ..analysis.profile_mpi import BUCKETS
    hist = mpi.hist
    kinds = [k for k in ("p2p", "coll") if k in hist]
    if not kinds:
        return ""
    names = {"p2p": "point-to-point", "coll": "collectives"}
    rows = []
    for i, b in enumerate(BUCKETS):
        cells = [((hist[k].hist or [0] * len(BUCKETS))[i], (hist[k].hist_ns or [0] * len(BUCKETS))[i])
                 for k in kinds]
        if any(c for c, _ in cells):
            rows.append(f"<tr><td>{esc(b)}</td>" + "".join(f'<td class="n">{c}</td><td class="n">{ns / 1e9:.3g}</td>'
                                                            for c, ns in cells) + "</tr>")
    head = "".join(f'<th class="n">{names[k]} calls</th><th class="n">seconds</th>' for k in kinds)
    return (f"<table><thead><tr><th>message size</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
