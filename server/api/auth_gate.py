"""Authentication from the headers alone, before any request body is read.

FastAPI reads and parses a body before it resolves dependencies, so a bearer check in a dependency
lets anyone make the server buffer up to PADBENCH_MAX_BODY_BYTES per request. This middleware answers
401 for every `/v1` and `/metrics` request without a valid token before the application touches the body,
so every route that takes a token counts and logs its failures in one place: a guesser gains nothing by
choosing the route.

Failed attempts are counted in the database (padbench.server.db.auth_failures), so every server process
behind one port (`padbench server --workers N`) sees the same counts: a guesser gains nothing by spreading
its connections over the processes. They are counted per client address AND presented credential: a
short hash of the token's first characters (a missing token is a credential of its own). A client
retrying one wrong token, such as a worker with a stale token file, gets 429 with Retry-After after
PADBENCH_AUTH_FAILURE_LIMIT failures within PADBENCH_AUTH_FAILURE_WINDOW_SECONDS; other clients at the
same address are not affected. Every invalid attempt from an address also counts towards
PADBENCH_AUTH_FAILURE_ADDRESS_LIMIT in the same window, so a client that varies what it presents is held
back too.

A request presenting a valid token is never refused by the limiter: clients on one host, or behind one
proxy, share an address, and one misconfigured client must not take the others' leases away. Answering a
valid token while refusing wrong ones does tell a guesser when a guess is right, but the tokens are 32
random bytes (2^256 possibilities), so no rate of guessing finds one; the limiter bounds the log lines,
the hashing and the rows that floods of wrong tokens cost. A valid token costs the limiter nothing: only
a failed authentication reads and writes its table. Each failure is logged with the client's address,
the reason and the credential's hash, never with what was presented.

The client's address is the one uvicorn resolved (`scope["client"]`): the peer of the connection, or what
a proxy named in PADBENCH_TRUSTED_PROXIES put in X-Forwarded-For. The header itself is never read here, so
no client chooses the address it is counted under.
"""

from __future__ import annotations

import hashlib
import logging
import math

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from padbench.contract.api import API_PREFIX
from padbench.server.api.errors import database_error_handler
from padbench.server.core.security import Principal, TokenStore
from padbench.server.db import auth_failures
from padbench.server.db.auth_failures import FailureLimits
from padbench.server.db.engine import Database
from padbench.server.db.failures import DatabaseCondition
from padbench.terminal_text import literal

log = logging.getLogger("padbench.server.auth")
HTTP_TOO_MANY_REQUESTS = 429
# A presented token's characters that name its credential. The hash is cut to 32 bits, fewer than the
# 48 bits of those characters, so neither the memory nor the log can confirm what was presented.
CREDENTIAL_PREFIX_CHARACTERS = 8
CREDENTIAL_TAG_HEX_DIGITS = 8
MISSING_CREDENTIAL = "none"
CHALLENGE = {"WWW-Authenticate": "Bearer"}
# Prometheus' scrape endpoint, outside `/v1` by convention, and token-guarded like it.
METRICS_PATH = "/metrics"


def is_gated(path: str) -> bool:
    """Whether a request to `path` must present a valid token before it reaches the application."""
    return path.startswith(API_PREFIX + "/") or path == METRICS_PATH


def credential_tag(presented: str | None) -> str:
    """Which credential a request presented, as far as failures are counted: a hash of its first characters."""
    if presented is None:
        return MISSING_CREDENTIAL
    digest = hashlib.sha256(presented[:CREDENTIAL_PREFIX_CHARACTERS].encode()).hexdigest()
    return digest[:CREDENTIAL_TAG_HEX_DIGITS]


def bearer_token(scope: Scope) -> str | None:
    header = dict(scope["headers"]).get(b"authorization")
    if header is None:
        return None
    scheme, _, credentials = header.decode("latin-1").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None


class AuthGateMiddleware:
    def __init__(self, app: ASGIApp, tokens: TokenStore, limits: FailureLimits) -> None:
        self.app = app
        self.tokens = tokens
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_gated(scope["path"]):
            await self.app(scope, receive, send)
            return
        presented = bearer_token(scope)
        principal = self.tokens.authenticate(presented) if presented is not None else None
        if principal is not None:
            scope.setdefault("state", {})["principal"] = principal
            await self.app(scope, receive, send)
            return
        await self.refuse(scope, receive, send, presented)

    async def refuse(self, scope: Scope, receive: Receive, send: Send, presented: str | None) -> None:
        """401 for a missing or invalid token; 429 once its credential or its address failed too often."""
        client = scope["client"][0] if scope.get("client") else "unknown"
        credential = credential_tag(presented)
        try:
            wait = await run_in_threadpool(self.check_and_record, scope, client, credential)
        except (DBAPIError, PoolTimeoutError, DatabaseCondition) as error:
            # The database cannot count this failure: 503 JSON naming why, as every route answers then.
            await (await database_error_handler(Request(scope, receive), error))(scope, receive, send)
            return
        if wait is not None:
            seconds = math.ceil(wait)  # at least 1: the oldest failure is still inside the window
            detail = f"too many failed authentications from {client}; retry in {seconds} s"
            response = JSONResponse({"detail": detail}, HTTP_TOO_MANY_REQUESTS, headers={"Retry-After": str(seconds)})
            await response(scope, receive, send)
            return
        reason = "missing bearer token (Authorization: Bearer …)" if presented is None else "invalid bearer token"
        # The path is the client's own text (percent-decoded): escaped, so the log cannot carry terminal controls.
        log.warning("authentication failed from %s: %s, credential %s (%s %s)", client, reason, credential,
                    scope["method"], literal(scope["path"]))
        await JSONResponse({"detail": reason}, 401, headers=CHALLENGE)(scope, receive, send)

    def check_and_record(self, scope: Scope, client: str, credential: str) -> float | None:
        """The wait when this failure is refused; else None, with the failure counted. A refusal is decided by
        a read, so a flood already refused never takes the write lock from the queue's writers; an attempt
        that is let through is checked again and counted in one write transaction."""
        database: Database = scope["app"].state.database
        with database.read() as session:
            wait = auth_failures.retry_after(session, client, credential, self.limits)
        if wait is not None:
            return wait
        with database.writing() as session:
            return auth_failures.check_and_record(session, client, credential, self.limits)


def gated_principal(state: object) -> Principal | None:
    """The principal the gate authenticated for this request, if it did."""
    principal = getattr(state, "principal", None)
    return principal if isinstance(principal, Principal) else None
