"""`tuner dashboard NAME`: optuna-dashboard (an optional extra) on a study's storage."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

from ..collector import resume as resume_collector

__all__ = ["INSTALL_HINT", "dashboard_installed", "server_arguments", "start_server",
           "study_address"]

INSTALL_HINT = "pip install 'cluster-tuner[dashboard]'"


def dashboard_installed() -> bool:
    """True when the optuna_dashboard package can be imported."""
    return importlib.util.find_spec("optuna_dashboard") is not None


def server_arguments(url: str, *, host: str, port: int) -> dict[str, Any]:
    """Keyword arguments of optuna_dashboard.run_server: the storage URL (opened by the
    dashboard itself, without our heartbeats), the host and the port."""
    return {"storage": url, "host": host, "port": int(port)}


def study_address(*, host: str, port: int, study_id: int) -> str:
    """The dashboard's page of one study."""
    return f"http://{host}:{port}/dashboard/studies/{study_id}"


def start_server(arguments: dict[str, Any]) -> None:
    """Run optuna-dashboard until it is stopped (Ctrl-C); blocks."""
    run: Callable[..., None] = importlib.import_module("optuna_dashboard").run_server
    resume_collector()  # a server runs until stopped (tuner.collector)
    run(**arguments)
