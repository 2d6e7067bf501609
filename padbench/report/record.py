"""A result as a self-describing benchmark record (`padbench results ID --format record`): what was measured
(the entity: model, data, dtype, mode), on what (hardware and interconnect), how (the full spec), with what
(every version recorded), when, and each row's figure with its interval, fingerprint and, where known, cost
and energy; the whole result document follows, so a team can publish the record beside its code and nothing
measured is left out.
"""

from __future__ import annotations

import json
from typing import Any

from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.results import JobResultBase
from padbench.kinds.record import kind_spec
from padbench.report.efficiency import row_costs
from padbench.report.fingerprint import digest, gpu_count, measured_rows, measured_what

RECORD_SCHEMA = "padbench.benchmark-record/1"


def _hardware(result: JobResultBase) -> dict[str, Any]:
    environment = result.environment
    parallel = getattr(result, "parallel", None)  # jobs on several GPUs say how they connect
    return {"device": environment.device, "gpu": environment.gpu_name, "gpus": gpu_count(result),
            "gpu_memory_bytes": environment.gpu_memory_bytes, "hostname": environment.hostname,
            "interconnect": getattr(parallel, "topology", None),
            "price_per_gpu_hour": environment.price_per_gpu_hour}


def _versions(result: JobResultBase) -> dict[str, str | None]:
    environment = result.environment
    return {"padbench": environment.padbench, "python": environment.python, "torch": environment.torch,
            "transformers": environment.transformers, "cuda": environment.cuda, "driver": environment.driver,
            "flash_attn": environment.flash_attn, "flash_attn_cute": environment.flash_attn_cute,
            "datasets": environment.datasets}


def _rows(result: JobResultBase) -> list[dict[str, Any]]:
    rule = kind_spec(result.kind).report.compare
    costs = row_costs(result)
    spreads = rule.spreads(result) if rule.spreads is not None else {}
    rows = []
    for row in measured_rows(result):
        spread = spreads.get(row.key)
        rows.append({**dict(zip(rule.key_names, row.key, strict=True)), "batch": row.batch,
                     "fingerprint": row.fingerprint, rule.metric: row.figure,
                     "ci95": None if spread is None else [spread.ci95_low_tokens_per_s, spread.ci95_high_tokens_per_s],
                     "usd_per_million_tokens": costs.get(row.key)})
    return rows


def benchmark_record(result: JobResultBase, job_id: int | None = None) -> dict[str, Any]:
    facts = kind_spec(result.kind).report.run_facts(result)
    spec = result.spec.model_dump(mode="json")
    entity = {"kind": result.kind, "model": facts.model, "model_digest": digest(spec.get("model")),
              "data_digest": measured_what(result)["data"], "dtype": facts.dtype, "mode": facts.mode}
    return {"schema": RECORD_SCHEMA, "job_id": job_id, "date": result.environment.started_at, "entity": entity,
            "hardware": _hardware(result), "versions": _versions(result), "spec": spec,
            "metric": kind_spec(result.kind).report.compare.metric, "rows": _rows(result),
            "result": JOB_RESULT_ADAPTER.dump_python(result, mode="json")}


def render_record(result: JobResultBase, job_id: int | None = None) -> str:
    return json.dumps(benchmark_record(result, job_id), indent=2) + "\n"
