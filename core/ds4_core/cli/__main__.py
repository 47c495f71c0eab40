"""`python -m ds4_core.cli ARGV...`: the `ds4` command (`ds4_core.cli.main`)."""

from .runner import main

main()
