"""Which transformers model types padbench can measure, decided from names and configs alone.

A model type runs when transformers has a causal-LM class for it whose attention goes through the
attention interface (`_supports_attention_backend`): that is where padbench plugs its kernels in. It is
refused when it is an encoder (bidirectional attention: packing and padding mean something else there),
when its attention is hard-wired (no kernel could be swapped in), or when it routes tokens to experts in code of
its own rather than through transformers' experts interface (no implementation could be chosen, and its
routed work would go uncounted). Every check runs before a weight is allocated.
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import re
from pathlib import Path
from typing import Any

import transformers
from transformers import PretrainedConfig
from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_MASKED_LM_MAPPING_NAMES,
)

from padbench.worker.engine.model.experts import expert_field, uses_experts_interface
from padbench.worker.runtime.isolation import SpecProblem


class UnsupportedModel(SpecProblem):
    """A model type or config padbench cannot measure; the message names the field, the type and why."""


def check_model_type(model_type: str, field: str) -> type[PretrainedConfig]:
    """The config class of a model type that can run; UnsupportedModel otherwise."""
    version = transformers.__version__
    if model_type not in CONFIG_MAPPING_NAMES:
        raise UnsupportedModel(f"{field}: model_type {model_type!r} is not known to transformers {version}")
    if model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES or model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise UnsupportedModel(f"{field}: model_type {model_type!r} is not a causal language model "
                               "(padbench measures decoder-only LMs: llama, qwen2, mistral, gemma2, phi3, gpt2, …)")
    class_name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]
    model_class = getattr(transformers, class_name, None)  # imports that one modeling module, no weights
    if model_class is None:
        raise UnsupportedModel(f"{field}: model_type {model_type!r}: transformers {version} has no {class_name}")
    if not getattr(model_class, "_supports_attention_backend", False):
        raise UnsupportedModel(f"{field}: model_type {model_type!r}: {class_name} computes attention in its own "
                               "code, not through transformers' attention interface, so no kernel can be "
                               "plugged in")
    return CONFIG_MAPPING[model_type]


# transformers 5 gathers rotary settings into `rope_parameters`, and its config classes still take the fields
# many published config.json files state (`rope_theta`, `rope_scaling`) and fold them in, as AutoConfig does.
LEGACY_ROPE_FIELDS = frozenset({"rope_theta", "rope_scaling"})


def check_config_fields(config_class: type[PretrainedConfig], fields: dict[str, Any], field: str) -> None:
    """Every explicit field must be one the config class takes: a typo must not become a silent default."""
    accepted = set(inspect.signature(config_class.__init__).parameters) - {"self", "kwargs"}
    accepted |= set(getattr(config_class, "attribute_map", {}))
    if "rope_parameters" in accepted:
        accepted |= LEGACY_ROPE_FIELDS
    accepted |= optional_fields_read(config_class)
    unknown = sorted(name for name in fields if name not in accepted)
    if unknown:
        model_type = getattr(config_class, "model_type", config_class.__name__)
        raise UnsupportedModel(f"{field}: {model_type} configs have no field {', '.join(map(repr, unknown))}"
                               f"{_suggestion(unknown[0], accepted)}")


# `getattr(config, "head_dim", …)` in a modeling file: a field the model reads when a config states it.
_OPTIONAL_READ = re.compile(r"getattr\(\s*(?:self\.)?config\s*,\s*[\"'](\w+)[\"']")


def optional_fields_read(config_class: type[PretrainedConfig]) -> set[str]:
    """Fields the family's modeling code reads only when a config states them, which its config class does not
    list (Qwen3-MoE's `head_dim`: Qwen3-30B-A3B's config.json states 128 where width / heads is 64)."""
    module = config_class.__module__.replace(".configuration_", ".modeling_")
    spec = importlib.util.find_spec(module) if module != config_class.__module__ else None
    if spec is None or spec.origin is None:
        return set()
    return set(_OPTIONAL_READ.findall(Path(spec.origin).read_text()))


def check_experts_supported(config: PretrainedConfig, field: str) -> None:
    """A mixture of experts runs when its experts go through transformers' experts interface."""
    experts = expert_field(config)
    if experts is None:
        return
    class_name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type, "")
    model_class = getattr(transformers, class_name, None) if class_name else None
    if model_class is None or not uses_experts_interface(model_class):
        name, count = experts
        raise UnsupportedModel(f"{field}: model_type {config.model_type!r} is a mixture of experts ({name}={count}) "
                               f"whose experts do not go through transformers {transformers.__version__}'s experts "
                               "interface: padbench can neither choose their implementation nor count their work")


def _suggestion(name: str, accepted: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(accepted), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
