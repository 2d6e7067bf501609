"""The echo kind's runner, as the worker imports it (by the name its contract gives)."""

from __future__ import annotations

import platform
from collections.abc import Iterator

from padbench.contract.results import Environment, PartialResult
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.jobs import PartialFn
from padbench.worker.runtime.progress import ProgressFn
from tests.echo_kind.contract import EchoJobSpec, EchoResult


class EchoRunner:
    def run(self, spec: EchoJobSpec, progress: ProgressFn, on_partial: PartialFn) -> EchoResult:
        environment = Environment(hostname=platform.node() or "test", device="cpu", python=platform.python_version(),
                                  torch="none", started_at="2026-11-25T00:00:00+00:00")
        lines: list[str] = []
        for number in range(1, spec.times + 1):
            lines.append(f"{number}: {spec.word}")
            progress(number / spec.times, f"said {spec.word!r} {number} of {spec.times} times")
            if number < spec.times:
                on_partial(EchoResult(spec=spec, environment=environment, lines=list(lines),
                                      partial=PartialResult(rows_finished=number, rows_planned=spec.times)))
        return EchoResult(spec=spec, environment=environment, lines=lines)

    def kernel_names(self, device: str) -> list[str]:
        return ["echo-voice"]

    def findings(self, spec: EchoJobSpec) -> Iterator[tuple[bool, str]]:
        yield True, f"word: {spec.word!r}, said {spec.times} times"

    def planned_run(self, spec: EchoJobSpec) -> PaddingJobSpec | None:
        return None


RUNNER = EchoRunner()
