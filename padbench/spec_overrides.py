"""`--set key.path=value` and `--sweep key.path=a,b,c` on a spec file: the jobs a command line asks for.

Overrides change the loaded YAML document before it is validated, so a value set on the command line is
checked exactly as one written in the file. Values are YAML (`auto`, `5`, `[static, packed]`). Every sweep
multiplies the jobs: one per point of the cartesian product, each named `<name>[key=value,...]` so the
results of a sweep can be told apart.
"""

from __future__ import annotations

import argparse
import copy
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from padbench.contract.bounds import MAX_NAME_LENGTH
from padbench.contract.job_kind import kind_tag
from padbench.contract.kinds import DEFAULT_KIND, JOB_KINDS
from padbench.contract.model_spec import nearest
from padbench.contract.spec import JobSpecBase
from padbench.specfile import SpecError, check_new_job, load_spec_document, spec_sections

# A sweep is meant for a handful of settings; thousands of jobs from one typo would flood the queue.
MAX_POINTS = 256
MAX_VALUES_PER_SWEEP = 256
KeyPath = tuple[str, ...]


@dataclass(frozen=True)
class Override:
    option: str  # `--set` or `--sweep`, for messages
    path: KeyPath
    written: str  # the key path as typed
    values: tuple[Any, ...]  # one for --set; every point of a --sweep
    texts: tuple[str, ...]  # each value as typed, for job names


@dataclass(frozen=True)
class SpecPoint:
    spec: JobSpecBase
    label: str  # `batch_size=8,dtype=fp32` for a sweep's point; empty for a single job


def yaml_value(text: str) -> Any:
    """A value as YAML reads it (`5` a number, `auto` a string, `[a, b]` a list); text YAML refuses stays text."""
    try:
        return yaml.safe_load(text) if text.strip() else text
    except yaml.YAMLError:
        return text


def split_top_level(text: str) -> list[str]:
    """`a,[b,c],d` -> `a`, `[b,c]`, `d`: commas inside brackets or braces belong to a flow collection."""
    parts, depth, current = [], 0, ""
    for character in text:
        depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(character, 0)
        if character == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += character
    return [*parts, current]


def parse_override(option: str, text: str) -> Override:
    key, equals, value = text.partition("=")
    key = key.strip()
    if not equals or not key:
        raise SpecError(f"{option} {text!r}: write KEY=VALUE, e.g. {option} measurement.repeats=5")
    path = tuple(key.split("."))
    if any(not part for part in path):
        raise SpecError(f"{option} {key}: a key path is names joined by dots, e.g. measurement.repeats")
    texts = tuple(part.strip() for part in split_top_level(value)) if option == "--sweep" else (value,)
    if option == "--sweep" and (len(texts) > MAX_VALUES_PER_SWEEP or any(not part for part in texts)):
        raise SpecError(f"{option} {key}: give 1 to {MAX_VALUES_PER_SWEEP} values separated by commas, none empty")
    return Override(option, path, key, tuple(yaml_value(part) for part in texts), texts)


def _field_names(section: type[BaseModel]) -> set[str]:
    return {field.alias or name for name, field in section.model_fields.items()} | set(section.model_fields)


def check_path(override: Override, kind: type[JobSpecBase]) -> None:
    """Refuse a key path the spec has no key at, naming the nearest key there is."""
    sections = spec_sections(kind)
    section: type[BaseModel] | None = kind
    walked: KeyPath = ()
    for part in override.path:
        if section is None:
            return  # below a free-form or scalar field (a model config's own keys): validation checks the rest
        if part.isdigit() and walked:
            continue  # an index into a list (`strategies.1.name`)
        if part not in _field_names(section):
            raise SpecError(f"{override.option} {override.written}: {_unknown(part, walked, kind, sections)}")
        walked = (*walked, part)
        section = sections.get(walked)


def _unknown(part: str, walked: KeyPath, kind: type[JobSpecBase], sections: dict[KeyPath, type[BaseModel]]) -> str:
    """`no key 'repeat' in measurement in a padding spec (did you mean 'measurement.repeats'?)`."""
    close = nearest(part, _field_names(sections[walked]))
    elsewhere = sorted((".".join((*path, part)) for path, model in sections.items()
                        if path != walked and part in model.model_fields), key=len)
    # A key that exists as written in another section was put in the wrong place, which is likelier than a
    # typo of a different key here (`repeats` is `measurement.repeats`, not `experts`), as the spec file says.
    hint = elsewhere[0] if elsewhere else (".".join((*walked, close)) if close else None)
    where = f" in {'.'.join(walked)}" if walked else ""
    suggestion = f" (did you mean {hint!r}?)" if hint else ""
    return f"no key {part!r}{where} in a {kind_tag(kind)} spec{suggestion}"


def assign(document: dict[str, Any], override: Override, value: Any) -> None:
    """Put `value` at the override's key path, making the mappings on the way that the file left out."""
    node: Any = document
    for depth, part in enumerate(override.path[:-1]):
        here = ".".join(override.path[:depth + 1])
        if isinstance(node, list):
            node = node[_index(node, part, override, here)]
        else:
            if node.get(part) is None:
                node[part] = {}
            node = node[part]
        if not isinstance(node, (dict, list)):
            raise SpecError(f"{override.option} {override.written}: {here} is {node!r} in the spec, not a mapping; "
                            f"set {here} itself (e.g. {override.option} {here}={{...}})")
    last = override.path[-1]
    if isinstance(node, list):
        node[_index(node, last, override, override.written)] = value
    else:
        node[last] = value


def _index(node: list[Any], part: str, override: Override, here: str) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise SpecError(f"{override.option} {override.written}: {here} is not an item of the spec's list of "
                        f"{len(node)}")
    return int(part)


def point_name(base: str, label: str) -> str:
    """`<name>[key=value,...]` within a job name's length: the base name gives way first, then the label."""
    suffix = f"[{label}]"
    if len(suffix) >= MAX_NAME_LENGTH:
        return suffix[:MAX_NAME_LENGTH - 2] + "…]"
    return base[:MAX_NAME_LENGTH - len(suffix)] + suffix


def _kind_model(document: dict[str, Any]) -> type[JobSpecBase]:
    kind = document.get("kind", DEFAULT_KIND)
    if not isinstance(kind, str) or kind not in JOB_KINDS:
        raise SpecError(f"kind: {kind!r} is not one of {', '.join(name for name, _ in JOB_KINDS.items())}")
    return JOB_KINDS.get(kind).spec


def _count_points(sweeps: Sequence[Override]) -> int:
    count = 1
    for sweep in sweeps:
        count *= len(sweep.values)
    if count > MAX_POINTS:
        raise SpecError(f"the sweeps make {count:,} jobs; at most {MAX_POINTS} at once (sweep fewer values)")
    return count


def expand(source: str | Path, document: dict[str, Any], sets: Sequence[str], sweeps: Sequence[str]) -> list[SpecPoint]:
    """Every job the command line asks for, each checked as a new job; SpecError naming the option or the point."""
    overrides = [parse_override("--set", text) for text in sets]
    swept = [parse_override("--sweep", text) for text in sweeps]
    kind = _kind_model(document)
    for override in (*overrides, *swept):
        check_path(override, kind)
    seen = [sweep.written for sweep in swept]
    if len(set(seen)) != len(seen):
        raise SpecError(f"--sweep names a key twice: {', '.join(sorted(k for k in set(seen) if seen.count(k) > 1))}")
    _count_points(swept)
    base = copy.deepcopy(document)
    for override in overrides:
        assign(base, override, override.values[0])
    if not swept:
        return [SpecPoint(check_new_job(base, source), "")]
    name = str(base.get("name") or Path(source).stem)
    points = []
    for choice in itertools.product(*(range(len(sweep.values)) for sweep in swept)):
        point = copy.deepcopy(base)
        for sweep, index in zip(swept, choice, strict=True):
            assign(point, sweep, copy.deepcopy(sweep.values[index]))
        label = ",".join(f"{sweep.written}={sweep.texts[index]}" for sweep, index in zip(swept, choice, strict=True))
        point["name"] = point_name(name, label)
        points.append(SpecPoint(check_new_job(point, f"{source} [{label}]"), label))
    return points


def load_points(path: str | Path, sets: Sequence[str] = (), sweeps: Sequence[str] = ()) -> list[SpecPoint]:
    return expand(path, load_spec_document(path), sets, sweeps)


def add_override_options(parser: argparse.ArgumentParser) -> None:
    """`--set` and `--sweep`, the same on every command that reads a spec file."""
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="change one key of the spec before it is checked, e.g. --set measurement.repeats=5 or "
                             "--set strategies=[static,packed] (the value is YAML; repeatable)")
    parser.add_argument("--sweep", dest="sweeps", action="append", default=[], metavar="KEY=A,B,...",
                        help=f"one job per value, e.g. --sweep batch_size=16,64,auto; several sweeps make every "
                             f"combination (at most {MAX_POINTS} jobs), each named NAME[KEY=VALUE,...]")
