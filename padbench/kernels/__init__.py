"""Attention kernel families, one module each: `FAMILY`, the `KernelFamily` a spec's `attention` names.

Every module here is registered by `padbench.contract.kernel_families` (so each must declare one family and nothing
else). A family's module is the contract layer: it imports only `padbench.contract`, and names its worker
implementations by dotted path, which only the worker imports.
"""
