"""Authentication from the headers alone, before any request body is read.

FastAPI reads and parses a body before it resolves dependencies, so a bearer check in a dependency
lets anyone make the server buffer up to PADBENCH_MAX_BODY_BYTES per request. This middleware answers
401 for every `/v1` request without a valid token before the application touches the body, and 429 to a
client address with too many failed attempts in a window (PADBENCH_AUTH_FAILURE_LIMIT per
PADBENCH_AUTH_FAILURE_WINDOW_SECONDS), which slows token guessing to a crawl. Each failure is logged with
the client's address and the reason, never with what was presented.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict, deque

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from padbench.contract.api import API_PREFIX
from padbench.server.core.security import Principal, TokenStore

log = logging.getLogger("padbench.server.auth")
HTTP_TOO_MANY_REQUESTS = 429
# Addresses remembered at once; the oldest is forgotten first, so a flood of addresses cannot grow memory.
MAX_TRACKED_CLIENTS = 10_000
CHALLENGE = {"WWW-Authenticate": "Bearer"}


class FailureLimiter:
    """Failed authentications per client address within a sliding window."""

    def __init__(self, limit: int, window_seconds: float) -> None:
        self.limit = limit
        self.window_seconds = window_seconds
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, client: str, now: float) -> deque[float]:
        times = self._failures.get(client, deque())
        while times and times[0] <= now - self.window_seconds:
            times.popleft()
        return times

    def retry_after(self, client: str) -> float | None:
        """Seconds until `client` may try again, or None when it is not refused."""
        now = time.monotonic()
        times = self._recent(client, now)
        if len(times) < self.limit:
            return None
        return times[0] + self.window_seconds - now

    def record_failure(self, client: str) -> None:
        now = time.monotonic()
        times = self._recent(client, now)
        times.append(now)
        self._failures[client] = times
        self._failures.move_to_end(client)
        while len(self._failures) > MAX_TRACKED_CLIENTS:
            self._failures.popitem(last=False)


def bearer_token(scope: Scope) -> str | None:
    header = dict(scope["headers"]).get(b"authorization")
    if header is None:
        return None
    scheme, _, credentials = header.decode("latin-1").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None


class AuthGateMiddleware:
    def __init__(self, app: ASGIApp, tokens: TokenStore, limiter: FailureLimiter) -> None:
        self.app = app
        self.tokens = tokens
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(API_PREFIX + "/"):
            await self.app(scope, receive, send)
            return
        client = scope["client"][0] if scope.get("client") else "unknown"
        wait = self.limiter.retry_after(client)
        if wait is not None:
            detail = f"too many failed authentications from {client}; retry in {math.ceil(wait)} s"
            response = JSONResponse({"detail": detail}, HTTP_TOO_MANY_REQUESTS,
                                    headers={"Retry-After": str(math.ceil(wait))})
            await response(scope, receive, send)
            return
        presented = bearer_token(scope)
        principal = self.tokens.authenticate(presented) if presented is not None else None
        if principal is None:
            reason = "missing bearer token (Authorization: Bearer …)" if presented is None else "invalid bearer token"
            self.limiter.record_failure(client)
            log.warning("authentication failed from %s: %s (%s %s)", client, reason, scope["method"], scope["path"])
            await JSONResponse({"detail": reason}, 401, headers=CHALLENGE)(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


def gated_principal(state: object) -> Principal | None:
    """The principal the gate authenticated for this request, if it did."""
    principal = getattr(state, "principal", None)
    return principal if isinstance(principal, Principal) else None
