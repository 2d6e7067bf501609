"""Request dependencies as `Annotated` aliases: sessions, settings, and who is calling.

The routers use `UnitOfWorkRoute` (padbench.server.api.transactions): a request's sessions are committed
(or rolled back) and closed in the endpoint's own thread, before the response is serialized or sent, so
a client that reads its own write right after a 201 always sees it committed. The session dependencies
only create a session (no connection until the first statement) and close it afterwards in case the
endpoint never ran. Everything here that does no I/O is `async`, so it runs on the event loop instead of
costing a thread hop per dependency.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Path, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from padbench.contract.api import IDEMPOTENCY_KEY_HEADER
from padbench.contract.bounds import MAX_DB_ID, IdempotencyKey
from padbench.server.api.auth_gate import gated_principal
from padbench.server.core.config import Settings
from padbench.server.core.security import Principal, Role, TokenStore
from padbench.server.db.engine import Database

bearer_scheme = HTTPBearer(auto_error=False, description="A token from PADBENCH_TOKENS_FILE")


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_database(request: Request) -> Database:
    return request.app.state.database


async def get_write_session(request: Request) -> AsyncIterator[Session]:
    """One write transaction per request (BEGIN IMMEDIATE on SQLite), ended by the endpoint's route."""
    session = get_database(request).write()
    try:
        yield session
    finally:
        session.close()  # a no-op once the route ended it; nothing was executed if the endpoint never ran


async def get_read_session(request: Request) -> AsyncIterator[Session]:
    session = get_database(request).read()
    try:
        yield session
    finally:
        session.close()


async def get_current_principal(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]
) -> Principal:
    gated = gated_principal(request.state)
    if gated is not None:  # the gate already checked the token, before the body was read
        return gated
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing bearer token (Authorization: Bearer …)",
                            headers=challenge)
    tokens: TokenStore = request.app.state.tokens
    principal = tokens.authenticate(credentials.credentials)
    if principal is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid bearer token", headers=challenge)
    return principal


CurrentPrincipal = Annotated[Principal, Depends(get_current_principal)]


def require_role(role: Role) -> Callable[[Principal], Awaitable[Principal]]:
    """A dependency admitting `role` and admins; anyone else authenticated gets 403."""
    return require_any_role(role)


def require_any_role(*roles: Role) -> Callable[[Principal], Awaitable[Principal]]:
    """A dependency admitting any of `roles` and admins; anyone else authenticated gets 403."""

    async def check(principal: CurrentPrincipal) -> Principal:
        if principal.role not in roles and not principal.is_admin:
            needed = " or ".join(role.value for role in roles)
            caller = f"{principal.role.value}:{principal.name}"
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"this endpoint needs a {needed} token; {caller} is not one")
        return principal

    return check


SettingsDep = Annotated[Settings, Depends(get_settings)]
DatabaseDep = Annotated[Database, Depends(get_database)]
SessionDep = Annotated[Session, Depends(get_write_session)]
ReadSessionDep = Annotated[Session, Depends(get_read_session)]
SubmitterAuth = Annotated[Principal, Depends(require_role(Role.submitter))]
WorkerAuth = Annotated[Principal, Depends(require_role(Role.worker))]
AdminAuth = Annotated[Principal, Depends(require_role(Role.admin))]
# Reading jobs and results: submitters (their own jobs), viewers and admins (every job).
ReaderAuth = Annotated[Principal, Depends(require_any_role(Role.submitter, Role.viewer))]
ViewerAuth = Annotated[Principal, Depends(require_role(Role.viewer))]
# An id in a URL: past the database's integer range it names nothing, so it is a 422, not a driver error.
JobIdPath = Annotated[int, Path(ge=1, le=MAX_DB_ID)]
# A submit's `Idempotency-Key` header: a retry carrying the same key gets the job the first attempt created.
IdempotencyKeyHeader = Annotated[IdempotencyKey | None, Header(
    alias=IDEMPOTENCY_KEY_HEADER,
    description="Any 1 to 200 printable ASCII characters, new for each job (a UUID, say) and the same on every "
                "retry of that submit: a retry with the key answers 200 with the job the first attempt created "
                "(and `Idempotent-Replayed: true`) instead of queuing it twice; the same key with another spec "
                "is refused with 422. Keys are per submitter.",
)]
