"""The generate strategies, one module each. Importing this package registers each in GENERATE_STRATEGIES."""

from padbench.worker.jobs.generate.strategies import continuous, sorted_batches, static
from padbench.worker.jobs.generate.strategies.base import GENERATE_STRATEGIES, GenerateStrategy

__all__ = ["GENERATE_STRATEGIES", "GenerateStrategy", "continuous", "sorted_batches", "static"]
