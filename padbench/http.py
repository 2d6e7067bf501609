"""The HTTP session both the submitter's client and the worker use: one server, one bearer token, `/v1`.

Every failure — an HTTP error status, a refused connection, a timeout, a body that does not match the
contract — becomes one `ApiError` whose message is a single line a person can act on, e.g.
`HTTP 422: spec.batch_size: Input should be greater than 0`.

A server that says it is saturated (503) or asks a client to slow down (429) names a wait in `Retry-After`;
the session waits that long, with jitter so a crowd of clients does not come back in one burst, and tries
again while its retry budget lasts. So does a refused connection (a server restarting), with jittered
exponential back-off. Those requests never reached a handler, so sending them again is always safe; a
request that timed out or lost its answer may have run, and is retried only when it reads (GET), since a
repeated POST could act twice (submits carry an Idempotency-Key for that reason, and lease calls are
fenced by their token).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from padbench.contract.api import API_PREFIX

if TYPE_CHECKING:
    from typing_extensions import Self

# Explicit, short timeouts: API calls are small; a hung server must not hang the CLI forever.
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)

HTTP_SERVER_ERROR = 500
HTTP_TOO_MANY_REQUESTS = 429
HTTP_SERVICE_UNAVAILABLE = 503
RETRYABLE_STATUSES = frozenset({HTTP_TOO_MANY_REQUESTS, HTTP_SERVICE_UNAVAILABLE})
# How long one call keeps retrying a saturated server (503, 429) before it reports the failure, and a
# refused connection (a server restarting takes a second or two; a server that is down should be said soon).
DEFAULT_RETRY_BUDGET_S = 30.0
CONNECT_RETRY_BUDGET_S = 3.0
FIRST_BACKOFF_S = 0.25
MAX_BACKOFF_S = 8.0

ModelT = TypeVar("ModelT", bound=BaseModel)


class TokenFileUnreadable(ValueError):
    """The token file named with --token-file / PADBENCH_TOKEN_FILE cannot be read or is empty."""


def token_from_file(path: Path) -> str:
    """The token kept in `path` (its first non-blank line): a token on the command line shows in `ps`."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise TokenFileUnreadable(f"--token-file {path}: cannot read it ({error.strerror})") from error
    token = next((line.strip() for line in lines if line.strip()), None)
    if token is None:
        raise TokenFileUnreadable(f"--token-file {path}: the file is empty")
    return token


class ApiError(Exception):
    """One clear line describing why a request failed; `status` is the HTTP status when there was one, and
    `retry_after` the seconds the server asked the client to wait (its Retry-After header), if it did."""

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def is_transient(self) -> bool:
        """No answer at all, a server-side error, or "slow down" (429): worth trying again shortly."""
        return self.status is None or self.status >= HTTP_SERVER_ERROR or self.status == HTTP_TOO_MANY_REQUESTS


def retry_after_seconds(response: httpx.Response) -> float | None:
    """The Retry-After header in seconds; None when absent or given as a date (our server sends seconds)."""
    try:
        seconds = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def stretched_retry_after(retry_after: float, jitter: float) -> float:
    """The server's Retry-After stretched by up to half again (`jitter` in [0, 1)), so that clients told the
    same wait do not all come back in the same instant."""
    return retry_after * (1.0 + jitter / 2)


def jittered_wait(retry_after: float | None, attempt: int) -> float:
    """The server's Retry-After stretched by up to half again, or exponential back-off with full jitter."""
    if retry_after is not None:
        return stretched_retry_after(retry_after, random.random())
    return random.uniform(0, min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2**attempt))


def describe_detail(detail: Any) -> str:
    """FastAPI's `detail`: a string, or for 422 a list of {loc, msg} items; render either as one line."""
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if isinstance(item, dict) and "msg" in item:
                location = ".".join(str(part) for part in item.get("loc", ()) if part != "body")
                parts.append(f"{location}: {item['msg']}" if location else str(item["msg"]))
            else:
                parts.append(str(item))
        return "; ".join(parts)
    return str(detail)


def error_from_response(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
        detail = body.get("detail", body) if isinstance(body, dict) else body
        text = describe_detail(detail)
    except ValueError:
        text = response.text.strip() or response.reason_phrase
    return ApiError(f"HTTP {response.status_code}: {text}", status=response.status_code,
                    retry_after=retry_after_seconds(response))


class ApiSession:
    """An httpx client bound to one server and one bearer token; shared by the client and the worker."""

    default_retry_budget_s = DEFAULT_RETRY_BUDGET_S

    def __init__(
        self,
        server: str,
        token: str,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        retry_budget_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.server = server.rstrip("/")
        self.retry_budget_s = self.default_retry_budget_s if retry_budget_s is None else retry_budget_s
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=self.server,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Send a request under `/v1`; raise ApiError unless the status is 2xx, after retrying what is safe
        to retry (see the module doc) for up to `retry_budget_s`."""
        url = path if path.startswith("/healthz") else f"{API_PREFIX}{path}"
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                return self._send_once(method, url, **kwargs)
            except ApiError as error:
                wait = self._retry_wait(method, error, attempt)
                budget = self.retry_budget_s if error.status is not None else min(
                    self.retry_budget_s, CONNECT_RETRY_BUDGET_S)
                if wait is None or time.monotonic() + wait > started + budget:
                    raise
            self._sleep(wait)
            attempt += 1

    def _send_once(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, url, **kwargs)
        except httpx.ConnectError as error:
            raise NotSent(f"cannot reach the padbench server at {self.server}: {error}") from error
        except httpx.TimeoutException as error:
            raise ApiError(f"{self.server} did not answer {method} {url} in time ({type(error).__name__})") from error
        except httpx.TransportError as error:
            raise ApiError(f"cannot reach the padbench server at {self.server}: {error}") from error
        if response.is_error:
            raise error_from_response(response)
        return response

    @staticmethod
    def _retry_wait(method: str, error: ApiError, attempt: int) -> float | None:
        """How long to wait before sending again, or None when this failure must not be retried."""
        if error.status in RETRYABLE_STATUSES or isinstance(error, NotSent):
            return jittered_wait(error.retry_after, attempt)
        if error.status is None and method == "GET":
            return jittered_wait(None, attempt)
        return None


class NotSent(ApiError):
    """The connection was refused: the request never reached the server."""


def parse_body(model: type[ModelT], response: httpx.Response) -> ModelT:
    try:
        return model.model_validate_json(response.content)
    except ValidationError as error:
        raise ApiError(f"the server's answer does not match the {model.__name__} contract: {error}") from error
