"""`ds4_core.wire.to_wire`: the one conversion of typed results to their JSON wire shape."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ds4_core.json_bounds import MAX_SAFE_INTEGER
from ds4_core.results import GitState, ProjectStatus
from ds4_core.wire import WireResult, camel_case, omit_if_none, to_wire


@dataclass(frozen=True, slots=True)
class _Inner(WireResult):
    leaf_id: str | None
    token_count: int


@dataclass(frozen=True, slots=True)
class _Outer(WireResult):
    inner: _Inner
    items: tuple[_Inner, ...]
    document: dict
    fallback_reason: str | None = omit_if_none()


def test_dataclasses_become_camel_case_objects_and_documents_keep_their_keys() -> None:
    value = _Outer(
        inner=_Inner(None, 3),
        items=(_Inner("a", 1),),
        document={"snake_key": [1, {"x_y": None}]},
    )
    assert value.to_wire() == {
        "inner": {"leafId": None, "tokenCount": 3},
        "items": [{"leafId": "a", "tokenCount": 1}],
        "document": {"snake_key": [1, {"x_y": None}]},
    }
    with_reason = _Outer(_Inner("b", 0), (), {}, fallback_reason="why")
    assert with_reason.to_wire()["fallbackReason"] == "why"


def test_integers_are_clamped_to_what_javascript_represents_exactly() -> None:
    huge = 10**30
    assert to_wire({"a": [huge, -huge, MAX_SAFE_INTEGER, 5]}) == {
        "a": [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER, 5]
    }
    assert to_wire(_Inner("x", huge)) == {"leafId": "x", "tokenCount": MAX_SAFE_INTEGER}
    assert to_wire(True) is True  # a bool is not an int on the wire


class _Ratio(float):
    pass


def test_subclasses_of_json_types_are_converted_by_value() -> None:
    class Level(enum.IntEnum):
        HIGH = 2

    class Name(str):
        pass

    converted = to_wire({"level": Level.HIGH, "name": Name("n"), "ratio": _Ratio(0.5)})
    assert converted == {"level": 2, "name": "n", "ratio": 0.5}
    assert [type(v) for v in converted.values()] == [int, str, float]


def test_values_json_cannot_hold_are_refused() -> None:
    with pytest.raises(TypeError, match="set"):
        to_wire({"a": {1, 2}})
    with pytest.raises(TypeError, match="bytes"):
        to_wire([b"x"])


def test_camel_case_follows_lsprotocol() -> None:
    assert camel_case("context_window") == "contextWindow"
    assert camel_case("from_") == "from"
    assert camel_case("id") == "id"


def test_a_result_omits_only_the_fields_marked_so() -> None:
    status = ProjectStatus(
        status="ready", project_path=None, trusted=True, git=GitState(None, None, None)
    )
    assert status.to_wire() == {
        "status": "ready",
        "projectPath": None,
        "trusted": True,
        "git": {"branch": None, "head": None, "dirty": None},
    }


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def _clamped(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int | dict | list):
        return value
    if isinstance(value, int):
        return max(-MAX_SAFE_INTEGER, min(MAX_SAFE_INTEGER, value))
    if isinstance(value, dict):
        return {k: _clamped(v) for k, v in value.items()}
    return [_clamped(v) for v in value]


@given(_JSON)
def test_plain_json_is_copied_with_only_integers_clamped(value: object) -> None:
    converted = to_wire(value)
    assert converted == _clamped(value)
    assert json.loads(json.dumps(converted)) == converted
    if isinstance(value, dict | list):
        assert converted is not value  # a copy: callers may add warnings to the answer
