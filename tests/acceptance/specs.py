"""Tiny CPU job specs for the acceptance tests: seconds per job on two shared cores."""

from __future__ import annotations

from typing import Any

from padbench.contract.kinds import parse_job_spec

QUICK: dict[str, Any] = {
    "kind": "padding",
    "name": "acceptance-quick",
    # A small vocabulary: on a CPU the 30,522-entry LM head of the `tiny` preset would dominate the time.
    "model": {"config": {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 2048, "n_positions": 128}},
    "data": {"source": "synthetic", "max_length": 64, "num_samples": 48, "seed": 1},
    "strategies": ["static", "packed"],
    "attention": "sdpa",
    "batch_size": 8,
    "dtype": "fp32",
    "device": "cpu",
    "measurement": {"warmup_batches": 1, "min_seconds": 0, "min_batches": 1, "max_batches": 3, "repeats": 1,
                    "correctness_samples": 2},
}

# Runs until it is stopped: the measurement must last five minutes, and nothing caps its batches.
LONG: dict[str, Any] = QUICK | {
    "name": "acceptance-long",
    "measurement": {"warmup_batches": 1, "min_seconds": 300, "min_batches": 1, "repeats": 1,
                    "correctness_samples": 2},
}

# Valid as a spec (a relative model name), but it is under no root of the worker and, offline, no hub model
# either: the child cannot load it.
MISSING_MODEL = "padbench-missing/model"
FAILING: dict[str, Any] = QUICK | {"name": "acceptance-failing", "model": {"path": MISSING_MODEL}}

# A generate job: every strategy and transformers' generate loop on a few requests of varied output lengths.
GENERATE: dict[str, Any] = {
    "kind": "generate",
    "name": "acceptance-generate",
    "model": {"config": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 2048,
                         "max_position_embeddings": 128}},
    "data": {"source": "synthetic", "max_length": 24, "num_samples": 12, "seed": 1},
    "output_length": {"uniform": [2, 8]},
    "references": ["transformers-generate"],
    "attention": "sdpa",
    "batch_size": 4,
    "dtype": "fp32",
    "device": "cpu",
    "measurement": {"repeats": 1, "warmup_requests": 2, "correctness_samples": 4, "correctness_tokens": 4},
}

for _spec in (QUICK, LONG, FAILING, GENERATE):
    parse_job_spec(_spec)  # a typo here should fail at import, not as a mysterious job failure
