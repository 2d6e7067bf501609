"""The measured model: a GPT-2 built with transformers from a preset, explicit fields or a local directory.

Throughput does not depend on weight values, so weights are randomly initialised (seeded, on the CPU so
every device starts from the same numbers) unless the spec asks to load a local checkpoint. Callers that
only need the memory a model takes (the OOM probe) pass `init="on_device"`: unseeded, built directly on
the device, skipping the slow CPU initialisation and the host-to-device copy. Dropout is
off and the model is in eval mode: a benchmark forward must be a deterministic function of its input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, TypedDict, cast

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from padbench.contract.spec import ModelSpec
from padbench.worker.engine.lm_head import align_lm_head


class DropoutRates(TypedDict):
    """GPT2Config's dropout keywords, typed per key so that `**NO_DROPOUT` is checked against its parameters."""

    resid_pdrop: float
    embd_pdrop: float
    attn_pdrop: float


NO_DROPOUT: DropoutRates = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
# GPT-2's `gelu_new` is the tanh-approximated GELU written as seven elementwise torch ops, each a full pass over
# the (tokens, 4·width) MLP activation; `gelu_pytorch_tanh` is the same function as one fused kernel.
FUSED_ACTIVATION = {"gelu_new": "gelu_pytorch_tanh"}
# The implementation a plain `model(...)` call uses; kernels switch it only for the duration of their forward.
DEFAULT_ATTENTION = "sdpa"


class ModelSourceError(ValueError):
    """A model directory that cannot be used; the message names the `model.path` and why."""


WeightInit = Literal["seeded", "on_device"]


def build_model(spec: ModelSpec, dtype: torch.dtype, device: torch.device, seed: int,
                init: WeightInit = "seeded") -> GPT2LMHeadModel:
    """The spec's model on `device` in eval mode; `init="on_device"` gives unseeded random weights, fast."""
    config = model_config(spec)
    if spec.load_weights:
        model = _load_pretrained(_model_dir(spec), config, dtype)
    elif init == "on_device":
        with torch.device(device):  # parameters are created, and initialised, where they will live
            model = GPT2LMHeadModel(config)
    else:
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
    # transformers wraps `to` with functools.wraps, which typeshed does not bind as a method.
    return align_lm_head(model.to(device=device, dtype=dtype).eval())  # type: ignore[call-arg]


def config_of(model: torch.nn.Module) -> GPT2Config:
    """The GPT-2 config of a model from `build_model`, compiled or not.

    nn.Module's stubs type any unknown attribute as `Tensor | Module`; `.config` is the model's GPT2Config
    (a compiled wrapper forwards the attribute to the model it wraps).
    """
    return cast(GPT2Config, model.config)


def model_config(spec: ModelSpec) -> GPT2Config:
    """The transformers config of the spec's model: dropout off, fused activation, default attention."""
    fields = spec.known_fields()
    if fields is None:
        config = GPT2Config.from_pretrained(_model_dir(spec), local_files_only=True, **NO_DROPOUT)
    else:
        config = GPT2Config(n_layer=fields.n_layer, n_embd=fields.n_embd, n_head=fields.n_head,
                            vocab_size=fields.vocab_size, n_positions=fields.n_positions, **NO_DROPOUT)
    config.activation_function = FUSED_ACTIVATION.get(config.activation_function, config.activation_function)
    config._attn_implementation = DEFAULT_ATTENTION
    # A benchmark forward never generates: without this, transformers fills a KV cache on every call,
    # copying each layer's keys and values (torch.cat) — 18% of a packed gpt2-seed forward on an H200.
    config.use_cache = False
    return config


def model_max_positions(spec: ModelSpec) -> int:
    fields = spec.known_fields()
    if fields is not None:
        return fields.n_positions
    config = _read_config_json(_model_dir(spec))
    positions = config.get("n_positions", config.get("max_position_embeddings"))
    if not isinstance(positions, int) or positions <= 0:
        raise ModelSourceError(f"model.path {spec.path!r}: config.json has no positive n_positions")
    return positions


def _model_dir(spec: ModelSpec) -> Path:
    directory = Path(spec.path or "").expanduser()
    _read_config_json(directory)  # validates it
    return directory


def _read_config_json(directory: Path) -> dict[str, object]:
    config_file = directory / "config.json"
    if not config_file.is_file():
        raise ModelSourceError(f"model.path {str(directory)!r}: no config.json there")
    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError) as error:
        raise ModelSourceError(f"model.path {str(directory)!r}: config.json is unreadable ({error})") from None
    if not isinstance(config, dict) or config.get("model_type") != "gpt2":
        found = config.get("model_type") if isinstance(config, dict) else None
        raise ModelSourceError(f"model.path {str(directory)!r}: model_type is {found!r}, padbench measures gpt2")
    return config


def _load_pretrained(directory: Path, config: GPT2Config, dtype: torch.dtype) -> GPT2LMHeadModel:
    try:
        return GPT2LMHeadModel.from_pretrained(directory, config=config, local_files_only=True, dtype=dtype,
                                               attn_implementation=DEFAULT_ATTENTION)
    except OSError as error:  # transformers reports missing weight files as OSError
        raise ModelSourceError(f"model.path {str(directory)!r}: cannot load weights ({error})") from None
