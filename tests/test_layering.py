"""The one-way stack of shared/STYLE.md, sec. 1: cost <- search_spaces <- studies <- tuner.

Walks every module of the four packages with `ast` and fails on an import of a package to the
right, on optuna in cost or search_spaces, and on click outside tuner."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STACK = ("cost", "search_spaces", "studies", "tuner")
FORBIDDEN_THIRD_PARTY = {
    "cost": {"optuna", "click", "pydantic", "yaml", "sqlalchemy"},
    "search_spaces": {"optuna", "click", "sqlalchemy"},
    "studies": {"click"},
    "tuner": set(),
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
def test_packages_import_only_to_their_left(package: str) -> None:
    rank = STACK.index(package)
    right = set(STACK[rank + 1:])
    bad = {f"{path.relative_to(ROOT)} imports {name}"
           for path in _modules(package)
           for name in _imported_top_levels(path) & (right | FORBIDDEN_THIRD_PARTY[package])}
    assert not bad, sorted(bad)


def test_every_package_has_modules() -> None:
    assert all(_modules(p) for p in STACK)


def test_the_walk_sees_imports() -> None:
    assert {"search_spaces", "cost", "click"} <= _imported_top_levels(ROOT / "tuner" / "cli.py")
