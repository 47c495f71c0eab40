"""The derived SQLite store (peewee over SQLite + FTS5): open, migrate, repositories.

The store is a projection of the Pi session files and can be deleted and rebuilt at any time
(docs/architecture.md "Canonical vs derived"). See `database` for the storage rules,
`migrations` for the schema, `sessions` and `manifests` for the repositories.
"""

from ds4_core.store.database import (
    DATABASE_ENV_VAR,
    DEFAULT_BUSY_TIMEOUT_MS,
    Store,
    default_database_path,
    move_aside,
    open_store,
    resolve_database_path,
    utc_now_iso,
)
from ds4_core.store.manifests import (
    count_manifests,
    get_manifest,
    latest_manifest,
    save_manifest,
)
from ds4_core.store.migrations import LATEST_VERSION, MIGRATIONS, Migration
from ds4_core.store.models import StoreModels, build_models
from ds4_core.store.sessions import (
    IndexedEntry,
    IndexState,
    SessionSummary,
    append_entries,
    branch_entry_ids,
    canonical_session_file,
    counts,
    delete_session,
    entry_count,
    entry_key,
    existing_entries,
    get_index_state,
    index_state_for_file,
    list_sessions,
    load_entries,
    replace_session,
    session_file,
    session_for_file,
    session_header,
    update_index_state,
)

__all__ = [
    "DATABASE_ENV_VAR",
    "DEFAULT_BUSY_TIMEOUT_MS",
    "LATEST_VERSION",
    "MIGRATIONS",
    "IndexState",
    "IndexedEntry",
    "Migration",
    "SessionSummary",
    "Store",
    "StoreModels",
    "append_entries",
    "branch_entry_ids",
    "build_models",
    "canonical_session_file",
    "count_manifests",
    "counts",
    "default_database_path",
    "delete_session",
    "entry_count",
    "entry_key",
    "existing_entries",
    "get_index_state",
    "get_manifest",
    "index_state_for_file",
    "latest_manifest",
    "list_sessions",
    "load_entries",
    "move_aside",
    "open_store",
    "replace_session",
    "resolve_database_path",
    "save_manifest",
    "session_file",
    "session_for_file",
    "session_header",
    "update_index_state",
    "utc_now_iso",
]
