"""The sweep's kernels: every kernel family's sweep kernels, each its declaration (`padbench/kernels/<family>.py`:
name, device, dtype, GPU generation, documents, backward, score matrices) bound to the binding it names
(`bindings.py`: how it computes), in a registry that follows the registered families.

Availability is detected, never assumed: the declared prerequisites, then a tiny call on the device in the dtype,
cached per process.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from padbench.contract.kernel_family import KernelFamily, SweepDeclaration
from padbench.worker.engine.families import FamilyKernels, implementation
from padbench.worker.jobs.attention.bindings import KernelCall, SweepBinding
from padbench.worker.jobs.attention.inputs import InputSet, Problem, make_input_sets

HALF_DTYPES = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class SweepKernel:
    declared: SweepDeclaration
    binding: SweepBinding

    def __post_init__(self) -> None:
        if (self.declared.dense_only is None) != (self.binding.bind_varlen is not None):
            raise TypeError(f"sweep kernel {self.name!r}: its declaration's dense_only must say why exactly when "
                            "its binding has no varlen binder")

    @property
    def name(self) -> str:
        return self.declared.name

    def available(self, device: torch.device, dtype: torch.dtype) -> str | None:
        """None when the kernel runs on this device in this dtype, else the reason it does not."""
        return _availability(self.name, str(device), dtype)

    def check(self, device: torch.device, dtype: torch.dtype) -> str | None:
        """The static prerequisites: the device, dtype and GPU generation declared, then the binding's own."""
        declared = self.declared
        if declared.needs_cuda and device.type != "cuda":
            return "needs a CUDA device"
        if declared.half_precision_only and dtype not in HALF_DTYPES:
            return "needs dtype fp16 or bf16"
        reason = self.binding.prerequisites(device, dtype)
        oldest = declared.min_compute_capability
        if reason is None and oldest is not None and torch.cuda.get_device_capability(device) < oldest:
            return f"needs a GPU of compute capability {oldest[0]}.{oldest[1]} or later"
        return reason

    def unsupported(self, problem: Problem) -> str | None:
        """Why the kernel never runs this problem (a backward it lacks, documents it cannot mask); None if it can."""
        if problem.backward and self.declared.forward_only is not None:
            return self.declared.forward_only
        return self.declared.dense_only if problem.layout == "varlen" else None

    def predicted_bytes(self, problem: Problem) -> int:
        """The materialised score matrices' size (0 for tiled kernels): a lower bound on the peak."""
        return self.declared.score_matrices[int(problem.backward)] * problem.score_matrix_bytes

    def bind(self, problem: Problem, inputs: InputSet) -> KernelCall:
        binder = self.binding.bind_varlen if problem.layout == "varlen" else self.binding.bind_dense
        if binder is None:
            raise ValueError(f"{self.name}: {self.unsupported(problem)}")
        return binder(problem, inputs)


def _family_sweep_kernels(family: KernelFamily) -> list[tuple[str, SweepKernel]]:
    kernels = []
    for declared in family.sweep:
        binding = implementation(declared.implementation)
        if not isinstance(binding, SweepBinding):
            raise TypeError(f"{declared.implementation} (sweep kernel {declared.name!r}) is no SweepBinding")
        kernels.append((declared.name, SweepKernel(declared, binding)))
    return kernels


SWEEP_KERNELS: FamilyKernels[SweepKernel] = FamilyKernels("sweep kernel", _family_sweep_kernels)


def available_sweep_kernels(device: torch.device | str) -> list[str]:
    """The kernels that run on `device` in bf16 or fp32: what a worker registers as capabilities."""
    device = torch.device(device)
    return [name for name, kernel in SWEEP_KERNELS.items()
            if any(kernel.available(device, dtype) is None for dtype in (torch.bfloat16, torch.float32))]


@functools.cache
def _availability(name: str, device_name: str, dtype: torch.dtype) -> str | None:
    kernel, device = SWEEP_KERNELS.get(name), torch.device(device_name)
    reason = kernel.check(device, dtype)
    if reason is not None or not kernel.binding.probed:
        return reason
    probe = Problem(batch=1, heads=2, kv_heads=2, head_dim=64, seq_len=128, causal=True, dtype=dtype,
                    backward=False, layout="dense")
    try:
        kernel.bind(probe, make_input_sets(probe, device, count=1)[0])()
    except Exception as error:  # any failure of a 128-token call means the kernel cannot run here
        return describe_error(error)
    return None


def describe_error(error: BaseException, limit: int = 200) -> str:
    """`Type: message` of an exception on one line, short enough for a cell's reason."""
    text = " ".join(str(error).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
