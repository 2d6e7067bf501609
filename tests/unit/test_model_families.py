"""Every model family through every layout and every kernel that runs on this CPU, guarded by the gate.

Tiny presets of Llama, Qwen 2, Mistral, Gemma 2, Phi-3 and GPT-2 keep each family's features: grouped-query
attention (2 key/value heads for 4 query heads), rotary positions, gated MLPs, untied heads, Gemma's logit
soft-capping; those of Mixtral, Qwen 3 MoE and OLMoE route each token to 2 of 4 experts (routing is per token,
so every layout must agree with the one-sequence reference like a dense model). The batches come from the real
strategies and go through the real kernels, compared with the one-sequence reference exactly as a job's
correctness gate does.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import padbench.worker.engine.strategies  # noqa: F401  (importing registers the strategies)
from padbench.contract.model_spec import ModelSpec
from padbench.contract.spec import StrategySpec
from padbench.worker.engine.attention import ATTENTION_KERNELS, AttentionKernel, KernelUnavailable
from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.engine.data.batches import STRATEGIES, Batch, PackedBatch
from padbench.worker.engine.measure.correctness import check_layout, reference_logits
from padbench.worker.engine.model.build import build_model

CPU = torch.device("cpu")
MIXTURES = ["tiny-mixtral", "tiny-qwen3-moe", "tiny-olmoe"]  # mixtures of experts, run with transformers' default
FAMILIES = ["tiny-llama", "tiny-qwen2", "tiny-mistral", "tiny-gemma2", "tiny-phi3", "tiny-gpt2", "tiny-qwen3",
            "tiny-gemma3", *MIXTURES]
LAYOUTS = [StrategySpec(name="static"), StrategySpec(name="dynamic"), StrategySpec(name="binned", n_bins=2),
           StrategySpec(name="packed")]
LENGTHS = (5, 31, 12, 3, 47, 20, 8, 40)
MAX_LENGTH = 48


def sample(vocab: int = 30522) -> list[list[int]]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randint(1, vocab, (n,), generator=generator).tolist() for n in LENGTHS]


@pytest.fixture(scope="module", params=FAMILIES)
def family(request: pytest.FixtureRequest) -> tuple[str, torch.nn.Module, list[torch.Tensor]]:
    model = build_model(ModelSpec(preset=request.param), torch.float32, CPU, seed=0)
    return request.param, model, reference_logits(model, sample(), CPU)


def cpu_kernels() -> list[AttentionKernel]:
    return [kernel for _, kernel in ATTENTION_KERNELS.items() if kernel.unavailable_reason(CPU, torch.float32) is None]


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: layout.label)
def test_every_layout_on_every_cpu_kernel_passes_the_gate(family: tuple, layout: StrategySpec) -> None:
    name, model, references = family
    features = AttentionFeatures.of(model.config)
    assert features.grouped or name == "tiny-gpt2"  # GQA is exercised in every family that has it
    ran = []
    for kernel in cpu_kernels():
        if kernel.layout is not STRATEGIES.get(layout.name).layout:
            continue
        reason = kernel.unsupported_reason(features, max(LENGTHS))
        if reason is not None:
            assert name == "tiny-gemma2" and "soft-capping" in reason  # only Gemma's softcap refuses a kernel
            continue
        batches = [kernel.prepare(batch) for batch in
                   STRATEGIES.get(layout.name).batches(sample(), layout, 3, MAX_LENGTH, 0, 0)]
        gate = check_layout(lambda batch, k=kernel: k.forward(model, batch), batches, references, "fp32")
        assert gate.passed, f"{name} {layout.label} on {kernel.name}: {gate.reason}"
        ran.append(kernel.name)
    assert ran, f"no CPU kernel ran {name} {layout.label}"


def packed_sample(kernel: AttentionKernel) -> list[Batch]:
    plugin = STRATEGIES.get("packed")
    return [kernel.prepare(batch) for batch in plugin.batches(sample(), StrategySpec(name="packed"), 3, MAX_LENGTH,
                                                              0, 0)]


def test_positions_restarted_at_the_wrong_token_fail_the_gate_for_a_rotary_model() -> None:
    """Rotary attention depends only on relative positions, so positions that merely run on across sequences
    (a constant shift per sequence) compute the same function, and the gate rightly passes them; positions
    restarted one token late change distances inside a sequence, and the gate must catch that."""
    model = build_model(ModelSpec(preset="tiny-llama"), torch.float32, CPU, seed=0)
    references = reference_logits(model, sample(), CPU)
    kernel = ATTENTION_KERNELS.get("sdpa-block-mask")
    batches = packed_sample(kernel)

    def with_positions(batch: Batch, shifted: bool) -> Batch:
        assert isinstance(batch, PackedBatch)
        running = torch.arange(batch.input_ids.shape[1])
        if shifted:
            return replace(batch, position_ids=running[None])
        late = torch.cat([torch.arange(n) + (1 if i else 0) for i, n in enumerate(batch.lengths)])
        late[torch.tensor(batch.lengths[:-1]).cumsum(0)] = 0  # each later sequence's first token keeps 0
        return replace(batch, position_ids=late[None])

    def gate(shifted: bool | None) -> tuple[bool, float]:
        result = check_layout(lambda batch: kernel.forward(
            model, batch if shifted is None else with_positions(batch, shifted)), batches, references, "fp32")
        return result.passed, result.tolerance

    assert gate(None)[0]
    assert gate(shifted=True)[0]
    assert not gate(shifted=False)[0]


def test_positions_that_do_not_restart_fail_the_gate_for_absolute_positions() -> None:
    model = build_model(ModelSpec(preset="tiny-gpt2"), torch.float32, CPU, seed=0)
    references = reference_logits(model, sample(), CPU)
    kernel = ATTENTION_KERNELS.get("sdpa-block-mask")

    def running(batch: Batch) -> Batch:
        assert isinstance(batch, PackedBatch)
        return replace(batch, position_ids=torch.arange(batch.input_ids.shape[1])[None])

    gate = check_layout(lambda batch: kernel.forward(model, running(batch)), packed_sample(kernel), references,
                        "fp32")
    assert not gate.passed


class SoftcapDroppingSdpa(type(ATTENTION_KERNELS.get("sdpa"))):  # type: ignore[misc]
    """A deliberately broken kernel: it claims soft-capping and ignores it."""

    name = "test-softcap-dropping-sdpa"
    applies_softcap = True

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float, *,
               padbench_softcap: float | None = None, **inputs: object) -> torch.Tensor:
        return super().attend(query, key, value, scale, **inputs)


def test_a_kernel_that_drops_soft_capping_fails_the_gate() -> None:
    model = build_model(ModelSpec(preset="tiny-gemma2"), torch.float32, CPU, seed=0)
    # Larger query weights push attention logits past the cap of 50, so capping changes the function.
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(40)
    references = reference_logits(model, sample(), CPU)
    eager, broken = ATTENTION_KERNELS.get("eager"), SoftcapDroppingSdpa()
    layout = StrategySpec(name="static")

    def gate(kernel: AttentionKernel) -> bool:
        batches = [kernel.prepare(batch) for batch in STRATEGIES.get("static").batches(sample(), layout, 3,
                                                                                       MAX_LENGTH, 0, 0)]
        return check_layout(lambda batch: kernel.forward(model, batch), batches, references, "fp32").passed

    assert gate(eager)
    assert not gate(broken)


def test_kernels_without_soft_capping_are_refused_for_gemma_with_the_reason() -> None:
    model = build_model(ModelSpec(preset="tiny-gemma2"), torch.float32, CPU, seed=0)
    features = AttentionFeatures.of(model.config)
    assert ATTENTION_KERNELS.get("eager").unsupported_reason(features, 48) is None
    reason = ATTENTION_KERNELS.get("sdpa").unsupported_reason(features, 48)
    assert reason is not None and "soft-capping" in reason and "50" in reason
    kernel = ATTENTION_KERNELS.get("sdpa")
    batch = kernel.prepare(next(iter(STRATEGIES.get("static").batches(sample(), StrategySpec(name="static"), 3,
                                                                       MAX_LENGTH, 0, 0))))
    with pytest.raises(KernelUnavailable, match="soft-capping"), torch.inference_mode():
        kernel.forward(model, batch)  # the call-time guard: never silently dropped


def test_a_sliding_window_shorter_than_the_sequences_refuses_only_kernels_without_windows() -> None:
    features = AttentionFeatures(query_heads=4, kv_heads=2, softcap=None, sliding_window=16)
    for _, kernel in ATTENTION_KERNELS.items():
        reason = kernel.unsupported_reason(features, longest=48)
        assert (reason is None) == kernel.applies_window, kernel.name
        assert kernel.unsupported_reason(features, longest=16) is None
    assert [name for name, kernel in ATTENTION_KERNELS.items() if not kernel.applies_window] == ["torch-flash"]


def test_grouped_query_attention_is_recorded_as_native_or_expanded() -> None:
    assert ATTENTION_KERNELS.get("sdpa").gqa_handling(CPU, torch.float32) == "native"
    assert ATTENTION_KERNELS.get("eager").gqa_handling(CPU, torch.float32) == "expanded"
    assert ATTENTION_KERNELS.get("eager-block-mask").gqa_handling(CPU, torch.float32) == "expanded"
