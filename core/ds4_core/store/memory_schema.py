"""The schema of migration 11 (`memory-and-pins`, docs/memory.md "Storage"): the mutations read
from sessions' custom entries and the projection the replay makes of them. Its own module, as
`calibration_schema.py`, so `migrations.py` stays within its size.

Everything here is derived from session files and rebuilt from them alone: a session's
`context_mutations` rows are replaced when it is re-indexed and appended to as it grows;
`memory_items` and `pins` are replaced whole by each replay (`store/memory.py`).
"""

_LIFECYCLE = """    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    superseded_by TEXT,
    status_reason TEXT,
    origin_mutation_key TEXT NOT NULL,
    mutation_keys_json TEXT NOT NULL,
    position INTEGER NOT NULL"""
"""The lifecycle and provenance columns both item tables end with (`store.memory._item_row`)."""

MEMORY_SQL = f"""
CREATE TABLE context_mutations (
    mutation_key TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    entry_order INTEGER NOT NULL CHECK (entry_order >= 0),
    kind TEXT NOT NULL CHECK (kind IN ('memory', 'pin')),
    mutation_id TEXT,
    created_at_ms INTEGER,
    payload_json TEXT,
    error TEXT,
    rejected_reason TEXT,
    CHECK ((error IS NULL) = (payload_json IS NOT NULL))
) STRICT;

CREATE INDEX context_mutations_session ON context_mutations (session_id, entry_order);

CREATE TABLE memory_items (
    memory_id TEXT PRIMARY KEY,
    scope TEXT NOT NULL CHECK (scope IN ('session', 'project')),
    session_id TEXT NOT NULL,
    project_path TEXT,
    classification TEXT,
    memory_key TEXT,
    claim TEXT NOT NULL,
    source_entry_ids_json TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'superseded', 'invalid', 'expired')),
{_LIFECYCLE}
) STRICT;

CREATE INDEX memory_items_status ON memory_items (status, scope);

CREATE TABLE pins (
    pin_id TEXT PRIMARY KEY,
    scope TEXT NOT NULL CHECK (scope IN ('session', 'branch', 'project')),
    session_id TEXT NOT NULL,
    project_path TEXT,
    classification TEXT,
    branch_leaf_id TEXT,
    content TEXT NOT NULL,
    source_entry_id TEXT,
    source_file TEXT,
    status TEXT NOT NULL CHECK (status IN ('active', 'superseded', 'deleted')),
{_LIFECYCLE}
) STRICT;

CREATE INDEX pins_status ON pins (status, scope);
"""
"""The SQL of migration 11 (docs/reference.md §3.11 v9 in our shape: one mutation table with a
`kind`, invalid entries kept with their `error`, rejected ones with `rejected_reason`; times in
ms since the epoch as the entries write them; `position` is the replay's creation order). Both
item tables have the same leading columns (id, scope, origin session, project path,
classification) and the same lifecycle columns after their own."""

__all__ = ["MEMORY_SQL"]
