"""Sweep problems and inputs: document packing, FLOP counts, masks."""

from __future__ import annotations

import pytest
import torch

from padbench.kinds.attention.contract import AttentionJobSpec
from padbench.worker.jobs.attention.inputs import DocumentStructure, Problem, make_input_sets


def spec(**fields: object) -> AttentionJobSpec:
    base: dict[str, object] = {"kind": "attention", "batch": 2, "heads": 4, "head_dim": 8, "seq_lens": [64]}
    return AttentionJobSpec.model_validate({**base, **fields})


def test_dense_flops_are_four_b_h_n2_d_halved_when_causal_and_scaled_for_backward() -> None:
    forward = Problem.from_spec(spec(), 64)
    assert forward.flops == 4 * 2 * 4 * 64 * 64 * 8
    assert Problem.from_spec(spec(causal=True), 64).flops == forward.flops / 2
    assert Problem.from_spec(spec(direction="forward+backward"), 64).flops == forward.flops * 2.5


def test_varlen_rows_are_filled_exactly_and_deterministically() -> None:
    varlen = spec(layout="varlen", varlen={"distribution": "wikitext103-bert", "seed": 3})
    problem = Problem.from_spec(varlen, 1024)
    assert len(problem.documents) == 2
    assert all(sum(row) == 1024 and min(row) >= 1 for row in problem.documents)
    assert sum(len(row) for row in problem.documents) > 4  # WikiText lines are ~100 tokens: many per row
    assert Problem.from_spec(varlen, 1024).documents == problem.documents


def test_varlen_flops_count_each_document_not_the_row() -> None:
    problem = Problem.from_spec(spec(layout="varlen", varlen={"distribution": "fixed:16"}), 64)
    assert problem.documents == ((16, 16, 16, 16), (16, 16, 16, 16))
    assert problem.flops == 4 * 4 * 8 * (8 * 16 * 16)


def test_unknown_distribution_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="wikitext103-bert"):
        Problem.from_spec(spec(layout="varlen", varlen={"distribution": "zipf"}), 64)


def test_document_structure_marks_boundaries_and_masks() -> None:
    problem = Problem.from_spec(spec(layout="varlen", varlen={"distribution": "uniform:3:9"}), 32)
    structure = DocumentStructure.build(problem, torch.device("cpu"))
    lengths = [n for row in problem.documents for n in row]
    assert structure.cu_seqlens.dtype == torch.int32
    assert structure.cu_seqlens.diff().tolist() == lengths
    assert structure.max_document == max(lengths)
    allowed = structure.allowed(causal=True)
    assert allowed.shape == (2, 1, 32, 32)
    first = problem.documents[0][0]
    assert allowed[0, 0, first - 1, :first].all() and not allowed[0, 0, first, :first].any()
    assert not allowed[0, 0, 0, 1]  # causal: the first token sees only itself


def test_input_sets_differ_but_share_shapes_and_structure() -> None:
    problem = Problem.from_spec(spec(kv_heads=2, direction="forward+backward", layout="varlen"), 64)
    first, second = make_input_sets(problem, torch.device("cpu"), count=2)
    assert first.query.shape == (2, 64, 4, 8) and first.key.shape == (2, 64, 2, 8)
    assert first.query.requires_grad and first.grad_output is not None
    assert not torch.equal(first.query, second.query)
    assert first.documents is second.documents
