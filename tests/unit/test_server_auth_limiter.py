"""The authentication failure limiter: counted per (address, credential) and per address, in a sliding
window on a fake clock, with bounded memory; a credential is a hash of a token's first characters."""

from __future__ import annotations

import secrets

import pytest

from padbench.server.api.auth_gate import (
    MISSING_CREDENTIAL,
    FailureLimiter,
    SlidingWindowCounter,
    credential_tag,
)

WINDOW = 60.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def fail(limiter: FailureLimiter, address: str, credential: str, times: int) -> None:
    for _ in range(times):
        assert limiter.retry_after(address, credential) is None
        limiter.record_failure(address, credential)


def test_one_credential_is_refused_after_the_limit_until_its_oldest_failure_ages_out(clock: FakeClock) -> None:
    limiter = FailureLimiter(limit=3, window_seconds=WINDOW, address_limit=100, clock=clock)
    fail(limiter, "10.0.0.1", "aaaa", 1)
    clock.now += 10
    fail(limiter, "10.0.0.1", "aaaa", 2)
    assert limiter.retry_after("10.0.0.1", "aaaa") == pytest.approx(WINDOW - 10)
    clock.now += WINDOW - 10
    assert limiter.retry_after("10.0.0.1", "aaaa") is None


def test_other_credentials_from_the_same_address_are_not_refused(clock: FakeClock) -> None:
    limiter = FailureLimiter(limit=3, window_seconds=WINDOW, address_limit=100, clock=clock)
    fail(limiter, "10.0.0.1", "aaaa", 3)
    assert limiter.retry_after("10.0.0.1", "aaaa") is not None
    assert limiter.retry_after("10.0.0.1", "bbbb") is None
    assert limiter.retry_after("10.0.0.1", MISSING_CREDENTIAL) is None
    assert limiter.retry_after("10.0.0.2", "aaaa") is None


def test_an_address_varying_its_credentials_is_refused_at_the_address_limit(clock: FakeClock) -> None:
    limiter = FailureLimiter(limit=3, window_seconds=WINDOW, address_limit=5, clock=clock)
    for attempt in range(5):
        fail(limiter, "10.0.0.1", f"guess{attempt}", 1)
    assert limiter.retry_after("10.0.0.1", "a-new-guess") == pytest.approx(WINDOW)
    assert limiter.retry_after("10.0.0.2", "a-new-guess") is None
    clock.now += WINDOW
    assert limiter.retry_after("10.0.0.1", "a-new-guess") is None


def test_memory_is_bounded_by_the_number_of_keys_and_the_limit() -> None:
    counter = SlidingWindowCounter(limit=4, window_seconds=WINDOW, max_keys=50)
    for address in range(1000):
        counter.record(f"10.0.{address // 256}.{address % 256}", 1.0)
    assert len(counter) == 50
    # The most recent keys are kept: the oldest were forgotten first.
    assert counter.retry_after("10.0.3.231", 1.0) is None
    for _ in range(4):
        counter.record("10.0.3.231", 1.0)
    assert counter.retry_after("10.0.3.231", 1.0) == WINDOW


def test_a_credential_is_a_short_hash_of_the_first_characters_and_holds_nothing_of_the_token() -> None:
    token = secrets.token_urlsafe(32)
    tag = credential_tag(token)
    assert tag == credential_tag(token[:8] + "different-tail") and len(tag) == 8
    assert tag != credential_tag(secrets.token_urlsafe(32))
    assert token[:4] not in tag and credential_tag(None) == MISSING_CREDENTIAL


def test_random_tokens_never_start_like_an_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--token -abc…` would be parsed as an option: a token starting with `-` is drawn again."""
    from padbench import tokens

    draws = iter(["-starts-like-an-option", "fine-token"])
    monkeypatch.setattr(tokens.secrets, "token_urlsafe", lambda size: next(draws))
    assert tokens.random_token() == "fine-token"
