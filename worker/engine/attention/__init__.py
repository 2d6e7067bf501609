"""Attention kernels: the typed plugin family the engine resolves a spec's `attention` through."""

from worker.engine.attention.ops import KernelUnavailable

__all__ = ["KernelUnavailable"]
