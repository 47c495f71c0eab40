"""Bounds on JSON values: depth (found and clipped without recursion) and echoed text."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.json_bounds import (
    DEPTH_MARKER,
    clip_depth,
    describe_type,
    echo,
    json_path,
    may_be_too_deep,
    too_deep,
)


def nested(depth: int) -> Any:
    value: Any = 0
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


@settings(max_examples=200, deadline=None)
@given(depth=st.integers(1, 3000), limit=st.integers(1, 150))
def test_depth_is_found_and_clipped_at_any_nesting(depth: int, limit: int) -> None:
    """`too_deep` finds a container below `limit` levels exactly when there is one, and after
    `clip_depth` there is none; neither recurses (3000 levels would overflow the stack)."""
    value = nested(depth)
    path = too_deep(value, limit)
    assert (path is None) == (depth <= limit)
    if path is not None:
        assert len(path) == limit
    clipped = clip_depth(value, limit)
    assert (clipped == 1) == (depth > limit)
    assert too_deep(value, limit) is None
    assert (DEPTH_MARKER in json.dumps(value)) == (depth > limit)
    assert may_be_too_deep("[" * depth + "]" * depth, limit) == (depth > limit)


@settings(max_examples=300, deadline=None)
@given(
    value=st.text(max_size=300)
    | st.text(alphabet=st.characters(), max_size=5).map(lambda t: t + "\ud800")
)
def test_echo_is_short_and_always_encodable(value: str) -> None:
    shown = echo(value)
    shown.encode("utf-8")  # never raises, lone surrogates included
    assert len(shown) <= 80 * 12 + 40
    if len(value) <= 80 and value.isprintable() and value.isascii():
        assert shown == f"'{value}'"


def test_echo_names_the_length_of_a_cut_value_and_never_dumps_containers() -> None:
    assert echo("x" * 10_000_000).endswith("...' (10000000 characters)")
    assert echo({"secret": "v"}) == "an object"
    assert [describe_type(v) for v in (None, True, 1, 1.5, "s", [], {})] == [
        "null",
        "true",
        "an integer",
        "a number",
        "a string",
        "an array",
        "an object",
    ]
    assert json_path("params", ["messages", 0, "content"]) == "params.messages[0].content"
    assert json_path("params", ["a"] * 20).endswith("...")


def test_settings_warnings_quote_bounded_keys_and_values() -> None:
    from ds4_core.config import Config

    _, warnings = Config().with_settings(
        {"k" * 1_000_000: 1, "retrieval.maxResults": "v" * 1_000_000, "enabled": "yes"}
    )
    assert len(warnings) == 3
    assert all(len(w) < 400 for w in warnings), [len(w) for w in warnings]
    assert "(1000000 characters)" in warnings[0]
    assert "(1000002 characters)" in warnings[1]
    assert warnings[2] == "setting 'enabled' = \"yes\" was ignored: expected true or false"
