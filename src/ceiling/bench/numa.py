"""The one NUMA sweep: for each CPU node, threads on its CPUs, and for each memory
node, a measurement with the working set bound there (mbind). The bandwidth
(bench/memory.py) and latency (bench/latency.py) matrices differ only in the cell
they measure; the order of cells, the CPUs each row uses, the progress and the
reasons a cell stays empty are the same, and are here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from ..errors import CoreError
from ..machine.model import NumaNode
from ..results.measure import Context

# cell(cpu_node, mem_node, cpus) -> (value or None, problem or ""); may raise CoreError.
Cell = Callable[[NumaNode, NumaNode, List[int]], "tuple[Optional[float], str]"]


@dataclass
class Grid:
    nodes: List[NumaNode]
    rows: List[List[Optional[float]]] = field(default_factory=list)   # rows: CPU node, columns: memory node
    row_cpus: Dict[str, List[int]] = field(default_factory=dict)      # the CPUs each row ran on (plan order)
    errors: List[str] = field(default_factory=list)                   # why a cell is empty or invalid

    @property
    def labels(self) -> List[str]:
        return [str(n.id) for n in self.nodes]


def sweep(ctx: Context, title: str, cell: Cell) -> Grid:
    """Every (CPU node, memory node) cell, row by row. A row runs on the node's CPUs in
    the placement plan, else on the node's CPUs this process may use."""
    m = ctx.machine
    grid = Grid(sorted(m.nodes, key=lambda n: n.id))
    plan = list(ctx.cpus)
    allowed = set(m.affinity) if m.affinity else None
    ctx.progress.start(title, total=len(grid.nodes) ** 2)
    for cpu_node in grid.nodes:
        cpus = [c for c in plan if c in cpu_node.cpus] or \
               [c for c in cpu_node.cpus if allowed is None or c in allowed]
        grid.row_cpus[str(cpu_node.id)] = cpus
        row: List[Optional[float]] = []
        for mem_node in grid.nodes:
            val = None
            where = f"CPU node {cpu_node.id}, memory node {mem_node.id}"
            if mem_node.mem_bytes == 0:
                grid.errors.append(f"memory node {mem_node.id} has no memory")
            elif not cpus:
                grid.errors.append(f"CPU node {cpu_node.id}: no CPU of it may be used")
            else:
                try:
                    val, problem = cell(cpu_node, mem_node, cpus)
                    if problem:
                        grid.errors.append(f"{where}: {problem}")
                except CoreError as e:
                    grid.errors.append(f"{where}: {e}")
            row.append(val)
            ctx.progress.advance()
        grid.rows.append(row)
    ctx.progress.done()
    return grid
