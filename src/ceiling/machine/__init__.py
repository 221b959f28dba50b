"""machine: what the hardware and OS are, and the peaks they allow.

``detect(root="/", measure=True, config=None) -> Machine`` is the entry
point; ``peaks.flop_peak`` and ``placement.plan`` work on its result.
"""
from .detect import detect
from .model import Cache, Clocks, Cpu, Machine, NumaNode

__all__ = ["detect", "Machine", "Cpu", "Cache", "NumaNode", "Clocks"]
