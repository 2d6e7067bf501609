"""What a row measures, as one short digest: its fingerprint.

Two rows share a fingerprint when they measure the same thing — the same model (its spec section, digested),
the same data (the worker's digest of the tokens, else the spec's data section), the same layout and kernel
(the row's compare key), batch size, mode, dtype, and the same GPU model and count — so their figures can be
read as one figure over time, whatever padbench, torch, driver or kernel package measured them. Everything
comes from the stored result, so results stored before fingerprints existed have them too.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from padbench.contract.parallel import ALL_GPUS
from padbench.contract.results import Environment, JobResultBase
from padbench.contract.student_t import Moments
from padbench.kinds.record import kind_spec
from padbench.report.identity import device_name
from padbench.report.kind import CompareKey

FINGERPRINT_LENGTH = 16  # hex characters: 64 bits, more than enough to keep a server's rows apart
# The versions whose change between two points of a history may explain a change of its figure.
VERSION_FIELDS = ("padbench", "torch", "transformers", "cuda", "driver", "flash_attn", "flash_attn_cute")


@dataclass(frozen=True)
class MeasuredRow:
    """One row of a result as a history and a regression check read it."""

    key: CompareKey  # (strategy, kernel), (kernel, sequence length), …
    fingerprint: str
    figure: float | None  # the kind's compare figure; None: not measured (failed, invalid)
    moments: Moments | None  # mean, cv and count of its repeats; None: a single repeat, or the kind keeps none
    batch: str | None  # the row's batch size as its table prints it


def digest(document: Any) -> str:
    """A stable digest of a JSON-able document (keys sorted)."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_LENGTH]


def gpu_count(result: JobResultBase) -> int | None:
    """GPUs the job ran on: its spec's count, or for `all` the GPUs its worker saw; None for a scaling axis,
    whose rows each name their count in their key."""
    asked = result.spec.gpus
    if isinstance(asked, list):
        return None
    return result.environment.gpu_count if asked in ("all", ALL_GPUS) else int(asked)


def measured_what(result: JobResultBase) -> dict[str, Any]:
    """The job-wide part of every row's fingerprint."""
    facts = kind_spec(result.kind).report.run_facts(result)
    spec = result.spec.model_dump(mode="json", exclude_none=True)
    return {"kind": result.kind, "model": digest(spec.get("model")),
            "data": result.environment.dataset_digest or digest(spec.get("data")),
            "mode": facts.mode, "dtype": facts.dtype, "gpu": device_name(result), "gpus": gpu_count(result)}


def measured_rows(result: JobResultBase) -> list[MeasuredRow]:
    """Every row the kind compares, with its fingerprint, figure and repeats."""
    rule = kind_spec(result.kind).report.compare
    job = measured_what(result)
    batches = rule.batch_sizes(result) if rule.batch_sizes is not None else {}
    spreads = rule.spreads(result) if rule.spreads is not None else {}
    rows = []
    for key, figure in rule.figures(result).items():
        spread = spreads.get(key)
        moments = None if spread is None else (spread.mean_tokens_per_s, spread.cv, spread.repeats)
        fingerprint = digest({**job, "row": row_name(key, batches.get(key)), "batch": batches.get(key)})
        rows.append(MeasuredRow(key, fingerprint, figure, moments, batches.get(key)))
    return rows


def row_name(key: CompareKey, batch: str | None) -> list[str]:
    """The row's key as its fingerprint reads it: without the ` @ BATCH` a table adds to a layout that one job
    measured at several batch sizes. The batch size is a part of the fingerprint of its own, so a row keeps its
    fingerprint whether or not its job measured other batch sizes beside it."""
    suffix = f" @ {batch}"
    return [key[0].removesuffix(suffix) if batch is not None else key[0], *key[1:]]


def versions(environment: Environment) -> dict[str, str | None]:
    """The versions of what measured a result, by name (None: not recorded or not installed)."""
    return {name: getattr(environment, name) for name in VERSION_FIELDS}


def changed_versions(before: Environment, after: Environment) -> dict[str, list[str | None]]:
    """Each version that differs between two results: [before, after]."""
    old, new = versions(before), versions(after)
    return {name: [old[name], new[name]] for name in VERSION_FIELDS if old[name] != new[name]}
