"""Times a decode step's greedy choice: `argmax` over (slots, vocabulary) logits, compiled, against the decoder's
two-stage `greedy_tokens` over several chunk counts, each replayed as a CUDA graph of 28 calls.

    python scripts/bench_greedy.py [--rows 64] [--vocab 151936]

Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

import torch

from padbench.worker.engine.decoding.decoder import greedy_tokens
from padbench.worker.runtime.graph_timing import graph_micros

CALLS = 28
CHUNKS = (2, 4, 8, 16, 32, 128)


def _on_table(choose: Any, tables: list[torch.Tensor], call: int) -> Any:
    return choose(tables[call])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=151_936)
    args = parser.parse_args()
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    tables = [torch.randn(args.rows, args.vocab, device="cuda", dtype=torch.bfloat16) for _ in range(CALLS)]
    expected = tables[0].argmax(dim=-1)
    choices: dict[str, Any] = {"argmax": lambda logits: logits.argmax(dim=-1)}
    choices |= {f"two stages, {chunks} chunks": partial(greedy_tokens, chunks=chunks) for chunks in CHUNKS}
    megabytes = args.rows * args.vocab * 2 / 1e6
    for name, choose in choices.items():
        torch._dynamo.reset()
        compiled: Any = torch.compile(choose, dynamic=False)
        micros = graph_micros(partial(_on_table, compiled, tables), CALLS)
        same = torch.equal(compiled(tables[0]), expected)
        print(f"  {name:24s} {micros:7.1f} µs  {megabytes / micros:5.2f} TB/s  same tokens as argmax: {same}")


if __name__ == "__main__":
    main()
