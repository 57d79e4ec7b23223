"""The request body's schema that /openapi.json publishes (the spec model's JSON schema) takes
every spec the server takes: a client that validates its requests against it (a generated
client, a portal's form) could otherwise send none of the example specs, whose catalog model
names, quantities with units ("400 Gbit/s", "15e12"), lists of choices and one objective
the schema refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from search_spaces import StudySpec

from .specs import EXAMPLES

jsonschema = pytest.importorskip("jsonschema")


def _validator() -> Any:
    spec = StudySpec.model_json_schema(ref_template="#/components/schemas/{model}")
    components = {**spec.pop("$defs", {}), "StudySpec": spec}
    return jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/StudySpec", "components": {"schemas": components}})


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_spec_is_valid_under_the_published_schema(path: Path) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:120]}"
              for e in _validator().iter_errors(data)]
    assert errors == []


@pytest.mark.parametrize("data", [
    {"name": "x"},
    {"model": "gpt3-1.3b", "training": {"global_batch": 8}, "clustr": {}},
    {"model": "gpt3-1.3b", "training": {"global_batch": 8}, "cluster": {"gpu": "a100-80gb"},
     "plan": {"tp": []}},
])
def test_the_schema_still_refuses_what_the_server_refuses(data: dict[str, Any]) -> None:
    assert list(_validator().iter_errors(data))
