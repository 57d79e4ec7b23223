"""`python -m tuner`: the command line, as the `tuner` script.

`python -m` puts the current directory first on the import path, where a folder named like one
of this project's packages (a `studies/` folder holding the storage of earlier versions, say)
would shadow the installed package: the script does not import from the current directory, and
neither does this, unless the packages live there (a source checkout run in place)."""

import os
import sys
from pathlib import Path


def _drop_current_directory() -> None:
    here = Path(__file__).resolve().parents[1]
    if Path.cwd().resolve() != here:
        sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]


_drop_current_directory()

from tuner import main  # noqa: E402 (after the path is fixed)

if __name__ == "__main__":
    main()
