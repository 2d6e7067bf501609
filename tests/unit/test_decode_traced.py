"""The compiled decode step traces the attention into its graph: one graph for the whole step (where the fenced
attention splits it at every layer), the cache written in place, and the same greedy tokens as one request at a
time (fp32, the CPU's sdpa kernel)."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

from padbench.worker.engine.decoding.registry import DECODE_KERNELS
from padbench.worker.engine.model.build import build_model, config_of
from padbench.worker.jobs.generate.gate import judge, reference_runs
from padbench.worker.jobs.generate.passes import run_pass
from tests.unit.test_generate_engine import CPU, MODELS, decoder_and_scheduler, gate_set

pytestmark = pytest.mark.slow  # compiles a model on the CPU


@pytest.mark.parametrize("traced", [True, False], ids=["traced", "fenced"])
def test_the_compiled_decode_step_is_one_graph_when_its_attention_is_traced(traced: bool) -> None:
    model = build_model(MODELS["qwen3"], torch.float32, CPU, seed=0)
    requests = gate_set(int(config_of(model).vocab_size))
    references = reference_runs(model, requests, CPU, "fp32")
    decoder, scheduler = decoder_and_scheduler(model, DECODE_KERNELS.get("sdpa-kvcache"), requests, CPU,
                                               torch.float32)
    # What a CUDA graph would replay, compiled on the CPU: decode steps compiled, steps with prefills eager.
    decoder.compile_decode, decoder.trace_attention = True, traced
    torch._dynamo.reset()
    counters.clear()
    cache_before = [tensor.data_ptr() for tensor in decoder.cache.keys]
    run_pass("continuous", scheduler, decoder, requests, CPU)
    outcome = judge(requests, references, decoder.generated, decoder.first_logits, "fp32")
    assert outcome.passed, outcome.detail
    assert [tensor.data_ptr() for tensor in decoder.cache.keys] == cache_before
    breaks = sum(counters["graph_break"].values())
    assert (breaks == 0) == traced, dict(counters["graph_break"])
