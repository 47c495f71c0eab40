"""Evidence groups: a tool call quoted with its result (`retrieval/history_select.py`).

In a Pi session an assistant message holds its tool calls (`toolCall` blocks) and the results
follow it as `toolResult` messages, each a child of the one before (the first a child of the
assistant message), in the order of the calls. A result alone ("93") says nothing about what was
asked, and a call alone does not hold the answer, so a hit is quoted with its partner:

* a `toolResult` hit starts with `[tool call] <name> <arguments JSON>`, the call that produced
  it (the call in its assistant message at the position of the result among the results that
  follow it, checked by tool name; the first call of that tool otherwise), then
  `[tool result]` and its own text;
* an assistant hit with tool calls ends with `[tool result] <text>` for each of its results of
  at most `SHORT_RESULT_CHARS` characters (a longer one is its own entry).

The call lines are the `<name> <arguments JSON>` lines of the assistant message's searchable
text (`sessions/searchable.py`). The group is the quoted text only: it goes through the same
quoting as any excerpt (`retrieval/evidence.py`).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from typing import Protocol

from ds4_core.retrieval.history_candidates import _Candidate

SHORT_RESULT_CHARS = 400
GROUP_LIMIT = 24
"""Only the best this many hits are grouped (no more can be sent)."""
MAX_RESULTS_PER_CALL = 16
_CALL_LINE = re.compile(r"^([A-Za-z_][\w.-]{0,63}) (\{.*\})$", re.MULTILINE)
_ROW_SQL = (
    "SELECT entry_id, parent_id, role, searchable_text FROM entries "
    "WHERE session_id = ? AND entry_id = ?"
)
_CHILDREN_SQL = (  # by `entries_session_parent`; the first result is picked in Python
    "SELECT seq, entry_id, role, searchable_text FROM entries "
    "WHERE session_id = ? AND parent_id = ?"
)


class _Connected(Protocol):
    conn: sqlite3.Connection


def _session(c: _Candidate) -> str:
    return c.entry_key[: len(c.entry_key) - len(c.entry_id) - 1]


def _call_line(conn: sqlite3.Connection, session: str, c: _Candidate) -> str | None:
    """The call line of the tool result `c` (module docstring), or None."""
    row = conn.execute(_ROW_SQL, (session, c.entry_id)).fetchone()
    position = 0
    parent = row[1] if row else None
    for _step in range(MAX_RESULTS_PER_CALL):
        if parent is None:
            return None
        row = conn.execute(_ROW_SQL, (session, parent)).fetchone()
        if row is None:
            return None
        if row[2] == "assistant":
            calls = [m.group(0) for m in _CALL_LINE.finditer(row[3] or "")]
            name = c.text.split("\n", 1)[0]
            if position < len(calls) and calls[position].startswith(name + " "):
                return calls[position]
            return next((line for line in calls if line.startswith(name + " ")), None)
        if row[2] != "toolResult":
            return None
        position += 1
        parent = row[1]
    return None


def _short_results(conn: sqlite3.Connection, session: str, c: _Candidate) -> list[str]:
    """The texts of the results that follow the assistant entry `c`, when short."""
    if not _CALL_LINE.search(c.text):
        return []
    out: list[str] = []
    parent = c.entry_id
    for _step in range(MAX_RESULTS_PER_CALL):
        children = [
            r for r in conn.execute(_CHILDREN_SQL, (session, parent)) if r[2] == "toolResult"
        ]
        if not children:
            break
        _seq, parent, _role, text = min(children)
        if text and len(text) <= SHORT_RESULT_CHARS:
            out.append(text)
    return out


def group_texts(search: _Connected, candidates: Sequence[_Candidate]) -> dict[int, str]:
    """rowid -> the quoted text of each of the first `GROUP_LIMIT` `candidates` that forms a
    group (module docstring); candidates without a partner are left out."""
    out: dict[int, str] = {}
    for c in candidates[:GROUP_LIMIT]:
        session = _session(c)
        if c.role == "toolResult":
            line = _call_line(search.conn, session, c)
            if line is not None:
                out[c.rowid] = f"[tool call] {line}\n[tool result]\n{c.text}"
        elif c.role == "assistant":
            results = _short_results(search.conn, session, c)
            if results:
                out[c.rowid] = c.text + "".join(f"\n[tool result] {r}" for r in results)
    return out


__all__ = ["GROUP_LIMIT", "SHORT_RESULT_CHARS", "group_texts"]
