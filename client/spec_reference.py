"""The job-spec reference in Markdown, generated from the contract's JSON Schema (`padbench schema
--format markdown`), so the documented keys, types, defaults and bounds are always the ones enforced.

docs/spec-reference.md is this output; a test fails when the two differ.
"""

from __future__ import annotations

import json
from typing import Any

from padbench.contract.kernel_families import AUTO_ATTENTION, BEST_FLASH, attention_aliases, families, sweep_aliases
from padbench.contract.kernel_family import ENTRY_POINT_WORDS
from padbench.contract.kinds import DEFAULT_KIND, JOB_KINDS, JOB_SPEC_ADAPTER

# Sections in reading order: each job kind's spec, in the order the kinds were registered, then the parts
# they refer to, in this order; parts not named here follow alphabetically.
PARTS = ("ModelSpec", "DataSpec", "StrategySpec", "MeasurementSpec", "ProbeSpec", "TrlSettings", "VarlenLayout")
BOUNDS = (("minimum", "≥ {}"), ("exclusiveMinimum", "> {}"), ("maximum", "≤ {}"), ("exclusiveMaximum", "< {}"),
          ("minLength", "≥ {} characters"), ("maxLength", "≤ {} characters"),
          ("minItems", "≥ {} items"), ("maxItems", "≤ {} items"), ("pattern", "matching `{}`"))


def _anchor(name: str) -> str:
    return name.lower()


def describe_type(schema: dict[str, Any]) -> str:
    """`integer > 0`, `"auto"`, one of `bf16`, `fp16`, …, a link to a section, or a union of those."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    for alternatives in ("anyOf", "oneOf"):
        if alternatives in schema:
            return " or ".join(describe_type(option) for option in schema[alternatives])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        values = schema["enum"]
        return f"`{json.dumps(values[0])}`" if len(values) == 1 else "one of " + ", ".join(f"`{v}`" for v in values)
    kind = schema.get("type", "any")
    if kind == "array":
        kind = f"list of {describe_type(schema.get('items', {}))}"
    elif kind == "object" and "additionalProperties" in schema and isinstance(schema["additionalProperties"], dict):
        kind = f"mapping to {describe_type(schema['additionalProperties'])}"
    # A `|` (a pattern's alternation) would end the cell of the markdown table the type is written in.
    bounds = [template.format(str(schema[key]).replace("|", "\\|")) for key, template in BOUNDS if key in schema]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _default(field: dict[str, Any], required: bool) -> str:
    if required:
        return "required"
    if "default" not in field:
        return ""
    value = field["default"]
    if isinstance(value, (dict, list)) and len(json.dumps(value)) > 40:
        return "see its section" if isinstance(value, dict) else f"{len(value)} items"
    return f"`{json.dumps(value)}`"


def section(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"## {name}", ""]
    if schema.get("description"):
        lines += [" ".join(schema["description"].split()), ""]
    lines += ["| key | type | default |", "|---|---|---|"]
    required = set(schema.get("required", ()))
    for key, field in schema.get("properties", {}).items():
        lines.append(f"| `{key}` | {describe_type(field)} | {_default(field, key in required)} |")
    return [*lines, ""]


def _aliases(names: dict[str, str]) -> str:
    return ", ".join(f"`{alias}` → `{kernel}`" for alias, kernel in names.items())


def written_as_strings() -> list[str]:
    """What the schema cannot show: how a string `model` is read, and the attention names also accepted."""
    return [
        "`model` written as a string is read by its form: a preset name is that preset; `hub:NAME` or "
        "`org/name` is a model on the Hugging Face Hub (the worker fetches its config.json; weights are "
        "random); a path (`./dir`, `/dir`, `~/dir`, `a/b/c`) is a local model directory. Any other bare "
        "name is refused with the nearest preset, so `gpt2` is the preset and `hub:gpt2` the Hub's model.",
        "",
        "Where a spec names an attention kernel (`attention`, a strategy's `attention`), transformers' names "
        f"for its attention implementations are accepted and stored as the kernel they run: "
        f"{_aliases(attention_aliases())}. In an attention sweep's `kernels`: {_aliases(sweep_aliases())}.",
        "",
        *kernel_families(),
    ]


def kernel_families() -> list[str]:
    """The attention kernel families, each with the paths it has: a spec naming one for a path it lacks (a
    generate job's KV cache, say) is refused at submission."""
    lines = ["Attention kernel families (`padbench/kernels/`), and the paths each has: a padding job's strategies "
             "need padded or packed rows, a generate job the KV-cache path, an attention sweep names the sweep "
             f"kernels. `{BEST_FLASH}` is the fastest flash implementation present for the path. `{AUTO_ATTENTION}`, "
             "what a padding or generate spec naming none gets, is the family the worker running the job measured "
             f"fastest there (its table of kernel speeds; where it has no figure, `flex` for decoding on a GPU, "
             f"measured fastest there, else `{BEST_FLASH}`), stated in the result.", "",
             "| family | what it runs | paths | sweep kernels |", "|---|---|---|---|"]
    for family in families():
        paths = ", ".join(ENTRY_POINT_WORDS[entry] for entry in family.entry_points if entry != "sweep")
        sweep = ", ".join(f"`{kernel.name}`" for kernel in family.sweep)
        lines.append(f"| `{family.name}` | {family.description} | {paths} | {sweep} |")
    return lines


def render_reference() -> str:
    definitions = JOB_SPEC_ADAPTER.json_schema()["$defs"]
    ordered = [kind.spec.__name__ for _, kind in JOB_KINDS.items()] + list(PARTS)
    names = [name for name in ordered if name in definitions] + sorted(set(definitions) - set(ordered))
    lines = ["# Job spec reference", "",
             "Generated from the JSON Schema every spec is checked against (`padbench schema --format markdown`); "
             "`padbench schema` prints the schema itself. Unknown keys are errors. A spec without `kind` is a "
             f"{DEFAULT_KIND} job. `dtype` also accepts `bfloat16`, `float16` and `float32`.", "",
             *written_as_strings(), ""]
    for name in names:
        lines += section(name, definitions[name])
    return "\n".join(lines).rstrip() + "\n"
