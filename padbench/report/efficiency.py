"""What a row's tokens cost: dollars per million tokens, from the price per GPU-hour its worker was given, and
joules per token, from the energy its GPUs used over its measured repeats.

A row's figure is the job's tokens per second over all its GPUs (all ranks), so a million tokens take
1e6 / figure seconds of every GPU the job held: price × GPUs × 1e6 / (3600 × figure). On a worker without GPUs
the price is the machine's per hour, counted once. Without a price, or for rows without a rate, nothing is
shown: a cost that was not given is never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence

from padbench.contract.results import EnergyUse, JobResultBase
from padbench.kinds.record import kind_spec
from padbench.report.fingerprint import gpu_count, measured_rows
from padbench.report.noise import compact_rate

SECONDS_PER_HOUR = 3600.0


def dollars_per_million_tokens(price_per_hour: float, units: int, tokens_per_s: float) -> float | None:
    """The cost of a million tokens at `tokens_per_s` on `units` priced units; None without a rate."""
    if tokens_per_s <= 0:
        return None
    return price_per_hour * units * 1e6 / (SECONDS_PER_HOUR * tokens_per_s)


def priced_units(result: JobResultBase) -> int:
    """The priced units the job held: its GPUs, or the machine once on CPU."""
    return (gpu_count(result) or 1) if result.environment.device == "cuda" else 1


def row_costs(result: JobResultBase) -> dict[tuple[str, str], float]:
    """$ per million tokens per row (compare key), for the rows with a rate; empty without a price."""
    price = result.environment.price_per_gpu_hour
    rule = kind_spec(result.kind).report.compare
    if price is None or not rule.higher_is_faster:  # a time per call (attention sweeps) is not a token rate
        return {}
    units = priced_units(result)
    row_gpus = rule.row_gpus(result) if rule.row_gpus is not None and result.environment.device == "cuda" else {}
    costs = {}
    for row in measured_rows(result):
        held = row_gpus.get(row.key, units)
        cost = None if row.figure is None else dollars_per_million_tokens(price, held, row.figure)
        if cost is not None:
            costs[row.key] = cost
    return costs


def rate_cost(result: JobResultBase, tokens_per_s: float | None, gpus: int | None = None) -> float | None:
    """$ per million tokens at `tokens_per_s` on the units the job held (or on `gpus`, a scaling axis row's own
    count); None without a price or a rate."""
    price = result.environment.price_per_gpu_hour
    if price is None or tokens_per_s is None:
        return None
    units = gpus if gpus is not None and result.environment.device == "cuda" else priced_units(result)
    return dollars_per_million_tokens(price, units, tokens_per_s)


def priced_as(result: JobResultBase) -> str:
    """`$2.5 per GPU-hour × 8 GPUs`, or `$0.4 per hour of the machine` on CPU; the job must have a price."""
    price = result.environment.price_per_gpu_hour
    units = priced_units(result)
    held = (f"per GPU-hour × {units} GPU{'s' if units > 1 else ''}" if result.environment.device == "cuda"
            else "per hour of the machine")
    if result.environment.device == "cuda" and isinstance(result.spec.gpus, list):
        held = "per GPU-hour × the GPUs of each row's count"
    return f"${price:g} {held}"


def dollars(cost: float) -> str:
    """A cost per million tokens as the tables print it: `$0.2734`, `$1,204`."""
    return f"${cost:,.4g}"


def cost_lines(result: JobResultBase) -> list[str]:
    """Each row's cost, under the table; nothing without a price."""
    costs = row_costs(result)
    if not costs:
        return []
    metric = kind_spec(result.kind).report.compare.metric_label
    lines = [f"cost per million tokens (counted as {metric}) at {priced_as(result)}:"]
    lines += [f"  {' / '.join(key)}: {dollars(cost)}" for key, cost in sorted(costs.items(), key=lambda item: item[1])]
    return lines


JOULES_PER_KWH = 3.6e6
ENERGY_SOURCES = {"nvml-energy-counter": "NVML energy counter",
                  "power-samples": "power samples integrated: this GPU has no energy counter"}


def joules_per_token(energy: EnergyUse) -> float | None:
    """The energy over the measured repeats divided by the tokens they processed; None without tokens."""
    return None if not energy.tokens or energy.joules <= 0 else energy.joules / energy.tokens


def energy_lines(rows: Sequence[tuple[str, EnergyUse | None]], tokens: str) -> list[str]:
    """Each row's joules per token and tokens per kWh (`tokens`: which tokens, e.g. "output"), under the table,
    for the rows whose energy was measured; nothing when none was (CPU, or no NVML): not measured, never
    estimated."""
    lines = []
    for label, energy in rows:
        per_token = None if energy is None else joules_per_token(energy)
        if energy is None or per_token is None:
            continue
        gpus = f"{energy.gpus} GPU{'s' if energy.gpus > 1 else ''}"
        lines.append(f"  {label}: {per_token:.4g} J/token, {compact_rate(JOULES_PER_KWH / per_token)} tokens/kWh "
                     f"({energy.joules / energy.seconds:,.0f} W mean over {gpus}; {ENERGY_SOURCES[energy.source]})")
    return [f"energy per {tokens} token over the measured repeats:", *lines] if lines else []
