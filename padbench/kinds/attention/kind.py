"""The `attention` kind: attention kernels alone, swept over sequence lengths, timed and measured for memory."""

from __future__ import annotations

from padbench.kinds.attention import plot, policy, report
from padbench.kinds.attention.contract import JOB_KIND, AttentionJobSpec, AttentionResult
from padbench.kinds.record import KindSpec
from padbench.report.kind import KindReport

KIND = KindSpec[AttentionJobSpec, AttentionResult](
    contract=JOB_KIND,
    policy=policy.POLICY,
    report=KindReport[AttentionResult](
        noun="an attention sweep", plural="attention sweeps", render_table=report.render_table,
        csv_rows=report.csv_rows, run_facts=report.run_facts, compare=report.COMPARE),
    plot=plot.attention_plot,
)
