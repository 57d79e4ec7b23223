"""The routes under /v1: each reads the request, calls tuner.serve.service in a worker thread
(the event loop never waits on the model or the storage) and answers with the JSON or text of
the matching command (`tuner evaluate --json`, `tuner studies --json`, `tuner best --json`,
`tuner export --json`, `tuner plan --as`, `tuner report`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool

from ..export import FORMATS
from ..views.text import to_json as to_json_text
from .guard import error_body
from .models import BestPlans, ErrorBody, PlanResultJSON, StudyCreated, StudyStatus, StudySummary
from .service import RequestError, Service

__all__ = ["JSON", "error_response", "v1_router"]

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


StudyName = Path(description="The study's name (its spec's `name`).")
Top = Query(default=1, ge=1, le=100, description="How many distinct plans (one objective).")


def v1_router(dependencies: list[Any]) -> APIRouter:
    """Every /v1 route, each behind `dependencies` (the bearer-token check, when set)."""
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
        search` does. Answers 202 at once with where to follow it."""
        body = await request.body()
        made = await _call(service.create_study, body, _content_type(request))
        return _json(to_json_text(made), 202, headers={"Location": made["location"]})

    @router.get("/studies", response_model=list[StudySummary], summary="List studies")
    async def studies(service: ServiceDep) -> Response:
        """`tuner studies --json`: every study of the storage, trials by state."""
        return _json(await _call(service.studies))

    @router.get("/studies/{name}", response_model=StudyStatus, summary="A study's status",
                responses={404: {"model": ErrorBody}})
    async def study_status(service: ServiceDep, name: str = StudyName) -> Response:
        """Target, completed, running, sampler, proven optimal or not, live workers."""
        return _json(to_json_text(await _call(service.status, name)))


def _study_output_routes(router: APIRouter) -> None:
    found: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody},
                                              409: {"model": ErrorBody}}

    @router.get("/studies/{name}/best", response_model=BestPlans, responses=found,
                summary="A study's best plans or Pareto front")
    async def best(service: ServiceDep, name: str = StudyName, top: int = Top) -> Response:
        """`tuner best NAME --top K --json`."""
        return _json(await _call(service.best, name, top=top))

    @router.get("/studies/{name}/trials", response_model=list[dict[str, Any]],
                responses=found, summary="A study's trials")
    async def trials(service: ServiceDep, name: str = StudyName) -> Response:
        """`tuner export NAME --json`: one flat row per trial."""
        return _json(await _call(service.trials, name))

    @router.get("/studies/{name}/plan", response_class=PlainTextResponse, responses=found,
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

    @router.get("/studies/{name}/report", response_class=HTMLResponse, responses=found,
                summary="A study's HTML report")
    async def report(service: ServiceDep, name: str = StudyName,
                     top: int = Query(5, ge=1, le=100)) -> Response:
        """`tuner report NAME`: one self-contained HTML page with plots."""
        return HTMLResponse(await _call(service.report, name, top=top))
