"""The outermost layer of the app (a plain ASGI middleware): bodies over the size limit are
refused with 413 before they are read whole, and an exception that escapes a route becomes a
generic 500 for the client while the traceback goes to the server's log (redacted, see
tuner.serve.logs), never to the client."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.exceptions import HTTPException

__all__ = ["BodyTooLarge", "Guard", "error_body"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_LOG = logging.getLogger(__name__)
INTERNAL = "internal error; the server's log has the details"


def error_body(message: str) -> bytes:
    """Every error's JSON: {"error": "one line"}."""
    return json.dumps({"error": message}).encode("utf-8")


class BodyTooLarge(HTTPException):
    """A body that grew past the limit while it was read (no Content-Length given)."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=_too_large(limit))


def _too_large(limit: int) -> str:
    return (f"the request body is over {limit:,} bytes; send fewer specs per request, or "
            "POST a search space to /v1/studies")


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value) if value.isdigit() else -1
    return None


async def _answer(send: Send, status: int, message: str) -> None:
    body = error_body(message)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Body limit (413) and the last-resort 500 around `app`."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.limit = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and not 0 <= declared <= self.limit:
            await _answer(send, 413, _too_large(self.limit))
            return
        received, started = 0, False

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:
                raise BodyTooLarge(self.limit)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, watched)
        except BodyTooLarge as err:
            if not started:
                await _answer(send, 413, str(err.detail))
        except Exception:
            _LOG.exception("%s %s failed", scope.get("method"), scope.get("path"))
            if not started:
                await _answer(send, 500, INTERNAL)
