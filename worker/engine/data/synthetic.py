"""Named distributions of sequence lengths, for the `synthetic` data source and the attention sweep.

A name is a family and its parameters separated by colons: `wikitext103-bert`, `uniform:LO:HI`, `fixed:N`.
Families live in a typed registry, so an unknown name fails with the list of known families.
Every distribution returns integer lengths clipped to [2, max_length]: two tokens is the shortest a
tokenizer that adds [CLS]/[SEP] ever produces, and anything longer than max_length would be truncated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from padbench.contract.registry import Registry, UnknownPlugin

SHORTEST_SEQUENCE = 2


class DistributionError(ValueError):
    """A distribution name that does not resolve; the message says which part is wrong."""


class LengthDistribution(Protocol):
    @property
    def name(self) -> str: ...

    def sample(self, rng: np.random.Generator, count: int, max_length: int) -> np.ndarray: ...


def clip_lengths(lengths: np.ndarray, max_length: int) -> np.ndarray:
    return np.clip(lengths, min(SHORTEST_SEQUENCE, max_length), max_length).astype(np.int64)


@dataclass(frozen=True)
class EmpiricalQuantiles:
    """Inverse-CDF sampling from a table of quantiles at evenly spaced probabilities 0 … 1.

    A uniform draw is mapped through the table with linear interpolation and rounded to a whole length,
    so the samples follow the measured distribution to within the table's resolution.
    """

    name: str
    quantiles: tuple[float, ...]

    def sample(self, rng: np.random.Generator, count: int, max_length: int) -> np.ndarray:
        probabilities = np.linspace(0.0, 1.0, len(self.quantiles))
        lengths = np.rint(np.interp(rng.random(count), probabilities, self.quantiles))
        return clip_lengths(lengths, max_length)


@dataclass(frozen=True)
class UniformLengths:
    name: str
    low: int
    high: int

    def sample(self, rng: np.random.Generator, count: int, max_length: int) -> np.ndarray:
        return clip_lengths(rng.integers(self.low, self.high + 1, size=count), max_length)


@dataclass(frozen=True)
class FixedLength:
    name: str
    length: int

    def sample(self, rng: np.random.Generator, count: int, max_length: int) -> np.ndarray:
        return clip_lengths(np.full(count, self.length), max_length)


def fit_quantile_table(lengths: Sequence[int], points: int = 201) -> tuple[float, ...]:
    """The table EmpiricalQuantiles samples from: numpy's linear quantiles, rounded to 0.01."""
    probabilities = np.linspace(0.0, 1.0, points)
    return tuple(round(float(value), 2) for value in np.quantile(np.asarray(lengths), probabilities))


# Token lengths of WikiText-103 under bert-base-uncased, [CLS]/[SEP] included, as quantiles at
# probabilities 0, 0.005, …, 1 (201 points). Measured by `scripts/fit_lengths.py` over all 5,982 non-empty
# lines of the three WikiText files in the offline corpus (validation and test splits are the same articles
# in WikiText-2 and WikiText-103), tokenized with the bert-base-uncased tokenizer.json, no truncation.
# The corpus figures: mean 97.23, median 82, p90 225.9, p99 357.19, min 3, max 525.
WIKITEXT103_BERT_QUANTILES: tuple[float, ...] = (
    3.0, 4.0, 5.0, 5.0, 6.0, 6.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 8.0,
    8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 10.0, 10.0, 10.0,
    10.0, 10.0, 10.0, 10.0, 10.0, 11.0, 11.0, 11.0, 11.0, 11.0, 11.0, 12.0, 12.0, 12.0, 12.0, 12.0, 13.0,
    13.0, 13.0, 13.0, 14.0, 14.0, 15.0, 15.0, 16.0, 16.0, 17.0, 17.0, 18.0, 19.0, 20.0, 22.0, 24.0, 27.0,
    29.0, 31.88, 35.0, 37.0, 39.0, 41.49, 44.0, 46.0, 48.0, 50.0, 53.0, 55.0, 57.0, 59.0, 61.64, 63.0,
    65.0, 67.0, 69.0, 70.0, 71.07, 73.0, 75.0, 76.0, 78.0, 80.0, 82.0, 84.0, 85.0, 86.22, 88.0, 89.0,
    90.0, 92.0, 93.0, 95.0, 96.0, 97.0, 99.0, 101.0, 102.0, 103.0, 104.0, 106.0, 107.0, 108.0, 110.0,
    112.0, 113.0, 115.0, 116.0, 117.0, 119.0, 120.0, 122.0, 123.74, 125.0, 126.0, 127.0, 129.0, 130.27,
    132.0, 134.0, 135.0, 136.0, 138.0, 140.0, 141.0, 142.0, 144.0, 146.0, 147.0, 149.0, 150.0, 152.0,
    153.85, 155.0, 157.0, 159.0, 161.0, 162.0, 164.0, 166.0, 168.0, 170.0, 172.0, 175.0, 177.0, 180.0,
    182.0, 184.0, 186.0, 188.0, 190.0, 192.0, 194.0, 197.0, 199.0, 201.0, 203.0, 207.0, 209.0, 212.28,
    215.0, 219.0, 222.0, 225.9, 229.0, 232.0, 236.0, 239.0, 242.0, 247.0, 250.0, 256.0, 258.05, 266.95,
    271.86, 278.76, 287.66, 299.0, 306.0, 321.0, 336.28, 357.19, 398.19, 525.0,
)

# A family turns the parameters after its name into a distribution (or raises DistributionError).
DistributionFamily = Callable[[str, tuple[str, ...]], LengthDistribution]
DISTRIBUTION_FAMILIES: Registry[DistributionFamily] = Registry("length distribution")


def _positive_ints(name: str, params: tuple[str, ...], expected: int, usage: str) -> list[int]:
    if len(params) != expected:
        raise DistributionError(f"{name!r}: expected the form {usage}")
    try:
        values = [int(param) for param in params]
    except ValueError:
        raise DistributionError(f"{name!r}: parameters must be whole numbers ({usage})") from None
    if any(value < 1 for value in values):
        raise DistributionError(f"{name!r}: lengths must be at least 1 ({usage})")
    return values


@DISTRIBUTION_FAMILIES.register("wikitext103-bert")
def _wikitext103_bert(name: str, params: tuple[str, ...]) -> LengthDistribution:
    if params:
        raise DistributionError(f"{name!r}: wikitext103-bert takes no parameters")
    return EmpiricalQuantiles(name, WIKITEXT103_BERT_QUANTILES)


@DISTRIBUTION_FAMILIES.register("uniform")
def _uniform(name: str, params: tuple[str, ...]) -> LengthDistribution:
    low, high = _positive_ints(name, params, 2, "uniform:LO:HI")
    if low > high:
        raise DistributionError(f"{name!r}: LO ({low}) must not exceed HI ({high})")
    return UniformLengths(name, low, high)


@DISTRIBUTION_FAMILIES.register("fixed")
def _fixed(name: str, params: tuple[str, ...]) -> LengthDistribution:
    (length,) = _positive_ints(name, params, 1, "fixed:N")
    return FixedLength(name, length)


def get_distribution(name: str) -> LengthDistribution:
    family, *params = name.split(":")
    try:
        build = DISTRIBUTION_FAMILIES.get(family)
    except UnknownPlugin as error:
        raise DistributionError(str(error)) from None
    return build(name, tuple(params))
