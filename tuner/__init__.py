"""The search and the command line: Optuna samplers over a search space with the cost model
as objective (engine), the `tuner` command (cli), and what it shows (views: text, JSON, HTML).

May import `cost`, `search_spaces`, `studies`, Optuna, click and plotly.
"""

__all__ = ["main"]


def main() -> None:
    """The `tuner` command (imported when called, so that `import tuner` stays light), with
    the garbage collector paused while it starts (tuner.collector)."""
    from .collector import pause

    pause()
    from .cli import main as cli_main

    cli_main()
