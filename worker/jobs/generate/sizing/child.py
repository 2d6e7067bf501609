"""Child-process target of the generate kind's OOM probe (run through a `ChildSession`, never in the caller).

`probe_slots` builds the job's model (random weights made on the device: their values do not change the
memory a step takes), resolves the decode kernel the rows will use, allocates the KV cache of `size` slots
at the job's worst capacity (longest prompt + longest output + 1), and runs the worst steps through a
`Decoder`: a static batch's prefill of `size` prompts of the longest length — `size × longest` tokens in one
forward, the largest activation any row computes (continuous batching's first step packs at most as many) —
then a few decode steps. The peak is read in the frame of `padbench.worker.jobs.probing.child`: on CUDA
the allocator's peaks against its reserve plus the free memory, on the CPU the address space's growth
against the budget (RLIMIT_AS makes an over-budget size fail as a GPU runs out).

CUDA graphs and torch.compile stay off here: the graph's private memory pool is covered by the margin the
job's `probe.margin` takes off the limit. The model is kept for the next size while sizes fit, as the padding
kind's probe does; everything of the last size is released first.
"""

from __future__ import annotations

import time
from dataclasses import replace
from itertools import islice

import torch

from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.engine.decoding.cache import CacheShape, KvCache
from padbench.worker.engine.decoding.decoder import Decoder
from padbench.worker.engine.decoding.kernels import DecodeKernel
from padbench.worker.engine.decoding.registry import resolve_decode_kernel
from padbench.worker.engine.model.build import build_model, config_of
from padbench.worker.jobs.generate.schedule import Request, Scheduler
from padbench.worker.jobs.generate.sizing.protocol import SlotsRequest
from padbench.worker.jobs.probing.child import BuiltModel, ModelKeeper, peak, size_frame, synchronize
from padbench.worker.jobs.probing.protocol import ProbeMeasurement
from padbench.worker.runtime.device import torch_dtype
from padbench.worker.runtime.isolation import ChildContext, SpecProblem

_MODEL: ModelKeeper[DecodeKernel] = ModelKeeper()


def _built(request: SlotsRequest, device: torch.device) -> BuiltModel[DecodeKernel]:
    def build() -> tuple[DecodeKernel, torch.nn.Module]:
        dtype = torch_dtype(request.dtype)
        kernel = resolve_decode_kernel(request.attention, device, dtype)
        model: torch.nn.Module = build_model(request.model, dtype, device, request.seed, init="on_device")
        features = AttentionFeatures.of(config_of(model))
        reason = kernel.unsupported_reason(features.softcap, features.sinks)
        if reason is not None:
            raise SpecProblem(f"attention: kernel {kernel.name} cannot run this model: {reason}")
        return kernel, model

    return _MODEL.get(replace(request, size=0), device, request.cpu_memory_budget_bytes, build)


def probe_slots(ctx: ChildContext, request: SlotsRequest) -> ProbeMeasurement:
    started = time.monotonic()
    device = torch.device(request.device)
    built = _built(request, device)
    frame = size_frame(device, built)
    # Everything from here on counts towards the peak: the cache, the decoder's tables, the steps.
    size, output = request.size, request.output_tokens
    capacity = request.prompt_tokens + output + 1
    cache = KvCache(CacheShape.of(config_of(built.model)), size, capacity, device, torch_dtype(request.dtype))
    decoder = Decoder(built.model, built.kernel, cache, size, output, device, cuda_graphs=False)
    scheduler = Scheduler(size, capacity, 0, size, output)
    vocabulary = int(config_of(built.model).vocab_size)
    prompt = tuple(1 + token % (vocabulary - 1) for token in range(request.prompt_tokens))  # one, shared
    count = min(1 + request.decode_steps, output)  # a batch decodes output − 1 steps after its prefill
    steps = islice(scheduler.batch([Request(row, prompt, output) for row in range(size)]), count)
    with torch.inference_mode():
        for number, (plan, _) in enumerate(steps):  # planned one at a time, as a measured pass plans them
            decoder.step(plan)
            synchronize(device)
            ctx.progress((number + 1) / count, f"size {size}: step {number + 1} of {count}")
    peak_bytes, peak_allocated = peak(device, frame)
    return ProbeMeasurement(peak_bytes=peak_bytes, peak_allocated_bytes=peak_allocated, capacity_bytes=frame.capacity,
                            baseline_bytes=frame.baseline, kernel=built.kernel.name,
                            seconds=time.monotonic() - started)
