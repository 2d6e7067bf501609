"""How a tokens file stores a token: never the token itself, its SHA-256 digest (`sha256:HEX`).

Shared by the server, which compares presented tokens against the digests, and the client's demo, which
writes a tokens file for the server it starts.
"""

from __future__ import annotations

import hashlib
import re
import secrets

DIGEST_PREFIX = "sha256:"
DIGEST_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")


def token_digest(token: str) -> str:
    """What the tokens file stores for `token`: `sha256:` and the hex digest."""
    return DIGEST_PREFIX + hashlib.sha256(token.encode()).hexdigest()


def random_token() -> str:
    """32 random bytes, URL-safe, never starting with `-`: a token is passed as `--token TOKEN`, and argparse
    (like most option parsers) takes an argument that starts with `-` for an option of its own."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token
