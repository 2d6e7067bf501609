"""What the authentication failure limiter counts a request under: a credential is a hash of a token's first
characters (the counting itself is in the database: tests/integration/test_auth_failures.py)."""

from __future__ import annotations

import secrets

import pytest

from padbench.server.api.auth_gate import MISSING_CREDENTIAL, credential_tag


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
