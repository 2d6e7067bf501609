"""The benchmark engine: data → layouts (strategies) → model with an attention kernel → measured result."""
