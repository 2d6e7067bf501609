"""`attention: auto`: the worker that runs a padding or generate job picks its attention family, here, in the
job's process (it knows the device), from the table of kernel speeds the worker keeps
(`padbench.worker.runtime.kernel_speeds`, whose rules decide). The job then runs a spec naming that family, and
its result keeps the spec as written, states the pick per entry point and why.

The candidates at an entry point are the families with a kernel there that runs on this device in the job's
dtype and applies what the model needs (soft-capping, sinks, a window its sequences outgrow). With no
comparison in the table, the static default runs: `flex` for decoding on a GPU (measured fastest there), else
`flash` where a flash implementation is among the candidates, else `sdpa`, else the first candidate. A
strategy's `auto` never repeats a kernel another strategy of the same layout names: it takes the next family in
line.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from padbench.contract.attention_pick import AttentionPick, KernelFigure
from padbench.contract.kernel_families import AUTO_ATTENTION, BEST_FLASH, KERNEL_FAMILIES, families
from padbench.contract.kernel_family import KernelFamily, ModelEntryPoint
from padbench.contract.results import JobResultBase
from padbench.contract.spec import JobSpecBase, strategy_entry_point
from padbench.kinds.generate.contract import GenerateJobSpec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.attention import ATTENTION_KERNELS
from padbench.worker.engine.attention.features import AttentionFeatures, window_bites
from padbench.worker.engine.decoding.registry import DECODE_KERNELS
from padbench.worker.engine.model.build import model_config
from padbench.worker.runtime.device import resolve_device, torch_dtype
from padbench.worker.runtime.kernel_evidence import model_digest
from padbench.worker.runtime.kernel_speeds import Figure, KernelSpeeds, Pick, Place, Query, length_band, pick_family
from padbench.worker.runtime.settings import WorkerSettings

# The family the static default falls to where no flash implementation runs: torch's own, which runs anywhere.
PORTABLE_DEFAULT = "sdpa"


def device_name(device: torch.device) -> str:
    """How the table names a device: the GPU's model name, or `cpu`."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _runs(family: KernelFamily, entry: ModelEntryPoint, device: torch.device, dtype: torch.dtype,
          features: AttentionFeatures, longest: int) -> bool:
    declared = family.kernel(entry)
    if declared is None:
        return False
    if entry == "decode":
        decode = DECODE_KERNELS.get(declared.name)
        window = features.sliding_window if window_bites(features.sliding_window, longest) else None
        return decode.unavailable_reason(device, dtype) is None and \
            decode.unsupported_reason(features.softcap, features.sinks, window) is None
    kernel = ATTENTION_KERNELS.get(declared.name)
    return kernel.unavailable_reason(device, dtype) is None and kernel.unsupported_reason(features, longest) is None


def candidates(entry: ModelEntryPoint, device: torch.device, dtype: torch.dtype, features: AttentionFeatures,
               longest: int) -> list[str]:
    """The families that can run at `entry` here, in the static default's order: flash implementations (fastest
    first), then the others as registered."""
    runnable = [family for family in families() if _runs(family, entry, device, dtype, features, longest)]
    flash = sorted((family for family in runnable if family.flash_rank is not None),
                   key=lambda family: family.flash_rank or 0)
    return [family.name for family in [*flash, *(family for family in runnable if family.flash_rank is None)]]


# Decoding from a KV cache on a GPU, with no figure of the worker's own: FlexAttention's decode kernel, which
# padbench's own runs measured fastest on H100s and H200s (continuous batching of Qwen3-1.7B's shape, 128 new
# tokens: 9,768 against torch's flash decode kernel's 9,051 output tokens/s, 1.06–1.10× in one tune on an H100,
# and ahead of it in every longer job; docs/benchmarks.md §8 and §15).
GPU_DECODE_DEFAULT = "flex"


def static_default(names: Sequence[str], taken: Sequence[str] = (), entry: ModelEntryPoint | None = None,
                   device_type: str = "cpu") -> str:
    """What runs without a comparison in the table: `flex` for decoding on a GPU where it runs (measured fastest
    there); else `flash` where a flash implementation is among `names`; where another strategy of the layout
    names a family, the first flash implementation left, since `flash` might resolve to the one taken; else
    sdpa."""
    if entry == "decode" and device_type == "cuda" and GPU_DECODE_DEFAULT in names and not taken:
        return GPU_DECODE_DEFAULT
    flash = [name for name in names if KERNEL_FAMILIES.get(name).flash_rank is not None]
    if flash:
        return flash[0] if taken else BEST_FLASH
    return PORTABLE_DEFAULT if PORTABLE_DEFAULT in names or not names else names[0]


def _figure(figure: Figure | None) -> KernelFigure | None:
    if figure is None:
        return None
    return KernelFigure(family=figure.family, rate=figure.rate, metric=figure.metric, source=figure.source,
                        measured_at=figure.measured_at, setting=figure.setting)


class Chooser:
    """Picks for one job: its device, dtype, model and the table as read once."""

    def __init__(self, spec: PaddingJobSpec | GenerateJobSpec, kind: str, mode: str, longest: int) -> None:
        self.device = resolve_device(spec.device)
        self.dtype = torch_dtype(spec.dtype)
        self.features = AttentionFeatures.of(model_config(spec.model))
        self.spec, self.kind, self.mode, self.longest = spec, kind, mode, longest
        self.figures = KernelSpeeds(WorkerSettings().kernel_speeds_path).figures()

    def pick(self, entry: ModelEntryPoint, taken: Sequence[str] = ()) -> AttentionPick:
        names = candidates(entry, self.device, self.dtype, self.features, self.longest)
        free = [name for name in names if name not in taken] or names
        place = Place(self.kind, device_name(self.device), self.spec.dtype, self.mode, entry)
        query = Query(place, length_band(self.longest), model_digest(self.spec.model), tuple(free),
                      static_default(free, taken, entry, self.device.type))
        chosen: Pick = pick_family(self.figures, query)
        return AttentionPick(entry=entry, chosen=chosen.family, measured=chosen.measured, reason=chosen.reason,
                             device=place.device, fastest=_figure(chosen.fastest), runner_up=_figure(chosen.runner_up))


def _settled_padding(spec: PaddingJobSpec, chooser: Chooser) -> tuple[PaddingJobSpec, list[AttentionPick]]:
    """Every strategy naming its family (the one asked, or the one picked), and the picks, one per layout (and
    per set of families the layout's other strategies name)."""
    picks: dict[tuple[str, tuple[str, ...]], AttentionPick] = {}
    strategies = []
    for strategy in spec.strategies:
        asked = spec.attention_for(strategy)
        if asked != AUTO_ATTENTION:
            strategies.append(strategy.model_copy(update={"attention": asked}))
            continue
        named = tuple(spec.attention_for(other) for other in spec.strategies
                      if other.label == strategy.label and spec.attention_for(other) != AUTO_ATTENTION)
        key = (strategy_entry_point(strategy.name), named)
        if key not in picks:
            picks[key] = chooser.pick(key[0], named)
        strategies.append(strategy.model_copy(update={"attention": picks[key].chosen}))
    job_level = spec.attention if spec.attention != AUTO_ATTENTION else next(iter(picks.values())).chosen
    return spec.model_copy(update={"attention": job_level, "strategies": strategies}), list(picks.values())


def settle_attention(spec: JobSpecBase) -> tuple[JobSpecBase, list[AttentionPick] | None]:
    """The spec with every `auto` replaced by the family picked, and the picks (None where nothing was `auto`)."""
    if isinstance(spec, GenerateJobSpec) and spec.attention == AUTO_ATTENTION:
        pick = Chooser(spec, "generate", "generate", spec.longest_context()).pick("decode")
        return spec.model_copy(update={"attention": pick.chosen}), [pick]
    if isinstance(spec, PaddingJobSpec) and any(spec.attention_for(s) == AUTO_ATTENTION for s in spec.strategies):
        return _settled_padding(spec, Chooser(spec, "padding", spec.mode, spec.data.max_length))
    return spec, None


def stated(result: JobResultBase, spec: JobSpecBase, picks: list[AttentionPick] | None) -> JobResultBase:
    """The result with the spec as written and the picks, where `auto` was settled."""
    if picks is None:
        return result
    return result.model_copy(update={"spec": spec, "attention_auto": picks})
