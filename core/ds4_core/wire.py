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
  a JavaScript client represents exactly; json_bounds), booleans, floats, strings and None pass;
* a `WireObject` is already in its wire shape (made by `wire_object`) and passes as it is: a
  plan sends the same session messages on every request, and the engine keeps their wire form
  (`engine/privacy_cache.py`).
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

    Plain JSON (dict, list, str, int, float, bool, None) is dispatched on its exact type first:
    a plan's messages are most of its 200+ KiB answer, and this walk runs on every answer.

    Raises:
        TypeError: a value JSON cannot hold (a set, bytes, an arbitrary object).
    """
    kind = type(value)
    if kind is str or kind is float or kind is bool or value is None:
        return value
    if kind is dict:
        return {key: to_wire(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [to_wire(item) for item in value]
    if kind is int:
        return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else _clamp(value)
    return _to_wire_other(value)


class WireObject(dict[str, Any]):
    """A JSON object already in its wire shape (`wire_object`): `to_wire` passes it as it is.
    Callers must not mutate it."""

    __slots__ = ()


def wire_object(value: Mapping[str, Any]) -> WireObject:
    """`to_wire(value)` as a `WireObject`, for a value sent again and again.

    Raises:
        TypeError: as `to_wire`.
    """
    converted = to_wire(value)
    assert isinstance(converted, dict)
    return WireObject(converted)


def _clamp(value: int) -> int:
    return max(-MAX_SAFE_INTEGER, min(MAX_SAFE_INTEGER, value))


_FIELDS: dict[type, tuple[tuple[str, str, bool], ...]] = {}
"""Per dataclass: (field name, wire name, omit while None), computed once."""


def _wire_fields(kind: type) -> tuple[tuple[str, str, bool], ...]:
    found = _FIELDS.get(kind)
    if found is None:
        found = _FIELDS[kind] = tuple(
            (f.name, camel_case(f.name), bool(f.metadata.get(OMIT_IF_NONE)))
            for f in dataclasses.fields(kind)
        )
    return found


def _to_wire_other(value: Any) -> Any:
    """`to_wire` of what is not plain JSON: dataclasses, other mappings and sequences, and
    subclasses of the JSON scalar types (an `IntEnum`, a `str` subclass)."""
    if type(value) is WireObject:
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return _clamp(int(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for name, key, omit in _wire_fields(type(value)):
            item = getattr(value, name)
            if item is None and omit:
                continue
            out[key] = to_wire(item)
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
