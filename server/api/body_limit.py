"""A request-body size limit (Starlette enforces none by default): count the bytes, answer 413.

A declared Content-Length over the limit is refused before anything is read; a chunked body is counted
as it streams in and refused the moment it passes the limit.
"""

from __future__ import annotations

from fastapi import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HTTP_CONTENT_TOO_LARGE = 413


class BodySizeLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> str:
        return f"request body: larger than the server's limit of {self.max_bytes} bytes (PADBENCH_MAX_BODY_BYTES)"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await JSONResponse({"detail": self._too_large()}, HTTP_CONTENT_TOO_LARGE)(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # FastAPI re-raises HTTPExceptions met while reading the body, so this becomes the response.
                    raise HTTPException(HTTP_CONTENT_TOO_LARGE, self._too_large())
            return message

        await self.app(scope, counting_receive, send)
