"""The HTTP session both the submitter's client and the worker use: one server, one bearer token, `/v1`.

Every failure — an HTTP error status, a refused connection, a timeout, a body that does not match the
contract — becomes one `ApiError` whose message is a single line a person can act on, e.g.
`HTTP 422: spec.batch_size: Input should be greater than 0`.
"""

from __future__ import annotations

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
    """One clear line describing why a request failed; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def is_transient(self) -> bool:
        """No answer at all, or a server-side error: worth trying again shortly."""
        return self.status is None or self.status >= HTTP_SERVER_ERROR


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
    return ApiError(f"HTTP {response.status_code}: {text}", status=response.status_code)


class ApiSession:
    """An httpx client bound to one server and one bearer token; shared by the client and the worker."""

    def __init__(
        self,
        server: str,
        token: str,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.server = server.rstrip("/")
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
        """Send a request under `/v1`; raise ApiError unless the status is 2xx."""
        url = path if path.startswith("/healthz") else f"{API_PREFIX}{path}"
        try:
            response = self._http.request(method, url, **kwargs)
        except httpx.TimeoutException as error:
            raise ApiError(f"{self.server} did not answer {method} {url} in time ({type(error).__name__})") from error
        except httpx.TransportError as error:
            raise ApiError(f"cannot reach the padbench server at {self.server}: {error}") from error
        if response.is_error:
            raise error_from_response(response)
        return response


def parse_body(model: type[ModelT], response: httpx.Response) -> ModelT:
    try:
        return model.model_validate_json(response.content)
    except ValidationError as error:
        raise ApiError(f"the server's answer does not match the {model.__name__} contract: {error}") from error
