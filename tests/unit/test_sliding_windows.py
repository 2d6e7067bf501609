"""Sliding-window attention through every layout and every CPU kernel that applies windows.

A tiny Mistral with a window of 8 tokens runs sequences of up to 24, so the window bites in every layer; the
gate compares each kernel with transformers' own eager attention on one sequence at a time, which applies the
window itself. A kernel that drops the band must fail that gate, and a Gemma 2-like model whose layers
alternate between local (windowed) and global attention must pass it with the mask picked per layer.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import padbench.worker.engine.strategies  # noqa: F401  (importing registers the strategies)
from padbench.contract.model_spec import ModelSpec
from padbench.contract.presets import MODEL_PRESETS
from padbench.contract.spec import StrategySpec
from padbench.worker.engine.attention import ATTENTION_KERNELS, AttentionKernel, KernelUnavailable, masks, ops
from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.engine.data.batches import STRATEGIES, Batch, longest_attention_span
from padbench.worker.engine.measure.correctness import check_layout, reference_logits
from padbench.worker.engine.model.build import build_model
from tests.unit.test_engine_attention_kernels import ReferenceVarlen

CPU = torch.device("cpu")
WINDOW = 8
MAX_LENGTH = 24
LENGTHS = (5, 23, 12, 3, 24, 17, 9, 20)
LAYOUTS = [StrategySpec(name="static"), StrategySpec(name="dynamic"), StrategySpec(name="binned", n_bins=2),
           StrategySpec(name="packed")]


def sample() -> list[list[int]]:
    generator = torch.Generator().manual_seed(5)
    return [torch.randint(1, 30522, (n,), generator=generator).tolist() for n in LENGTHS]


def windowed(preset: str, **fields: Any) -> torch.nn.Module:
    config = {**MODEL_PRESETS[preset], "sliding_window": WINDOW, **fields}
    return build_model(ModelSpec(config=config), torch.float32, CPU, seed=0)


@pytest.fixture(scope="module")
def mistral() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    model = windowed("tiny-mistral")
    return model, reference_logits(model, sample(), CPU, eager=True)


def gate(kernel: AttentionKernel, model: torch.nn.Module, references: list[torch.Tensor],
         layout: StrategySpec = LAYOUTS[0]) -> bool:
    windows = AttentionFeatures.of(model.config).layer_windows
    batches = [kernel.prepare(batch, windows)
               for batch in STRATEGIES.get(layout.name).batches(sample(), layout, 3, MAX_LENGTH, 0, 0)]
    result = check_layout(lambda batch: kernel.forward(model, batch), batches, references, "fp32")
    return result.passed


def cpu_kernels(layout: StrategySpec) -> list[AttentionKernel]:
    return [kernel for _, kernel in ATTENTION_KERNELS.items()
            if kernel.layout is STRATEGIES.get(layout.name).layout
            and kernel.unavailable_reason(CPU, torch.float32) is None]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: layout.label)
def test_every_layout_on_every_windowed_cpu_kernel_passes_the_gate(mistral: tuple, layout: StrategySpec) -> None:
    model, references = mistral
    features = AttentionFeatures.of(model.config)
    assert features.layer_windows == (WINDOW,)  # Mistral: every layer is local
    kernels = cpu_kernels(layout)
    assert len(kernels) == 3  # sdpa, eager and flex of the layout
    for kernel in kernels:
        assert kernel.applies_window and kernel.unsupported_reason(features, MAX_LENGTH) is None
        assert gate(kernel, model, references, layout), f"{layout.label} on {kernel.name}"


def test_varlen_kernels_pass_the_layer_window_as_a_flash_window_size(mistral: tuple) -> None:
    """The flash varlen kernels run on GPUs only; a per-sequence reference of the same call checks the plumbing
    and the (window - 1, 0) conversion against transformers' eager window on the CPU."""
    model, references = mistral
    kernel = ReferenceVarlen()
    assert kernel.applies_window
    assert gate(kernel, model, references, LAYOUTS[3])


class WindowDroppingSdpa(type(ATTENTION_KERNELS.get("sdpa"))):  # type: ignore[misc]
    """A deliberately broken kernel: it claims windows and builds its masks without the band."""

    name = "test-window-dropping-sdpa"

    def build_mask(self, batch: Batch, window: int | None) -> torch.Tensor:
        return super().build_mask(batch, None)


def test_a_kernel_that_drops_the_window_fails_the_gate(mistral: tuple) -> None:
    model, references = mistral
    assert not gate(WindowDroppingSdpa(), model, references)


@pytest.mark.parametrize("kernel_name, layout", [("eager", LAYOUTS[1]), ("eager-block-mask", LAYOUTS[3])])
def test_local_and_global_layers_pick_their_mask_per_layer(kernel_name: str, layout: StrategySpec) -> None:
    model = windowed("tiny-gemma2", layer_types=["sliding_attention", "full_attention"])
    features = AttentionFeatures.of(model.config)
    assert features.layer_windows == (None, WINDOW)
    references = reference_logits(model, sample(), CPU, eager=True)
    assert gate(ATTENTION_KERNELS.get(kernel_name), model, references, layout)
    everywhere = windowed("tiny-gemma2", layer_types=["sliding_attention", "sliding_attention"])
    everywhere.load_state_dict(model.state_dict())  # same weights, the window on the global layer too
    assert not gate(ATTENTION_KERNELS.get(kernel_name), everywhere, references, layout)


def test_kernels_without_windows_are_refused_with_the_reason_and_at_call_time(mistral: tuple) -> None:
    model, _ = mistral
    features = AttentionFeatures.of(model.config)
    reason = ATTENTION_KERNELS.get("torch-flash").unsupported_reason(features, MAX_LENGTH)
    assert reason is not None and "torch-flash does not apply a sliding window" in reason and "8" in reason
    assert ATTENTION_KERNELS.get("torch-flash").unsupported_reason(features, WINDOW) is None  # never bites

    class WindowlessSdpa(type(ATTENTION_KERNELS.get("sdpa"))):  # type: ignore[misc]
        name = "test-windowless-sdpa"
        applies_window = False

    kernel = WindowlessSdpa()
    batch = kernel.prepare(next(iter(STRATEGIES.get("static").batches(sample(), LAYOUTS[0], 3, MAX_LENGTH, 0, 0))))
    with pytest.raises(KernelUnavailable, match="does not apply a sliding window"), torch.inference_mode():
        kernel.forward(model, batch)


def test_a_wrapped_row_of_short_documents_is_judged_by_its_whole_span(mistral: tuple) -> None:
    """Documents shorter than the window never meet it alone; wrapped into one row they do, so a kernel without
    windows is refused for wrapped rows and allowed for the others."""
    model, _ = mistral
    features = AttentionFeatures.of(model.config)
    lengths = [WINDOW - 2] * 6
    kernel = ATTENTION_KERNELS.get("torch-flash")
    spans = {name: longest_attention_span(STRATEGIES.get(name), lengths, MAX_LENGTH) for name in ("binned", "wrapped")}
    assert spans == {"binned": WINDOW - 2, "wrapped": min(MAX_LENGTH, sum(lengths))}
    assert kernel.unsupported_reason(features, spans["binned"]) is None
    reason = kernel.unsupported_reason(features, spans["wrapped"])
    assert reason is not None and "does not apply a sliding window" in reason


def test_a_flex_batch_prepared_without_the_window_is_an_error(mistral: tuple) -> None:
    model, _ = mistral
    kernel = ATTENTION_KERNELS.get("flex-padding-mask")
    batch = kernel.prepare(next(iter(STRATEGIES.get("static").batches(sample(), LAYOUTS[0], 3, MAX_LENGTH, 0, 0))))
    with pytest.raises(KernelUnavailable, match="prepared for full only"), torch.inference_mode():
        kernel.forward(model, batch)


def test_window_conventions() -> None:
    assert ops.flash_window(WINDOW) == (WINDOW - 1, 0) and ops.flash_window(None) == (-1, 0)
    mask = masks.padding_causal(torch.tensor([12, 3]), 12, WINDOW)[:, 0]
    assert mask[0].sum(dim=1).tolist() == [min(i + 1, WINDOW) for i in range(12)]
    assert bool(mask[1, 11, :3].all())  # a pad query past the window still sees its row's real keys
    packed = masks.block_diagonal_causal(torch.tensor([0] * 10 + [1] * 10), WINDOW)
    assert packed.sum(dim=1).tolist() == [min(i + 1, WINDOW) for i in range(10)] * 2


def test_layer_windows_follow_the_config() -> None:
    qwen = AttentionFeatures.of(build_model(ModelSpec(preset="tiny-qwen2"), torch.float32, CPU, seed=0).config)
    assert qwen.layer_windows == (None,)  # states a window, uses it on no layer
