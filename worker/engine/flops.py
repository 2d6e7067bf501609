"""FLOPs counted per batch, and the device peak they are compared with (MFU).

Counting rules (2 FLOPs per multiply-accumulate):
- matmuls, per computed token: QKV projection 3·E², output projection E², MLP 2·E·I, LM head E·V — so
  padding costs what the GPU really spends on it;
- attention, per layer and sequence of computed length L: QKᵀ and AV are 2·L²·E MACs together,
  counted as half for causal attention (the ideal a causal kernel skips to); a padded row's computed length
  is its full width, a packed sequence's its own length.
For gpt2-seed (E 1024, 12 layers, V 30,522) the matmuls are ~365 MFLOP per token (anchors §2).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from transformers import GPT2Config

from padbench.worker.engine.batches import Batch, PackedBatch


@dataclass(frozen=True)
class ModelShape:
    n_layer: int
    n_embd: int
    n_inner: int
    vocab_size: int

    @classmethod
    def of(cls, config: GPT2Config) -> ModelShape:
        inner = config.n_inner if config.n_inner is not None else 4 * config.n_embd
        return cls(n_layer=config.n_layer, n_embd=config.n_embd, n_inner=inner, vocab_size=config.vocab_size)

    @property
    def matmul_flops_per_token(self) -> int:
        width = self.n_embd
        per_layer = 3 * width * width + width * width + 2 * width * self.n_inner
        return 2 * (self.n_layer * per_layer + width * self.vocab_size)

    def attention_flops(self, lengths: Iterable[int], causal: bool = True) -> int:
        """Score and value matmuls of every layer over sequences of these computed lengths."""
        full = sum(2 * 2 * length * length * self.n_embd for length in lengths) * self.n_layer
        return full // 2 if causal else full


@dataclass(frozen=True)
class BatchFlops:
    matmul: int
    attention: int

    @property
    def total(self) -> int:
        return self.matmul + self.attention


def batch_flops(shape: ModelShape, batch: Batch) -> BatchFlops:
    """The work the device performs for this batch (pads included), for MFU on computed tokens."""
    if isinstance(batch, PackedBatch):
        computed_lengths: Iterable[int] = batch.lengths
    else:
        computed_lengths = [batch.width] * batch.rows
    return BatchFlops(matmul=shape.matmul_flops_per_token * batch.computed_tokens,
                      attention=shape.attention_flops(computed_lengths))


# --- device peaks ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PeakEntry:
    name_contains: str  # matched against torch.cuda.get_device_name, most specific entries first
    dense_half_flops: float  # bf16/fp16 tensor-core peak without sparsity, fp32 accumulation
    source: str


# Dense (no 2:4 sparsity) bf16/fp16 peaks from the vendors' datasheets; where a sheet quotes only the sparse
# figure, half of it. No fp32 entries: fp32 runs on different units and has no comparable peak here.
PEAK_TABLE: tuple[PeakEntry, ...] = (
    PeakEntry("H100 NVL", 835e12, "NVIDIA H100 datasheet: H100 NVL bf16 1,671 TFLOPS sparse → 835 dense"),
    PeakEntry("H100 PCIe", 756e12, "NVIDIA H100 datasheet: H100 PCIe bf16 1,513 TFLOPS sparse → 756 dense"),
    PeakEntry("H100", 989e12, "NVIDIA H100 datasheet: H100 SXM bf16 1,979 TFLOPS sparse → 989 dense"),
    PeakEntry("H200 NVL", 835e12, "NVIDIA H200 datasheet: H200 NVL bf16 1,671 TFLOPS sparse → 835 dense"),
    PeakEntry("H200", 989e12, "NVIDIA H200 datasheet: H200 SXM bf16 1,979 TFLOPS sparse → 989 dense"),
    PeakEntry("A100", 312e12, "NVIDIA A100 datasheet: bf16/fp16 tensor core 312 TFLOPS dense"),
    PeakEntry("L40S", 362e12, "NVIDIA L40S datasheet: bf16 362.05 TFLOPS dense (733 sparse)"),
    PeakEntry("L4", 121e12, "NVIDIA L4 datasheet: bf16 242 TFLOPS sparse → 121 dense"),
    PeakEntry("A10", 125e12, "NVIDIA A10 datasheet: bf16 tensor core 125 TFLOPS dense"),
    PeakEntry("RTX 4090", 165.2e12, "NVIDIA Ada whitepaper: RTX 4090 fp16/bf16 with fp32 accumulate 165.2 TFLOPS"),
    PeakEntry("RTX 3090", 71e12, "NVIDIA Ampere GA102 whitepaper: RTX 3090 fp16/bf16 with fp32 accumulate 71 TFLOPS"),
)


def peak_flops_for_name(device_name: str, dtype: torch.dtype) -> tuple[float | None, str]:
    if dtype not in (torch.bfloat16, torch.float16):
        return None, f"no {str(dtype).removeprefix('torch.')} peak is tabulated (bf16/fp16 only)"
    for entry in PEAK_TABLE:
        if entry.name_contains in device_name:
            return entry.dense_half_flops, entry.source
    return None, f"{device_name!r} is not in the peak table"


def peak_flops(device: torch.device, dtype: torch.dtype) -> tuple[float | None, str]:
    """The device's dense peak in FLOP/s and where the figure comes from; None when unknown."""
    if device.type != "cuda":
        return None, f"no peak is tabulated for {device.type} devices"
    return peak_flops_for_name(torch.cuda.get_device_name(device), dtype)
