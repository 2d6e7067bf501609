"""The decoding engine against one request at a time: every strategy's greedy tokens equal the plain model's,
exactly, in fp32 on the CPU, for Llama, Qwen 3 and Gemma 2 on every CPU cache kernel that can run them; and a
planted slot mix-up fails the gate, naming the request it broke.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

from padbench.contract.model_spec import ModelSpec
from padbench.contract.presets import MODEL_PRESETS
from padbench.worker.engine.attention import flex
from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.engine.attention.libraries import KernelUnavailable
from padbench.worker.engine.decoding import flex_decode
from padbench.worker.engine.decoding.cache import CacheShape, HostPlan, KvCache, TokenBuckets
from padbench.worker.engine.decoding.decoder import Decoder
from padbench.worker.engine.decoding.kernels import DecodeKernel
from padbench.worker.engine.decoding.registry import DECODE_KERNELS, resolve_decode_kernel
from padbench.worker.engine.model.build import build_model, config_of
from padbench.worker.jobs.generate import schedule
from padbench.worker.jobs.generate.gate import GateOutcome, ReferenceRun, judge, reference_runs
from padbench.worker.jobs.generate.passes import run_pass
from padbench.worker.jobs.generate.schedule import Request, Scheduler

CPU = torch.device("cpu")
PAD_ID = 0
# Prompt and output lengths that differ, so that static batches pad and idle, and continuous batching refills.
PROMPTS = (5, 11, 2, 8, 3, 13, 7)
OUTPUTS = (6, 2, 7, 4, 5, 3, 6)
SLOTS = 3
QWEN3: dict[str, Any] = {"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 30522,
         "max_position_embeddings": 256}
MODELS = {"tiny-llama": ModelSpec(preset="tiny-llama"), "qwen3": ModelSpec(config=QWEN3),
          "tiny-gemma2": ModelSpec(preset="tiny-gemma2")}
STRATEGIES = ("static", "sorted", "continuous")


def gate_set(vocab: int) -> list[Request]:
    generator = torch.Generator().manual_seed(7)
    return [Request(row, tuple(torch.randint(1, vocab, (p,), generator=generator).tolist()), n)
            for row, (p, n) in enumerate(zip(PROMPTS, OUTPUTS, strict=True))]


@pytest.fixture(scope="module", params=list(MODELS))
def family(request: pytest.FixtureRequest) -> tuple[str, torch.nn.Module, list[Request], dict[int, ReferenceRun]]:
    model = build_model(MODELS[request.param], torch.float32, CPU, seed=0)
    requests = gate_set(int(config_of(model).vocab_size))
    return request.param, model, requests, reference_runs(model, requests, CPU, "fp32")


def decoder_and_scheduler(model: torch.nn.Module, kernel: DecodeKernel, requests: Sequence[Request],
                          device: torch.device, dtype: torch.dtype, *, slots: int = SLOTS,
                          buckets: TokenBuckets | None = None, scratch: int | None = None,
                          cuda_graphs: bool = False, compile_decode: bool = False) -> tuple[Decoder, Scheduler]:
    """The cache, decoder and scheduler a generate job builds for `requests`, so every test decodes through them."""
    capacity = max(len(r.prompt) for r in requests) + max(r.output_length for r in requests) + 1
    longest = max(r.output_length for r in requests)
    if scratch is None:
        scratch = buckets.step if buckets else 0
    cache = KvCache(CacheShape.of(config_of(model)), slots, capacity, device, dtype, scratch=scratch)
    decoder = Decoder(model, kernel, cache, len(requests), longest, device, cuda_graphs=cuda_graphs,
                      compile_decode=compile_decode)
    decoder.keep_first_logits = True
    return decoder, Scheduler(slots, capacity, PAD_ID, len(requests), longest, buckets)


def decode(model: torch.nn.Module, kernel: DecodeKernel, strategy: str, requests: Sequence[Request],
           slots: int = SLOTS, buckets: TokenBuckets | None = None) -> Decoder:
    decoder, scheduler = decoder_and_scheduler(model, kernel, requests, CPU, torch.float32, slots=slots,
                                               buckets=buckets)
    run_pass(strategy, scheduler, decoder, requests, CPU)  # type: ignore[arg-type]
    return decoder


def gate(model: torch.nn.Module, kernel: DecodeKernel, strategy: str, requests: Sequence[Request],
         references: dict[int, ReferenceRun], buckets: TokenBuckets | None = None) -> GateOutcome:
    decoder = decode(model, kernel, strategy, requests, buckets=buckets)
    return judge(requests, references, decoder.generated, decoder.first_logits, "fp32")


def cpu_kernels() -> list[DecodeKernel]:
    return [kernel for _, kernel in DECODE_KERNELS.items() if kernel.unavailable_reason(CPU, torch.float32) is None]


def test_the_cpu_runs_sdpa_eager_and_flex_and_refuses_flash() -> None:
    assert sorted(k.name for k in cpu_kernels()) == ["eager-kvcache", "flex-kvcache", "sdpa-kvcache"]
    with pytest.raises(KernelUnavailable, match="torch-flash-kvcache: it needs bf16 or fp16"):
        resolve_decode_kernel("flash", CPU, torch.float32)
    with pytest.raises(KernelUnavailable, match="CUDA GPUs only"):
        resolve_decode_kernel("flash", CPU, torch.bfloat16)
    assert resolve_decode_kernel("sdpa", CPU, torch.float32).name == "sdpa-kvcache"
    assert resolve_decode_kernel("eager", CPU, torch.float32).name == "eager-kvcache"
    assert resolve_decode_kernel("flex", CPU, torch.float32).name == "flex-kvcache"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_and_cpu_kernel_passes_the_gate(family: tuple, strategy: str) -> None:
    name, model, requests, references = family
    softcap = AttentionFeatures.of(config_of(model)).softcap
    ran = []
    for kernel in cpu_kernels():
        reason = kernel.unsupported_reason(softcap)
        if reason is not None:
            assert name == "tiny-gemma2" and kernel.name == "sdpa-kvcache"
            continue
        decoder = decode(model, kernel, strategy, requests)
        outcome = judge(requests, references, decoder.generated, decoder.first_logits, "fp32")
        assert outcome.passed, f"{name} {strategy} on {kernel.name}: {outcome.detail}"
        # fp32 on one CPU: beyond the gate (which stops at a near-tie), every token equals the reference's.
        for request in requests:
            assert decoder.generated[request.row, :request.output_length].tolist() == references[request.row].tokens
        ran.append(kernel.name)
    expected = ["eager-kvcache", "flex-kvcache"]
    assert sorted(ran) == (expected if name == "tiny-gemma2" else [*expected, "sdpa-kvcache"])


def test_sdpa_refuses_gemma2_soft_capping() -> None:
    model = build_model(MODELS["tiny-gemma2"], torch.float32, CPU, seed=0)
    softcap = AttentionFeatures.of(config_of(model)).softcap
    kernel = DECODE_KERNELS.get("sdpa-kvcache")
    reason = kernel.unsupported_reason(softcap)
    assert reason == ("sdpa-kvcache does not apply attention logit soft-capping (the model caps at 50); "
                      "eager-kvcache does")
    assert DECODE_KERNELS.get("eager-kvcache").unsupported_reason(softcap) is None
    # Run anyway, the kernel refuses inside the model's forward rather than computing uncapped scores.
    with pytest.raises(KernelUnavailable, match="does not apply attention logit soft-capping"):
        decode(model, kernel, "static", gate_set(int(config_of(model).vocab_size))[:2])


# --- planted mix-ups -----------------------------------------------------------------------------------------

def swap_two_slots(field: str) -> Callable[[schedule.PlanBuilder], HostPlan]:
    """PlanBuilder.build that swaps `field` of slots 0 and 1 in every pure decode step."""
    original = schedule.PlanBuilder.build

    def build(self: schedule.PlanBuilder) -> HostPlan:
        plan = original(self)
        if plan.decode_only:
            values = getattr(plan, field)
            values[[0, 1]] = values[[1, 0]]
        return plan

    return build


@pytest.fixture(scope="module")
def llama() -> tuple[torch.nn.Module, list[Request], dict[int, ReferenceRun]]:
    model = build_model(MODELS["tiny-llama"], torch.float32, CPU, seed=0)
    requests = gate_set(int(config_of(model).vocab_size))
    return model, requests, reference_runs(model, requests, CPU, "fp32")


@pytest.mark.parametrize("field", ["out_slot", "k_start"])
@pytest.mark.parametrize("strategy", ["static", "continuous"])
@pytest.mark.parametrize("kernel_name", ["eager-kvcache", "sdpa-kvcache", "flex-kvcache"])
def test_a_planted_slot_mix_up_fails_the_gate(llama: tuple, monkeypatch: pytest.MonkeyPatch, field: str,
                                              strategy: str, kernel_name: str) -> None:
    model, requests, references = llama
    kernel = DECODE_KERNELS.get(kernel_name)
    assert gate(model, kernel, strategy, requests, references).passed  # the same pass, unplanted
    monkeypatch.setattr(schedule.PlanBuilder, "build", swap_two_slots(field))
    outcome = gate(model, kernel, strategy, requests, references)
    assert not outcome.passed
    assert outcome.detail.startswith("gate request ")
    assert "one-at-a-time reference's is" in outcome.detail


def test_a_missing_first_step_fails_the_gate(llama: tuple) -> None:
    model, requests, references = llama
    decoder = decode(model, DECODE_KERNELS.get("eager-kvcache"), "static", requests)
    decoder.first_logits.pop(3)
    outcome = judge(requests, references, decoder.generated, decoder.first_logits, "fp32")
    assert not outcome.passed and outcome.detail == "gate request 3: no first-step logits were produced"


# --- steps padded to token buckets ---------------------------------------------------------------------------

# Small buckets, so that most steps with prefills are padded (and the first, of every slot's prompt, is not).
BUCKETS = TokenBuckets(step=4, limit=24)


@pytest.mark.parametrize("kernel_name", ["eager-kvcache", "sdpa-kvcache", "flex-kvcache"])
def test_padded_steps_generate_exactly_the_unpadded_tokens_and_touch_no_slot(llama: tuple, kernel_name: str) -> None:
    model, requests, references = llama
    kernel = DECODE_KERNELS.get(kernel_name)
    plain, padded = decode(model, kernel, "continuous", requests), decode(model, kernel, "continuous", requests,
                                                                         buckets=BUCKETS)
    # fp32 on one CPU: the same tokens, bit for bit, and nothing written to any request's row but its own.
    assert torch.equal(padded.generated[:len(requests)], plain.generated[:len(requests)])
    for request in requests:
        assert padded.generated[request.row, :request.output_length].tolist() == references[request.row].tokens
    assert torch.equal(padded.last_tokens[:SLOTS], plain.last_tokens[:SLOTS])
    # The slots' cache regions hold the same keys and values (to the last bits a matmul of more rows may round
    # differently): the padding wrote the scratch rows only.
    end = plain.cache.scratch_start
    for ours, theirs in zip([*padded.cache.keys, *padded.cache.values], [*plain.cache.keys, *plain.cache.values],
                            strict=True):
        torch.testing.assert_close(ours[:end], theirs[:end], rtol=1e-5, atol=1e-6)
    assert any(tensor[end:].abs().sum() > 0 for tensor in padded.cache.keys)  # the padding did run


def leak_padding(into: str) -> Callable[..., int]:
    """PlanBuilder.pad_to whose padding writes its keys over slot 0's region, or gives the step's first output
    its logits."""
    original = schedule.PlanBuilder.pad_to

    def pad_to(self: schedule.PlanBuilder, tokens: int, scratch_start: int, pad_id: int) -> int:
        before = len(self.tokens)
        pads = original(self, tokens, scratch_start, pad_id)
        if into == "cache":
            self.writes[before:] = range(pads)
        else:
            self.logits[0] = tokens - 1
        return pads

    return pad_to


@pytest.mark.parametrize("into", ["cache", "outputs"])
def test_padding_that_leaks_into_a_slot_fails_the_gate(llama: tuple, monkeypatch: pytest.MonkeyPatch,
                                                       into: str) -> None:
    model, requests, references = llama
    kernel = DECODE_KERNELS.get("sdpa-kvcache")
    assert gate(model, kernel, "continuous", requests, references, BUCKETS).passed
    monkeypatch.setattr(schedule.PlanBuilder, "pad_to", leak_padding(into))
    outcome = gate(model, kernel, "continuous", requests, references, BUCKETS)
    assert not outcome.passed and outcome.detail.startswith("gate request ")


# --- layers that alternate windows ---------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", ["static", "continuous"])
def test_layers_that_alternate_windows_each_decode_with_their_own(strategy: str) -> None:
    """Gemma 3's layers alternate a sliding window (4 tokens here, shorter than every request) with full
    attention: a kernel that derives its mask once per step must derive one per window."""
    config = {**MODEL_PRESETS["tiny-gemma3"], "sliding_window": 4,
              "layer_types": ["sliding_attention", "full_attention"]}
    model = build_model(ModelSpec(config=config), torch.float32, CPU, seed=0)
    requests = gate_set(int(config_of(model).vocab_size))
    references = reference_runs(model, requests, CPU, "fp32")
    for kernel in cpu_kernels():
        outcome = gate(model, kernel, strategy, requests, references)
        assert outcome.passed, f"{kernel.name}: {outcome.detail}"


def test_flex_decode_steps_ask_for_the_tuned_split_kv_kernel(llama: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pure decode steps hand FlexAttention the decoding kernel's settings; steps with prefills leave its
    defaults. The CPU's reference takes no kernel options, so the tokens stay the reference's."""
    model, requests, references = llama
    asked: list[tuple[int, dict[str, Any] | None]] = []
    flex_dense = flex.flex_dense

    def recording(query: torch.Tensor, *args: Any, **options: Any) -> torch.Tensor:
        asked.append((query.shape[1], options.get("kernel_options")))
        return flex_dense(query, *args, **options)

    monkeypatch.setattr(flex, "flex_dense", recording)
    outcome = gate(model, DECODE_KERNELS.get("flex-kvcache"), "static", requests, references)
    assert outcome.passed, outcome.detail
    decode_calls = [options for queries, options in asked if queries == 1]
    assert decode_calls and all(options == flex_decode.DECODE_KERNEL_OPTIONS for options in decode_calls)
    assert all(options is None for queries, options in asked if queries != 1)


def test_flex_mask_bounds_are_made_once_per_cache_for_its_largest_step(llama: tuple,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA graphs captured with flex's mask bounds keep their addresses, so the bounds are sized once for the
    most tokens a step can have (one per cache row) and never replaced, whatever the steps' sizes."""
    model, requests, references = llama
    made: list[int] = []
    make = flex_decode._bounds

    def recording(rows: int, *args: Any, **options: Any) -> Any:
        made.append(rows)
        return make(rows, *args, **options)

    monkeypatch.setattr(flex_decode, "_bounds", recording)
    decoder = decode(model, DECODE_KERNELS.get("flex-kvcache"), "continuous", requests,
                     buckets=TokenBuckets(step=4, limit=8))
    assert judge(requests, references, decoder.generated, decoder.first_logits, "fp32").passed
    state = decoder.cache.kernel_state
    assert sorted(made) == [SLOTS, decoder.cache.rows] and set(state) == {"flex_decode:None", "flex_packed:None"}
    assert state["flex_packed:None"].first.numel() == decoder.cache.rows


def test_flex_steps_with_prefills_attend_the_decoding_slots_by_slot(llama: tuple,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """In a step that prefills beside running decodes, each decoding slot's single query goes through the decoding
    kernel; the packed call's mask gives it no keys, so no block of packed queries lists its slot's cache. The gate
    passing shows the two calls' outputs merged back in token order."""
    model, requests, references = llama
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []  # per step with prefills: single queries, their mask rows
    packed_mask = flex_decode.FlexDecode._packed_mask

    def recording(self: Any, step: Any, window: int | None, segments: Any) -> Any:
        mask = packed_mask(self, step, window, segments)
        rows = torch.arange(segments.position.numel())[:, None]
        keys = torch.arange(step.cache.rows)[None, :]
        seen.append((segments.single.clone(), mask.mask_mod(0, 0, rows, keys).any(dim=1)))
        return mask

    monkeypatch.setattr(flex_decode.FlexDecode, "_packed_mask", recording)
    outcome = gate(model, DECODE_KERNELS.get("flex-kvcache"), "continuous", requests, references)
    assert outcome.passed, outcome.detail
    mixed = [(single, attends) for single, attends in seen if single.any() and not single.all()]
    assert mixed, "no step prefilled beside running decodes"
    for single, attends in mixed:
        assert not attends[single].any() and attends[~single].all()


def test_flex_by_slot_masks_list_only_blocks_inside_each_slots_region(llama: tuple,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps with prefills leave free slots idle once no request waits. The decoding kernel reads the key blocks
    its mask lists from each slot's region, with no bounds check on a GPU: an idle slot must list none, and no
    slot a block before or past its region."""
    model, requests, references = llama
    listed: list[tuple[torch.Tensor, torch.Tensor]] = []
    decode_mask = flex_decode.FlexDecode._decode_mask

    def recording(self: Any, step: Any, window: int | None) -> Any:
        mask = decode_mask(self, step, window)
        listed.append((step.k_used[:step.cache.slots].clone(), mask))
        return mask

    monkeypatch.setattr(flex_decode.FlexDecode, "_decode_mask", recording)
    # A slot more than there are requests: it sits out the first step, which prefills every request.
    decoder = decode(model, DECODE_KERNELS.get("flex-kvcache"), "continuous", requests, slots=len(requests) + 1)
    assert judge(requests, references, decoder.generated, decoder.first_logits, "fp32").passed
    blocks = -(-decoder.cache.capacity // flex_decode.BLOCK)
    assert any((used == 0).any() for used, _ in listed), "no step left a slot idle"
    for used, mask in listed:
        counts, indices = mask.kv_num_blocks[:, 0, 0], mask.kv_indices[:, 0, 0]
        assert (counts[used == 0] == 0).all()
        for slot, count in enumerate(counts.tolist()):
            assert ((indices[slot, :count] >= 0) & (indices[slot, :count] < blocks)).all()
