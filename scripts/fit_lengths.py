"""Re-derive the `wikitext103-bert` length distribution from a WikiText corpus and print it.

    .venv/bin/python scripts/fit_lengths.py --corpus 'wikitext/wiki.*.raw' --tokenizer bert-base-uncased/ \
        [--points 201] [--write-lengths tests/fixtures/wikitext2-bert-lengths.txt]

Tokenizes every non-empty line of the corpus (special tokens included, no truncation) through the same
loader the engine uses, prints the summary figures (lines, tokens, mean, median, p90, p99, static padding
efficiency at 640 and dynamic padding efficiency with random batches of 32), the quantile table in the form
`worker/engine/data/synthetic.py` keeps it, and whether that table still matches the one in the code.
`--write-lengths` also writes every line's length as `length count` pairs: the tests' copy of the corpus
figures (tests/fixtures/wikitext2-bert-lengths.txt), so they check the table without the corpus.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np

from padbench.contract.spec import DataSpec
from padbench.worker.engine.data.sources import load_tokenizer, tokenize_corpus
from padbench.worker.engine.data.synthetic import WIKITEXT103_BERT_QUANTILES, fit_quantile_table

PADDED_WIDTH = 640
DYNAMIC_BATCH = 32


def corpus_lengths(corpus: str, tokenizer_dir: str) -> np.ndarray:
    data = DataSpec(source=corpus, tokenizer=tokenizer_dir)
    # A throwaway cache: the figures must come from tokenizing now, not from an earlier run's files.
    with tempfile.TemporaryDirectory() as cache_dir:
        tokenized = tokenize_corpus(data, load_tokenizer(tokenizer_dir), Path(cache_dir), lambda f, m: None)
        return np.array([len(ids) for ids in tokenized.dataset["input_ids"]])


def dynamic_efficiency(lengths: np.ndarray, seed: int) -> float:
    """Real tokens over padded tokens, for random batches of 32 each padded to its longest row."""
    shuffled = np.random.default_rng(seed).permutation(lengths)
    batches = [shuffled[start:start + DYNAMIC_BATCH] for start in range(0, len(shuffled), DYNAMIC_BATCH)]
    return float(shuffled.sum() / sum(len(batch) * batch.max() for batch in batches))


def print_summary(lengths: np.ndarray) -> None:
    truncated = np.minimum(lengths, PADDED_WIDTH)
    p90, p99 = np.percentile(lengths, [90, 99])
    dynamic = [dynamic_efficiency(truncated, seed) for seed in range(10)]
    print(f"lines {len(lengths):,}  tokens {int(lengths.sum()):,}  mean {lengths.mean():.2f}  "
          f"median {np.median(lengths):g}  p90 {p90:.2f}  p99 {p99:.2f}  min {lengths.min()}  max {lengths.max()}")
    print(f"static @{PADDED_WIDTH} {truncated.sum() / (len(lengths) * PADDED_WIDTH):.4f}  "
          f"dynamic bs{DYNAMIC_BATCH} random (mean of 10 shuffles) {np.mean(dynamic):.4f}")


def write_lengths(lengths: np.ndarray, corpus: str, tokenizer: str, path: Path) -> None:
    counts = Counter(int(length) for length in lengths)
    header = (f"# Token lengths of every non-empty line of {corpus} ({len(lengths):,} lines) under the {tokenizer}\n"
              "# tokenizer, special tokens included, no truncation, as `length count` pairs.\n"
              "# Written by scripts/fit_lengths.py --write-lengths.\n")
    path.write_text(header + "".join(f"{length} {counts[length]}\n" for length in sorted(counts)), encoding="utf-8")


def print_table(table: tuple[float, ...]) -> None:
    body = ", ".join(repr(value) for value in table)
    print(f"WIKITEXT103_BERT_QUANTILES: tuple[float, ...] = (  # {len(table)} points")
    print(textwrap.fill(body + ",", width=110, initial_indent="    ", subsequent_indent="    "))
    print(")")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="the WikiText raw files, e.g. 'wikitext/wiki.*.raw'")
    parser.add_argument("--tokenizer", required=True, help="the bert-base-uncased tokenizer folder (or hub name)")
    parser.add_argument("--points", type=int, default=len(WIKITEXT103_BERT_QUANTILES))
    parser.add_argument("--write-lengths", type=Path, metavar="FILE", help="also write the lengths to FILE")
    args = parser.parse_args()
    lengths = corpus_lengths(args.corpus, args.tokenizer)
    if args.write_lengths is not None:
        write_lengths(lengths, args.corpus, Path(args.tokenizer).name, args.write_lengths)
    print_summary(lengths)
    table = fit_quantile_table(lengths.tolist(), args.points)
    print_table(table)
    matches = table == WIKITEXT103_BERT_QUANTILES
    print("matches worker/engine/data/synthetic.py" if matches else "DIFFERS from worker/engine/data/synthetic.py")
    return 0 if matches else 1


if __name__ == "__main__":
    sys.exit(main())
