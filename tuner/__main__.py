"""`python -m tuner`: the command line, as the `tuner` script."""

from .cli import main

if __name__ == "__main__":
    main()
