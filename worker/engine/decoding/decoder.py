"""One decoding step on the device: upload its plan, run the model over its tokens, keep the greedy tokens.

Nothing is read back to the host: each slot's last generated token stays on the device (`last_tokens`) and
becomes the next step's input there, and generated tokens are written into a device table (`generated`,
one row per request plus a trash row and column for tokens nobody asked for). A step's plan travels as one
pinned host array copied asynchronously, so the host plans the next steps while the device computes.

Pure decode steps (every slot one token) have fixed shapes; on CUDA with a graph-safe kernel they are
captured once as a CUDA graph and replayed: one launch per step instead of one per kernel, which is what
keeps a small model's decode step from being bound by the host.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from padbench.worker.engine.attention.base import attention_implementation
from padbench.worker.engine.decoding.cache import HostPlan, KvCache, StepInputs
from padbench.worker.engine.decoding.kernels import DecodeKernel

# Fields of a plan uploaded to the device, in the order they are packed.
_PLAN_FIELDS = ("tokens", "source_slot", "positions", "write_index", "k_start", "k_used", "logit_rows", "out_slot",
                "out_row", "out_col")
GRAPH_WARMUP_STEPS = 2  # eager runs on a side stream before capture, as torch.cuda.graph requires


class Decoder:
    def __init__(self, model: torch.nn.Module, kernel: DecodeKernel, cache: KvCache, requests: int,
                 max_output: int, device: torch.device, cuda_graphs: bool, compile_decode: bool = False) -> None:
        self.model, self.kernel, self.cache, self.device = model, kernel, cache, device
        slots = cache.slots
        self.last_tokens = torch.zeros(slots, dtype=torch.long, device=device)
        # Row `requests` and column `max_output` are the trash: writes nobody reads.
        self.generated = torch.full((requests + 1, max_output + 1), -1, dtype=torch.long, device=device)
        self.cu_q_decode = torch.arange(slots + 1, dtype=torch.int32, device=device)
        self.use_graphs = cuda_graphs and device.type == "cuda" and kernel.graph_safe
        self.graph: torch.cuda.CUDAGraph | None = None
        # torch.compile fuses the elementwise kernels between a decode step's matmuls (norms, rotary
        # embeddings, activations): with ~50 small kernels per layer, they, not the matmuls, set a small
        # model's step time. Only the graphed decode step is compiled: its shapes never change.
        self.compile_decode = compile_decode and self.use_graphs
        # Steps with prefills (any length) run compiled with dynamic shapes where their kernel needs no host
        # ranges: eagerly, HF's ~50 operations per layer cost a mixed step of continuous batching ~15 ms of
        # launches on the host, several decode steps' worth.
        self.compile_steps = self.compile_decode and kernel.graph_safe and not kernel.loops_over_slots
        self._compiled: Any = None
        self._compiled_dynamic: Any = None
        self.compile_seconds: float | None = None
        self._staged = torch.zeros(len(_PLAN_FIELDS) * (slots + 1), dtype=torch.long, device=device)
        self.keep_first_logits = False
        self.first_logits: dict[int, torch.Tensor] = {}  # request row → its first step's logits (the gate)

    def reset(self) -> None:
        self.generated.fill_(-1)
        self.first_logits.clear()

    def step(self, plan: HostPlan) -> None:
        """Issue one step; returns before the device has run it."""
        if self.use_graphs and plan.decode_only:
            self._replay(plan)
        else:
            self._eager(plan)

    # --- eager -------------------------------------------------------------------------------------------

    def _eager(self, plan: HostPlan) -> None:
        fields = self._upload(plan)
        # A pure decode step takes the path its CUDA graph takes (no host ranges), so the CPU runs it too.
        host = None if plan.decode_only and self.kernel.graph_safe else plan
        logits = self._forward(fields, max_q=int(plan.query_counts.max(initial=0)), host=host,
                               compiled=(self.compile_decode and host is None) or self.compile_steps)
        if self.keep_first_logits:
            for index in np.flatnonzero(plan.out_col == 0):
                self.first_logits[int(plan.out_row[index])] = logits[index].float().cpu()

    def _upload(self, plan: HostPlan) -> dict[str, torch.Tensor]:
        slots = self.cache.slots
        cu_q = np.concatenate([[0], np.cumsum(plan.query_counts)])
        k_start = np.concatenate([plan.k_start, [slots * self.cache.capacity]])
        arrays = {"tokens": plan.tokens, "source_slot": plan.source_slot, "positions": plan.positions,
                  "write_index": plan.write_index, "cu_q": cu_q, "k_start": k_start, "k_used": plan.k_used,
                  "logit_rows": plan.logit_rows, "out_slot": plan.out_slot, "out_row": plan.out_row,
                  "out_col": plan.out_col}
        packed = torch.from_numpy(np.concatenate(list(arrays.values())).astype(np.int64))
        on_device = packed.pin_memory().to(self.device, non_blocking=True) if self.device.type == "cuda" else packed
        views, offset = {}, 0
        for name, array in arrays.items():
            views[name] = on_device[offset:offset + len(array)]
            offset += len(array)
        return views

    def _forward(self, fields: dict[str, torch.Tensor], max_q: int, host: HostPlan | None,
                 compiled: bool = False) -> torch.Tensor:
        name = self.kernel.hf_name_compiled if compiled else self.kernel.hf_name
        with attention_implementation(self.model, name):
            if not compiled:
                return self._core(fields, max_q, host)
            if max_q == 1 and host is None and len(fields["tokens"]) == self.cache.slots:
                return self._compiled_core()(fields, max_q, None)
            return self._compiled_steps()(fields, max_q, None)

    def _core(self, fields: dict[str, torch.Tensor], max_q: int, host: HostPlan | None) -> torch.Tensor:
        tokens = torch.where(fields["tokens"] >= 0, fields["tokens"], self.last_tokens[fields["source_slot"]])
        inputs = StepInputs(self.cache, fields["write_index"], fields["cu_q"].to(torch.int32),
                            fields["k_start"].to(torch.int32), fields["k_used"].to(torch.int32), max_q, host)
        logits = self.model(input_ids=tokens[None], position_ids=fields["positions"][None],
                            logits_to_keep=fields["logit_rows"], padbench_step=inputs).logits[0]
        chosen = logits.argmax(dim=-1)
        self.last_tokens.index_copy_(0, fields["out_slot"], chosen)
        self.generated.index_put_((fields["out_row"], fields["out_col"]), chosen)
        return logits

    def _compiled_core(self) -> Any:
        if self._compiled is None:
            # Every layer's code is traced once per layer object; the default limit of 8 would leave most
            # layers uncompiled.
            torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 256)
            self._compiled = torch.compile(self._core, dynamic=False)
        return self._compiled

    def _compiled_steps(self) -> Any:
        if self._compiled_dynamic is None:
            self._compiled_dynamic = torch.compile(self._core, dynamic=True)
        return self._compiled_dynamic

    # --- CUDA graph --------------------------------------------------------------------------------------

    def _decode_fields(self) -> dict[str, torch.Tensor]:
        """Views of the static upload buffer as a pure decode step's fields (every slot one token)."""
        slots = self.cache.slots
        views = {name: self._staged[i * (slots + 1):i * (slots + 1) + slots] for i, name in enumerate(_PLAN_FIELDS)}
        views["k_start"] = self._staged[4 * (slots + 1):5 * (slots + 1)]
        views["cu_q"] = self.cu_q_decode
        return views

    def _stage(self, plan: HostPlan) -> None:
        slots = self.cache.slots
        rows = np.zeros((len(_PLAN_FIELDS), slots + 1), dtype=np.int64)
        for index, name in enumerate(_PLAN_FIELDS):
            values = getattr(plan, name)
            rows[index, :len(values)] = values
        rows[4, slots] = slots * self.cache.capacity
        self._staged.copy_(torch.from_numpy(rows.reshape(-1)).pin_memory(), non_blocking=True)

    def _replay(self, plan: HostPlan) -> None:
        self._stage(plan)
        if self.graph is None:
            self.graph = self._capture()
        self.graph.replay()

    def _capture(self) -> torch.cuda.CUDAGraph:
        fields = self._decode_fields()
        # Capture runs the step for real: warm-up and capture write tokens and cache rows, so they run on
        # copies of the state they would change and the state is restored afterwards.
        saved_tokens, saved_generated = self.last_tokens.clone(), self.generated.clone()
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        started = time.perf_counter()
        with torch.cuda.stream(side):
            for _ in range(GRAPH_WARMUP_STEPS):
                self._forward(fields, 1, None, self.compile_decode)
        torch.cuda.current_stream(self.device).wait_stream(side)
        if self.compile_decode:
            torch.cuda.synchronize(self.device)
            self.compile_seconds = time.perf_counter() - started
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._forward(fields, 1, None, self.compile_decode)
        self.last_tokens.copy_(saved_tokens)
        self.generated.copy_(saved_generated)
        return graph
