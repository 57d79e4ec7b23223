"""The `tuner` command line: a thin shell that parses, calls the library and renders."""

from .cli import main

__all__ = ["main"]
