"""What `padbench check` prints: that the spec is valid, then what the kind's runner finds on this machine (for
kinds that build a model: its shape, the tokenizer's fit and each row's kernel on this device).

Imported only when the command runs: building the CLI's parser must never load torch.
"""

from __future__ import annotations

from typing import TextIO

from padbench.contract.spec import JobSpecBase
from padbench.worker.engine.hub import cache_only
from padbench.worker.jobs import get_job_runner


def report(spec: JobSpecBase, out: TextIO) -> int:
    out.write(f"spec: valid {spec.kind} job\n")
    with cache_only():  # a Hub model or tokenizer is read from the cache here, never waited for on the network
        findings = list(get_job_runner(spec.kind).findings(spec))
    for fine, what in findings:
        out.write(f"{'  ' if fine else '✗ '}{what}\n")
    return 0 if all(fine for fine, _ in findings) else 1
