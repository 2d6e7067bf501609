"""The `tune` job kind: see `kind.py` for its record and `padbench.kinds` for the layout."""
