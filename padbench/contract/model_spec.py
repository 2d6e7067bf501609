"""The `model` of a padding job: a preset, explicit architecture fields, or a local model directory.

Any Hugging Face causal LM whose attention goes through transformers' attention interface can be
measured. The contract checks what it can without transformers (shapes of the values, their bounds, a
model type present); the worker checks the fields against that model type's own config class, and
whether the model type can run at all, before it loads anything heavy.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints, model_validator

from padbench.contract.bounds import NoNul, PathName, refusing_urls
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


class ModelSpec(BaseModel):
    """Exactly one of `preset`, `config` or `path` (a local Hugging Face model directory)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    preset: PresetName | None = None
    # Architecture fields of one model type, e.g. {model_type: llama, hidden_size: 2048, …}; fields left
    # out take the config class's defaults.
    config: ArchitectureFields | None = None
    # A model directory; where it may point is the worker's decision (its roots), never the submitter's.
    path: Annotated[PathName, refusing_urls(
        "name a local path (relative to the worker's model root) or a preset")] | None = None
    # Throughput does not depend on weight values, so random init is the default even for `path`.
    load_weights: bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"preset": value} if value in MODEL_PRESETS else {"path": value}
        config = value.get("config") if isinstance(value, dict) else None
        if isinstance(config, dict) and "model_type" not in config and set(config) >= GPT2_FIELDS:
            # Specs written when padbench measured GPT-2 only (stored jobs included) name no model type.
            return {**value, "config": {"model_type": "gpt2", **config}}
        return value

    @model_validator(mode="after")
    def _exactly_one_source(self) -> ModelSpec:
        given = [name for name in ("preset", "config", "path") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of preset, config or path (got {given or 'none'})")
        if self.load_weights and self.path is None:
            raise ValueError("load_weights needs a local model directory in `path`")
        if self.config is not None:
            model_type = self.config.get("model_type")
            if not isinstance(model_type, str) or not MODEL_TYPE_PATTERN.fullmatch(model_type):
                raise ValueError("config needs a `model_type`, a transformers model type such as llama, qwen2, "
                                 f"mistral, gemma2, phi3 or gpt2 (got {model_type!r})")
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
        return f"custom {(self.config or {}).get('model_type')}"


def weights_upper_bound(fields: dict[str, Any] | None) -> int | None:
    """Weights a token passes through, from architecture fields alone (2 FLOPs each per token).

    Counted generously, whatever the family: full-width attention projections (4·E² a layer, more than GQA
    needs) and a three-matrix gated MLP (3·E·I), plus the LM head (E·V). None when width or depth is not
    stated (a model directory, or fields left to the config class's defaults).
    """
    if fields is None:
        return None
    width = _first_int(fields, "hidden_size", "n_embd")
    layers = _first_int(fields, "num_hidden_layers", "n_layer")
    if width is None or layers is None:
        return None
    vocab = _first_int(fields, "vocab_size") or 0  # a config class default the server cannot know: not counted
    inner = _first_int(fields, "intermediate_size", "n_inner") or 4 * width
    return layers * (4 * width * width + 3 * width * inner) + width * vocab


def _first_int(fields: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = fields.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
