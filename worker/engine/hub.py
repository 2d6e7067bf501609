"""Files from the Hugging Face Hub (a model's config.json, a tokenizer), asked of the network at most once.

huggingface_hub retries a request that finds no network, with backoff, for every file it is asked for: half a
minute to a minute and a half of retry lines for one model and its tokenizer before a message about the last file.
Here a file is read from the Hugging Face cache first, without the network; only when it is not there is the Hub
asked, after one quick check (per process) that it answers at all, so a machine without network gets one message
at once saying so and what to do instead.

`padbench check` reads the cache alone (`cache_only`): a Hub name not in it is the worker's to fetch, and a check
on a laptop never waits on the network for it.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx
from huggingface_hub import constants

T = TypeVar("T")
ANSWER_TIMEOUT_S = 5.0  # a Hub that answers at all answers a HEAD of its front page well within this
TRUE_WORDS = {"1", "true", "yes", "on"}
_CACHE_ONLY = False


class HubUnavailable(OSError):
    """The file is not in the Hugging Face cache, and the Hub cannot be asked for it now: the message says why and
    what to do instead."""


class NotInCache(HubUnavailable):
    """`cache_only`: the file is not in this machine's Hugging Face cache, and the Hub was not asked."""


def offline_mode() -> bool:
    """Whether HF_HUB_OFFLINE (huggingface_hub's switch, which transformers honours too) asks for the cache only."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in TRUE_WORDS


@functools.cache
def hub_answers(endpoint: str) -> bool:
    """One quick request to the Hub's endpoint: any HTTP answer means there is a network to it."""
    try:
        httpx.head(endpoint, timeout=ANSWER_TIMEOUT_S, follow_redirects=False)
    except httpx.HTTPError:
        return False
    return True


@contextmanager
def libraries_offline() -> Iterator[None]:
    """huggingface_hub (and datasets, once imported) as HF_HUB_OFFLINE=1 makes them: their caches alone.

    Each reads the variable once, at import, into a constant it consults before every request of its own (a daily
    fetch of huggingface_hub's agent registry, made while it reads the cache, too), so the constants are what is
    set here, and put back after."""
    datasets_config: Any = sys.modules.get("datasets.config")  # a module of constants, untyped
    was = constants.HF_HUB_OFFLINE, getattr(datasets_config, "HF_HUB_OFFLINE", None)
    constants.HF_HUB_OFFLINE = True
    if datasets_config is not None:
        datasets_config.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = was[0]
        if datasets_config is not None:
            datasets_config.HF_HUB_OFFLINE = was[1]


@contextmanager
def cache_only() -> Iterator[None]:
    """Within it, files come from the Hugging Face cache or not at all (`NotInCache`): the Hub is never asked."""
    global _CACHE_ONLY
    was = _CACHE_ONLY
    _CACHE_ONLY = True
    try:
        with libraries_offline():
            yield
    finally:
        _CACHE_ONLY = was


def alternatives(local: str) -> str:
    return (
        "use a copy in the Hugging Face cache (fetched once where there is network; HF_HOME says where the "
        f"cache is), HF_HUB_OFFLINE=1 to read only that cache, or {local}"
    )


def from_cache_or_hub(
    what: str,
    load: Callable[[bool], T],
    misses: tuple[type[BaseException], ...],
    local: str = "a local model directory under PADBENCH_MODEL_ROOTS",
) -> T:
    """`load(local_files_only)`: from the cache; else, when the Hub answers, from the Hub; else `HubUnavailable`
    naming `what` (`model.hub 'org/name'`) and, beside the cache, `local`: where a local copy goes instead. `misses`
    are the errors `load(True)` raises for a file that is not cached."""
    try:
        return load(True)
    except misses:
        pass
    if _CACHE_ONLY:
        raise NotInCache(
            f"{what}: not in this machine's Hugging Face cache; the worker that runs the job fetches "
            "it from the Hub (this check reads no network)"
        )
    if offline_mode():
        raise HubUnavailable(
            f"{what}: not in the Hugging Face cache, and HF_HUB_OFFLINE is set, so the Hub is not "
            f"asked; unset it where there is network, or {alternatives(local)}"
        )
    if not hub_answers(constants.ENDPOINT):
        raise HubUnavailable(
            f"{what}: no network to the Hugging Face Hub ({constants.ENDPOINT} does not answer), "
            f"and it is not in the Hugging Face cache; {alternatives(local)}"
        )
    return load(False)
