"""`padbench plan SPEC`: a padding job's model state per GPU, printed before anything is built."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from padbench.cli import main
from padbench.worker.cli import planning
from padbench.worker.cli.plan import memory_size

TRAINING_8B = {"kind": "padding", "model": "llama-3.1-8b", "mode": "training", "gpus": 2,
               "training": {"precision": "amp"}, "data": {"max_length": 1024}}


def plan(tmp_path: Path, spec: dict[str, object], capsys: pytest.CaptureFixture[str],
         *options: str) -> tuple[int, str, str]:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    code = main(["plan", str(path), *options])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_training_plan_prints_parameters_run_and_bytes_per_rank_by_part(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = plan(tmp_path, TRAINING_8B, capsys, "--gpu-memory", "80GiB")
    assert code == 0
    assert "llama-3.1-8b, 8,030,261,248 parameters (8.03 B)" in out
    assert "gpus: 2 (the spec's gpus)" in out
    assert ("sharded over 2 GPUs (FSDP2), precision amp: fp32 weights, gradients and AdamW state, computing in "
            "bf16") in out
    for part, count in (("weights", "16,060,522,496"), ("gradients", "16,060,522,496"),
                        ("optimizer state", "32,121,044,992"), ("gathered layers", "2,973,802,496"),
                        ("total", "67,215,892,480")):
        assert any(line.split()[0] == part.split()[0] and count in line for line in out.splitlines()), part
    assert "fits: 62.6 GiB per rank of 80.0 GiB free (--gpu-memory), 17.4 GiB left for activations" in out
    assert "┃" not in out  # a pipe gets plain columns


def test_state_that_does_not_fit_exits_1_naming_the_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = plan(tmp_path, TRAINING_8B, capsys, "--gpu-memory", "40GiB")
    assert code == 1 and "does not fit: 62.6 GiB per rank needed, 40.0 GiB free (--gpu-memory)" in out


def test_mixtral_on_one_gpu_does_not_fit_and_the_plan_names_the_gpus_and_bytes_that_hold_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = plan(tmp_path, {"kind": "padding", "model": "mixtral-8x7b", "gpus": 1}, capsys,
                        "--gpu-memory", "80GiB")
    assert code == 1
    assert "46,702,792,704 parameters (46.70 B)" in out
    assert "active: 12,879,925,248 parameters per token (12.88 B)" in out
    assert "does not fit: 87.0 GiB per rank needed, 80.0 GiB free (--gpu-memory)" in out
    assert "needs at least 2 GPUs of this memory: 49.4 GiB (53,032,169,472 bytes) per GPU, sharded (gpus: 2)" in out


def test_70b_inference_is_planned_sharded_on_80_gib_gpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = plan(tmp_path, {"kind": "padding", "model": "llama-3.1-70b", "gpus": 8}, capsys,
                        "--gpu-memory", "80GiB")
    assert code == 0 and "runs: inference, sharded over 8 GPUs (FSDP2), everything in bf16" in out
    assert "distributed.inference auto: replicated when each GPU has 146.0 GiB free" in out
    assert "fits: 23.5 GiB per rank of 80.0 GiB free" in out


def test_llama_70b_amp_training_on_eight_gpus_prints_its_bytes_per_rank(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"kind": "padding", "model": "llama-3.1-70b", "mode": "training", "gpus": 8}
    code, out, _ = plan(tmp_path, spec, capsys, "--gpu-memory", "80GiB")
    assert code == 1 and "148,732,739,584" in out and "does not fit: 138.5 GiB per rank needed" in out
    assert "needs at least 16 GPUs of this memory: 72.8 GiB (78,179,033,088 bytes) per GPU, sharded (nodes: 2, " \
           "gpus: 8)" in out


def test_a_job_across_nodes_is_planned_sharded_over_every_rank_of_every_node(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"kind": "padding", "model": "llama-3.1-70b", "mode": "training", "gpus": 8, "nodes": 4}
    code, out, _ = plan(tmp_path, spec, capsys, "--gpu-memory", "80GiB")
    assert code == 0 and "gpus: 32 (4 nodes (the spec's nodes) × 8 GPUs each (the spec's gpus))" in out
    assert "sharded over 32 GPUs (FSDP2)" in out and "fits: 40.0 GiB per rank of 80.0 GiB free" in out
    code, out, _ = plan(tmp_path, spec | {"nodes": 1}, capsys, "--gpu-memory", "80GiB", "--nodes", "2")
    assert code == 0 and "gpus: 16 (2 nodes (--nodes) × 8 GPUs each" in out


def test_gpus_all_plans_for_the_visible_gpus_or_asks_for_gpus(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {"kind": "padding", "model": "llama-2-7b", "gpus": "all"}
    monkeypatch.setattr(planning, "visible_gpu_count", lambda: 0)
    code, _, err = plan(tmp_path, spec, capsys)
    assert code == 2 and "gpus: all runs on every GPU of the worker that takes the job" in err and "--gpus N" in err
    code, out, _ = plan(tmp_path, spec, capsys, "--gpus", "4", "--gpu-memory", "24GiB")
    assert code == 0 and "gpus: 4 (--gpus)" in out and "replicated on 4 GPUs" in out


def test_without_gpu_memory_the_fit_is_not_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planning, "visible_gpu_count", lambda: 0)
    code, out, _ = plan(tmp_path, TRAINING_8B, capsys)
    assert code == 0 and "fit: not checked (no GPU here; give --gpu-memory SIZE to compare)" in out


def test_a_bad_spec_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = plan(tmp_path, {**TRAINING_8B, "training": {"precision": "fp4"}}, capsys)
    assert code == 2 and out == ""
    assert "training.precision: 'fp4' is not one of 'auto', 'bf16', 'amp' or 'fp8'" in err


def test_a_kind_that_runs_no_model_over_gpus_has_nothing_to_plan(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = plan(tmp_path, {"kind": "attention"}, capsys)
    assert code == 2 and "an attention sweep runs no model whose memory spreads over GPUs" in err


def test_a_bad_option_exits_2_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        plan(tmp_path, TRAINING_8B, capsys, "--gpu-memory", "80")
    assert exit_.value.code == 2
    assert "'80' is not a size: write a number and a unit" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "count"), [("80GiB", 80 * 2**30), ("141 GB", 141 * 10**9), ("79.5gib", 85362475008),
                                             ("512MiB", 2**29)])
def test_gpu_memory_reads_binary_and_decimal_units(text: str, count: int) -> None:
    assert memory_size(text) == count


def test_a_scaling_axis_is_planned_at_its_smallest_count_and_kept_layers_are_counted_gathered(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = plan(tmp_path, TRAINING_8B | {"gpus": [2, 4]}, capsys, "--gpu-memory", "80GiB")
    assert code == 0 and "gpus: 2 (the smallest count of the spec's scaling axis [2, 4])" in out
    assert any(line.split()[0] == "gathered" and "2,973,802,496" in line for line in out.splitlines())
    kept = TRAINING_8B | {"distributed": {"reshard_after_forward": False}}
    _, out, _ = plan(tmp_path, kept, capsys, "--gpu-memory", "80GiB")
    # every decoder layer and the root gathered at once after the forward: the whole model's weights in bf16
    assert any(line.split()[0] == "gathered" and "16,060,522,496" in line for line in out.splitlines())
