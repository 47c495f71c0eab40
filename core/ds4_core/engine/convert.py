"""Building typed results (`ds4_core.results`) from the records the engine's parts return: the
dataclasses of the retrieval, sync and planner modules (same field names) and the camelCase
JSON records of the project layer (`ds4_core.project`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from ..wire import camel_case

R = TypeVar("R")


def from_attributes(cls: type[R], source: object, **values: Any) -> R:
    """A `cls` (a result dataclass) whose fields are `source`'s attributes of the same names,
    except those given in `values`; a field with a default that `source` lacks keeps its
    default (e.g. a hit's `classification`, set later by privacy).

    Raises:
        AttributeError: `source` lacks the attribute of a field without a default that
            `values` does not give.
    """
    found = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in values:
            found[f.name] = values[f.name]
        elif hasattr(source, f.name) or (
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ):
            found[f.name] = getattr(source, f.name)
    return cls(**found)


def from_record(cls: type[R], record: Mapping[str, Any], **values: Any) -> R:
    """A `cls` (a result dataclass) whose fields are the camelCase keys of the JSON `record`,
    except those given in `values`; a key the record lacks leaves the field's default.

    Raises:
        TypeError: the record lacks the key of a field without a default (and not given in
            `values`), or holds a key that names no field of `cls`; both name the key.
    """
    found = {}
    keys = set()
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = camel_case(f.name)
        keys.add(key)
        if f.name in values:
            found[f.name] = values[f.name]
        elif key in record:
            found[f.name] = record[key]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}: the record lacks {key!r}")
    unknown = sorted(set(record) - keys)
    if unknown:
        raise TypeError(f"{cls.__name__}: the record has unknown key(s) {', '.join(unknown)}")
    return cls(**found)
