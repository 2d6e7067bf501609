"""The plain transformers baseline runs a soft-capping model on transformers' own attention over the packs,
per document, and its varlen function refuses what torch's varlen kernel would drop."""

from __future__ import annotations

import pytest
import torch

from scripts.plain_packed_baseline import plain_model

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
