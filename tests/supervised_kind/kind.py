"""The supervised kind's record: its file names are its data section's, confined like a padding job's."""

from __future__ import annotations

from padbench.contract.model_spec import ModelSpec
from padbench.kinds.policy import JobCost, KindPolicy, NamedPath, device_requirements, model_and_data_paths
from padbench.kinds.record import KindSpec
from padbench.report.kind import CompareRule, KindReport, RunFacts
from tests.supervised_kind.contract import JOB_KIND, SupervisedJobSpec, SupervisedResult


def named_paths(spec: SupervisedJobSpec) -> list[NamedPath]:
    return [] if spec.data is None else model_and_data_paths(spec.data, ModelSpec(preset="tiny"))


KIND = KindSpec[SupervisedJobSpec, SupervisedResult](
    contract=JOB_KIND,
    policy=KindPolicy[SupervisedJobSpec](requirements=lambda spec: device_requirements(spec.device),
                                         cost=lambda spec: JobCost(tokens=0, flops=0.0), named_paths=named_paths),
    report=KindReport[SupervisedResult](
        noun="a supervised job", plural="supervised jobs", render_table=lambda result: "",
        csv_rows=lambda result: [], run_facts=lambda result: RunFacts(model="test", dtype="none", mode="none"),
        compare=CompareRule[SupervisedResult](figures=lambda result: {}, key_names=("", ""), metric="",
                                              metric_label="", show=str, higher_is_faster=True)),
    view=None,
)
