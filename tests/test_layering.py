"""The one-way stack of shared/STYLE.md, sec. 1: cost <- search_spaces <- studies <- tuner.

Walks every module of the four packages with `ast` and checks each import against the
package's allowlist: the standard library, the packages to its left, and the third-party
packages it may use (`cost`: numpy only)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STACK = ("cost", "search_spaces", "studies", "tuner")
THIRD_PARTY = {
    "cost": {"numpy"},
    "search_spaces": {"numpy", "pydantic", "pydantic_core", "yaml"},
    "studies": {"numpy", "pydantic", "yaml", "optuna", "sqlalchemy"},
    "tuner": {"numpy", "pydantic", "yaml", "optuna", "sqlalchemy", "click", "plotly",
              "fastapi", "uvicorn", "starlette", "tqdm"},
}


def _imported_top_levels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", STACK)
def test_packages_import_only_what_their_allowlist_names(package: str) -> None:
    allowed = (set(sys.stdlib_module_names) | set(STACK[: STACK.index(package) + 1])
               | THIRD_PARTY[package])
    bad = {f"{path.relative_to(ROOT)} imports {name}"
           for path in _modules(package)
           for name in _imported_top_levels(path) - allowed}
    assert not bad, sorted(bad)


def test_every_package_has_modules() -> None:
    assert all(_modules(p) for p in STACK)


def test_the_walk_sees_imports() -> None:
    assert {"search_spaces", "click"} <= _imported_top_levels(
        ROOT / "tuner" / "cli" / "evaluate.py")
    assert {"fastapi", "starlette", "search_spaces", "cost"} <= _imported_top_levels(
        ROOT / "tuner" / "serve" / "app.py")


def test_workload_types_are_not_tested_outside_the_module_that_builds_them() -> None:
    """Step time, memory, price, validity, search and views ask the workload protocol, never
    `isinstance` on a workload type (only search_spaces/sections.py builds workloads)."""
    kinds = ("ModelSpec", "LayersModel", "Workload", "ModelSection", "LayersSection")
    found = []
    for package in STACK:
        for path in _modules(package):
            if path == ROOT / "search_spaces" / "sections.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
                    text = ast.unparse(node)
                    if any(k in text for k in kinds):
                        found.append(f"{path.relative_to(ROOT)}: {text}")
    assert not found, found
