"""The KV-cache kernels on a CUDA GPU as generate jobs run them there: bf16, decode steps compiled and replayed
as CUDA graphs, steps with prefills padded to token buckets and replayed too, through the generate gate.

    .venv/bin/python -m pytest -m gpu tests/unit/test_generate_gpu.py
"""

from __future__ import annotations

import pytest
import torch

from padbench.contract.model_spec import ModelSpec
from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.engine.decoding.cache import TokenBuckets
from padbench.worker.engine.decoding.decoder import Decoder
from padbench.worker.engine.decoding.kernels import DecodeKernel
from padbench.worker.engine.decoding.registry import DECODE_KERNELS
from padbench.worker.engine.model.build import build_model, config_of
from padbench.worker.jobs.generate.gate import judge, reference_runs
from padbench.worker.jobs.generate.passes import run_pass
from padbench.worker.jobs.generate.schedule import Request, Scheduler
from tests.unit.test_attention_sinks import TINY_GPT_OSS
from tests.unit.test_generate_engine import MODELS, decoder_and_scheduler, gate_set

pytestmark = pytest.mark.gpu
BUCKETS = TokenBuckets(step=8, limit=32)
CASES = {**MODELS, "gpt-oss": ModelSpec(config=TINY_GPT_OSS)}


def cuda() -> torch.device:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return torch.device("cuda")


def capture_buckets(decoder: Decoder, longest_prompt: int) -> None:
    if decoder.device.type == "cuda":
        decoder.capture_buckets(BUCKETS, longest_prompt)


@pytest.mark.parametrize("strategy", ["static", "continuous"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("kernel_name", ["flex-kvcache", "torch-flash-kvcache"])
def test_graphed_compiled_decoding_passes_the_bf16_gate(kernel_name: str, case: str, strategy: str) -> None:
    device = cuda()
    model = build_model(CASES[case], torch.bfloat16, device, seed=0)
    kernel = DECODE_KERNELS.get(kernel_name)
    config = config_of(model)
    reason = kernel.unavailable_reason(device, torch.bfloat16)
    features = AttentionFeatures.of(config)
    reason = reason or kernel.unsupported_reason(features.softcap, features.sinks)
    if reason is not None:
        pytest.skip(reason)
    requests = gate_set(int(config.vocab_size))
    references = reference_runs(model, requests, device, "bf16")
    buckets = BUCKETS if strategy == "continuous" else None
    decoder, scheduler = graphed_decoder(model, kernel, requests, device, buckets)
    if buckets is not None:
        capture_buckets(decoder, max(len(r.prompt) for r in requests))
    run_pass(strategy, scheduler, decoder, requests, device)  # type: ignore[arg-type]
    outcome = judge(requests, references, decoder.generated, decoder.first_logits, "bf16")
    assert outcome.passed, f"{kernel_name} {case} {strategy}: {outcome.detail}"


def graphed_decoder(model: torch.nn.Module, kernel: DecodeKernel, requests: list[Request], device: torch.device,
                    buckets: TokenBuckets | None) -> tuple[Decoder, Scheduler]:
    return decoder_and_scheduler(model, kernel, requests, device, torch.bfloat16, buckets=buckets,
                                 scratch=buckets.step if buckets else BUCKETS.step, cuda_graphs=True,
                                 compile_decode=True)


def test_flex_steps_beyond_the_largest_bucket_keep_the_mask_bounds_the_graphs_captured() -> None:
    """The first step's prompts (18 tokens) outgrow buckets of at most 8 and run without a graph after the bucket
    graphs were captured: flex's mask bounds, which those graphs write and read, must stay where they were, and
    the later bucketed steps still pass the gate."""
    device = cuda()
    model = build_model(CASES["qwen3"], torch.bfloat16, device, seed=0)
    requests = gate_set(int(config_of(model).vocab_size))
    references = reference_runs(model, requests, device, "bf16")
    buckets = TokenBuckets(step=4, limit=8)
    decoder, scheduler = graphed_decoder(model, DECODE_KERNELS.get("flex-kvcache"), requests, device, buckets)
    decoder.capture_buckets(buckets, max(len(r.prompt) for r in requests))
    captured = decoder.cache.kernel_state["flex_packed:None"].first.data_ptr()
    run_pass("continuous", scheduler, decoder, requests, device)
    assert decoder.cache.kernel_state["flex_packed:None"].first.data_ptr() == captured
    outcome = judge(requests, references, decoder.generated, decoder.first_logits, "bf16")
    assert outcome.passed, outcome.detail
