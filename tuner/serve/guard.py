"""The outermost layer of the app (a plain ASGI middleware): bodies over the size limit are
refused with 413 before they are read whole, a body that takes longer than BODY_S to arrive
with 408 (a client trickling bytes would otherwise hold a connection, and a slot of the
server's limit on connections, for as long as it likes), a client that leaves before its body
is read is one line in the log, and an exception that escapes a route becomes a generic 500
for the client while the traceback goes to the server's log (redacted, see tuner.serve.logs),
never to the client."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

__all__ = ["BODY_S", "BodyTooLarge", "BodyTooSlow", "Guard", "error_body"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_LOG = logging.getLogger(__name__)
INTERNAL = "internal error; the server's log has the details"
BODY_S = 30.0
"""Seconds a request's body may take to arrive, from the app's first look at the request
(1 MiB, the most a body may hold, in 30 s is 35 kB/s)."""
_CLOSE = {"Connection": "close"}
"""A body too slow is not waited for: the connection is closed after the answer (RFC 9110,
sec. 15.5.9). (Not after a 413: closing while the client still sends resets the connection
before it reads the answer.)"""


def error_body(message: str) -> bytes:
    """Every error's JSON: {"error": "one line"}."""
    return json.dumps({"error": message}).encode("utf-8")


class BodyTooLarge(HTTPException):
    """A body that grew past the limit while it was read (no Content-Length given)."""

    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=_too_large(limit))


class BodyTooSlow(HTTPException):
    """A body still arriving `seconds` after the request came."""

    def __init__(self, seconds: float) -> None:
        super().__init__(status_code=408, headers=_CLOSE, detail=(
            f"the request body took over {seconds:g} s to arrive; send it at once"))


def _too_large(limit: int) -> str:
    return (f"the request body is over {limit:,} bytes; send fewer specs per request, or "
            "POST a search space to /v1/studies")


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value) if value.isdigit() else -1
    return None


async def _answer(send: Send, status: int, message: str, *, close: bool = False) -> None:
    body = error_body(message)
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status,
                "headers": headers + ([(b"connection", b"close")] if close else [])})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Body limits (413, 408), clients that leave, and the last-resort 500 around `app`."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, body_s: float = BODY_S) -> None:
        self.app = app
        self.limit = max_body_bytes
        self.body_s = body_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and not 0 <= declared <= self.limit:
            await _answer(send, 413, _too_large(self.limit))
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, self._limited(receive), watched)
        except (BodyTooLarge, BodyTooSlow) as err:
            if not started:
                await _answer(send, err.status_code, str(err.detail),
                              close=isinstance(err, BodyTooSlow))
        except ClientDisconnect:  # nobody to answer: not the server's failure
            _LOG.info("%s %s: the client left before its request was read",
                      scope.get("method"), scope.get("path"))
        except Exception:
            _LOG.exception("%s %s failed", scope.get("method"), scope.get("path"))
            if not started:
                await _answer(send, 500, INTERNAL)

    def _limited(self, receive: Receive) -> Receive:
        """`receive` refusing a body past the size limit, or not whole within `body_s`
        (after the body, a wait for the client's disconnect is not bounded)."""
        deadline = asyncio.get_running_loop().time() + self.body_s
        received, whole = 0, False

        async def limited() -> Message:
            nonlocal received, whole
            if whole:
                return await receive()
            try:
                message = await asyncio.wait_for(
                    receive(), max(0.0, deadline - asyncio.get_running_loop().time()))
            except TimeoutError:
                raise BodyTooSlow(self.body_s) from None
            received += len(message.get("body", b""))
            if received > self.limit:
                raise BodyTooLarge(self.limit)
            whole = message["type"] != "http.request" or not message.get("more_body", False)
            return message
        return limited
