"""The batching layouts. Importing this package registers each of them in STRATEGIES."""

from padbench.worker.engine.strategies import binned, dynamic, packed, static, wrapped
from padbench.worker.engine.strategies.worst_case import worst_case_packed, worst_case_padded

__all__ = ["binned", "dynamic", "packed", "static", "worst_case_packed", "worst_case_padded", "wrapped"]
