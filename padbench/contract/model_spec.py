"""The `model` of a padding job: a preset, explicit architecture fields, a local model directory, or a
model on the Hugging Face Hub (its config only: weights are random).

Any Hugging Face causal LM whose attention goes through transformers' attention interface can be
measured. The contract checks what it can without transformers (shapes of the values, their bounds, a
model type padbench measures); the worker checks the fields against that model type's own config class,
and the model type again with its own transformers, before it loads anything heavy.

Written as a string, `model` is read by its form alone, so a name never means two things: a preset name
is the preset, `hub:NAME` and `org/name` are Hub models, a path (`./dir`, `/abs/dir`, `~/dir`, `a/b/c`)
is a local directory, and any other bare name is refused with the nearest preset.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from padbench.contract.bounds import NoNul, PathName, refusing_urls
from padbench.contract.experts import stated_experts
from padbench.contract.model_types import CAUSAL_LM_MODEL_TYPES
from padbench.contract.presets import MODEL_PRESETS, PresetName

# Config keys are Python identifiers (transformers' config attributes); values are JSON scalars, short
# lists (e.g. per-layer attention types) or one level of mapping (e.g. rotary scaling parameters).
ConfigKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
# Strings carry no NUL (PostgreSQL refuses it in text) and stay short: config values are names, not documents.
MODEL_TYPE_PATTERN = re.compile(r"[a-z0-9][a-z0-9_\-]{0,63}")
ConfigScalar = (StrictBool | Annotated[int, Field(ge=-(2**53), le=2**53)]
                | Annotated[float, Field(allow_inf_nan=False)] | Annotated[str, Field(max_length=256), NoNul] | None)
ConfigList = Annotated[list[ConfigScalar], Field(max_length=1024)]
ConfigValue = ConfigScalar | ConfigList | Annotated[dict[ConfigKey, ConfigScalar | ConfigList], Field(max_length=64)]
ArchitectureFields = Annotated[dict[ConfigKey, ConfigValue], Field(min_length=1, max_length=256)]

POSITION_FIELDS = ("max_position_embeddings", "n_positions")
GPT2_FIELDS = frozenset({"n_layer", "n_embd", "n_head"})

HUB_PREFIX = "hub:"
DATA_HUB_PREFIX = "hf:"
# A Hub model ID: `name` (the Hub's oldest models) or `org/name`, each part at most 96 characters.
HUB_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,95})"
HUB_MODEL_ID = re.compile(rf"{HUB_PART}(?:/{HUB_PART})?")
ORG_SLASH_NAME = re.compile(rf"{HUB_PART}/{HUB_PART}")


def _hub_model_id(value: str) -> str:
    if not HUB_MODEL_ID.fullmatch(value):
        raise PydanticCustomError("hub_model_id", "a Hugging Face Hub model ID is org/name (or a bare name): "
                                  "letters, digits, '-', '_' and '.', at most 96 of them each side")
    return value


HubModelId = Annotated[str, Field(min_length=1, max_length=2 * 96 + 1), AfterValidator(_hub_model_id)]
PATH_STARTS = ("/", "./", "../", "~", "\\", ".\\", "..\\")
EXAMPLE_MODEL_TYPES = "llama, qwen2, mistral, gemma2, phi3, gpt2"


def nearest(typed: str, choices: Any) -> str | None:
    """The choice a mistyped name most likely meant, or None when none is close. A name the typed text begins
    and covers at least half of (ignoring `-`, `.` and `_`, as `llama3` begins `llama-3.2-1b`) comes first: a
    ratio alone prefers whatever name is shortest, such as `llama-2-13b` for `llama3`."""
    names = sorted(choices)
    bare = _without_separators(typed)
    begun = [name for name in names
             if bare and _without_separators(name).startswith(bare) and 2 * len(bare) >= len(_without_separators(name))]
    close = difflib.get_close_matches(typed, begun, n=1, cutoff=0.0) if begun else []
    close = close or difflib.get_close_matches(typed, names, n=1, cutoff=0.6)
    return close[0] if close else None


def _without_separators(name: str) -> str:
    return name.casefold().replace("-", "").replace(".", "").replace("_", "")


def model_from_string(value: str) -> dict[str, str]:
    """A string `model` as the mapping it stands for; a bare name that is no preset is refused."""
    if value in MODEL_PRESETS:
        return {"preset": value}
    if value.startswith(HUB_PREFIX):
        return {"hub": value[len(HUB_PREFIX):]}
    if value.startswith(DATA_HUB_PREFIX):
        raise ValueError(f"write a Hugging Face Hub model as org/name or hub:NAME ({DATA_HUB_PREFIX} names data "
                         "sets, in data.source)")
    if value.startswith(PATH_STARTS):
        return {"path": value}
    if ORG_SLASH_NAME.fullmatch(value):
        return {"hub": value}
    if "/" in value or "\\" in value:
        return {"path": value}
    shown = value[:100]
    close = nearest(shown, MODEL_PRESETS)
    hint = f"did you mean {close!r}?" if close else f"presets: {', '.join(MODEL_PRESETS)}"
    raise ValueError(f"{shown!r} is not a preset ({hint}); write a local model directory as a path "
                     f"(./{shown}) and a Hugging Face Hub model as org/name or hub:{shown}")


class ModelSpec(BaseModel):
    """Exactly one of `preset`, `config`, `path` (a local Hugging Face model directory) or `hub` (a model on the
    Hugging Face Hub)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    preset: PresetName | None = None
    # Architecture fields of one model type, e.g. {model_type: llama, hidden_size: 2048, …}; fields left
    # out take the config class's defaults.
    config: ArchitectureFields | None = None
    # A model directory; where it may point is the worker's decision (its roots), never the submitter's.
    path: Annotated[PathName, refusing_urls(
        "name a local path (relative to the worker's model root), a Hub model (org/name) or a preset")] | None = None
    # A Hugging Face Hub model ID (`org/name`, or a bare `name` the Hub still serves): its config.json is
    # fetched by the worker, its weights never (they would be replaced by random ones).
    hub: HubModelId | None = None
    # Throughput does not depend on weight values, so random init is the default even for `path`.
    load_weights: bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            return model_from_string(value)
        config = value.get("config") if isinstance(value, dict) else None
        if isinstance(config, dict) and "model_type" not in config and set(config) >= GPT2_FIELDS:
            # Specs written when padbench measured GPT-2 only (stored jobs included) name no model type.
            return {**value, "config": {"model_type": "gpt2", **config}}
        return value

    @field_validator("config")
    @classmethod
    def _names_a_model_type(cls, config: dict[str, Any] | None) -> dict[str, Any] | None:
        if config is None:
            return None
        model_type = config.get("model_type")
        if not isinstance(model_type, str) or not MODEL_TYPE_PATTERN.fullmatch(model_type):
            raise ValueError(f"needs a `model_type`, a transformers model type such as {EXAMPLE_MODEL_TYPES} "
                             f"(got {model_type!r})")
        return config

    def model_type_problem(self) -> str | None:
        """Why a new job may not use this `config`'s model type, or None. A check for new jobs only: a result
        measured by a worker whose transformers knew a model type this list lacks stays readable."""
        model_type = (self.config or {}).get("model_type")
        if not isinstance(model_type, str) or model_type in CAUSAL_LM_MODEL_TYPES:
            return None
        close = nearest(model_type, CAUSAL_LM_MODEL_TYPES)
        hint = f" (did you mean {close!r}?)" if close else ""
        return (f"model_type {model_type!r} is not one padbench measures{hint}: it measures decoder-only causal "
                f"LMs whose attention goes through transformers' attention interface, e.g. {EXAMPLE_MODEL_TYPES}")

    @model_validator(mode="after")
    def _exactly_one_source(self) -> ModelSpec:
        given = [name for name in ("preset", "config", "path", "hub") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of preset, config, path or hub (got {', '.join(given) or 'none'})")
        if self.load_weights and self.path is None:
            raise ValueError("load_weights needs a local model directory in `path`")
        return self

    def architecture(self) -> dict[str, Any] | None:
        """The architecture fields when they are known without reading files (presets and explicit configs)."""
        return dict(MODEL_PRESETS[self.preset]) if self.preset else self.config

    def max_positions(self) -> int | None:
        """Positions the architecture declares, when stated without files; None leaves it to the worker."""
        fields = self.architecture() or {}
        for name in POSITION_FIELDS:
            if isinstance(fields.get(name), int):
                return int(fields[name])
        return None

    @property
    def label(self) -> str:
        """How reports name the model."""
        if self.preset:
            return self.preset
        if self.path:
            return self.path
        if self.hub:
            return HUB_PREFIX + self.hub  # never read as the preset of the same name
        return f"custom {(self.config or {}).get('model_type')}"


def weights_upper_bound(fields: dict[str, Any] | None) -> int | None:
    """Weights a token passes through, from architecture fields alone (2 FLOPs each per token).

    Counted generously, whatever the family: full-width attention projections (4·E² a layer, more than GQA
    needs) and a three-matrix gated MLP (3·E·I), plus the LM head (E·V); a mixture of experts' MLP is its
    top-k experts' and any shared expert's. None when width or depth is not stated (a model directory, or fields
    left to the config class's defaults).
    """
    shape = width_and_depth(fields)
    if fields is None or shape is None:
        return None
    width, layers = shape
    vocab = _first_int(fields, "vocab_size") or 0  # a config class default the server cannot know: not counted
    inner = _first_int(fields, "intermediate_size", "n_inner") or 4 * width
    routed = _first_int(fields, "num_experts_per_tok") if stated_experts(fields) else None
    if routed is not None:
        expert = _first_int(fields, "moe_intermediate_size", "intermediate_size") or 4 * width
        inner = routed * expert + (_first_int(fields, "shared_expert_intermediate_size") or 0)
    return layers * (4 * width * width + 3 * width * inner) + width * vocab


def width_and_depth(fields: dict[str, Any] | None) -> tuple[int, int] | None:
    """The hidden width and the number of layers, by the names the families give them; None when not stated."""
    if fields is None:
        return None
    width = _first_int(fields, "hidden_size", "n_embd")
    layers = _first_int(fields, "num_hidden_layers", "n_layer")
    return None if width is None or layers is None else (width, layers)


def _first_int(fields: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = fields.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
