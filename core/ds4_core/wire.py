"""The one conversion from typed results to their JSON wire shape (docs/protocol.md).

Results (`ds4_core.results`) are frozen dataclasses with snake_case fields. `to_wire` turns one
into the camelCase JSON object that both `ds4 ... --json` and the LSP server send, so the two
are equal by construction:

* a dataclass becomes an object whose keys are its field names in camelCase (`camel_case`); a
  field whose metadata has `OMIT_IF_NONE` is left out while it is None (fields the engine only
  sets when they apply, like `fallbackReason`); other None values are `null`;
* a mapping is a JSON document the engine passes through (Pi messages, a stored manifest, the
  summary graph's nodes): its keys are kept as they are and its values converted;
* lists and tuples become arrays; integers are clamped to +-`MAX_SAFE_INTEGER` (2^53 - 1, what
  a JavaScript client represents exactly; json_bounds), booleans, floats, strings and None pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .json_bounds import MAX_SAFE_INTEGER

OMIT_IF_NONE = "ds4_omit_if_none"
"""Dataclass field metadata key: leave the field out of the wire object while it is None."""

JsonObject = dict[str, Any]
"""A JSON object passed through unchanged (keys kept as they are)."""


def camel_case(name: str) -> str:
    """`context_window` -> `contextWindow`; a trailing `_` is dropped (lsprotocol's rule for
    names that are Python keywords, e.g. `from_`)."""
    head, *rest = name.removesuffix("_").split("_")
    return head + "".join(part.title() for part in rest)


def omit_if_none(default: Any = None) -> Any:
    """A dataclass field (default `default`) left out of the wire object while it is None."""
    return dataclasses.field(default=default, metadata={OMIT_IF_NONE: True})


def to_wire(value: Any) -> Any:
    """The JSON value of `value` (see the module docstring for the rules).

    Raises:
        TypeError: a value JSON cannot hold (a set, bytes, an arbitrary object).
    """
    if value is None or isinstance(value, bool | str | float):
        return value
    if isinstance(value, int):
        return max(-MAX_SAFE_INTEGER, min(MAX_SAFE_INTEGER, value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if item is None and field.metadata.get(OMIT_IF_NONE):
                continue
            out[camel_case(field.name)] = to_wire(item)
        return out
    if isinstance(value, Mapping):
        return {key: to_wire(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_wire(item) for item in value]
    raise TypeError(f"no JSON form for a {type(value).__name__}")


class WireResult:
    """Mixin of every result dataclass: `to_wire()` gives its camelCase JSON object."""

    __slots__ = ()

    def to_wire(self) -> dict[str, Any]:
        """The JSON object sent by `ds4 --json` and the LSP server (docs/protocol.md)."""
        wire = to_wire(self)
        assert isinstance(wire, dict)
        return wire
