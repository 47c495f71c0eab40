"""Artifacts: large tool results stored aside and condensed for the model (docs/artifacts.md).

`store.py` keeps the content-addressed objects; `condense.py` writes the condensed block that
replaces a large tool result in the provider-facing copy of a plan.
"""
