"""The routes under /v1: each reads the request, calls tuner.serve.service in a worker thread
(the event loop never waits on the model or the storage) and answers with the JSON or text of
the matching command (`tuner evaluate --json`, `tuner studies --json`, `tuner best --json`,
`tuner export --json`, `tuner plan --as`, `tuner report`), and a study's stop and deletion.

A study's name in a path may hold '/' (the command line makes such names; a client may send
it as it is or as %2F): the last segment is read as the route where it is one of
best|trials|plan|report|stop, so `/v1/studies/a/b/best` is the best of study `a/b`, and a
study named `a/best` has no status route of its own."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.convertors import Convertor, register_url_convertor

from ..export import FORMATS
from ..views.text import to_json as to_json_text
from .guard import error_body
from .models import (
    BestPlans,
    ErrorBody,
    PlanResultJSON,
    StudyCreated,
    StudyDeleted,
    StudyStatus,
    StudyStopped,
    StudySummary,
)
from .service import RequestError, Service

__all__ = ["JSON", "MAX_PAGE", "PAGE", "error_response", "v1_router"]

JSON = "application/json"
_SPEC_REF = {"$ref": "#/components/schemas/StudySpec"}
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text} for code, text in (
        (401, "a bearer token is required (a server with --token)"),
        (408, "the body took over 30 s to arrive"),
        (413, "the body is over the limit"),
        (422, "a bad spec or parameter: one line naming the field and what to change"),
        (500, "an internal error (logged by the server)"))}
_FORM: dict[int | str, dict[str, Any]] = {
    415: {"model": ErrorBody, "description": "a form (multipart) in place of a spec"}}


def _body(many: bool) -> dict[str, Any]:
    """The request body in the OpenAPI schema: the spec model, as JSON or YAML text."""
    schema = {"oneOf": [_SPEC_REF, {"type": "array", "items": _SPEC_REF}]} if many \
        else _SPEC_REF
    return {"requestBody": {"required": True, "content": {
        JSON: {"schema": schema},
        "application/yaml": {"schema": {"type": "string", "description": "the spec as YAML"}},
    }}}


def _json(text: str, status_code: int = 200, headers: dict[str, str] | None = None
          ) -> Response:
    return Response(text, status_code=status_code, media_type=JSON, headers=headers)


def error_response(status_code: int, message: str, headers: dict[str, str] | None = None
                   ) -> Response:
    """{"error": message} with `status_code`."""
    return Response(error_body(message), status_code=status_code, media_type=JSON,
                    headers=headers)


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


async def _call(work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`work` in the thread pool: the model and the storage are blocking calls."""
    return await run_in_threadpool(work, *args, **kwargs)


ServiceDep = Annotated[Service, Depends(_service)]


def _content_type(request: Request) -> str:
    """The body's Content-Type; a form (multipart, as a browser's file upload sends) is
    refused with 415: its parts' headers and boundaries are no spec, and were read as YAML
    ('malformed YAML: mapping values are not allowed here')."""
    kind = request.headers.get("content-type", "")
    if kind.lower().lstrip().startswith("multipart/"):
        raise RequestError(415, f"{kind.split(';')[0].strip()} is a form, not a spec; send "
                                "the spec itself as the body, JSON (Content-Type: "
                                "application/json) or YAML (e.g. curl --data-binary @FILE)")
    return kind


_ROUTES = ("best", "trials", "plan", "report", "stop")
"""The routes below a study's path: a name's last segment is read as one of them."""


class _StudyName(Convertor[str]):
    """A study name in a path, '/' included, not ending in '/' (a trailing slash is
    redirected, as without a name that may hold '/')."""

    regex = r".*[^/]"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


class _StudyOnly(_StudyName):
    """A study name as the whole rest of a path: not one ending in a route below a study
    (`x/best` is study x's best, never the status of a study `x/best`)."""

    regex = rf"(?!.*/(?:{'|'.join(_ROUTES)})$).*[^/]"


STUDY = "{name:study}"
"""A study's name in a route's path, followed by one of _ROUTES."""
STUDY_ONLY = "{name:study_only}"
"""A study's name ending a route's path."""
StudyName = Path(description="The study's name (its spec's `name`); may hold '/', sent as it "
                             "is or as %2F.")
PAGE = 1000
"""Rows a list answers when no `limit` is given."""
MAX_PAGE = 10_000
"""The most rows one list answer holds (`limit`)."""
Offset = Query(0, ge=0, description="Rows to skip, in the list's order.")
Limit = Query(PAGE, ge=0, le=MAX_PAGE, description=f"Rows in this page (up to {MAX_PAGE:,}; "
                                                   "0: none, only the count in X-Total-Count).")
_PAGED: dict[int | str, dict[str, Any]] = {200: {"headers": {
    "X-Total-Count": {"description": "Rows in the whole list, this page and the others.",
                      "schema": {"type": "integer"}},
    "Link": {"description": 'The next page, `<URL>; rel="next"` (RFC 8288), where there '
                            "is one; its path begins with the X-Forwarded-Prefix a reverse "
                            "proxy sends.", "schema": {"type": "string"}}}}}
_PREFIX = re.compile(r"(?:/[A-Za-z0-9._~%-]+)+")
"""A path prefix a proxy may send: segments of unreserved characters (and %-escapes)."""


def _page(text: str, request: Request, *, total: int, offset: int, limit: int) -> Response:
    """A page of a list, with its total and, where rows are left (and `limit` is not 0, a
    request for the count only), its next page's link: a path, under the prefix a reverse
    proxy stripped (X-Forwarded-Prefix), the request's other query parameters kept."""
    headers = {"X-Total-Count": str(total)}
    if limit and offset + limit < total:
        query = request.url.include_query_params(offset=offset + limit, limit=limit).query
        prefix = request.headers.get("x-forwarded-prefix", "").strip().rstrip("/")
        prefix = prefix if _PREFIX.fullmatch(prefix) else ""
        headers["Link"] = f'<{prefix}{quote(request.url.path)}?{query}>; rel="next"'
    return _json(text, headers=headers)


Top = Query(default=1, ge=1, le=100, description="How many distinct plans (one objective).")


def v1_router(dependencies: list[Any]) -> APIRouter:
    """Every /v1 route, each behind `dependencies` (the bearer-token check, when set)."""
    register_url_convertor("study", _StudyName())
    register_url_convertor("study_only", _StudyOnly())
    router = APIRouter(prefix="/v1", dependencies=dependencies, responses=_ERRORS)
    _evaluate_routes(router)
    _study_routes(router)
    _study_output_routes(router)
    return router


def _evaluate_routes(router: APIRouter) -> None:
    @router.post("/evaluate", response_model=PlanResultJSON | list[PlanResultJSON],
                 openapi_extra=_body(many=True), summary="Evaluate fixed specs",
                 responses=_FORM)
    async def evaluate(request: Request, service: ServiceDep) -> Response:
        """The cost model on one fixed spec (an object back) or a list of them (a list
        back): `tuner evaluate --json`. A search space is refused (422): POST it to
        /v1/studies."""
        body = await request.body()
        async with request.app.state.evaluations:  # a few at once (ServeConfig.evaluations)
            return _json(await _call(service.evaluate, body, _content_type(request)))


def _study_routes(router: APIRouter) -> None:
    @router.post("/studies", status_code=202, response_model=StudyCreated,
                 openapi_extra=_body(many=False), summary="Create and run a study",
                 responses={409: {"model": ErrorBody}, 429: {"model": ErrorBody}, **_FORM})
    async def create_study(request: Request, service: ServiceDep) -> Response:
        """A study from a spec with a `name`, run in the background by worker processes
        (`tuner search` then `tuner worker`); posting a study again continues it as `tuner
        search` does. Answers 202 at once with where to follow it; `outside_workers` counts
        live workers this server did not start that run it too (its own join them)."""
        body = await request.body()
        made = await _call(service.create_study, body, _content_type(request))
        return _json(to_json_text(made), 202, headers={"Location": made["location"]})

    @router.get("/studies", response_model=list[StudySummary], summary="List studies",
                responses=_PAGED)
    async def studies(request: Request, service: ServiceDep, offset: int = Offset,
                      limit: int = Limit) -> Response:
        """`tuner studies --json`: the studies of the storage by name, trials by state; a
        page of `limit` from `offset`, the count of all in X-Total-Count."""
        text, total = await _call(service.studies, offset=offset, limit=limit)
        return _page(text, request, total=total, offset=offset, limit=limit)

    @router.get(f"/studies/{STUDY_ONLY}", response_model=StudyStatus,
                summary="A study's status", responses={404: {"model": ErrorBody}})
    async def study_status(service: ServiceDep, name: str = StudyName) -> Response:
        """Target, completed, running, sampler, proven optimal or not, live workers."""
        return _json(to_json_text(await _call(service.status, name)))

    @router.post(f"/studies/{STUDY}/stop", response_model=StudyStopped,
                 summary="Stop a running study",
                 responses={404: {"model": ErrorBody}, 409: {"model": ErrorBody}})
    async def stop_study(service: ServiceDep, name: str = StudyName) -> Response:
        """Stop the study's worker processes as Ctrl-C stops `tuner search`: each puts its
        running trial back in the queue (neither complete nor failed) and exits, within 20 s
        (then it is killed). The study stays stopped, a server restarted too, until its spec
        is POSTed again, which resumes it. A study the server is about to resume (just
        started, its resumption not through) is stopped before its workers start
        (`workers_stopped` 0). 409 when no worker of this server runs it nor is about to
        (saying how many workers outside it do: `tuner worker` by hand, another server)."""
        return _json(to_json_text(await _call(service.stop, name)))

    @router.delete(f"/studies/{STUDY_ONLY}", response_model=StudyDeleted,
                   summary="Delete a study",
                   responses={404: {"model": ErrorBody}, 409: {"model": ErrorBody}})
    async def delete_study(service: ServiceDep, name: str = StudyName) -> Response:
        """Delete the study and its trials from the storage (optuna.delete_study; nothing
        else is touched). 409 while workers run it: this server's (POST .../stop first) or
        others' (`tuner worker` by hand, another server: stop them where they run)."""
        return _json(to_json_text(await _call(service.delete, name)))


def _study_output_routes(router: APIRouter) -> None:
    found: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody},
                                              409: {"model": ErrorBody}}

    @router.get(f"/studies/{STUDY}/best", response_model=BestPlans, responses=found,
                summary="A study's best plans or Pareto front")
    async def best(service: ServiceDep, name: str = StudyName, top: int = Top) -> Response:
        """`tuner best NAME --top K --json`."""
        return _json(await _call(service.best, name, top=top))

    @router.get(f"/studies/{STUDY}/trials", response_model=list[dict[str, Any]],
                responses={**found, **_PAGED}, summary="A study's trials")
    async def trials(request: Request, service: ServiceDep, name: str = StudyName,
                     offset: int = Offset, limit: int = Limit) -> Response:
        """`tuner export NAME --json`: one flat row per trial, by number; a page of `limit`
        from `offset`, the count of all in X-Total-Count."""
        text, total = await _call(service.trials, name, offset=offset, limit=limit)
        return _page(text, request, total=total, offset=offset, limit=limit)

    @router.get(f"/studies/{STUDY}/plan", response_class=PlainTextResponse, responses=found,
                summary="A plan as a spec or a framework's settings")
    async def plan(service: ServiceDep, name: str = StudyName,
                   fmt: str = Query("spec", alias="as", json_schema_extra={
                       "enum": list(FORMATS)}, description="spec, megatron, nemo or "
                                                           "torchtitan"),
                   trial: int | None = Query(None, ge=0, description="Trial N, not the best")
                   ) -> Response:
        """`tuner plan NAME [--trial N] --as FMT`: YAML, flags, overrides or TOML."""
        if fmt not in FORMATS:
            raise RequestError(422, f"as: {fmt!r} is not a format; give one of "
                                    f"{', '.join(FORMATS)}")
        text = await _call(service.plan, name, fmt=fmt, trial=trial)
        return PlainTextResponse(text if text.endswith("\n") else text + "\n")

    @router.get(f"/studies/{STUDY}/report", response_class=HTMLResponse, responses=found,
                summary="A study's HTML report")
    async def report(service: ServiceDep, name: str = StudyName,
                     top: int = Query(5, ge=1, le=100)) -> Response:
        """`tuner report NAME`: one self-contained HTML page with plots."""
        return HTMLResponse(await _call(service.report, name, top=top))
