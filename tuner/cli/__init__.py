"""The `tuner` command line (shared/SPEC.md): each command parses, calls the engine or the
studies package, and renders with tuner.views; user errors become one line on stderr with
exit code 2 (tracebacks only with --debug)."""

from .main import main

__all__ = ["main"]
