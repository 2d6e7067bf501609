"""The plain FSDP2 reference loop runs as its users run it, under torchrun, here on two gloo ranks of the CPU:
each rank trains on its share of the sequences, packed or binned as padbench batches them, for as many steps as
the rank with the fewest batches, and rank 0 reports the group's tokens."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from padbench.contract.model_spec import ModelSpec
from padbench.contract.spec import DataSpec
from padbench.worker.engine.model.build import model_config
from scripts.plain_fsdp_training_baseline import rank_batches

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # two processes build a tiny model and train one pass (about 20 s)
@pytest.mark.parametrize(("layout", "checkpointing"), [("packed", []), ("binned", ["--checkpointing"])])
def test_two_gloo_ranks_train_one_pass_of_their_shares(corpus_file: Path, tokenizer_dir: Path, tmp_path: Path,
                                                       layout: str, checkpointing: list[str]) -> None:
    result_file = tmp_path / "plain-fsdp.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(ROOT / "scripts" / "plain_fsdp_training_baseline.py"), "--preset", "tiny-llama",
               "--source", str(corpus_file), "--tokenizer", str(tokenizer_dir), "--max-length", "32",
               "--batch-size", "2", "--num-samples", "40", "--warmup", "1", "--min-seconds", "0",
               "--device", "cpu", "--attention", "sdpa", "--layout", layout, "--bins", "2", *checkpointing,
               "--json", str(result_file)]
    finished = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert finished.returncode == 0, finished.stderr[-3000:]
    result = json.loads(result_file.read_text())
    data = DataSpec(source=str(corpus_file), tokenizer=str(tokenizer_dir), max_length=32, num_samples=40)
    vocab = int(model_config(ModelSpec(preset="tiny-llama")).vocab_size)
    options = argparse.Namespace(layout=layout, bins=2, batch_size=2)
    shares = [rank_batches(options, data, vocab, rank, 2) for rank in range(2)]
    count = min(len(share) for share in shares)
    assert result["layout"] == layout and result["world_size"] == 2 and result["checkpointing"] == bool(checkpointing)
    assert result["packs_per_rank"] == count and result["steps"] == count
    assert result["real_tokens"] == sum(pack.real_tokens for share in shares for pack in share[:count])
    assert result["tokens_per_s_per_gpu"] == pytest.approx(result["tokens_per_s"] / 2)
