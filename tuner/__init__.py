"""The search and the command line: Optuna samplers over a search space with the cost model
as objective (engine), the `tuner` command (cli), and what it shows (views: text, JSON, HTML).

May import `cost`, `search_spaces`, `studies`, Optuna, click and plotly.
"""

from typing import NoReturn

__all__ = ["main"]


def main() -> None:
    """The `tuner` command (imported when called, so that `import tuner` stays light), with
    the garbage collector paused while it starts (tuner.collector) and SIGINT and SIGTERM
    raising Interrupted from its first moment (tuner.engine.interrupt): one line and exit code
    130 while it imports too, not a traceback or a silent death."""
    try:
        from .engine.interrupt import Interrupted, raise_on_signals
    except KeyboardInterrupt:
        _interrupted_while_starting(_SIGINT)
    raise_on_signals()
    try:
        from .collector import pause

        pause()
        from .cli import main as cli_main

        cli_main()
    except (Interrupted, KeyboardInterrupt) as err:  # before the group's error path runs
        _interrupted_while_starting(getattr(err, "signum", _SIGINT))


_SIGINT = 2  # signal.SIGINT, before anything is imported


def _interrupted_while_starting(signum: int) -> NoReturn:
    import signal
    import sys

    sys.stderr.write(f"interrupted ({signal.Signals(signum).name}) while starting: no stored "
                     "study was changed; run the same command again\n")
    sys.exit(130)
