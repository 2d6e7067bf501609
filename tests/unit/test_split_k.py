"""Split-K decode products: where they apply, that everything else stays `F.linear`, which weights tuning
times, and (on a GPU) that their partial sums make the product and a graphed decode passes the bf16 gate."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from padbench.contract.model_spec import ModelSpec
from padbench.worker.engine.decoding.fused import ProductLinear, fused_projections, share_fused_weights
from padbench.worker.engine.decoding.registry import DECODE_KERNELS
from padbench.worker.engine.decoding.split_k import BLOCK_M, DecodeProducts, SplitK, split_k_partials
from padbench.worker.engine.model.build import build_model, config_of
from padbench.worker.jobs.generate.gate import judge, reference_runs
from padbench.worker.jobs.generate.passes import run_pass
from tests.unit.test_generate_engine import decoder_and_scheduler, gate_set

# Wide enough for every candidate tiling's inner-dimension split (Qwen3's form, two layers).
WIDE_QWEN3 = {"model_type": "qwen3", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 2,
              "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 1000,
              "max_position_embeddings": 256}
TILING = SplitK(block_n=64, block_k=128, splits=4)


def test_a_tiling_takes_up_to_a_tile_of_rows_and_inner_dimensions_its_splits_divide() -> None:
    assert TILING.fits(1, 512) and TILING.fits(BLOCK_M, 6144)
    assert not TILING.fits(BLOCK_M + 1, 512)  # a prefill's rows: cuBLAS
    assert not TILING.fits(8, 640)  # 640 is not a multiple of 4 splits × 128
    assert not TILING.fits(0, 512)


def test_products_stay_f_linear_off_cuda_and_for_shapes_tuning_did_not_keep() -> None:
    products = DecodeProducts(tilings={(32, 512): TILING})
    x, weight, bias = torch.randn(4, 512), torch.randn(32, 512), torch.randn(32)
    torch.testing.assert_close(products.linear(x, weight, bias), F.linear(x, weight, bias), rtol=0, atol=0)
    other = torch.randn(16, 512)
    torch.testing.assert_close(products.linear(x, other), F.linear(x, other), rtol=0, atol=0)


def test_tuning_leaves_cpu_and_fp32_weights_on_f_linear_without_touching_a_gpu() -> None:
    products = DecodeProducts()
    products.tune({(32, 512): [torch.randn(32, 512)], (64, 512): [torch.randn(64, 512, dtype=torch.bfloat16)]}, 8)
    assert products.tuned and products.tilings == {} and products.choices == []


def test_tuning_times_every_fused_product_and_each_output_projection_by_shape() -> None:
    model = build_model(ModelSpec(config=WIDE_QWEN3), torch.float32, torch.device("cpu"), seed=0)
    shared = share_fused_weights(model)
    expected = {(512 + 2 * 256, 512): 2, (512, 512): 2, (2 * 1024, 512): 2, (512, 1024): 2}
    found = {shape: len(weights) for shape, weights in shared.product_weights().items()}
    assert found == expected
    with fused_projections(model, shared):  # the same weights while the fused modules are swapped in
        attention = model.model.layers[0].self_attn
        assert isinstance(attention.o_proj, ProductLinear) and attention.o_proj.products is shared.products
        assert {s: len(w) for s, w in shared.product_weights().items()} == expected
    assert type(model.model.layers[0].self_attn.o_proj) is nn.Linear


def cuda() -> torch.device:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return torch.device("cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 17, BLOCK_M])
def test_split_k_partials_sum_to_the_product(rows: int) -> None:
    device = cuda()
    x = torch.randn(rows, 2048, device=device, dtype=torch.bfloat16)
    weight = torch.randn(2048 + 96, 2048, device=device, dtype=torch.bfloat16) / 2048 ** 0.5  # a ragged last tile
    partials = split_k_partials(x, weight, TILING)
    assert partials.shape == (TILING.splits, rows, weight.shape[0]) and partials.dtype == torch.float32
    torch.testing.assert_close(partials.sum(0), x.float() @ weight.float().T, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
def test_tuning_keeps_only_tilings_it_timed_faster_and_records_them() -> None:
    device = cuda()
    weights = {(2048, 6144): [torch.randn(2048, 6144, device=device, dtype=torch.bfloat16) for _ in range(4)]}
    products = DecodeProducts()
    products.tune(weights, BLOCK_M)
    assert products.tuned and len(products.choices) == len(products.tilings)
    products.tune({}, BLOCK_M)  # once per model
    assert len(products.choices) == len(products.tilings)


@pytest.mark.gpu
@pytest.mark.parametrize("strategy", ["static", "continuous"])
def test_graphed_decoding_with_split_k_products_passes_the_bf16_gate(strategy: str) -> None:
    device = cuda()
    model = build_model(ModelSpec(config=WIDE_QWEN3), torch.bfloat16, device, seed=0)
    shared = share_fused_weights(model)
    for shape in shared.product_weights():
        shared.products.keep(shape, TILING, "set by the test")
    requests = gate_set(int(config_of(model).vocab_size))
    references = reference_runs(model, requests, device, "bf16")  # the stock model, cuBLAS products
    with fused_projections(model, shared):
        decoder, scheduler = decoder_and_scheduler(model, DECODE_KERNELS.get("flex-kvcache"), requests, device,
                                                   torch.bfloat16, cuda_graphs=True, compile_decode=True)
        run_pass(strategy, scheduler, decoder, requests, device)  # type: ignore[arg-type]
    outcome = judge(requests, references, decoder.generated, decoder.first_logits, "bf16")
    assert outcome.passed, outcome.detail
