"""The plain transformers baseline runs a soft-capping model on transformers' own attention over the packs,
per document, and its varlen function refuses what torch's varlen kernel would drop; the plain training loop's
binned batches keep padding out."""

from __future__ import annotations

import pytest
import torch

from padbench.contract.spec import DataSpec
from padbench.worker.engine.training.steps import IGNORE_INDEX
from scripts.plain_packed_baseline import plain_model
from scripts.plain_training_baseline import same_binned_batches, step_inputs

CPU = torch.device("cpu")
LENGTHS = (5, 9, 3)


def test_transformers_eager_attention_keeps_gemma2_packs_apart() -> None:
    model = plain_model("tiny-gemma2", CPU, torch.float32, "eager").eval()
    generator = torch.Generator().manual_seed(0)
    sequences = [torch.randint(1, 1000, (n,), generator=generator) for n in LENGTHS]
    positions = torch.cat([torch.arange(n) for n in LENGTHS])[None]
    with torch.inference_mode():
        packed = model(input_ids=torch.cat(sequences)[None], position_ids=positions).logits[0]
        alone = torch.cat([model(input_ids=sequence[None]).logits[0] for sequence in sequences])
    assert float((packed - alone).abs().max()) < 1e-4


def test_the_plain_varlen_function_refuses_soft_capping() -> None:
    model = plain_model("tiny-gemma2", CPU, torch.float32).eval()
    with pytest.raises(SystemExit, match="--attention flex_attention"), torch.inference_mode():
        model(input_ids=torch.ones(1, 4, dtype=torch.long), position_ids=torch.arange(4)[None])


def test_the_plain_training_loop_on_binned_batches_masks_the_padding() -> None:
    """Each padded row's loss is its sequence's loss alone: the mask keeps padding out of attention and labels."""
    model = plain_model("tiny-llama", CPU, torch.float32, "sdpa").eval()
    data = DataSpec(num_samples=24, max_length=32, seed=3)
    batch = next(batch for batch in same_binned_batches(data, model.config.vocab_size, 4, 2)
                 if len(set(batch.lengths)) > 1)
    input_ids, inputs, labels = step_inputs(batch, CPU)
    assert set(inputs) == {"attention_mask"}
    assert int((labels != IGNORE_INDEX).sum()) == sum(length - 1 for length in batch.lengths)
    with torch.inference_mode():
        logits = model(input_ids=input_ids, **inputs).logits
        for row, length in enumerate(batch.lengths):
            alone = model(input_ids=input_ids[row, :length][None]).logits[0]
            assert float((logits[row, :length] - alone).abs().max()) < 1e-4
