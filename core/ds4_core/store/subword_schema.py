"""The schema of the history sub-word index (migration `entries-subwords`, docs/retrieval.md
"History scope"): kept in its own module so `migrations.py` stays one screenful per migration.

Sub-words of history entries (docs/retrieval.md "History scope"): a row per user or
assistant message whose prose has camelCase names or CJK (`sessions.subwords.subword_text`,
keyed by rowid, written by `store.sessions`; the triggers drop it with its entry or text).
Ordinary FTS5, so a row can be deleted by rowid. Two `entries` indexes: user messages (turns)
and children by parent (tool results). Deleting `session_index_state` re-indexes each session.
"""

ENTRIES_SUBWORDS_SQL = """
CREATE VIRTUAL TABLE entries_subwords USING fts5(
    words,
    tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER entries_subwords_after_delete AFTER DELETE ON entries BEGIN
    DELETE FROM entries_subwords WHERE rowid = old.rowid;
END;
CREATE TRIGGER entries_subwords_after_update AFTER UPDATE ON entries
WHEN old.rowid IS NOT new.rowid OR old.searchable_text IS NOT new.searchable_text BEGIN
    DELETE FROM entries_subwords WHERE rowid = old.rowid;
END;
CREATE INDEX entries_session_role ON entries (session_id, role, seq);
CREATE INDEX entries_session_parent ON entries (session_id, parent_id);
DELETE FROM session_index_state;
"""
"""The SQL of migration 9 (`entries-subwords`)."""

__all__ = ["ENTRIES_SUBWORDS_SQL"]
