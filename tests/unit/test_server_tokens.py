"""The tokens file: `role:name:token` lines; weak, default-looking, duplicate or malformed tokens refused."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from padbench.server.core.security import (
    Principal,
    Role,
    TokenFileError,
    TokenStore,
    dev_token_store,
    generate_dev_tokens,
    parse_token_line,
    read_token_file,
    token_digest,
    token_file_line,
    token_weakness,
)

GOOD = "Zq3vT9xL0pR7sW2yB5nM8cK4"  # 24 characters, varied


def test_a_good_file_parses_with_comments_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"# who may call\n\nsubmitter:alice:{GOOD}\nworker:gpu0:{GOOD[::-1]}x\n", encoding="utf-8")
    store = read_token_file(path)
    assert store.principals == [Principal(Role.submitter, "alice"), Principal(Role.worker, "gpu0")]
    assert store.authenticate(GOOD) == Principal(Role.submitter, "alice")
    assert store.authenticate(GOOD[:-1]) is None and store.authenticate("") is None


def test_a_token_may_contain_colons() -> None:
    principal, digest = parse_token_line(f"admin:root:{GOOD}:more", "f:1")
    assert principal == Principal(Role.admin, "root") and digest == token_digest(f"{GOOD}:more")


@pytest.mark.parametrize(("line", "reason"), [
    (f"boss:root:{GOOD}", "unknown role 'boss'"),
    (f"submitter::{GOOD}", "the name is empty"),
    ("submitter:alice", "expected `role:name:token`"),
    ("submitter:alice:short-token", "at least 24"),
    ("submitter:alice:changeme-please-changeme-please", "default"),
    ("submitter:alice:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "distinct characters"),
])
def test_bad_lines_are_refused_with_file_and_line(line: str, reason: str) -> None:
    with pytest.raises(TokenFileError, match="tokens:3") as error:
        parse_token_line(line, "tokens:3")
    assert reason in str(error.value)


def test_duplicate_tokens_and_empty_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TokenFileError, match="used twice"):
        TokenStore([(Principal(Role.submitter, "a"), GOOD), (Principal(Role.admin, "b"), GOOD)])
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(TokenFileError, match="no tokens"):
        read_token_file(empty)
    with pytest.raises(TokenFileError, match="cannot read"):
        read_token_file(tmp_path / "missing")


def test_dev_tokens_are_strong_and_distinct() -> None:
    tokens = generate_dev_tokens()
    assert set(tokens) == set(Role)
    assert len(set(tokens.values())) == len(Role) and all(token_weakness(token) is None for token in tokens.values())
    assert dev_token_store(tokens).authenticate(tokens[Role.worker]) == Principal(Role.worker, "dev")


def test_the_file_holds_digests_and_the_store_never_keeps_a_plain_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tokens"
    path.write_text(token_file_line(Role.worker, "gpu0", GOOD) + "\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="padbench.server"):
        store = read_token_file(path)
    assert GOOD not in path.read_text() and caplog.records == []
    assert store.authenticate(GOOD) == Principal(Role.worker, "gpu0") and store.authenticate(GOOD + "x") is None
    assert GOOD.encode() not in repr(vars(store)).encode()


def test_plain_text_lines_still_work_with_a_warning_naming_the_replacement(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"submitter:alice:{GOOD}\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="padbench.server"):
        store = read_token_file(path)
    assert store.authenticate(GOOD) == Principal(Role.submitter, "alice")
    assert "plain text" in caplog.text and token_file_line(Role.submitter, "alice", GOOD) in caplog.text


def test_a_malformed_digest_is_refused() -> None:
    with pytest.raises(TokenFileError, match="64 lowercase hex digits"):
        parse_token_line("admin:root:sha256:abc", "f:1")


def test_token_new_prints_the_token_once_and_a_line_that_authenticates_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from padbench.cli import main

    assert main(["token", "new", "worker", "gpu-7"]) == 0
    output = capsys.readouterr().out.splitlines()
    token = output[0].rsplit(" ", 1)[1]
    line = output[-1]
    assert token not in line and line.startswith("worker:gpu-7:sha256:")
    (tmp_path / "tokens").write_text(line + "\n", encoding="utf-8")
    assert read_token_file(tmp_path / "tokens").authenticate(token) == Principal(Role.worker, "gpu-7")
