"""The measured model: any transformers causal LM, from a preset, explicit fields, a local directory or the
config.json of a model on the Hugging Face Hub.

Throughput does not depend on weight values, so weights are randomly initialised unless the spec asks to
load a local checkpoint: seeded, and created directly on the device in the job's dtype (an 8B model
initialised on a CPU in fp32 takes minutes and 32 GB of host memory before its copy to the GPU; on the
device it takes seconds). Callers that only need the memory a model takes (the OOM probe) pass
`init="on_device"`: the same, unseeded. Dropout is off and the model
is in eval mode: a benchmark forward must be a deterministic function of its input.

Whether a model type can run at all is decided from its config alone (`model_support`), before any
weight is allocated: a refusal names the field, the model type and why.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any, Literal, cast

import torch
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig, PreTrainedModel

from padbench.contract.model_spec import ModelSpec
from padbench.worker.engine.hub import HubUnavailable, NotInCache, from_cache_or_hub
from padbench.worker.engine.model.lm_head import align_lm_head
from padbench.worker.engine.model.support import check_config_fields, check_experts_supported, check_model_type
from padbench.worker.runtime.isolation import SpecProblem
from padbench.worker.runtime.messages import first_line

# GPT-2's `gelu_new` is the tanh-approximated GELU written as seven elementwise torch ops, each a full pass over
# the (tokens, 4·width) MLP activation; `gelu_pytorch_tanh` is the same function as one fused kernel.
FUSED_ACTIVATION = {"gelu_new": "gelu_pytorch_tanh"}
ACTIVATION_FIELDS = ("activation_function", "hidden_act", "hidden_activation")
# The implementation a plain `model(...)` call uses; kernels switch it only for the duration of their forward.
# transformers' eager attention is every family's own reference code (some, such as Gemma 2, have no SDPA path).
DEFAULT_ATTENTION = "eager"


class ModelSourceError(SpecProblem):
    """A model that cannot be used; the message names the spec field and why."""


WeightInit = Literal["seeded", "on_device"]


def build_model(spec: ModelSpec, dtype: torch.dtype, device: torch.device, seed: int,
                init: WeightInit = "seeded") -> PreTrainedModel:
    """The spec's model on `device` in eval mode; `init="on_device"` gives unseeded random weights, fast."""
    config = model_config(spec)
    if spec.load_weights:
        model = _load_pretrained(_model_dir(spec), config, dtype)
    else:
        if init == "seeded":
            torch.manual_seed(seed)  # seeds the CPU and every CUDA generator
        with torch.device(device):  # parameters are created, and initialised, where they will live
            model = _instantiate(config, spec, dtype)
    # transformers wraps `to` with functools.wraps, which typeshed does not bind as a method.
    return align_lm_head(model.to(device=device, dtype=dtype).eval())  # type: ignore[call-arg]


def build_on_meta(spec: ModelSpec, dtype: torch.dtype = torch.float32) -> PreTrainedModel:
    """The spec's model with shapes but no storage: for counting parameters and FLOPs, instantly, at any size,
    and for sharding a model before any rank allocates it."""
    with torch.device("meta"):
        return align_lm_head(_instantiate(model_config(spec), spec, dtype))


def count_parameters(spec: ModelSpec) -> int:
    return sum(parameter.numel() for parameter in build_on_meta(spec).parameters())


def _instantiate(config: PretrainedConfig, spec: ModelSpec, dtype: torch.dtype = torch.float32) -> PreTrainedModel:
    try:
        return cast(PreTrainedModel, AutoModelForCausalLM.from_config(config, dtype=dtype))
    except (AssertionError, ValueError, TypeError) as error:  # a config its own model class cannot build
        raise ModelSourceError(f"model {spec.label!r}: {config.model_type} cannot be built from these "
                               f"fields: {first_line(error) or type(error).__name__}") from None


def config_of(model: torch.nn.Module) -> PretrainedConfig:
    """The transformers config of a model from `build_model`, compiled or not.

    nn.Module's stubs type any unknown attribute as `Tensor | Module`; `.config` is the model's config
    (a compiled wrapper forwards the attribute to the model it wraps).
    """
    return cast(PretrainedConfig, model.config)


def model_config(spec: ModelSpec) -> PretrainedConfig:
    """The transformers config of the spec's model: dropout off, fused activation, default attention.

    Built once per model spec in a job (the data, the memory plan, the FLOP count, the probe and the model all
    ask for it; a Hub or local model reads its config.json each time it is built) and handed out as a copy,
    since callers set fields on it (the attention implementation, the layers to keep). A job starts with none
    built (`forget_model_configs`): a directory's config may have changed since the last job."""
    return copy.deepcopy(_built_config(spec.model_dump_json()))


def forget_model_configs() -> None:
    _built_config.cache_clear()


@functools.lru_cache(maxsize=8)
def _built_config(spec_json: str) -> PretrainedConfig:
    # Keyed by the spec's JSON: a model spec with a config mapping is not hashable itself.
    return _new_config(ModelSpec.model_validate_json(spec_json))


def _new_config(spec: ModelSpec) -> PretrainedConfig:
    fields = spec.architecture()
    if fields is None:
        field = "model.hub" if spec.hub else "model.path"
        config = _config_from_directory(_model_dir(spec), field)
    else:
        field = "model.preset" if spec.preset else "model.config"
        config = _config_from_fields(fields, field)
    config = text_model_config(config, spec, field)
    check_experts_supported(config, field)
    _disable_dropout(config)
    for name in ACTIVATION_FIELDS:
        activation = getattr(config, name, None)
        if isinstance(activation, str) and activation in FUSED_ACTIVATION:
            setattr(config, name, FUSED_ACTIVATION[activation])
    config._attn_implementation = DEFAULT_ATTENTION
    # A benchmark forward never generates: without this, transformers fills a KV cache on every call,
    # copying each layer's keys and values (torch.cat) — 18% of a packed gpt2-seed forward on an H200.
    config.use_cache = False
    if getattr(config, "output_router_logits", False):
        # A mixture's routers' load-balancing loss: padbench's training loss is the next-token cross-entropy
        # alone (see padbench/kinds/padding/experts.py), so the router logits it would gather are never read.
        config.output_router_logits = False
    return config


def text_model_config(config: PretrainedConfig, spec: ModelSpec, field: str) -> PretrainedConfig:
    """The text model's config of a multimodal wrapper (Gemma 3's `gemma3`, whose config holds a
    `text_config` and no vocabulary of its own); any other config as it is.

    transformers maps such types to their image-and-text model, but padbench measures token sequences: the
    text model is what runs them, and the vision tower would only add weights nobody reads.
    """
    if getattr(config, "text_config", None) is None or hasattr(config, "vocab_size"):
        return config
    text = config.get_text_config()
    if spec.load_weights:
        raise ModelSourceError(f"{field}: {config.model_type} is an image-and-text model; padbench runs its text "
                               f"model ({text.model_type}), and loading that alone from the combined checkpoint is "
                               "not supported: use random weights (load_weights: false)")
    check_model_type(text.model_type, field)
    return text


def model_max_positions(spec: ModelSpec) -> int:
    known = spec.max_positions()
    if known is not None:
        return known
    config = model_config(spec)
    positions = getattr(config, "max_position_embeddings", None)
    if not isinstance(positions, int) or positions <= 0:
        raise ModelSourceError(f"{spec.label!r}: the config states no positive max_position_embeddings")
    return positions


def _config_from_fields(fields: dict[str, Any], field: str) -> PretrainedConfig:
    model_type = str(fields["model_type"])
    config_class = check_model_type(model_type, field)
    arguments = {name: value for name, value in fields.items() if name != "model_type"}
    check_config_fields(config_class, arguments, field)
    try:
        return config_class(**arguments)
    except Exception as error:  # the config class's own validation (e.g. heads ∤ width), any error type
        cause = error.__cause__ or error
        raise ModelSourceError(f"{field}: the {model_type} config rejects these fields: "
                               f"{first_line(cause) or type(cause).__name__}") from None


def _config_from_directory(directory: Path, field: str) -> PretrainedConfig:
    model_type = _read_config_json(directory, field).get("model_type")
    if not isinstance(model_type, str):
        raise ModelSourceError(f"{field} {str(directory)!r}: config.json names no model_type")
    check_model_type(model_type, field)
    try:
        return AutoConfig.from_pretrained(directory, local_files_only=True)
    except (OSError, ValueError, TypeError) as error:
        raise ModelSourceError(f"{field} {str(directory)!r}: config.json is not a valid {model_type} config "
                               f"({type(error).__name__})") from None


def _disable_dropout(config: PretrainedConfig) -> None:
    """Every dropout rate of the config to zero, whatever the family calls it (attn_pdrop, attention_dropout…)."""
    for name, value in config.to_dict().items():
        if isinstance(value, float) and ("dropout" in name or name.endswith("pdrop")):
            setattr(config, name, 0.0)


def _model_dir(spec: ModelSpec) -> Path:
    if spec.hub is not None:
        return _hub_config_dir(spec.hub)
    directory = Path(spec.path or "").expanduser()
    _read_config_json(directory, "model.path")  # validates it
    return directory


def _hub_config_dir(model_id: str) -> Path:
    """The local folder holding the Hub model's config.json: the Hugging Face cache's, fetched there once."""
    def download(local_files_only: bool) -> str:
        return hf_hub_download(model_id, "config.json", local_files_only=local_files_only)

    try:
        config_file = from_cache_or_hub(f"model.hub {model_id!r}", download, (LocalEntryNotFoundError,))
    except NotInCache:
        raise  # `padbench check`: the worker's to fetch, not a refusal
    except HubUnavailable as error:  # no network, or asked not to use it: the message says what to do instead
        raise ModelSourceError(str(error)) from None
    except (OSError, ValueError, EntryNotFoundError) as error:  # no such model, gated, no config
        raise ModelSourceError(f"model.hub {model_id!r}: cannot fetch its config.json from the Hugging Face Hub "
                               f"({type(error).__name__}); a local model directory is written as a path "
                               f"(./{model_id})") from None
    return Path(config_file).parent


def _read_config_json(directory: Path, field: str) -> dict[str, object]:
    config_file = directory / "config.json"
    if not config_file.is_file():
        raise ModelSourceError(f"{field} {str(directory)!r}: no config.json there")
    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError):
        raise ModelSourceError(f"{field} {str(directory)!r}: config.json is not readable JSON") from None
    if not isinstance(config, dict):
        raise ModelSourceError(f"{field} {str(directory)!r}: config.json does not hold a JSON object")
    return config


def _load_pretrained(directory: Path, config: PretrainedConfig, dtype: torch.dtype) -> PreTrainedModel:
    try:
        model = AutoModelForCausalLM.from_pretrained(directory, config=config, local_files_only=True, dtype=dtype,
                                                     attn_implementation=DEFAULT_ATTENTION)
    except OSError as error:  # transformers reports missing weight files as OSError
        raise ModelSourceError(f"model.path {str(directory)!r}: cannot load weights ({error})") from None
    return cast(PreTrainedModel, model)
