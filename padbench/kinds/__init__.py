"""Job kinds, one folder each: everything a kind shows the world that needs no torch.

A kind's folder holds its spec and result models (`contract.py`, registered by `padbench.contract.kinds`), its
server policy (`policy.py`), its report (`report.py`: table, CSV, comparison, verdict), its plot (`plot.py`),
its dashboard view (`view.js`) and the record that assembles them (`kind.py`: a `KindSpec`, see `record.py`).
Its runner lives in `worker/jobs/<kind>/`, named by the contract's `JobKind.runner`.

This package and each kind's package only name themselves: importing a kind's models must not import its
report or policy (the contract layer sits below them).
"""
