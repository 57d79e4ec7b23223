"""HEAD requests (RFC 9110, sec. 9.3.2: a general-purpose server answers HEAD wherever it
answers GET, with the same status and headers and no body): a plain ASGI middleware hands the
app a GET and drops the body of its answer, so a client (a monitor, a cache, `curl -I`) can
ask whether a study exists, or how large its report is, without fetching it. FastAPI routes
answer only the methods they are declared with, and declaring HEAD beside GET would put a
second operation of each route in /openapi.json."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.routing import BaseRoute, Match

from .guard import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HEAD_ASKED", "Head", "allowed_methods"]

HEAD_ASKED = "tuner.head"
"""The scope key that marks a GET the client sent as HEAD (for the method an error names)."""
_METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")


def allowed_methods(routes: Iterable[BaseRoute], scope: Scope) -> list[str]:
    """The methods some route takes at the request's path, HEAD wherever GET, sorted (an
    `Allow` header's value): Starlette's 405 names only the first route of the path. Each
    method is asked of the routes' own matching (FastAPI nests an included router's)."""
    methods = {method for method in _METHODS for route in routes
               if route.matches({**scope, "method": method})[0] == Match.FULL}
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


class Head:
    """HEAD answered as GET without the body (see the module's docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET", HEAD_ASKED: True}, receive, headers_only)
