"""`python -m ds4_core` runs the `ds4` command line."""

from .cli import main

main()
