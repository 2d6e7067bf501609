"""The optional flash-attention libraries, each imported once per process: whether it is here, and whether the
installed version's functions take a given parameter (`softcap`, `learnable_sink`), read from their signatures.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
from collections.abc import Callable
from types import ModuleType


class KernelUnavailable(RuntimeError):
    """An attention kernel cannot run here; the message names the kernel and the reason."""

    def __init__(self, kernel: str, reason: str) -> None:
        super().__init__(f"attention kernel {kernel!r} is unavailable: {reason}")
        self.kernel = kernel
        self.reason = reason


# --- detection (once per process) ---------------------------------------------------------------------

@functools.cache
def optional_module(name: str) -> ModuleType | None:
    """Import an optional package once; None when it is absent or fails to load (e.g. a CUDA-only build)."""
    try:
        return importlib.import_module(name)
    except Exception:  # a broken binary wheel raises OSError/RuntimeError, not only ImportError
        return None


def flash_attn_module() -> ModuleType:
    module = optional_module("flash_attn")
    if module is None or not hasattr(module, "flash_attn_varlen_func"):
        raise KernelUnavailable("flash-attn", "the flash_attn package (FlashAttention 2) is not importable")
    return module


def flash_attn_cute_module() -> ModuleType:
    # flash-attn-4 JIT-compiles each kernel variant in every process, seconds apiece, and the worker runs
    # every probe and measurement in a fresh child: its on-disk compile cache (off by default) pays once.
    os.environ.setdefault("FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED", "1")
    module = optional_module("flash_attn.cute")
    if module is None or not hasattr(module, "flash_attn_varlen_func"):
        # FlashAttention-4, which transformers' `flash_attention_4` runs: the flash-attn-cute package.
        raise KernelUnavailable("flash-attn-cute", "flash_attn.cute (FlashAttention-4, the flash-attn-cute package) "
                                                   "is not importable")
    return module


def flash_attn_3_module() -> ModuleType:
    module = optional_module("flash_attn_interface")
    if module is None or not hasattr(module, "flash_attn_varlen_func"):
        # FlashAttention-3, which transformers' `flash_attention_3` runs: a build of flash-attn's hopper/ folder.
        raise KernelUnavailable("flash-attn-3", "flash_attn_interface (FlashAttention-3, built from flash-attn's "
                                                "hopper/ folder) is not importable")
    return module


FLASH_MODULES: dict[str, Callable[[], ModuleType]] = {"flash-attn": flash_attn_module,
                                                       "flash-attn-cute": flash_attn_cute_module,
                                                       "flash-attn-3": flash_attn_3_module}


@functools.cache
def flash_library_reason(family: str, function: str, parameter: str) -> str | None:
    """Why the installed flash library's `function` takes no `parameter` (e.g. `softcap`); None when it does.

    Also None when the library is absent: the kernel is then unavailable, and availability says why.
    """
    try:
        module = FLASH_MODULES[family]()
    except KernelUnavailable:
        return None
    if parameter in inspect.signature(getattr(module, function)).parameters:
        return None
    version = getattr(optional_module("flash_attn"), "__version__", "this version")
    return f"the installed flash_attn ({version})'s {function} takes no {parameter}"
