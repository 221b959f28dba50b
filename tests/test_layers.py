"""The package's layers, checked on its source: imports run one way only, from the
top (cli, verbs) down to the bottom (errors, results, machine), never back up, and
no module is part of an import circle; no module reads another package's private
names (``from ceiling.x import _y``, ``from ceiling.x._y import z``, ``x._y``); and
no source file grows past about 500 lines without saying why in its docstring.

Function-level imports count (they are how a layer reaches up when it should
not); imports under ``if TYPE_CHECKING:`` do not (they are annotations only).
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "ceiling"
CSRC = Path(__file__).resolve().parents[1] / "csrc"

# Rank of each top-level part of the package: an import may go to the same rank or lower.
RANK = {
    "errors": 0, "region": 0, "units": 1, "sysfs": 1, "files": 1, "core": 2, "results": 2, "machine": 3,
    "probes": 4,
    "checks": 5, "bench": 5, "cluster": 5, "observe": 5, "experiments": 5, "profile": 5, "trace": 5,
    "analysis": 6,
    "report": 7,
    "verbs": 8,
    "cli": 9, "__main__": 10, "__init__": 0,
}
# Among the measurements (rank 5), the directions allowed: a bench uses MPI through cluster/;
# observing a program reads the competing load as the load check does (checks/load.py); an
# experiment is the program observed again and again (observe/).
SIDEWAYS = {("bench", "cluster"), ("observe", "checks"), ("experiments", "observe")}
LONG_MARK = "Longer than 500 lines"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> List[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)]
        base = ".".join(pkg + ([node.module] if node.module else []))
    if not base.startswith("ceiling"):
        return []
    if node.module is None or base.count(".") < 2:
        # "from . import core" / "from .. import machine": the names are modules
        return [f"{base}.{a.name}" for a in node.names]
    return [base]


def _type_checking_lines(tree: ast.AST) -> Set[int]:
    lines: Set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            for sub in n.body:
                for x in ast.walk(sub):
                    if hasattr(x, "lineno"):
                        lines.add(x.lineno)
    return lines


@functools.lru_cache(maxsize=1)
def _graph() -> Dict[str, Set[str]]:
    """Every module's imports of ceiling modules (built once, by the first test that asks: not when
    the file is collected, which every pytest process does)."""
    edges: Dict[str, Set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        mod = _module_name(path)
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_lines(tree)
        out: Set[str] = set()
        for n in ast.walk(tree):
            if getattr(n, "lineno", None) in skip:
                continue
            if isinstance(n, ast.ImportFrom):
                out.update(_resolve(mod, path.name == "__init__.py", n))
            elif isinstance(n, ast.Import):
                out.update(a.name for a in n.names if a.name.startswith("ceiling"))
        edges[mod] = {t for t in out if t != mod}
    return edges


def _part(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _known(graph: Dict[str, Set[str]], target: str) -> str:
    """The module ``target`` names (an attribute of a module resolves to the module)."""
    while target and target not in graph:
        target = target.rpartition(".")[0]
    return target


def test_every_part_has_a_rank():
    parts = {_part(m) for m in _graph()}
    assert not parts - set(RANK), f"give these a layer in RANK: {sorted(parts - set(RANK))}"


def test_imports_never_run_up_the_layers():
    graph = _graph()
    bad = []
    for mod, targets in graph.items():
        a = _part(mod)
        for t in targets:
            t = _known(graph, t)
            if not t:
                continue
            b = _part(t)
            if a == b or (a, b) in SIDEWAYS:
                continue
            if RANK[b] > RANK[a] or (RANK[b] == RANK[a] and a != "__init__"):
                bad.append(f"{mod} -> {t}")
    assert not bad, "imports against the layers:\n" + "\n".join(sorted(bad))


def test_no_import_circle():
    graph = {m: {_known(_graph(), t) for t in ts} - {""} for m, ts in _graph().items()}
    # A package's __init__ importing its own modules is how a package presents itself, not a circle.
    for m in graph:
        graph[m] = {t for t in graph[m] if not (t.startswith(m + ".") or m.startswith(t + ".") and _is_pkg(t))}
    seen: Dict[str, int] = {}
    stack: List[str] = []
    cycles: List[Tuple[str, ...]] = []

    def visit(m: str) -> None:
        seen[m] = 1
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if seen.get(t) == 1:
                cycles.append(tuple(stack[stack.index(t):]) + (t,))
            elif t not in seen:
                visit(t)
        stack.pop()
        seen[m] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m)
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_reads(path: Path) -> List[str]:
    """What the module at ``path`` reads of other packages' private names: a private module or
    name imported (``from ..x._y import z``, ``from ..x import _y``) or an attribute read through
    an imported module (``x._y``). A package's own modules share its private names."""
    mod = _module_name(path)
    tree = ast.parse(path.read_text(), str(path))
    modules: Dict[str, str] = {}             # local name -> the ceiling module it stands for
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            if n.level == 0:
                base = n.module or ""
            else:
                pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
                base = ".".join(pkg[: len(pkg) - (n.level - 1)] + ([n.module] if n.module else []))
            if not base.startswith("ceiling"):
                continue
            for a in n.names:
                full = f"{base}.{a.name}"
                if _part(full) == _part(mod):
                    continue
                if any(_private(x) for x in full.split(".")[1:]):
                    out.append(f"{mod}: from {base} import {a.name}")
                modules[a.asname or a.name] = full
        elif isinstance(n, ast.Import):
            for a in n.names:
                if a.name.startswith("ceiling"):
                    if _part(a.name) != _part(mod) and any(_private(x) for x in a.name.split(".")[1:]):
                        out.append(f"{mod}: import {a.name}")
                    if a.asname:
                        modules[a.asname] = a.name
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and _private(n.attr) and isinstance(n.value, ast.Name):
            full = modules.get(n.value.id)
            if full and _part(full) != _part(mod):
                out.append(f"{mod}: {n.value.id}.{n.attr} ({full}.{n.attr})")
    return out


def test_no_module_reads_another_packages_private_names():
    bad = [x for path in sorted(SRC.rglob("*.py")) for x in _private_reads(path)]
    assert not bad, "private names read across packages (make them public, or move the code):\n" + "\n".join(bad)


def test_a_private_read_across_packages_is_found(tmp_path):
    """The check itself: each form it rejects, in a module placed as verbs/ would be."""
    pkg = tmp_path / "ceiling" / "verbs"
    pkg.mkdir(parents=True)
    cases = {"from ..report._format import printable": 1, "from ..analysis.profile import _with_mpi": 1,
             "from ..analysis import profile\nprofile._bounds": 1, "import ceiling.report._format as f": 1,
             "from . import common\ncommon._x": 0, "from ..units import printable": 0}
    for i, (text, n) in enumerate(cases.items()):
        path = pkg / f"m{i}.py"
        path.write_text(text + "\n")
        got = _private_reads_at(path, tmp_path)
        assert len(got) == n, (text, got)


def _private_reads_at(path: Path, root: Path) -> List[str]:
    global SRC
    saved, SRC = SRC, root / "ceiling"
    try:
        return _private_reads(path)
    finally:
        SRC = saved


def _is_pkg(mod: str) -> bool:
    return (SRC.parent / mod.replace(".", "/") / "__init__.py").exists()


@pytest.mark.parametrize("path", sorted([*SRC.rglob("*.py"), *CSRC.rglob("*.c")]), ids=lambda p: p.name)
def test_no_long_file_without_a_reason(path: Path):
    text = path.read_text()
    if text.count("\n") <= 520:
        return
    head = text[:4000]
    assert LONG_MARK in head, (f"{path.relative_to(SRC.parents[1])} has {text.count(chr(10))} lines: split it along "
                               f"its seams, or say why not in its docstring ('{LONG_MARK}: ...')")


def test_every_check_area_has_a_title():
    from ceiling.checks.base import AREAS
    from ceiling.report.labels import AREA_TITLES
    assert tuple(AREA_TITLES) == AREAS


# ---- where a process is started ------------------------------------------------------------------------------
# observe/ starts every program of the application half: the profiled one, --overhead's and
# --experiments' re-runs (experiments/), the co-runners beside them (observe/companions.py), so that
# a new verb that runs a program (trace, scale) gets the deadline, the group kill, Ctrl-C and the
# figures as profile has them. Outside it, a module may start a process only when it is listed here,
# with the reason.
STARTS_ALLOWED = {
    # the application half's mechanism, reached only through observe/ (the next test checks it)
    "ceiling.probes.launch": "the fork and exec, and ceiling-launch's posix_spawn, that observe/run.py drives "
                             "through perf_counters.spawn",
    "ceiling.probes.interpose_cost": "the interposer's calibration (dd and ceiling-launch run with and without it), "
                                     "which observe/run.py asks for its cost per call",
    "ceiling.verbs.profile_launch": "end_job: rank 0's program started only to call MPI_Abort for a rank that "
                                    "cannot report; nothing is observed, and it needs close_fds=False (the "
                                    "launcher's PMI descriptor) and its 60 s limit without a group of its own",
    "ceiling.verbs.monitor": "monitor -- CMD: the command is started with Popen and only read from /proc as a "
                             "job (nothing put into it); onto probes/launch's launcher is left (issue 32)",
    # the node half: tools and launchers of ceiling's own, no user program
    "ceiling.machine.dmi": "dmidecode -t memory (the DIMMs)",
    "ceiling.verbs.bench": "bench --site-mpi: ceiling itself again under another MPI's launcher",
    "ceiling.cluster.site_mpi": "--site-mpi's build steps (pip, the MPI compiler wrapper, mpi4py's import)",
    "ceiling.cluster.launch": "end_the_job: ceiling's own mpi4py joins a job to abort it",
    "ceiling.cluster.library": "an MPI installation's own tools asked for their version (mpichversion, "
                               "ompi_info, mpicc -show)",
}
# the starting functions of the mechanism above, which only observe/ calls
MECHANISM = {"ceiling.probes.launch": {"start", "fork"}, "ceiling.probes.perf_counters": {"spawn"},
             "ceiling.probes.interpose_cost": {"measure", "loader_reads"},
             "ceiling.probes.trace_cost": {"measure"}}      # dd through interpose_cost's runner
_STARTS = {"subprocess": {"Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"},
           "os": {"fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp"},
           "pty": {"fork", "spawn"}, "asyncio": {"create_subprocess_exec", "create_subprocess_shell"}}


def _starter(module: str, name: str) -> bool:
    """Whether ``module.name`` starts a process (subprocess.run, os.fork, os.execve, os.spawnv,
    anything of multiprocessing)."""
    return (module == "multiprocessing" or name in _STARTS.get(module, ())
            or module == "os" and name.startswith(("exec", "spawn")))


def _starts(path: Path) -> List[str]:
    """Where the module at ``path`` starts a process: a call through an imported module
    (``subprocess.Popen(...)``, ``os.fork()``, an alias of either) or a starting name imported
    (``from subprocess import run``)."""
    tree = ast.parse(path.read_text(), str(path))
    alias: Dict[str, str] = {}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                alias[a.asname or a.name] = a.name
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            out += [f"line {n.lineno}: from {n.module} import {a.name}" for a in n.names if _starter(n.module, a.name)]
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name):
            module = alias.get(n.func.value.id, "")
            if _starter(module, n.func.attr):
                out.append(f"line {n.lineno}: {module}.{n.func.attr}()")
    return out


def _outside_observe() -> List[Path]:
    return [p for p in sorted(SRC.rglob("*.py")) if _part(_module_name(p)) != "observe"]


def test_only_observe_starts_a_program():
    bad = [f"{_module_name(p)}, {x}" for p in _outside_observe() if _module_name(p) not in STARTS_ALLOWED
           for x in _starts(p)]
    assert not bad, ("a process started outside observe/ (observe it: observe(cmd, exe, Instruments(...)); or, "
                     "for a tool of the node half, list the module in STARTS_ALLOWED with the reason):\n"
                     + "\n".join(bad))
    unused = [m for m in STARTS_ALLOWED if not any(_starts(p) for p in SRC.rglob("*.py") if _module_name(p) == m)]
    assert not unused, f"allowed to start a process but starts none (take it off STARTS_ALLOWED): {unused}"


def _mechanism_uses(path: Path) -> List[str]:
    """Where the module at ``path`` reaches a starting function of MECHANISM: imported by name
    (``from ..probes.perf_counters import spawn``) or called through its module
    (``from ..probes import launch`` and ``launch.start``)."""
    mod = _module_name(path)
    tree = ast.parse(path.read_text(), str(path))
    alias: Dict[str, str] = {}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            for base in _resolve(mod, path.name == "__init__.py", n):
                for a in n.names:
                    if base in MECHANISM and a.name in MECHANISM[base]:
                        out.append(f"from {base} import {a.name}")
                    if f"{base}.{a.name}" in MECHANISM or base in MECHANISM and base.endswith("." + a.name):
                        alias[a.asname or a.name] = base if base in MECHANISM else f"{base}.{a.name}"
        elif isinstance(n, ast.Import):
            for a in n.names:
                if a.name in MECHANISM:
                    alias[a.asname or a.name] = a.name
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in alias \
                and n.attr in MECHANISM[alias[n.value.id]]:
            out.append(f"{alias[n.value.id]}.{n.attr}")
    return out


def test_the_mechanism_of_observe_is_called_by_observe_alone():
    bad = [f"{_module_name(p)}: {x}" for p in _outside_observe() if _module_name(p) not in MECHANISM
           for x in _mechanism_uses(p)]
    assert not bad, "the mechanism observe/ starts programs with, used outside it:\n" + "\n".join(bad)
    assert _mechanism_uses(SRC / "observe" / "run.py"), "observe/run.py no longer found to use its mechanism"


def test_a_process_started_is_found(tmp_path):
    """The check itself: each form it rejects, and what it leaves alone."""
    cases = {"import subprocess\nsubprocess.run(['x'])": 1, "import subprocess as sp\nsp.Popen(['x'])": 1,
             "from subprocess import check_output": 1, "import os\nos.execvpe('x', [], {})": 1,
             "import os\nos.fork()": 1, "import os\nos.posix_spawn('x', [], {})": 1, "import os\nos.system('x')": 1,
             "import subprocess\nsubprocess.DEVNULL\ntry:\n    pass\nexcept subprocess.TimeoutExpired:\n    pass": 0,
             "import os\nos.waitpid(1, 0)": 0, "from subprocess import DEVNULL": 0,
             "from multiprocessing import Process": 1}
    for i, (text, n) in enumerate(cases.items()):
        path = tmp_path / f"m{i}.py"
        path.write_text(text + "\n")
        assert len(_starts(path)) == n, (text, _starts(path))
