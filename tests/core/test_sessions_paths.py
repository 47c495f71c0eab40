"""`PathIndex` answers exactly what `active_path` answers, also after the session grows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.sessions import (
    LAST_ENTRY,
    SessionEntry,
    UnknownLeafError,
    active_path,
    current_thinking_level,
)
from ds4_core.sessions.paths import PathIndex


def _entry(
    seq: int, entry_id: str, parent_id: str | None, level: str | None = None
) -> SessionEntry:
    kind = "message" if level is None else "thinking_level_change"
    data: dict[str, Any] = {"type": kind, "id": entry_id, "parentId": parent_id}
    if level is not None:
        data["thinkingLevel"] = level
    return SessionEntry(entry_id, parent_id, kind, None, data, "", seq + 2, 0, seq)


# Each step: an id (small pool: duplicates and cycles happen) and a parent choice: the previous
# entry (Pi's usual append), a random earlier id, an unknown id, itself, or none (a new root).
steps = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=40),
        st.sampled_from(["previous", "previous", "previous", "earlier", "unknown", "self", "root"]),
        st.integers(min_value=0, max_value=1000),
    ),
    min_size=1,
    max_size=60,
)


def _build(raw: list[tuple[int, str, int]]) -> list[SessionEntry]:
    entries: list[SessionEntry] = []
    for seq, (number, parent_kind, pick) in enumerate(raw):
        entry_id = f"e{number}"
        if parent_kind == "previous":
            parent = entries[-1].entry_id if entries else None
        elif parent_kind == "earlier":
            parent = entries[pick % len(entries)].entry_id if entries else None
        elif parent_kind == "unknown":
            parent = f"e{41 + pick % 5}"  # may be appended later: a root gains a parent
        elif parent_kind == "self":
            parent = entry_id
        else:
            parent = None
        level = ("low", "high", None)[pick % 3] if pick % 4 == 0 else None
        entries.append(_entry(seq, entry_id, parent, level))
    return entries


@settings(max_examples=300, deadline=None)
@given(raw=steps, cuts=st.lists(st.integers(min_value=1, max_value=60), max_size=4), data=st.data())
def test_paths_equal_active_path_as_the_session_grows(
    raw: list[tuple[int, str, int]], cuts: list[int], data: st.DataObject
) -> None:
    entries = _build(raw)
    points = sorted({min(c, len(entries)) for c in cuts} | {len(entries)})
    index = PathIndex(entries[: points[0]])
    previous = points[0]
    for point in [*points[1:], None]:
        current = entries[:previous]
        leaves: list[Any] = [LAST_ENTRY, *{e.entry_id for e in current}]
        for leaf in data.draw(st.lists(st.sampled_from(leaves), max_size=6)) + [LAST_ENTRY]:
            expected = active_path(current, leaf)
            assert index.path_and_level(leaf) == (expected, current_thinking_level(expected))
        if point is None:
            break
        index = index.extended(entries[:point], entries[previous:point])
        previous = point


def test_unknown_leaf_and_no_leaf() -> None:
    index = PathIndex([_entry(0, "a", None)])
    with pytest.raises(UnknownLeafError):
        index.path("zzz")
    assert index.path(None) == []
    assert PathIndex([]).path() == []


def test_an_append_reuses_the_previous_path() -> None:
    entries = [_entry(n, f"e{n}", f"e{n - 1}" if n else None) for n in range(1000)]
    index = PathIndex(entries)
    first = index.path()
    grown = [*entries, _entry(1000, "e1000", "e999")]
    extended = index.extended(grown, grown[1000:])
    path = extended.path()
    assert path == active_path(grown)
    assert all(a is b for a, b in zip(first, path, strict=False))
