"""Bearer tokens with roles, read from a tokens file (`role:name:sha256:HEX` per line).

The file and the server's memory hold only SHA-256 digests of the tokens: a copy of the file or a core
dump does not reveal a token. An unsalted fast hash is enough because the tokens are random (32 bytes from
`secrets`), not passwords: there is nothing to guess from a dictionary. `padbench token new ROLE NAME`
prints a fresh token once and the line to add. The digest of a presented token is compared with
`secrets.compare_digest` against every known digest, so the time a check takes does not reveal which one
came close. Older `role:name:token` lines with the token in plain text still work (hashed on reading) but
the server warns at start-up, so a deployment can move to digests without a flag day. Short or
default-looking plain tokens are refused when the file is read.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from padbench.tokens import DIGEST_PATTERN, DIGEST_PREFIX, random_token, token_digest

log = logging.getLogger("padbench.server")
MIN_TOKEN_LENGTH = 24
# Distinct characters a 24+ character secret should have at the very least ("aaaa…", "abab…" are not secrets).
MIN_DISTINCT_CHARACTERS = 8
DEFAULT_LOOKING_WORDS = ("changeme", "changethis", "change-me", "change_me", "default", "example", "password",
                         "secret", "token", "placeholder", "xxxxxxxx", "12345678")


class Role(str, Enum):
    submitter = "submitter"
    worker = "worker"
    admin = "admin"
    # Reads every job, result and the metrics and changes nothing: the token for a dashboard or Prometheus.
    viewer = "viewer"


@dataclass(frozen=True)
class Principal:
    """Who is calling: the role decides what they may do, the name owns jobs and workers."""

    role: Role
    name: str

    @property
    def is_admin(self) -> bool:
        return self.role is Role.admin

    @property
    def reads_everything(self) -> bool:
        return self.role in (Role.admin, Role.viewer)


class TokenFileError(ValueError):
    """The tokens file is missing, unreadable or holds a token the server refuses; the message says which line."""


def token_weakness(token: str) -> str | None:
    """Why a token is unfit to guard the server, or None when it is acceptable."""
    if len(token) < MIN_TOKEN_LENGTH:
        return f"is {len(token)} characters long; at least {MIN_TOKEN_LENGTH} are required"
    lowered = token.lower()
    for word in DEFAULT_LOOKING_WORDS:
        if word in lowered:
            return f"looks like a default or example value (contains {word!r})"
    if len(set(token)) < MIN_DISTINCT_CHARACTERS:
        return f"uses fewer than {MIN_DISTINCT_CHARACTERS} distinct characters"
    return None


def token_file_line(role: Role, name: str, token: str) -> str:
    return f"{role.value}:{name}:{token_digest(token)}"


def parse_token_line(line: str, where: str) -> tuple[Principal, str] | None:
    """One `role:name:sha256:HEX` (or plain `role:name:token`) line → (principal, digest); None for blank and
    `#` comment lines. A plain token is hashed here and logged as a warning: it should be replaced."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    parts = text.split(":", 2)
    if len(parts) != 3:
        raise TokenFileError(f"{where}: expected `role:name:token`")
    role_text, name, token = (part.strip() for part in parts)
    try:
        role = Role(role_text)
    except ValueError:
        roles = ", ".join(r.value for r in Role)
        raise TokenFileError(f"{where}: unknown role {role_text!r} (expected one of {roles})") from None
    if not name:
        raise TokenFileError(f"{where}: the name is empty")
    if DIGEST_PATTERN.fullmatch(token):
        return Principal(role, name), token
    if token.startswith(DIGEST_PREFIX):
        raise TokenFileError(f"{where}: `sha256:` must be followed by 64 lowercase hex digits")
    weakness = token_weakness(token)
    if weakness:
        raise TokenFileError(f"{where}: the token for {role.value}:{name} {weakness}")
    log.warning("%s: the token for %s:%s is stored in plain text; replace the line with `%s:%s:%s`", where,
                role.value, name, role.value, name, token_digest(token))
    return Principal(role, name), token_digest(token)


class TokenStore:
    """The known token digests; `authenticate` maps a presented bearer token to its principal."""

    def __init__(self, entries: Iterable[tuple[Principal, str]]) -> None:
        """`entries`: (principal, digest as `token_digest` makes it)."""
        self._entries: list[tuple[Principal, bytes]] = []
        seen: set[str] = set()
        for principal, digest in entries:
            if digest in seen:
                raise TokenFileError(f"the token for {principal.role.value}:{principal.name} is used twice")
            seen.add(digest)
            self._entries.append((principal, digest.encode()))
        if not self._entries:
            raise TokenFileError("no tokens: the server would refuse every request")

    def authenticate(self, presented: str) -> Principal | None:
        candidate = token_digest(presented).encode()
        match: Principal | None = None
        for principal, token in self._entries:  # no early exit: every check costs the same
            if secrets.compare_digest(candidate, token):
                match = principal
        return match

    @property
    def principals(self) -> list[Principal]:
        return [principal for principal, _ in self._entries]


def read_token_file(path: Path) -> TokenStore:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise TokenFileError(f"cannot read PADBENCH_TOKENS_FILE {path}: {error.strerror}") from error
    parsed = (parse_token_line(line, f"{path}:{number}") for number, line in enumerate(lines, start=1))
    return TokenStore(entry for entry in parsed if entry is not None)


def new_token() -> str:
    """A random token that passes our own checks (a random string may, very rarely, contain a listed word)."""
    while True:
        token = random_token()
        if token_weakness(token) is None:
            return token


def generate_dev_tokens() -> dict[Role, str]:
    """Fresh random tokens, one per role, for `padbench server --dev`."""
    return {role: new_token() for role in Role}


def dev_token_store(tokens: dict[Role, str], name: str = "dev") -> TokenStore:
    return TokenStore((Principal(role, name), token_digest(token)) for role, token in tokens.items())
