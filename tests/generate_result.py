"""Hand-built results of the generate kind, for the tests of its reports, plot, verdict and dashboard.

The figures are made up but consistent: continuous batching fastest, sorted between it and static, and the
two transformers references beside them; one row of each kind of gap (failed, unmeasured latency).
"""

from __future__ import annotations

from typing import Any

from padbench.contract.results import Environment, MemoryStats
from padbench.kinds.generate.contract import GenerateJobSpec, GenerateResult, GenerateRow, Latency
from padbench.worker.engine.measure.spread import repeat_spread

ENVIRONMENT = Environment(hostname="gpu-box", device="cuda", gpu_name="NVIDIA H100", python="3.12", torch="2.13.0",
                          transformers="5.17.0", dataset_digest="0123456789abcdef",
                          started_at="2026-11-26T10:00:00+00:00")
SPEC: dict[str, Any] = {"kind": "generate", "model": {"preset": "llama-3.2-1b"}, "dtype": "bf16",
                        "attention": "sdpa", "batch_size": 16, "device": "cuda"}


def row(strategy: str, repeats: list[float] | None, *, reference: bool = False, kernel: str = "sdpa-kvcache",
        **fields: Any) -> GenerateRow:
    """A measured row whose headline is the mean of `repeats` (None: a row with no figure)."""
    if repeats is None:
        measured: dict[str, Any] = {}
    else:
        rate = sum(repeats) / len(repeats)
        measured = {"output_tokens_per_s": rate, "total_tokens_per_s": 3 * rate, "decode_tokens_per_s": 1.2 * rate,
                    "repeat_tokens_per_s": repeats, "spread": repeat_spread(repeats, 0.05),
                    "time_to_first_token": Latency(p50_ms=12.5, p99_ms=48.0, samples=64),
                    "time_per_output_token": Latency(p50_ms=3.5, p99_ms=9.75, mean_ms=4.0, samples=64),
                    "inter_token_latency": Latency(p50_ms=0.0412, p99_ms=1234.0, mean_ms=4.0, samples=1984),
                    "slot_utilization": 0.62, "bandwidth_utilization": 0.31, "mfu": 0.04,
                    "memory": MemoryStats(peak_allocated_bytes=3 << 30), "kv_cache_bytes": 1 << 28}
    values: dict[str, Any] = {"status": "ok" if repeats is not None else "failed", "batch_size": 16,
                              **measured, **fields}
    return GenerateRow(strategy=strategy, reference=reference, attention="sdpa", kernel=kernel, **values)


def rows_at(context: int | None = None) -> list[GenerateRow]:
    static = row("static", [990.0, 1000.0, 1010.0], context=context, speedup_vs_static=1.0)
    return [
        static,
        row("sorted", [1490.0, 1500.0, 1510.0], context=context, speedup_vs_static=1.5),
        row("continuous", [2390.0, 2400.0, 2410.0], context=context, speedup_vs_static=2.4, slot_utilization=0.97),
        row("transformers-generate", [890.0, 900.0, 910.0], reference=True, kernel="transformers-sdpa",
            context=context),
        row("transformers-continuous", [1990.0, 2000.0, 2010.0], reference=True, kernel="transformers-sdpa",
            context=context),
    ]


def generate_result(rows: list[GenerateRow] | None = None, **spec: Any) -> GenerateResult:
    listed = rows_at() if rows is None else rows
    outputs = 64 * 32
    return GenerateResult(spec=GenerateJobSpec(**{**SPEC, **spec}), environment=ENVIRONMENT,
                          model_parameters=1_235_814_400, weight_bytes=2_471_628_800, kv_bytes_per_token=32_768,
                          matmul_tflops=650.0, copy_bandwidth_gbps=2_900.0, num_requests=64,
                          prompt_tokens_total=64 * 100, output_tokens_total=outputs, rows=listed)


def context_result() -> GenerateResult:
    """A context table: every strategy and reference at two prompt lengths."""
    return generate_result(rows_at(512) + rows_at(2048), context=[512, 2048])
