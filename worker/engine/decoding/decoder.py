"""One decoding step on the device: upload its plan, run the model over its tokens, keep the greedy tokens.

Nothing is read back to the host: each slot's last generated token stays on the device (`last_tokens`) and
becomes the next step's input there, and generated tokens are written into a device table (`generated`,
one row per request plus a trash row and column for tokens nobody asked for). A step's plan travels as one
pinned host array copied asynchronously, so the host plans the next steps while the device computes.

Pure decode steps (every slot one token) have fixed shapes; on CUDA with a graph-safe kernel they are
captured once as a CUDA graph and replayed: one launch per step instead of one per kernel, which is what
keeps a small model's decode step from being bound by the host. Steps with prefills vary in length; padded to
token buckets (`TokenBuckets`) they replay a graph captured for each bucket, before anything is timed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from padbench.worker.engine.attention.base import attention_implementation
from padbench.worker.engine.decoding.cache import HostPlan, KvCache, StepInputs, TokenBuckets
from padbench.worker.engine.decoding.kernels import DecodeKernel
from padbench.worker.engine.decoding.upload import StepShape, stage, upload, views

GRAPH_WARMUP_STEPS = 2  # eager runs on a side stream before capture, as torch.cuda.graph requires
# A greedy step's argmax runs in two stages over this many chunks of each slot's logits: in one stage, inductor's
# argmax over 64 rows of Qwen3's 151,936 logits took 37 µs on an H200 (a quarter of the LM head that produced
# them). Two stages took 20.6 µs with 8 chunks, 22.6 with 16 and 36.6 with 128 (scripts/bench_greedy.py). The
# last chunk may be padding, which never wins: the first chunk holding the maximum does.
ARGMAX_CHUNKS = 8
MIN_CHUNK = 1024  # tokens a chunk holds at least, or the choice takes one stage


def greedy_tokens(logits: torch.Tensor, chunks: int = ARGMAX_CHUNKS) -> torch.Tensor:
    """`logits.argmax(dim=-1)` of a (rows, vocab) table, ties to the first index as argmax's: each chunk's first
    maximum, then the first chunk holding the row's maximum."""
    rows, vocab = logits.shape
    # Chunks of a multiple of 64 tokens start on 128-byte boundaries, where loads vectorise.
    width = -(-vocab // (chunks * 64)) * 64
    if width < MIN_CHUNK:  # a vocabulary too small to split: a row is a few loads for one thread block
        return logits.argmax(dim=-1)
    padded = torch.nn.functional.pad(logits, (0, width * chunks - vocab), value=float("-inf"))
    best, within = padded.view(rows, chunks, width).max(dim=-1)
    chunk = best.argmax(dim=-1, keepdim=True)
    return (chunk * width + within.gather(-1, chunk)).squeeze(-1)


@dataclass(frozen=True)
class StepGraph:
    graph: torch.cuda.CUDAGraph
    inputs: torch.Tensor  # the static buffer the graph reads its plan from
    logits: torch.Tensor  # the graph's output, rewritten at each replay
    max_q: int  # the most queries of one segment its attention launch covers


class Decoder:
    def __init__(self, model: torch.nn.Module, kernel: DecodeKernel, cache: KvCache, requests: int,
                 max_output: int, device: torch.device, cuda_graphs: bool, compile_decode: bool = False) -> None:
        self.model, self.kernel, self.cache, self.device = model, kernel, cache, device
        slots = cache.slots
        # The last entry is the trash slot: the next tokens of padding segments and of unused outputs land there.
        self.last_tokens = torch.zeros(slots + 1, dtype=torch.long, device=device)
        # Row `requests` and column `max_output` are the trash: writes nobody reads.
        self.generated = torch.full((requests + 1, max_output + 1), -1, dtype=torch.long, device=device)
        self.use_graphs = self.graphs_possible(kernel, device, cuda_graphs)
        self.graphs: dict[StepShape, StepGraph] = {}
        self._pool: Any = None
        # torch.compile fuses the elementwise kernels between a decode step's matmuls (norms, rotary
        # embeddings, activations): with ~50 small kernels per layer, they, not the matmuls, set a small
        # model's step time. The graphed decode step compiles with static shapes: they never change.
        self.compile_decode = compile_decode and self.use_graphs
        # Steps with prefills (any length) run compiled with dynamic shapes where their kernel needs no host
        # ranges: eagerly, HF's ~50 operations per layer cost a mixed step of continuous batching ~15 ms of
        # launches on the host, several decode steps' worth.
        self.compile_steps = self.compile_decode and not kernel.loops_over_slots
        # torch.compile's mode for the decode step (None: its default). The step is captured into a CUDA graph
        # here, so a mode must leave graphs to the caller ("max-autotune-no-cudagraphs", which also tunes the
        # step's matmuls and fuses elementwise work into their epilogues).
        self.compile_mode: str | None = None
        # Whether the compiled decode step traces the attention into its graph (see `DecodeKernel`); off, it
        # calls the attention behind a fence, as steps with prefills do: for comparing the two.
        self.trace_attention = True
        self._compiled: Any = None
        self._compiled_dynamic: Any = None
        self.compile_seconds: float | None = None
        self.capture_seconds: float | None = None
        self.keep_first_logits = False
        self.first_logits: dict[int, torch.Tensor] = {}  # request row → its first step's logits (the gate)

    @staticmethod
    def graphs_possible(kernel: DecodeKernel, device: torch.device, cuda_graphs: bool) -> bool:
        return cuda_graphs and device.type == "cuda" and kernel.graph_safe

    @staticmethod
    def replays_prefills(kernel: DecodeKernel, device: torch.device, cuda_graphs: bool) -> bool:
        """Whether steps with prefills can replay graphs: their kernel must not loop over host ranges."""
        return Decoder.graphs_possible(kernel, device, cuda_graphs) and not kernel.loops_over_slots

    def reset(self) -> None:
        self.generated.fill_(-1)
        self.first_logits.clear()

    def step(self, plan: HostPlan) -> None:
        """Issue one step; returns before the device has run it."""
        shape = StepShape.of(plan)
        if self.use_graphs and (shape in self.graphs or plan.decode_only):
            self._keep_first(plan, self._replay(plan, shape))
        else:
            self._keep_first(plan, self._eager(plan))

    def _keep_first(self, plan: HostPlan, logits: torch.Tensor) -> None:
        if self.keep_first_logits:
            for index in np.flatnonzero(plan.out_col == 0):
                self.first_logits[int(plan.out_row[index])] = logits[index].float().cpu()

    # --- eager -------------------------------------------------------------------------------------------

    def _eager(self, plan: HostPlan) -> torch.Tensor:
        fields = upload(plan, self.cache.rows, self.device)
        # A pure decode step takes the path its CUDA graph takes (no host ranges), so the CPU runs it too.
        host = None if plan.decode_only and self.kernel.graph_safe else plan
        return self._forward(fields, max_q=int(plan.query_counts.max(initial=0)), host=host,
                             compiled=(self.compile_decode and host is None) or self.compile_steps)

    def _forward(self, fields: dict[str, torch.Tensor], max_q: int, host: HostPlan | None,
                 compiled: bool = False) -> torch.Tensor:
        decode_step = max_q == 1 and host is None and len(fields["tokens"]) == self.cache.slots
        if not compiled or (decode_step and self.trace_attention):
            name = self.kernel.hf_name
        else:
            name = self.kernel.hf_name_fenced
        with attention_implementation(self.model, name):
            if not compiled:
                return self._core(fields, max_q, host)
            if decode_step:
                return self._compiled_core()(fields, max_q, None)
            return self._compiled_steps()(fields, max_q, None)

    def _core(self, fields: dict[str, torch.Tensor], max_q: int, host: HostPlan | None) -> torch.Tensor:
        tokens = torch.where(fields["tokens"] >= 0, fields["tokens"], self.last_tokens[fields["source_slot"]])
        inputs = StepInputs(self.cache, fields["write_index"], fields["cu_q"].to(torch.int32),
                            fields["k_start"].to(torch.int32), fields["k_used"].to(torch.int32), max_q, host)
        logits = self.model(input_ids=tokens[None], position_ids=fields["positions"][None],
                            logits_to_keep=fields["logit_rows"], padbench_step=inputs).logits[0]
        chosen = greedy_tokens(logits)
        self.last_tokens.index_copy_(0, fields["out_slot"], chosen)
        self.generated.index_put_((fields["out_row"], fields["out_col"]), chosen)
        return logits

    def _compiled_core(self) -> Any:
        if self._compiled is None:
            # Every layer's code is traced once per layer object; the default limit of 8 would leave most
            # layers uncompiled.
            torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 256)
            self._compiled = torch.compile(self._core, dynamic=False, mode=self.compile_mode)
        return self._compiled

    def _compiled_steps(self) -> Any:
        if self._compiled_dynamic is None:
            torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 256)
            self._compiled_dynamic = torch.compile(self._core, dynamic=True)
        return self._compiled_dynamic

    # --- CUDA graphs -------------------------------------------------------------------------------------

    def _replay(self, plan: HostPlan, shape: StepShape) -> torch.Tensor:
        graph = self.graphs.get(shape)
        if graph is None:  # the decode step's graph, captured at the first decode step (of the warm-up)
            started = time.perf_counter()
            graph = self.graphs[shape] = self._capture(plan, max_q=1, compiled=self.compile_decode)
            if self.compile_decode:
                self.compile_seconds = time.perf_counter() - started
        if plan.query_counts.max(initial=0) > graph.max_q:
            raise ValueError(f"a step segment of {plan.query_counts.max()} tokens exceeds the {graph.max_q} its "
                             "CUDA graph was captured for")
        stage(graph.inputs, plan, self.cache.rows)
        graph.graph.replay()
        return graph.logits

    def capture_buckets(self, buckets: TokenBuckets, longest_prompt: int) -> None:
        """Captures one graph per bucket of padded steps, before any pass: each plan keeps every query segment
        (the slots' and the padding's), one output per slot, and attends at most `longest_prompt` queries per
        segment (a prompt; the padding is shorter than a bucket's step)."""
        started = time.perf_counter()
        # As the passes that replay them run: with autograd recording, the graphs would keep what a backward
        # needs, and FlexAttention's decoding kernel refuses its block masks (made without query blocks).
        with torch.inference_mode():
            for size in reversed(buckets.sizes()):  # the largest first: later graphs reuse its pool memory
                plan = self._capture_plan(size)
                max_q = min(size, max(longest_prompt, buckets.step))
                self.graphs[StepShape.of(plan)] = self._capture(plan, max_q, compiled=self.compile_steps)
        # The capture plans' segments may exceed `max_q`; whatever their uncomputed rows left in the scratch
        # rows goes, so that no NaN sits in the cache.
        self.cache.clear_scratch()
        torch.cuda.synchronize(self.device)
        self.capture_seconds = time.perf_counter() - started

    def _capture_plan(self, size: int) -> HostPlan:
        """A padded step whose tokens all belong to the padding segment: capturing it writes scratch rows and
        the trash only."""
        slots, scratch, start = self.cache.slots, self.cache.scratch, self.cache.scratch_start
        zeros, trash = np.zeros(size, dtype=np.int64), np.full(slots, slots, dtype=np.int64)
        return HostPlan(tokens=zeros, source_slot=np.full(size, slots, dtype=np.int64), positions=zeros,
                        write_index=start + np.arange(size) % scratch,
                        query_counts=np.array([0] * slots + [size]), k_start=np.full(slots + 1, start),
                        k_used=np.array([0] * slots + [min(size, scratch)]),
                        logit_rows=np.full(slots, size - 1), out_slot=trash,
                        out_row=np.full(slots, self.generated.shape[0] - 1),
                        out_col=np.full(slots, self.generated.shape[1] - 1))

    def _capture(self, plan: HostPlan, max_q: int, compiled: bool) -> StepGraph:
        shape = StepShape.of(plan)
        inputs = torch.zeros(shape.length, dtype=torch.long, device=self.device)
        stage(inputs, plan, self.cache.rows)
        fields = views(inputs, shape)
        # Capture runs the step for real: warm-up and capture write tokens and cache rows, so they run on
        # copies of the state they would change and the state is restored afterwards.
        saved_tokens, saved_generated = self.last_tokens.clone(), self.generated.clone()
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(GRAPH_WARMUP_STEPS):
                self._forward(fields, max_q, None, compiled)
        torch.cuda.current_stream(self.device).wait_stream(side)
        torch.cuda.synchronize(self.device)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            logits = self._forward(fields, max_q, None, compiled)
        self.last_tokens.copy_(saved_tokens)
        self.generated.copy_(saved_generated)
        return StepGraph(graph, inputs, logits, max_q)
