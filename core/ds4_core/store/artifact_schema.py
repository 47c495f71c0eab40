"""The schema of migration 12 (`artifact-references`, docs/artifacts.md "References"): which
artifact each large tool result of an indexed session maps to. Its own module, as
`memory_schema.py`, so `migrations.py` stays within its size.

Derived from session files alone: an artifact id is the SHA-256 of the tool result's text, so
the session sync computes it from the JSONL (`store/artifacts.py`); a rebuild replaces the
session's rows, an incremental sync adds the new entries' rows, and a plan that offloads a
result the sync did not record (a threshold changed since) adds its row.
"""

ARTIFACT_REFS_SQL = """
CREATE TABLE artifact_refs (
    session_id TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    entry_order INTEGER NOT NULL CHECK (entry_order >= 0),
    artifact_id TEXT NOT NULL CHECK (length(artifact_id) = 64),
    original_chars INTEGER NOT NULL CHECK (original_chars >= 0),
    size_bytes INTEGER NOT NULL CHECK (size_bytes >= 0),
    PRIMARY KEY (session_id, entry_id)
) STRICT;

CREATE INDEX artifact_refs_artifact ON artifact_refs (artifact_id);
"""
"""The SQL of migration 12: one row per (session, toolResult entry) whose text is longer than
`artifacts.maxInlineToolResultChars` (and at most `artifacts.maxArtifactBytes`); `entry_order`
is the entry's position in its file (search order), sizes are the text's characters (code
points) and UTF-8 bytes. No foreign key to `sessions`, like the other derived tables: a
session's rows are replaced by its own rebuild. `artifact_refs_artifact` answers "is this
object referenced" for garbage collection."""

__all__ = ["ARTIFACT_REFS_SQL"]
