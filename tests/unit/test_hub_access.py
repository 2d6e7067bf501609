"""A Hub file is read from the Hugging Face cache first; the network is asked only for a file not there, after one
quick check that the Hub answers, and never under `cache_only` (`padbench check`)."""

from __future__ import annotations

import socket

import pytest

from padbench.worker.engine import hub
from padbench.worker.engine.hub import HubUnavailable, NotInCache, cache_only, from_cache_or_hub


class Missing(OSError):
    pass


class Loader:
    """Records each call's local_files_only; the cache holds the file only when `cached`."""

    def __init__(self, cached: bool) -> None:
        self.cached, self.calls = cached, []  # type: ignore[var-annotated]

    def __call__(self, local_files_only: bool) -> str:
        self.calls.append(local_files_only)
        if local_files_only and not self.cached:
            raise Missing("not in the cache")
        return "cache" if local_files_only else "hub"


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The endpoints the quick check was asked about; the Hub answers unless the test says otherwise."""
    asked: list[str] = []
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "hub_answers", lambda endpoint: asked.append(endpoint) or True)
    return asked


def test_a_cached_file_never_asks_the_network(network: list[str]) -> None:
    load = Loader(cached=True)
    assert from_cache_or_hub("model.hub 'org/name'", load, (Missing,)) == "cache"
    assert load.calls == [True] and network == []


def test_a_file_not_cached_is_fetched_once_the_hub_answers(network: list[str]) -> None:
    load = Loader(cached=False)
    assert from_cache_or_hub("model.hub 'org/name'", load, (Missing,)) == "hub"
    assert load.calls == [True, False] and len(network) == 1


def test_no_network_is_one_message_saying_what_to_do(network: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub, "hub_answers", lambda endpoint: False)
    load = Loader(cached=False)
    with pytest.raises(HubUnavailable) as raised:
        from_cache_or_hub("model.hub 'org/name'", load, (Missing,))
    message = str(raised.value)
    assert message.startswith("model.hub 'org/name': no network to the Hugging Face Hub")
    assert all(way in message for way in ("Hugging Face cache", "HF_HUB_OFFLINE=1", "PADBENCH_MODEL_ROOTS"))
    assert load.calls == [True]  # the download itself, with its retries, is never started


def test_hf_hub_offline_reads_the_cache_alone(network: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailable, match="HF_HUB_OFFLINE is set"):
        from_cache_or_hub("data.tokenizer 'name'", Loader(cached=False), (Missing,))
    assert network == []


def test_a_check_never_asks_the_network(network: list[str]) -> None:
    with cache_only(), pytest.raises(NotInCache, match="the worker that runs the job fetches it"):
        from_cache_or_hub("model.hub 'org/name'", Loader(cached=False), (Missing,))
    assert network == []
    assert from_cache_or_hub("model.hub 'org/name'", Loader(cached=False), (Missing,)) == "hub"  # only within it


def closed_port() -> int:
    """A loopback port nothing listens on: one the system just handed out, closed again."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_quick_check_is_false_for_a_closed_port() -> None:
    hub.hub_answers.cache_clear()
    try:
        assert hub.hub_answers(f"http://127.0.0.1:{closed_port()}") is False
    finally:
        hub.hub_answers.cache_clear()


def test_libraries_read_their_caches_alone_within_libraries_offline() -> None:
    import datasets.config
    from huggingface_hub import constants

    before = constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE
    with hub.libraries_offline():
        assert constants.HF_HUB_OFFLINE is True and datasets.config.HF_HUB_OFFLINE is True
    assert before == (constants.HF_HUB_OFFLINE, datasets.config.HF_HUB_OFFLINE)
