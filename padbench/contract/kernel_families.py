"""The registered attention kernel families, and the names a spec may give for attention that they define.

Every module of `padbench/kernels/` is one family (its `FAMILY`, a `KernelFamily`), registered when this module is
first imported; families kept outside padbench are named in `PADBENCH_KERNEL_FAMILIES` (modules separated by
commas), which every padbench process reads. Adding a family is one module there and its worker implementation:
the names a spec may write and their aliases, the refusals at submission, the worker's capabilities per kind and
the server's requirements all follow from its declaration.

`flash` is no family: it stands for the fastest flash implementation present (the families with a `flash_rank`),
which the worker resolves per entry point, and the result records the kernel that ran. `auto` is none either: a
padding or generate spec that names no attention gets it, and the worker that runs the job picks the family its
table of measured kernel speeds finds fastest for the job's kind and device (where it has no figure: `flex` for
decoding on a GPU, measured fastest there, else `flash`), which the result states.

Names are checked against the registry when a spec is validated, not frozen into a `Literal` when the spec models
are built, so a family registered later (a plugin's, a test's) is a name specs may use.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticKnownError

from padbench.contract.kernel_family import (
    ENTRY_POINT_WORDS,
    EntryPoint,
    KernelFamily,
    ModelEntryPoint,
    SweepDeclaration,
)
from padbench.contract.registry import Registry, UnknownPlugin

KERNEL_FAMILIES: Registry[KernelFamily] = Registry("attention kernel family")
FAMILIES_PACKAGE = "padbench.kernels"
PLUGIN_FAMILIES_VARIABLE = "PADBENCH_KERNEL_FAMILIES"
BEST_FLASH = "flash"
# What a padding or generate spec's attention means when it names none: the fastest measured family here.
AUTO_ATTENTION = "auto"
MODEL_ENTRY_POINTS: tuple[ModelEntryPoint, ...] = ("padded", "packed", "decode")
# A spec's attention: a family's name or `flash`, checked against the registry when the spec is validated.
AttentionName = str


# --- registration -------------------------------------------------------------------------------------------

def register_family_module(module: str) -> KernelFamily:
    """Register the family that `module` declares (its `FAMILY`)."""
    family = importlib.import_module(module).FAMILY
    if not isinstance(family, KernelFamily):
        raise TypeError(f"{module}.FAMILY must be a KernelFamily")
    _refuse_clashes(family)
    return KERNEL_FAMILIES.add(family.name, family)


def _refuse_clashes(family: KernelFamily) -> None:
    """A name means one thing: no family's name or alias may be another's, nor a sweep kernel's two families'."""
    others = [KERNEL_FAMILIES.get(name) for name in KERNEL_FAMILIES if name != family.name]
    taken = {BEST_FLASH, AUTO_ATTENTION} | {name for other in others for name in (other.name, *other.aliases)}
    clashes = {family.name, *family.aliases} & taken
    columns = {kernel.name for kernel in family.sweep} & {kernel.name for other in others for kernel in other.sweep}
    if clashes or columns:
        raise ValueError(f"kernel family {family.name!r} takes names already taken: "
                         f"{', '.join(sorted(clashes | columns))}")


def built_in_family_modules() -> list[str]:
    """Every module of `padbench/kernels/`, in name order: each is one family."""
    package = importlib.import_module(FAMILIES_PACKAGE)
    return [f"{FAMILIES_PACKAGE}.{module.name}" for module in sorted(pkgutil.iter_modules(package.__path__),
                                                                    key=lambda module: module.name)]


def plugin_family_modules() -> list[str]:
    return [name.strip() for name in os.environ.get(PLUGIN_FAMILIES_VARIABLE, "").split(",") if name.strip()]


for _module in (*built_in_family_modules(), *plugin_family_modules()):
    register_family_module(_module)


# --- families by entry point ----------------------------------------------------------------------------------

def families() -> list[KernelFamily]:
    """Every registered family, in registration order."""
    return [KERNEL_FAMILIES.get(name) for name in KERNEL_FAMILIES]


def flash_families(entry: EntryPoint) -> list[KernelFamily]:
    """The flash implementations with a kernel at `entry`, fastest first: what `flash` resolves to, in order."""
    ranked = [family for family in families() if family.flash_rank is not None and family.has(entry)]
    return sorted(ranked, key=lambda family: family.flash_rank or 0)


def attention_candidates(name: AttentionName, entry: EntryPoint) -> list[KernelFamily]:
    """The families `name` may run as at `entry`: `flash`'s in order of preference, `auto`'s every family with a
    kernel there, else the family itself."""
    if name == BEST_FLASH:
        return flash_families(entry)
    if name == AUTO_ATTENTION:
        return [family for family in families() if family.has(entry)]
    family = KERNEL_FAMILIES.get(name)
    return [family] if family.has(entry) else []


def attention_names(entries: tuple[EntryPoint, ...] = MODEL_ENTRY_POINTS) -> list[str]:
    """The names a spec may give for attention run at any of `entries`: `flash` first, then the families."""
    named = [family.name for family in families() if any(family.has(entry) for entry in entries)]
    has_flash = any(flash_families(entry) for entry in entries)
    return [BEST_FLASH, *named] if has_flash else named


def missing_entry_point(name: AttentionName, entry: EntryPoint) -> str | None:
    """Why `name` cannot run at `entry` (`flash-attn has no KV-cache (decode) path; families with one: …`);
    None when it can."""
    if attention_candidates(name, entry):
        return None
    words = ENTRY_POINT_WORDS[entry]
    having = [family.name for family in families() if family.has(entry)]
    subject = "no flash implementation has a" if name == BEST_FLASH else f"{name} has no"
    return f"{subject} {words} path; families with one: {', '.join(having) or 'none'}"


def needs_half_precision(name: AttentionName, entry: ModelEntryPoint) -> bool:
    """Whether every kernel `name` may run as at `entry` takes bf16 or fp16 only."""
    kernels = [family.kernel(entry) for family in attention_candidates(name, entry)]
    return bool(kernels) and all(kernel is not None and kernel.half_precision_only for kernel in kernels)


def attention_aliases() -> dict[str, str]:
    """The other names people bring for a family (transformers' `flash_attention_2`), and the family they mean."""
    return {alias: family.name for family in families() for alias in family.aliases}


# --- sweep kernels ----------------------------------------------------------------------------------------------

def sweep_declarations() -> list[tuple[KernelFamily, SweepDeclaration]]:
    return [(family, kernel) for family in families() for kernel in family.sweep]


def sweep_kernel_names() -> list[str]:
    return [kernel.name for _, kernel in sweep_declarations()]


def sweep_declaration(name: str) -> tuple[KernelFamily, SweepDeclaration]:
    """The sweep kernel `name` and its family (an unknown name lists the known ones)."""
    for family, kernel in sweep_declarations():
        if kernel.name == name:
            return family, kernel
    raise UnknownPlugin(f"unknown sweep kernel {name!r} (known: {', '.join(sweep_kernel_names()) or 'none'})")


def sweep_aliases() -> dict[str, str]:
    """A family's aliases in a sweep's `kernels`, and the sweep kernel each stands for (`eager` → `naive`)."""
    return {alias: family.sweep_alias for family in families() if family.sweep_alias is not None
            for alias in family.aliases}


# --- spec fields -----------------------------------------------------------------------------------------------

class NamesInSchema:
    """Annotated metadata: the names registered when a JSON schema is generated, as the field's `enum`."""

    def __init__(self, names: Callable[[], list[str]]) -> None:
        self.names = names

    def __get_pydantic_json_schema__(self, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {**handler(core_schema), "enum": self.names()}


def one_of(names: Callable[[], list[str]]) -> Callable[[str], str]:
    """A validator taking only the names `names()` gives, refusing others as pydantic refuses a `Literal` choice
    (so the CLI and the server suggest the nearest one)."""
    def check(value: str) -> str:
        known = names()
        if value not in known:
            quoted = [repr(name) for name in known]
            expected = " or ".join([", ".join(quoted[:-1]), quoted[-1]]) if len(quoted) > 1 else "".join(quoted)
            raise PydanticKnownError("literal_error", {"expected": expected})
        return value

    return check


def _aliased(aliases: Callable[[], dict[str, str]]) -> Callable[[Any], Any]:
    def resolve(value: Any) -> Any:
        return aliases().get(value, value) if isinstance(value, str) else value

    return resolve


def _layout_names() -> list[str]:
    return attention_names(("padded", "packed"))


def _decode_names() -> list[str]:
    return attention_names(("decode",))


def setting_names() -> list[str]:
    """What a padding or generate spec's attention may say: `auto` and every name of `attention_names`."""
    return [AUTO_ATTENTION, *attention_names()]


def _layout_settings() -> list[str]:
    return [AUTO_ATTENTION, *_layout_names()]


def _decode_settings() -> list[str]:
    return [AUTO_ATTENTION, *_decode_names()]


# A spec's attention: a family's name, `flash` or an alias (stored as the family's name, so both spellings are the
# same job and the same row). Any registered family validates, so a result that named a family before a refusal
# of it existed stays readable (what a new job may not ask is `missing_entry_point`, checked at submission); the
# schema lists the names with a kernel where the field's job runs attention: padded rows and packs for
# `AttentionChoice` (a padding job and its strategies), the KV cache for `DecodeAttentionChoice` (a generate job).
AttentionChoice = Annotated[str, BeforeValidator(_aliased(attention_aliases)), AfterValidator(one_of(attention_names)),
                            NamesInSchema(_layout_names)]
DecodeAttentionChoice = Annotated[str, BeforeValidator(_aliased(attention_aliases)),
                                  AfterValidator(one_of(attention_names)), NamesInSchema(_decode_names)]
# A spec's attention where `auto` may stand (a padding job and its strategies, a generate job): the worker picks.
AttentionSetting = Annotated[str, BeforeValidator(_aliased(attention_aliases)), AfterValidator(one_of(setting_names)),
                             NamesInSchema(_layout_settings)]
DecodeAttentionSetting = Annotated[str, BeforeValidator(_aliased(attention_aliases)),
                                   AfterValidator(one_of(setting_names)), NamesInSchema(_decode_settings)]
SweepKernelChoice = Annotated[str, BeforeValidator(_aliased(sweep_aliases)), AfterValidator(one_of(sweep_kernel_names)),
                              NamesInSchema(sweep_kernel_names)]
