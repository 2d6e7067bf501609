"""What `padbench check` finds on this machine for a kind that builds a model: the model's shape, the tokenizer's
fit, the device, and whether each row's kernel (and a mixture's experts) runs here. Each kind's runner picks
the findings of its rows (`JobRunner.findings`); nothing here is imported until the command runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

import padbench.worker.engine.strategies  # noqa: F401  (importing registers the strategies)
from padbench.contract.experts import dense_model_experts_problem
from padbench.contract.spec import JobSpecBase
from padbench.contract.units import format_bytes
from padbench.kinds.generate.contract import GenerateJobSpec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.attention import KernelUnavailable, resolve_kernel
from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.engine.data.batches import STRATEGIES
from padbench.worker.engine.data.sources import load_tokenizer
from padbench.worker.engine.decoding.registry import resolve_decode_kernel
from padbench.worker.engine.hub import NotInCache
from padbench.worker.engine.model.build import build_on_meta, config_of
from padbench.worker.engine.model.experts import EXPERTS_IMPLEMENTATIONS, expert_field, experts_implementation, top_k
from padbench.worker.engine.model.parameter_count import active_parameter_count
from padbench.worker.jobs.kernel_choice import settle_attention
from padbench.worker.runtime.device import resolve_device, torch_dtype
from padbench.worker.runtime.messages import first_line

Finding = tuple[bool, str]  # (fine, what)
ModelJob = PaddingJobSpec | GenerateJobSpec
# A kind's own findings on the device, once the model is built: its rows' kernels, its experts.
RowFindings = Callable[[torch.nn.Module, torch.device, AttentionFeatures], Iterator[Finding]]


def model_findings(spec: ModelJob, row_findings: RowFindings) -> Iterator[Finding]:
    try:
        model = build_on_meta(spec.model)
    except NotInCache as error:  # a Hub model this machine has not fetched: the worker's to fetch and check
        yield True, str(error)
        return
    except Exception as error:  # a refusal of the model (its type, its fields): the finding is its message
        yield False, f"model: {first_line(error)}"
        return
    config = model.config
    parameters = sum(parameter.numel() for parameter in model.parameters())
    element = torch.empty((), dtype=torch_dtype(spec.dtype)).element_size()
    yield True, (f"model: {config.model_type}, {parameters / 1e6:,.1f}M parameters, "
                 f"{format_bytes(parameters * element)} of weights in {spec.dtype}")
    yield from tokenizer_findings(spec, int(config.vocab_size))
    try:
        device = resolve_device(spec.device)
    except Exception as error:
        yield False, f"device: {first_line(error)}"
        return
    yield True, f"device: {device}" + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else "")
    yield from row_findings(model, device, AttentionFeatures.of(config))


def tokenizer_findings(spec: ModelJob, vocabulary: int) -> Iterator[Finding]:
    name = spec.data.tokenizer or (spec.model.path if spec.data.source != "synthetic" else None)
    if name is None:
        yield True, f"data: {spec.data.source} (token ids drawn below the vocabulary of {vocabulary:,})"
        return
    try:
        tokenizer = load_tokenizer(name)
    except NotInCache as error:
        yield True, str(error)
        return
    except Exception as error:
        yield False, f"data.tokenizer {name!r}: {first_line(error)}"
        return
    ids = len(tokenizer)
    yield ids <= vocabulary, (f"data.tokenizer {name!r}: {ids:,} ids, "
                              f"{'within' if ids <= vocabulary else 'beyond'} the model's vocabulary of "
                              f"{vocabulary:,}")


def auto_attention_findings(spec: PaddingJobSpec | GenerateJobSpec) -> tuple[JobSpecBase, list[Finding]]:
    """The spec with `attention: auto` settled as the job would settle it here, and a line per pick."""
    settled, picks = settle_attention(spec)
    return settled, [(True, f"attention auto ({pick.entry}): {pick.chosen}: {pick.reason}") for pick in picks or ()]


def padding_kernel_findings(spec: PaddingJobSpec, device: torch.device,
                            features: AttentionFeatures) -> Iterator[Finding]:
    settled, picked = auto_attention_findings(spec)
    yield from picked
    assert isinstance(settled, PaddingJobSpec)
    spec = settled
    dtype = torch_dtype(spec.dtype)
    for strategy in spec.strategies:
        attention = spec.attention_for(strategy)
        where = f"{strategy.label} / {attention}"
        try:
            kernel = resolve_kernel(attention, STRATEGIES.get(strategy.name).layout, device, dtype)
        except KernelUnavailable as error:
            yield False, f"{where}: refused: {error.reason}"
            continue
        reason = kernel.unsupported_reason(features, spec.data.max_length)
        yield reason is None, f"{where}: {kernel.name} " + ("runs" if reason is None else f"refused: {reason}")


def experts_findings(spec: PaddingJobSpec, model: torch.nn.Module, device: torch.device) -> Iterator[Finding]:
    """A mixture of experts: its experts and active parameters, and whether each implementation runs here."""
    config = config_of(model)
    experts = expert_field(config)
    named: list[str] = sorted({name for strategy in spec.strategies for name in spec.experts_for(strategy) if name})
    if experts is None:
        if named:
            yield False, f"experts: {dense_model_experts_problem(spec.model.label)}"
        return
    field, count = experts
    active = active_parameter_count(model) or 0
    yield True, (f"experts: {count} routed ({field}), {top_k(config)} per token; {active / 1e6:,.1f}M "
                 "parameters active per token")
    for name in named or [experts_implementation(model) or "eager"]:
        reason = EXPERTS_IMPLEMENTATIONS.get(name).unavailable_reason(device)
        yield reason is None, f"experts {name}: " + ("runs" if reason is None else f"refused: {reason}")


def decode_kernel_findings(spec: GenerateJobSpec, device: torch.device,
                           features: AttentionFeatures) -> Iterator[Finding]:
    settled, picked = auto_attention_findings(spec)
    yield from picked
    assert isinstance(settled, GenerateJobSpec)
    spec = settled
    try:
        kernel = resolve_decode_kernel(spec.attention, device, torch_dtype(spec.dtype))
    except KernelUnavailable as error:
        yield False, f"{spec.attention}: refused: {error.reason}"
        return
    reason = kernel.unsupported_reason(features.softcap, features.sinks)
    yield reason is None, f"{spec.attention}: {kernel.name} " + ("runs" if reason is None else f"refused: {reason}")


def padding_findings(spec: PaddingJobSpec) -> Iterator[Finding]:
    def rows(model: torch.nn.Module, device: torch.device, features: AttentionFeatures) -> Iterator[Finding]:
        yield from padding_kernel_findings(spec, device, features)
        yield from experts_findings(spec, model, device)

    return model_findings(spec, rows)


def generate_findings(spec: GenerateJobSpec) -> Iterator[Finding]:
    return model_findings(spec, lambda _model, device, features: decode_kernel_findings(spec, device, features))
