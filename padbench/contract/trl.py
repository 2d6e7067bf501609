"""TRL's packing settings, written as its `SFTConfig` names them, mapped onto padbench's layouts.

People who fine-tune with TRL already know `packing`, `packing_strategy`, `padding_free` and
`pad_to_multiple_of` (https://huggingface.co/docs/trl/sft_trainer#packing). A padding spec takes them as a
`trl:` block and adds the layout they mean to its strategies:

- nothing packed and not padding-free: `dynamic` (TRL's collator pads each batch to its longest row);
- `packing: true` (its default strategy `bfd`) or `padding_free: true`: `packed` — First-Fit-Decreasing packs
  whose positions restart at every sequence, what TRL's padding-free packing computes;
- `packing: true, packing_strategy: wrapped`: `wrapped` — every sequence end to end, cut every max_length tokens;
- `pad_to_multiple_of: N`: the padded layout's widths rounded up to a multiple of N.

Settings that contradict each other, or that would change nothing, are refused rather than guessed at.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

TrlLayout = Literal["dynamic", "packed", "wrapped"]
# What each layout computes, in the words the result's header states the mapping in.
MEANING: dict[TrlLayout, str] = {
    "dynamic": "each batch padded to its longest row, as TRL's collator pads when nothing is packed",
    "packed": "First-Fit-Decreasing packs of batch_size × max_length tokens, positions restarting at every "
              "sequence (TRL's padding-free packing)",
    "wrapped": "every sequence end to end, cut every max_length tokens, attention running across documents",
}


class TrlSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    packing: bool = False
    packing_strategy: Literal["bfd", "wrapped"] | None = None  # TRL's default with packing: bfd
    padding_free: bool = False
    pad_to_multiple_of: Annotated[int, Field(ge=1, le=4096)] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> TrlSettings:
        if self.packing_strategy is not None and not self.packing:
            raise ValueError(f"packing_strategy {self.packing_strategy} applies only with packing: true; set "
                             "packing: true, or leave packing_strategy out")
        if self.padding_free and self.packing_strategy == "wrapped":
            raise ValueError("padding_free restarts positions and attention at every sequence, packing_strategy "
                             "wrapped runs them across documents: choose one")
        if self.pad_to_multiple_of is not None and self.layout != "dynamic":
            raise ValueError(f"pad_to_multiple_of rounds up the width of padded batches, but these settings "
                             f"run as {self.layout}, whose rows are not padded: leave it out")
        return self

    @property
    def layout(self) -> TrlLayout:
        if self.packing and self.packing_strategy == "wrapped":
            return "wrapped"
        return "packed" if self.packing or self.padding_free else "dynamic"

    def strategy(self) -> dict[str, Any]:
        """The strategy entry these settings add to a spec."""
        extra = {"pad_to_multiple_of": self.pad_to_multiple_of} if self.pad_to_multiple_of is not None else {}
        return {"name": self.layout, **extra}

    def mapping(self) -> str:
        """`TRL packing: true, packing_strategy: wrapped → wrapped: …`: what the names given ran as."""
        extra = f", widths padded to a multiple of {self.pad_to_multiple_of}" if self.pad_to_multiple_of else ""
        return f"TRL {self._given()} → {self.layout}: {MEANING[self.layout]}{extra}"

    def _given(self) -> str:
        given = self.model_dump(exclude_defaults=True)
        return ", ".join(f"{key}: {str(value).lower()}" for key, value in given.items()) or "defaults"


def with_trl_strategy(document: Any) -> Any:
    """A padding spec document with its `trl` block's layout among its strategies: the only one when the spec
    lists none, else added after them unless listed already (so a stored spec read back is unchanged)."""
    if not isinstance(document, dict) or document.get("trl") is None:
        return document
    try:
        settings = TrlSettings.model_validate(document["trl"])
    except ValidationError:
        return document  # the `trl` field's own validation reports it, in place
    listed = document.get("strategies")
    if listed is None:
        return {**document, "strategies": [settings.strategy()]}
    if not isinstance(listed, list) or any(_plain_entry(entry) == settings.strategy() for entry in listed):
        return document
    return {**document, "strategies": [*listed, settings.strategy()]}


def _plain_entry(entry: Any) -> dict[str, Any] | None:
    """A strategy entry as `TrlSettings.strategy` writes one (its set options only), whatever form it takes."""
    if isinstance(entry, str):
        return {"name": entry}
    fields = entry.model_dump() if isinstance(entry, BaseModel) else entry
    return {key: value for key, value in fields.items() if value is not None} if isinstance(fields, dict) else None
