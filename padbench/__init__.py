"""padbench: which batching layout and attention kernel gives the most tokens per second on your GPU."""

__version__ = "0.1.0"
