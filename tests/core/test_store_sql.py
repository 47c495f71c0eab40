"""The shared SQL helpers (`ds4_core.store.sql`), checked against real SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.store.sql import (
    LIKE_ESCAPE,
    MAX_IN_VALUES,
    chunked,
    escape_like,
    like_literal,
    placeholders,
)

# Text SQLite can bind: no lone surrogates (UTF-8 cannot encode them) and no NUL (a LIKE
# pattern ends at its first NUL: `like_literal` is for terms that may hold one).
_BINDABLE = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=40,
)
_WILDCARD_HEAVY = st.text(alphabet="%_\\aA-é\u4e2d", max_size=20)
_TEXT = st.one_of(_BINDABLE, _WILDCARD_HEAVY)


@pytest.fixture(scope="module")
def conn() -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(":memory:")
    yield connection
    connection.close()


def _like(conn: sqlite3.Connection, value: str, pattern: str) -> bool:
    (matched,) = conn.execute(f"SELECT ? LIKE ? {LIKE_ESCAPE}", (value, pattern)).fetchone()
    return bool(matched)


def _like_fold(text: str) -> str:
    """SQLite's LIKE case rule: ASCII letters compare case-insensitively, nothing else does."""
    return "".join(c.lower() if c.isascii() else c for c in text)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT)
def test_an_escaped_string_matches_itself_literally(conn: sqlite3.Connection, text: str) -> None:
    assert _like(conn, text, escape_like(text))


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, other=_TEXT)
def test_an_escaped_string_matches_only_itself(
    conn: sqlite3.Connection, text: str, other: str
) -> None:
    assert _like(conn, other, escape_like(text)) == (_like_fold(other) == _like_fold(text))


@settings(max_examples=300, deadline=None)
@given(before=_TEXT, text=_TEXT, after=_TEXT, other=_TEXT)
def test_a_contains_pattern_finds_the_text_and_only_holders_of_it(
    conn: sqlite3.Connection, before: str, text: str, after: str, other: str
) -> None:
    pattern = f"%{escape_like(text)}%"
    assert _like(conn, before + text + after, pattern)
    assert _like(conn, other, pattern) == (_like_fold(text) in _like_fold(other))


def test_escape_like_escapes_the_escape_character_first() -> None:
    assert escape_like(r"50%_a\b") == r"50\%\_a\\b"
    assert escape_like("") == ""


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(_TEXT, min_size=1, max_size=4))
def test_like_literal_keeps_the_longest_nul_free_piece(
    conn: sqlite3.Connection, pieces: list[str]
) -> None:
    term = "\x00".join(pieces)
    longest = max(pieces, key=len)
    found = like_literal(term)
    if not longest:
        assert found is None
        return
    assert found == escape_like(longest)
    # wrapped in `%...%` it selects the (NUL-free) texts holding that piece, and those only
    assert _like(conn, f"x{longest}y", f"%{found}%")
    assert _like(conn, "x" + longest[:-1] + "y", f"%{found}%") == (
        _like_fold(longest) in _like_fold("x" + longest[:-1] + "y")
    )


def test_like_literal_of_empty_and_all_nul_terms_is_none() -> None:
    assert like_literal("") is None
    assert like_literal("\x00\x00") is None
    assert like_literal("ab\x00abc\x00xy") == "abc"
    assert like_literal("a_b\x00c") == r"a\_b"


@given(values=st.lists(st.integers(), max_size=60), size=st.integers(1, 7))
def test_chunked_splits_in_order_into_full_chunks_and_a_last_shorter_one(
    values: list[int], size: int
) -> None:
    chunks = list(chunked(values, size))
    assert [v for chunk in chunks for v in chunk] == values
    assert all(len(chunk) == size for chunk in chunks[:-1])
    assert all(1 <= len(chunk) <= size for chunk in chunks)


def test_chunked_takes_any_iterable_and_defaults_to_max_in_values() -> None:
    chunks = list(chunked(iter(range(MAX_IN_VALUES * 2 + 1))))
    assert [len(c) for c in chunks] == [MAX_IN_VALUES, MAX_IN_VALUES, 1]
    assert list(chunked(dict.fromkeys("abc"), 2)) == [["a", "b"], ["c"]]
    assert list(chunked([], 3)) == []


def test_chunked_refuses_a_size_below_one() -> None:
    with pytest.raises(ValueError, match="size must be >= 1"):
        list(chunked([1], 0))


def test_placeholders_bind_one_value_each(conn: sqlite3.Connection) -> None:
    assert placeholders(0) == ""
    assert placeholders(1) == "?"
    assert placeholders(3) == "?, ?, ?"
    values = list(range(MAX_IN_VALUES + 2))  # a full chunk plus the statement's own parameters
    for chunk in chunked(values):
        sql = f"SELECT ? IN ({placeholders(len(chunk))}) AND ?"
        assert conn.execute(sql, (chunk[-1], *chunk, 1)).fetchone() == (1,)
