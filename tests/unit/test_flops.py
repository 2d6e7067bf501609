"""FLOP counts against hand-computed values and torch's own FLOP counter for every model family, and the
peak table's refusal to invent figures."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from padbench.contract.model_spec import ModelSpec
from padbench.contract.presets import MODEL_PRESETS
from padbench.worker.engine.data.batches import PackedBatch, PaddedBatch
from padbench.worker.engine.model.build import build_model, build_on_meta
from padbench.worker.engine.model.experts import routed_macs_per_token, router_macs_per_token
from padbench.worker.engine.model.flops import ModelShape, batch_flops
from padbench.worker.engine.model.parameter_count import active_parameter_count, parameter_count
from padbench.worker.runtime.peaks import peak_flops, peak_flops_for_name

# tiny: 2 layers, width 64, MLP 256, vocab 30,522. MACs per token: per layer 3·64² + 64² + 2·64·256 = 49,152,
# two layers 98,304, LM head 64·30,522 = 1,953,408 → 2,051,712 MACs = 4,103,424 FLOPs.
TINY_MATMUL_FLOPS_PER_TOKEN = 4_103_424


def tiny_shape() -> ModelShape:
    return ModelShape.of(build_on_meta(ModelSpec(preset="tiny")))


def test_matmul_flops_per_token_tiny() -> None:
    assert tiny_shape().matmul_flops_per_token == TINY_MATMUL_FLOPS_PER_TOKEN


def test_matmul_flops_per_token_gpt2_seed_is_about_365_mflop() -> None:
    # 12 layers × 12·1024² + 1024·30,522 = 182,249,472 MACs, at 2 FLOPs each ~365 MFLOP per token.
    shape = ModelShape.of(build_on_meta(ModelSpec(preset="gpt2-seed")))
    assert shape.matmul_flops_per_token == 364_498_944


# The families the README names beyond the presets, at the tiny presets' size: OLMo (no biases, non-parametric
# norms), OLMo 2 (norms after the sublayers, query/key norms) and GPT-NeoX (fused QKV, partial rotary by default,
# parallel residual).
_TINY_SHAPE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
               "vocab_size": 2048, "max_position_embeddings": 256}
CONFIG_FAMILIES = {
    "olmo": {"model_type": "olmo", **_TINY_SHAPE, "num_key_value_heads": 2},
    "olmo2": {"model_type": "olmo2", **_TINY_SHAPE, "num_key_value_heads": 2},
    "gpt_neox": {"model_type": "gpt_neox", **_TINY_SHAPE, "use_parallel_residual": True},
}
MIXTURES = ["tiny-mixtral", "tiny-qwen3-moe", "tiny-olmoe", "tiny-gpt-oss"]
FLOP_ORACLE_MODELS = [*(ModelSpec(preset=name) for name in MODEL_PRESETS if name.startswith("tiny")),
                      *(ModelSpec(config=config) for config in CONFIG_FAMILIES.values())]


@pytest.mark.parametrize("spec", FLOP_ORACLE_MODELS, ids=lambda spec: spec.label)
def test_formula_matches_torchs_flop_counter_within_one_percent(spec: ModelSpec) -> None:
    """Every CPU-sized preset and every family the README names: GQA projections, gated MLPs, untied heads,
    wide heads (Gemma), fused QKV (GPT-NeoX) counted as torch counts them.

    The model runs its eager attention, which computes the full L×L score matrix, so the comparison counts
    attention as non-causal. A mixture of experts runs `batched_mm`, which multiplies every routed (token,
    expert) pair once, so torch's count is exact; `eager` skips experts no token reached, and torch's counter
    has no rule for `grouped_mm`.
    """
    model = build_model(spec, torch.float32, torch.device("cpu"), seed=0)
    model.set_attn_implementation("eager")
    if getattr(model.config, "num_experts_per_tok", None):  # a mixture of experts
        model.set_experts_implementation("batched_mm")
    length = 48
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        model(input_ids=torch.randint(1, 1000, (1, length)))
    shape = ModelShape.of(model)
    formula = shape.matmul_flops_per_token * length + shape.attention_flops([length], causal=False)
    assert formula == pytest.approx(counter.get_total_flops(), rel=0.01)


def test_grouped_query_attention_counts_fewer_key_value_flops() -> None:
    llama = ModelShape.of(build_on_meta(ModelSpec(preset="llama-3.2-1b")))
    # 16 layers × (q 2048² + k, v 2·2048·512 + o 2048² + gated MLP 3·2048·8192) + head 2048·128,256 MACs.
    per_layer = 2048 * 2048 * 2 + 2 * 2048 * 512 + 3 * 2048 * 8192
    assert llama.matmul_macs_per_token == 16 * per_layer + 2048 * 128_256


def test_packed_batch_counts_attention_from_each_sequence_length() -> None:
    batch = PackedBatch(input_ids=torch.zeros(1, 8, dtype=torch.long), position_ids=torch.zeros(1, 8, dtype=torch.long),
                        cu_seqlens=torch.tensor([0, 3, 8], dtype=torch.int32), max_seqlen=5, lengths=(3, 5),
                        sequence_ids=(0, 1), token_budget=10)
    flops = batch_flops(tiny_shape(), batch)
    assert flops.matmul == 8 * TINY_MATMUL_FLOPS_PER_TOKEN
    # 4·L²·E per layer for QKᵀ and AV, 2 layers, halved for causal: (9 + 25)·4·64·2 / 2 = 8,704.
    assert flops.attention == 8_704
    assert flops.total == flops.matmul + flops.attention


def test_padded_batch_counts_the_full_width_of_every_row() -> None:
    input_ids = torch.zeros(2, 5, dtype=torch.long)
    batch = PaddedBatch(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), lengths=(3, 5),
                        sequence_ids=(0, 1))
    flops = batch_flops(tiny_shape(), batch)
    assert flops.matmul == 10 * TINY_MATMUL_FLOPS_PER_TOKEN
    assert flops.attention == 2 * 25 * 4 * 64 * 2 // 2


def test_non_causal_attention_is_counted_in_full() -> None:
    assert tiny_shape().attention_flops([4], causal=False) == 2 * tiny_shape().attention_flops([4])


def test_known_gpus_have_sourced_dense_peaks() -> None:
    peak, source = peak_flops_for_name("NVIDIA H100 80GB HBM3", torch.bfloat16)
    assert peak == 989e12 and "H100 SXM" in source
    assert peak_flops_for_name("NVIDIA H100 PCIe", torch.float16)[0] == 756e12
    assert peak_flops_for_name("NVIDIA H200", torch.bfloat16)[0] == 989e12
    assert peak_flops_for_name("NVIDIA A100-SXM4-80GB", torch.bfloat16)[0] == 312e12
    assert peak_flops_for_name("NVIDIA GeForce RTX 3090", torch.bfloat16)[0] == 71e12


def test_unknown_gpu_fp32_and_cpu_have_no_peak() -> None:
    assert peak_flops_for_name("NVIDIA Imaginary 9000", torch.bfloat16) == (
        None, "'NVIDIA Imaginary 9000' is not in the peak table")
    assert peak_flops_for_name("NVIDIA H200", torch.float32)[0] is None
    assert peak_flops(torch.device("cpu"), torch.bfloat16)[0] is None


@pytest.mark.parametrize("preset", MIXTURES)
def test_routed_experts_and_routers_are_counted_exactly_per_token(preset: str) -> None:
    """Per token: each router's scores (experts × width) and the top-k experts' matrices, not all experts'."""
    model = build_model(ModelSpec(preset=preset), torch.float32, torch.device("cpu"), seed=0)
    model.set_experts_implementation("batched_mm")
    length = 24
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        model(input_ids=torch.randint(1, 1000, (1, length)))
    counted = sum(sum(ops.values()) for name, ops in counter.get_flop_counts().items()
                  if name.endswith((".experts", ".gate", ".router")))
    assert counted == 2 * length * (routed_macs_per_token(model) + router_macs_per_token(model))
    # 2 layers × 2 of 4 experts: half the experts' weights per token.
    experts = sum(parameter.numel() for name, parameter in model.named_parameters()
                  if ".experts." in name and parameter.dim() == 3)
    assert routed_macs_per_token(model) == experts // 2


@pytest.mark.parametrize(("preset", "total", "active"), [
    ("olmoe-1b-7b", 6_919_161_856, 1_282_017_280),  # "1B active, 7B total"
    ("qwen3-30b-a3b", 30_532_122_624, 3_353_032_704),  # "30.5B total, 3.3B activated"
    ("mixtral-8x7b", 46_702_792_704, 12_879_925_248),  # "46.7B total, 12.9B active"
])
def test_active_parameters_of_the_published_mixtures(preset: str, total: int, active: int) -> None:
    model = build_on_meta(ModelSpec(preset=preset))
    assert parameter_count(model) == total
    assert active_parameter_count(model) == active
