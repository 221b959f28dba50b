"""What `ceiling profile` costs the program it watches (issue 14): a program making
10^5 intercepted calls per second per thread (goal: at most 3 % slower) and an MPI
barrier loop like osu_barrier (goal: at most 10 % slower; ARM Performance Reports
made it 26x slower). The cost of one intercepted call is interpose_overhead.py's.

    PYTHONPATH=src .venv/bin/python benchmarks/profile_overhead.py [--rounds 7] \
        [--only rate|barrier] [--threads 1,2] [--iterations 200000] [--period-us 10] \
        [--barrier-iterations 2000000] [--barrier-warmup 1000] [--lib PATH] \
        [--ceiling CMD] [--cc cc] [--mpicc PATH] [--mpiexec PATH]

Three ways of running the same program, interleaved in every round (the order
rotating from round to round, so none is always first after a pause):
  - plain: the program alone;
  - profile: `ceiling profile --no-store --save-json F -- PROGRAM`, the whole verb
    (the /proc sampler on its thread in ceiling's process, the interposer preloaded,
    the records read back), with CEILING_INTERPOSE_LIB set to --lib so that it
    preloads the same library as the next way;
  - preload: the interposer alone, LD_PRELOAD=LIB with CEILING_INTERPOSE_OUT set as
    profile.py sets it (counting, a record per process), no sampler.

Rate: profile_overhead_rate.c, compiled with --cc into the temporary directory.
T threads (--threads, default 1 and 2), each doing a fixed amount of work, not a
fixed time: --iterations times a 1-byte write to /dev/null, then a block of pure
computation. The block is calibrated once, before the first round, so that one
iteration takes --period-us (10 us: 10^5 calls/s per thread) uninstrumented;
every run then does the same steps (a run that calibrated itself under a
profiler would do less work and hide the slowdown). Compared: the program's own
elapsed time, from before its first thread starts to after its last one ends.
Beside it, the process's wall time from exec to exit (for profile, ceiling's own
figure in its JSON) and, in a note, what the verb costs around the program
(Python's start, the per-call cost ceiling measures before the program, the report).

Barrier: osu_barrier_like.c, compiled with --mpicc (default the venv's MPICH
mpicc) and launched as --mpiexec -n 2 (default the venv's mpiexec: the launcher
must belong to the library mpicc links). Compared: the mean microseconds per
MPI_Barrier over the timed loop (after a warm-up), averaged over the ranks as
OSU's "Avg Latency(us)". OSU times 1000 barriers; the default here is 2,000,000
(about a second where a barrier takes 0.4 us), so that the loop spans many of the
sampler's readings (every 0.1 s) and what they cost is in the figure. The preload way puts the interposer into the ranks
only (`mpiexec -n 2 env LD_PRELOAD=LIB CEILING_INTERPOSE_OUT=... ./barrier`);
profile puts it into the launcher and its proxies too, as a user would run it.

Checked before anything is compared: every run exits 0; the rate program made
every write (each returned 1), made T x iterations calls, and its checksum of
the computation equals the other runs' of that T; the barrier program's ranks
each completed every barrier without an error, in a job of 2 ranks; a profile
run's JSON says the interposer was preloaded (and, for rate, counted at least
the program's writes); a preload run left a record per process (rate: the
writes counted; barrier: one per rank). Otherwise one line and exit 1, as for a
failed build. Goals not met do not change the exit status: this measures.

Per way: the median over rounds and the range (min-max); the ratio of medians
to plain, and best/best (each way's fastest round: what it costs when the
machine lets it). The tables are Markdown, to paste into an issue. Fewer than 5
rounds is a trial, not a figure. Everything is written in a temporary directory,
removed at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WAYS = ("plain", "profile", "preload")
LABEL = {"plain": "plain", "profile": "ceiling profile", "preload": "LD_PRELOAD interposer"}
RATE_GOAL, BARRIER_GOAL = 0.03, 0.10
RANKS = 2
MIN_ROUNDS = 5


class Failed(Exception):
    """A build or a run failed, or a run's output did not check out: one line, exit 1."""


# -- running ---------------------------------------------------------------------------

def base_env() -> Dict[str, str]:
    """The caller's environment without the interposer's variables, so that plain is plain.
    As root, Open MPI's mpiexec refuses to start without its two consent variables; MPICH
    ignores them."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CEILING_INTERPOSE_OUT")}
    if os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


def execute(what: str, cmd: Sequence[str], env: Dict[str, str], timeout: float) -> Tuple[str, float]:
    """(standard output, wall seconds) of a command that must exit 0."""
    t0 = time.monotonic()
    try:
        r = subprocess.run(list(cmd), env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failed(f"{what}: still running after {timeout:.0f} s: {shlex.join(cmd)}") from None
    except OSError as e:
        raise Failed(f"{what}: {cmd[0]}: {e.strerror}") from None
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise Failed(f"{what} failed (exit {r.returncode}): {shlex.join(cmd)}: {telling(r.stderr + r.stdout)}")
    return r.stdout, wall


def telling(text: str) -> str:
    """The line of a failed command's output that says most: the last naming an error, else the
    last with words (launchers end theirs with rules of dashes and exit codes)."""
    lines = [" ".join(x.split()) for x in text.splitlines() if re.search(r"[A-Za-z]", x)]
    errors = [x for x in lines if re.search(r"error|abort|fail|unsupported|not found|cannot|denied", x, re.I)]
    return (errors or lines or ["no output"])[-1]


def build(compiler: str, source: str, exe: Path, flags: Sequence[str], env: Dict[str, str]) -> None:
    try:
        execute(f"build of {source}", [compiler, "-O2", *flags, "-o", str(exe), str(HERE / source)], env, 300)
    except Failed as e:
        raise Failed(f"build failed: {e}") from None


def fields(text: str, first: Optional[str] = None) -> Dict[str, str]:
    """key=value words of the last line that has them (and starts with ``first``)."""
    for line in reversed(text.splitlines()):
        words = line.split()
        if first is not None and (not words or words[0] != first):
            continue
        kv = dict(w.split("=", 1) for w in words if "=" in w)
        if kv:
            return kv
    return {}


def profile_doc(what: str, path: Path) -> dict:
    """The profile run's JSON, refused unless the program exited 0 and the interposer was in it."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise Failed(f"{what}: no JSON from ceiling profile at {path}: {e}") from None
    app = doc.get("application") or {}
    ip = ((doc.get("application") or {}).get("profile") or {}).get("interposer") or {}
    if app.get("exit_status") != 0:
        raise Failed(f"{what}: ceiling profile says the program ended with {app.get('exit_status')!r}"
                     f"{' (' + app['signal'] + ')' if app.get('signal') else ''}")
    if not ip.get("used"):
        raise Failed(f"{what}: ceiling profile did not preload the interposer: {ip.get('why', 'no reason given')}")
    return doc


def records(what: str, rundir: Path, parse) -> List[dict]:
    """The preload run's records, one per process: every process writes its own file, and a
    process that wrote a checkpoint (reason=checkpoint, the MPI module at MPI_Finalize) wrote a
    later record that supersedes it, so the last of each pid is kept."""
    last: Dict[object, dict] = {}
    for f in sorted(rundir.glob("interpose.*")):
        for i, r in enumerate(parse(f.read_text(errors="replace"))):
            last[r.get("process", {}).get("pid", (f.name, i))] = r
    if not last:
        raise Failed(f"{what}: the interposer left no record in {rundir}: it was not loaded or did not count")
    return list(last.values())


def posix_writes(recs: List[dict]) -> int:
    """The write calls counted: to a file (class write) or, as here to /dev/null, to anything else
    (other_write)."""
    return sum(int(line.get("calls", 0)) for r in recs for line in r.get("lines", {}).get("posix", [])
               if line.get("class") in ("write", "other_write"))


def enabled_modules(recs: List[dict]) -> List[str]:
    return sorted({n for r in recs for n, m in r.get("modules", {}).items() if m.get("enabled", 1) == 1})


def rotated(rnd: int) -> Tuple[str, ...]:
    k = rnd % len(WAYS)
    return WAYS[k:] + WAYS[:k]


class Setup:
    """What every run needs: the library, ceiling's command, the parser, the temporary directory."""

    def __init__(self, lib: Path, ceiling: List[str], parse, tmp: Path, timeout: float) -> None:
        self.lib, self.ceiling, self.parse, self.tmp, self.timeout = lib, ceiling, parse, tmp, timeout
        self.runs = 0
        self.modules: Dict[str, List[str]] = {}

    def rundir(self) -> Path:
        self.runs += 1
        d = self.tmp / f"run{self.runs}"
        d.mkdir()
        return d

    def profile_cmd(self, rundir: Path, argv: Sequence[str]) -> Tuple[List[str], Dict[str, str]]:
        env = dict(base_env(), CEILING_INTERPOSE_LIB=str(self.lib))
        return [*self.ceiling, "profile", "--no-store", "--save-json", str(rundir / "profile.json"), "--",
                *argv], env

    def preload_vars(self, rundir: Path) -> Dict[str, str]:
        return {"LD_PRELOAD": str(self.lib), "CEILING_INTERPOSE_OUT": str(rundir / "interpose.%p")}


# -- rate: 10^5 intercepted calls per second per thread -----------------------------------

def calibrate(exe: Path, period_us: float) -> Dict[str, float]:
    out, _ = execute("calibration", [str(exe), "calibrate", str(int(period_us * 1000))], base_env(), 120)
    f = fields(out)
    try:
        return {"write_ns": float(f["write_ns"]), "spin_ns": float(f["spin_ns"]), "spin": int(f["spin"]),
                "iteration_ns": float(f["iteration_ns"])}
    except (KeyError, ValueError):
        raise Failed(f"calibration printed no figures: {out.strip()!r}") from None


def rate_run(s: Setup, exe: Path, way: str, threads: int, iterations: int, spin: int,
             checksums: Dict[int, str]) -> Dict[str, float]:
    """One run: {"elapsed": the program's own seconds, "process": exec to exit, "rate", "verb"}."""
    what = f"rate, {threads} thread(s), {LABEL[way]}"
    rundir = s.rundir()
    argv = [str(exe), "run", str(threads), str(iterations), str(spin)]
    env = base_env()
    if way == "profile":
        argv, env = s.profile_cmd(rundir, argv)
    elif way == "preload":
        env.update(s.preload_vars(rundir))
    out, wall = execute(what, argv, env, s.timeout)
    f = fields(out)
    calls = threads * iterations
    if f.get("failed") != "0" or f.get("calls") != str(calls) or "elapsed_s" not in f:
        raise Failed(f"{what}: the program did not make its {calls} writes: {out.strip()!r}")
    if checksums.setdefault(threads, f["checksum"]) != f["checksum"]:
        raise Failed(f"{what}: checksum {f['checksum']}, other runs {checksums[threads]}: not the same work")
    row = {"elapsed": float(f["elapsed_s"]), "rate": float(f["rate_per_thread"]), "process": wall}
    if way == "profile":
        doc = profile_doc(what, rundir / "profile.json")
        counted = doc["application"]["overhead"].get("calls", 0)       # every POSIX and stdio call
        if counted < calls:
            raise Failed(f"{what}: ceiling profile counted {counted} calls, the program made {calls} writes")
        row["process"], row["verb"] = float(doc["application"]["wall_s"]), wall
        s.modules["rate profile"] = doc["application"]["profile"]["interposer"].get("modules", [])
    elif way == "preload":
        recs = records(what, rundir, s.parse)
        if posix_writes(recs) < calls:
            raise Failed(f"{what}: the interposer counted {posix_writes(recs)} writes, the program made {calls}")
        s.modules["rate preload"] = enabled_modules(recs)
    shutil.rmtree(rundir)
    return row


def rate(s: Setup, a: argparse.Namespace) -> List[str]:
    exe = s.tmp / "profile_overhead_rate"
    build(a.cc, "profile_overhead_rate.c", exe, ["-pthread"], base_env())
    cal = calibrate(exe, a.period_us)
    data: Dict[int, Dict[str, List[Dict[str, float]]]] = {t: {w: [] for w in WAYS} for t in a.threads}
    checksums: Dict[int, str] = {}
    for rnd in range(a.rounds):
        for t in a.threads:
            for way in rotated(rnd):
                print(f"rate: round {rnd + 1}/{a.rounds}, {t} thread(s), {LABEL[way]} ...", file=sys.stderr,
                      flush=True)
                data[t][way].append(rate_run(s, exe, way, t, a.iterations, int(cal["spin"]), checksums))
    out = [f"### A program making 10^5 intercepted calls per second per thread (goal: at most "
           f"{RATE_GOAL:.0%} slower)", "",
           f"{a.iterations} iterations per thread of a 1-byte write to /dev/null and {int(cal['spin'])} steps of "
           f"computation, calibrated before the first round for {a.period_us:g} us per iteration (a write "
           f"{cal['write_ns']:.0f} ns in a loop of writes, a step {cal['spin_ns']:.3f} ns; an iteration "
           f"{cal['iteration_ns'] / 1000:.2f} us, best of 5); {a.rounds} rounds. Elapsed: the "
           f"program's own clock around its threads; process: exec to exit (ceiling profile: its own "
           f"application wall time).", "",
           "| threads | way | elapsed s, median | min-max | median / plain | best / best | calls/s per thread, "
           "median | process s, median (/ plain) |",
           "|---:|---|---:|---:|---:|---:|---:|---:|"]
    verdicts, verb = [], []
    for t in a.threads:
        el = {w: [r["elapsed"] for r in data[t][w]] for w in WAYS}
        proc = {w: statistics.median(r["process"] for r in data[t][w]) for w in WAYS}
        for w in WAYS:
            med, best = statistics.median(el[w]), min(el[w])
            out.append(f"| {t} | {LABEL[w]} | {med:.4f} | {min(el[w]):.4f}-{max(el[w]):.4f} | "
                       f"{med / statistics.median(el['plain']):.3f} | {best / min(el['plain']):.3f} | "
                       f"{statistics.median(r['rate'] for r in data[t][w]):,.0f} | "
                       f"{proc[w]:.4f} ({proc[w] / proc['plain']:.3f}) |")
        verdicts += [verdict(f"{t} thread(s), {LABEL[w]}", el[w], el["plain"], RATE_GOAL) for w in WAYS[1:]]
        verb.append(f"{t} thread(s) {statistics.median(r['verb'] for r in data[t]['profile']):.3f} s "
                    f"(program {proc['profile']:.3f} s)")
    out += ["", *verdicts, "",
            "The whole `ceiling profile` command, median (Python's start, the per-call cost measured "
            "before the program, the report): " + "; ".join(verb) + "."]
    return out


# -- barrier: a loop like osu_barrier -------------------------------------------------------

def barrier_run(s: Setup, exe: Path, way: str, mpiexec: str, iterations: int, warmup: int) -> float:
    """One run: the mean microseconds per barrier, averaged over the ranks."""
    what = f"barrier, {LABEL[way]}"
    rundir = s.rundir()
    prog = [str(exe), str(iterations), str(warmup)]
    env = dict(base_env(), CEILING_BARRIER_RANKS=str(RANKS))
    argv = [mpiexec, "-n", str(RANKS), *prog]
    if way == "profile":
        argv, penv = s.profile_cmd(rundir, argv)
        env.update(penv)
    elif way == "preload":
        argv = [mpiexec, "-n", str(RANKS), "env", *(f"{k}={v}" for k, v in s.preload_vars(rundir).items()), *prog]
    out, _ = execute(what, argv, env, s.timeout + iterations * 1e-4)
    f = fields(out, "result")
    if (f.get("ranks") != str(RANKS) or f.get("failed") != "0" or f.get("done_min") != str(iterations)
            or f.get("done_max") != str(iterations) or "avg_us" not in f):
        raise Failed(f"{what}: the barrier loop did not complete {iterations} barriers on {RANKS} ranks: "
                     f"{out.strip().splitlines()[-1:]!r}")
    if way == "profile":
        ip = profile_doc(what, rundir / "profile.json")["application"]["profile"]["interposer"]
        if ip.get("records", 0) < RANKS:
            raise Failed(f"{what}: ceiling profile read {ip.get('records', 0)} record(s), fewer than the ranks")
        s.modules["barrier profile"] = ip.get("modules", [])
    elif way == "preload":
        recs = records(what, rundir, s.parse)
        ranks = [r for r in recs if str(r.get("process", {}).get("exe", "")).endswith("/" + exe.name)]
        if len(ranks) != RANKS:
            raise Failed(f"{what}: {len(ranks)} record(s) from the ranks, expected {RANKS}")
        s.modules["barrier preload"] = enabled_modules(ranks)
    shutil.rmtree(rundir)
    return float(f["avg_us"])


def mpi_version(mpiexec: str) -> str:
    try:
        text = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30,
                              env=base_env()).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "version unknown"
    line = next((x for x in text.splitlines() if re.search(r"\d+\.\d+", x)), "version unknown")
    return " ".join(line.split())


def barrier(s: Setup, a: argparse.Namespace) -> List[str]:
    for tool in (a.mpicc, a.mpiexec):
        if not (shutil.which(tool) or Path(tool).is_file()):
            raise Failed(f"build failed: no {tool} (--mpicc/--mpiexec; the venv's come with the mpich wheel)")
    exe = s.tmp / "osu_barrier_like"
    build(a.mpicc, "osu_barrier_like.c", exe, [], base_env())
    data: Dict[str, List[float]] = {w: [] for w in WAYS}
    for rnd in range(a.rounds):
        for way in rotated(rnd):
            print(f"barrier: round {rnd + 1}/{a.rounds}, {LABEL[way]} ...", file=sys.stderr, flush=True)
            data[way].append(barrier_run(s, exe, way, a.mpiexec, a.barrier_iterations, a.barrier_warmup))
    out = [f"### A barrier loop like osu_barrier (goal: at most {BARRIER_GOAL:.0%} slower)", "",
           f"{RANKS} ranks, {a.barrier_warmup} barriers of warm-up, then {a.barrier_iterations} timed; "
           f"{a.mpicc} and {a.mpiexec} ({mpi_version(a.mpiexec)}); {a.rounds} rounds. The figure is OSU's "
           f"Avg Latency: each rank's mean us per MPI_Barrier, averaged over the ranks.", "",
           "| way | us per barrier, median | min-max | median / plain | best / best |",
           "|---|---:|---:|---:|---:|"]
    for w in WAYS:
        med, best = statistics.median(data[w]), min(data[w])
        out.append(f"| {LABEL[w]} | {med:.3f} | {min(data[w]):.3f}-{max(data[w]):.3f} | "
                   f"{med / statistics.median(data['plain']):.3f} | {best / min(data['plain']):.3f} |")
    return out + ["", *(verdict(LABEL[w], data[w], data["plain"], BARRIER_GOAL) for w in WAYS[1:])]


# -- report ------------------------------------------------------------------------------

def verdict(name: str, way: List[float], plain: List[float], goal: float) -> str:
    """The goal is judged on the ratio of medians; best/best is given beside it."""
    med = statistics.median(way) / statistics.median(plain) - 1
    best = min(way) / min(plain) - 1
    return (f"- {name}: {med:+.1%} by the medians, {best:+.1%} best/best: "
            f"{'met' if med <= goal else 'NOT met'} (goal +{goal:.0%})")


def header(a: argparse.Namespace, lib: Path, ceiling: List[str]) -> List[str]:
    model = "unknown CPU"
    try:
        model = next(x.split(":", 1)[1].strip() for x in Path("/proc/cpuinfo").read_text().splitlines()
                     if x.startswith("model name"))
    except (OSError, StopIteration):
        pass
    lines = [f"## ceiling profile overhead, {time.strftime('%Y-%m-%d %H:%M %Z')}, {platform.node()}", "",
             f"{model}, {len(os.sched_getaffinity(0))} CPUs allowed, kernel {platform.release()}, "
             f"load average {os.getloadavg()[0]:.2f} at the start", "",
             f"interposer {lib}; ceiling `{shlex.join(ceiling)}`; ways interleaved in each round, the order "
             f"rotating."]
    if a.rounds < MIN_ROUNDS:
        lines.append(f"Only {a.rounds} round(s): a trial of the script, not figures (at least {MIN_ROUNDS}).")
    return lines


def main() -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from ceiling import core
    from ceiling.probes.interpose_record import parse

    venv = ROOT / ".venv" / "bin"
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", type=Path, default=core.interpose_library_path(),
                    help="the interposer (default: CEILING_INTERPOSE_LIB, else the installed one)")
    ap.add_argument("--ceiling", default=str(venv / "ceiling") if (venv / "ceiling").exists() else "ceiling",
                    help="how to run ceiling, split as a shell would (default: the repo's .venv/bin/ceiling)")
    ap.add_argument("--rounds", type=int, default=7, help=f"rounds, ways interleaved (at least {MIN_ROUNDS} "
                                                          "for figures)")
    ap.add_argument("--only", choices=("rate", "barrier"), help="one of the two benchmarks")
    ap.add_argument("--threads", default="1,2", help="thread counts of the rate program (default 1,2)")
    ap.add_argument("--iterations", type=int, default=200000, help="write+compute iterations per thread")
    ap.add_argument("--period-us", type=float, default=10.0, help="one iteration, uninstrumented (10: 10^5/s)")
    ap.add_argument("--cc", default="cc", help="C compiler for the rate program")
    ap.add_argument("--mpicc", default=str(venv / "mpicc"), help="MPI compiler wrapper (default: the venv's)")
    ap.add_argument("--mpiexec", default=str(venv / "mpiexec"),
                    help="launcher of the MPI library --mpicc links (default: the venv's)")
    ap.add_argument("--barrier-iterations", type=int, default=2000000,
                    help="timed barriers per run (default 2,000,000: about a second at 0.4 us each, so that "
                         "the sampler's 0.1 s readings fall inside the loop)")
    ap.add_argument("--barrier-warmup", type=int, default=1000, help="untimed barriers before them")
    ap.add_argument("--timeout", type=float, default=300, help="seconds one run may take")
    a = ap.parse_args()
    try:
        a.threads = [int(t) for t in a.threads.split(",")]
    except ValueError:
        ap.error(f"--threads {a.threads!r}: a comma-separated list of numbers")
    if a.rounds < 1 or a.iterations < 1 or a.barrier_iterations < 1 or a.barrier_warmup < 0 or \
            a.period_us <= 0 or min(a.threads) < 1:
        ap.error("--rounds, --iterations, --barrier-iterations, --period-us and --threads must be positive")
    if not a.lib.is_file():
        print(f"profile_overhead.py: build failed: no interposer at {a.lib} (--lib or CEILING_INTERPOSE_LIB)",
              file=sys.stderr)
        return 1
    ceiling = shlex.split(a.ceiling)
    report = header(a, a.lib, ceiling)
    try:
        with tempfile.TemporaryDirectory(prefix="ceiling-profile-overhead-") as d:
            # the records in the reader's dict form (interpose_lines.Record.as_dict), as this script reads them
            s = Setup(a.lib.resolve(), ceiling, lambda text: [r.as_dict() for r in parse(text)], Path(d), a.timeout)
            if a.only in (None, "rate"):
                report += ["", *rate(s, a)]
            if a.only in (None, "barrier"):
                report += ["", *barrier(s, a)]
    except Failed as e:
        print(f"profile_overhead.py: {e}", file=sys.stderr)
        return 1
    report += ["", "Interposer modules enabled: " + "; ".join(f"{k}: {', '.join(v) or 'none'}"
                                                              for k, v in s.modules.items()) + ".",
               f"Load average {os.getloadavg()[0]:.2f} at the end."]
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
