"""Who may call the API: a loopback address needs no token; any other address needs one
(`--token` or TUNER_TOKEN), and then every /v1 route wants `Authorization: Bearer TOKEN`,
compared in constant time (hmac.compare_digest, so the time taken tells nothing of the
token)."""

# No `from __future__ import annotations`: FastAPI reads the dependency's annotation, which
# names the local `scheme`, and a string annotation could not be resolved from the module.
import hmac
import ipaddress
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..errors import TunerError

__all__ = ["MIN_TOKEN_CHARS", "TOKEN_ENV", "bearer_guard", "check_binding", "is_loopback"]

TOKEN_ENV = "TUNER_TOKEN"
MIN_TOKEN_CHARS = 16
"""The shortest token accepted: `secrets.token_urlsafe()` gives 43 characters."""
_MAKE_ONE = "e.g. python -c 'import secrets; print(secrets.token_urlsafe())'"


def is_loopback(host: str) -> bool:
    """True for `localhost` and the loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def check_binding(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token, and a token too short to guess
    slowly; TunerError (one line, exit code 2)."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise TunerError(f"the token has {len(token)} characters; give at least "
                         f"{MIN_TOKEN_CHARS} ({_MAKE_ONE})")
    if token is None and not is_loopback(host):
        raise TunerError(f"--host {host} is reachable from other machines: give a token "
                         f"(--token or {TOKEN_ENV}, {_MAKE_ONE}) that clients send as "
                         "`Authorization: Bearer TOKEN`, or serve on 127.0.0.1")


def bearer_guard(token: str) -> Callable[..., None]:
    """A FastAPI dependency answering 401 unless the request carries `token` as a bearer
    token (its scheme appears in the OpenAPI schema, so /docs can send it)."""
    expected = token.encode("utf-8")
    scheme = HTTPBearer(auto_error=False, description="The server's token (--token).")

    def check(request: Request,
              credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(scheme)]
              ) -> None:
        given = credentials.credentials.encode("utf-8") if credentials is not None else b""
        if credentials is None or credentials.scheme.lower() != "bearer" \
                or not hmac.compare_digest(given, expected):
            raise HTTPException(status_code=401, headers={"WWW-Authenticate": "Bearer"},
                                detail=_refusal(request.headers.get("authorization"),
                                                credentials))
    return check


def _refusal(header: str | None, credentials: HTTPAuthorizationCredentials | None) -> str:
    """Why a request is refused: no Authorization header, one of another scheme (HTTPBearer
    gives no credentials then), or a token that is not the server's. Nothing the client sent
    is repeated (a token sent without its scheme would be)."""
    ask = "send the server's token as `Authorization: Bearer TOKEN`"
    if not header:
        return f"a bearer token is required: {ask}"
    if credentials is None or credentials.scheme.lower() != "bearer":
        return f"the Authorization header is not `Bearer TOKEN`: {ask}"
    return ("the token in `Authorization: Bearer TOKEN` is not this server's; send the one "
            f"it was started with (--token or {TOKEN_ENV})")
