"""The HTTP API's application (FastAPI): the /v1 routes (tuner.serve.routes), the bearer-token
check, the body limit and last-resort 500 (tuner.serve.guard), errors as {"error": "one
line"}, and the OpenAPI schema at /openapi.json (docs at /docs) with the spec model.

Errors: a bad spec 422 (the command line's message, naming `request` where the command line
names the file), no such study 404, a study that cannot answer yet, holds another problem,
is not running (stop) or is running (delete) 409, a missing or wrong token 401, a body over
the limit 413, too many studies 429, anything else a generic 500; the library's advice as
requests, not commands (tuner.serve.wording)."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import optuna
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from cost import CostModelError
from search_spaces import SpecError, StudySpec
from studies import StudyError, close_storage

from ..errors import InputErrors, TunerError, one_line
from .auth import bearer_guard
from .config import ServeConfig
from .guard import Guard
from .head import HEAD_ASKED, Head, allowed_methods
from .routes import error_response, v1_router
from .runner import Runner
from .service import RequestError, Service
from .wording import for_http

__all__ = ["create_app"]

_LOG = logging.getLogger(__name__)
_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (SpecError, 422), (CostModelError, 422), (InputErrors, 422), (StudyError, 409),
    (TunerError, 409))
DESCRIPTION = ("cluster-tuner over HTTP: evaluate fixed specs, run studies in background "
               "worker processes, read their best plans, trials, framework settings and "
               "reports. Bodies are specs (shared/SPEC.md) as JSON or YAML.")


def _version() -> str:
    try:
        return importlib.metadata.version("cluster-tuner")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
        return "0"


def create_app(config: ServeConfig, storage: optuna.storages.BaseStorage) -> FastAPI:
    """The app over `storage` (opened by the caller, so that a bad URL is one line before
    the server starts); its workers start with the app and stop with it."""
    runner = Runner(storage, config.storage_url, workers=config.workers,
                    heartbeat_s=config.heartbeat_s, max_studies=config.max_studies)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runner.start()
        try:
            yield
        finally:
            await run_in_threadpool(runner.stop)
            # uvicorn re-raises SIGTERM once shut down, which ends the process without
            # Python's exit: the connections are closed here, so that SQLite checkpoints its
            # write-ahead log (the pool opens new ones if the storage is used again)
            close_storage(storage)

    app = FastAPI(title="cluster-tuner", version=_version(), description=DESCRIPTION,
                  lifespan=lifespan)
    app.state.service = Service(config=config, storage=storage, runner=runner,
                                admission=runner.admission)
    app.state.evaluations = asyncio.Semaphore(config.evaluations)
    guard = [Depends(bearer_guard(config.token))] if config.token else []
    app.include_router(v1_router(guard))
    _handle_errors(app)
    app.add_middleware(Head)
    app.add_middleware(Guard, max_body_bytes=config.max_body_bytes)
    app.openapi = _openapi(app)  # type: ignore[method-assign]
    return app


def _handle_errors(app: FastAPI) -> None:
    """Every error as {"error": "one line"} with its status (the module's docstring)."""
    async def library(request: Request, err: Exception) -> Response:
        status = next(code for kind, code in _STATUS if isinstance(err, kind))
        return error_response(status, for_http(one_line(err), request.path_params.get("name")))

    for kind, _ in _STATUS:
        app.add_exception_handler(kind, library)

    @app.exception_handler(RequestError)
    async def refused(request: Request, err: RequestError) -> Response:
        return error_response(err.status_code, str(err))

    @app.exception_handler(HTTPException)
    async def http(request: Request, err: HTTPException) -> Response:
        headers = dict(err.headers or {})
        return error_response(err.status_code, _routing_error(request, err, headers), headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, err: RequestValidationError) -> Response:
        first = err.errors()[0] if err.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return error_response(422, f"{where}: {first.get('msg', 'invalid')}")


def _routing_error(request: Request, err: HTTPException, headers: dict[str, str]) -> str:
    """The line of an HTTPException: Starlette's bare "Not Found" and "Method Not Allowed"
    (no route, or the route of another method) say which routes there are; a 405's `Allow`
    (in `headers`) lists every method of the path, not only the first route's."""
    method = "HEAD" if request.scope.get(HEAD_ASKED) else request.method
    asked = f"{method} {request.url.path}"
    if err.status_code == 404 and err.detail == "Not Found":
        return (f"no route {asked}; the routes are POST /v1/evaluate, POST and GET "
                "/v1/studies, GET and DELETE /v1/studies/NAME, GET "
                "/v1/studies/NAME/best|trials|plan|report, POST /v1/studies/NAME/stop "
                "(/openapi.json lists them)")
    if err.status_code == 405 and "allow" in {k.lower() for k in headers}:
        for key in [k for k in headers if k.lower() == "allow"]:
            del headers[key]
        headers["Allow"] = ", ".join(allowed_methods(request.app.router.routes,
                                                     request.scope))
        return f"{asked}: this route takes {headers['Allow']}; /openapi.json lists the routes"
    return str(err.detail)


def _openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The generated schema with the spec model (search_spaces.StudySpec) among its
    components, where the request bodies refer to it."""
    def build() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version,
                             description=app.description, routes=app.routes)
        spec = StudySpec.model_json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(spec.pop("$defs", {}))
        components["StudySpec"] = spec
        _errors_as_json(schema)
        app.openapi_schema = schema
        return schema
    return build


_ERROR_REF = "#/components/schemas/ErrorBody"


def _errors_as_json(schema: dict[str, Any]) -> None:
    """Every error response in `schema` as application/json, which it is: FastAPI files a
    route's error models under the route's own media type, so /openapi.json said the 404 of
    /plan was text/plain and that of /report text/html (a generated client then reads the
    JSON error as the plan or the page)."""
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for response in operation.get("responses", {}).values():
                content = response.get("content", {})
                errors = [kind for kind, body in content.items()
                          if body.get("schema", {}).get("$ref") == _ERROR_REF]
                for kind in errors:
                    content["application/json"] = content.pop(kind)
