"""peewee models of the store's tables, bound to one database.

The tables are created by `store.migrations` (SQL is the source of truth); these models only
describe them for queries. peewee binds a model class to one database, and tests open many
stores at once, so `build_models(db)` creates a fresh set of classes per database; `Store.models`
(see `store.database`) would be the natural place to cache it. The repositories in
`store.sessions` and `store.manifests` use bound-parameter SQL directly for bulk paths.

FTS: `EntryFTS.match(text)` / `EntryFTS.bm25()` work (docs/reference.md §L5), but `text` is
FTS5 query syntax: only pass queries built by `retrieval.descriptor.build_fts_query`, which
quotes every user term, never raw user text.
"""

from __future__ import annotations

from dataclasses import dataclass

import peewee
from playhouse.sqlite_ext import FTS5Model, RowIDField, SearchField


@dataclass(frozen=True)
class StoreModels:
    """The model classes of one database (see `build_models`)."""

    SchemaMigration: type[peewee.Model]
    Session: type[peewee.Model]
    Entry: type[peewee.Model]
    EntryFTS: type[FTS5Model]
    SessionIndexState: type[peewee.Model]
    ContextManifest: type[peewee.Model]


def build_models(db: peewee.Database) -> StoreModels:
    """Model classes for the tables of migrations 1-2, bound to `db`.

    Column types follow the STRICT table definitions: TEXT -> `TextField`, INTEGER ->
    `IntegerField`, REAL -> `FloatField`. Timestamps are ISO-8601 UTC strings (`...Z`), not
    datetimes, because that is how they are stored and compared.
    """

    class Base(peewee.Model):
        class Meta:
            database = db
            legacy_table_names = False

    class SchemaMigration(Base):
        version = peewee.IntegerField(primary_key=True)
        name = peewee.TextField()
        checksum = peewee.TextField()
        applied_at = peewee.TextField()

        class Meta:
            table_name = "schema_migrations"

    class Session(Base):
        session_id = peewee.TextField(primary_key=True)
        session_file = peewee.TextField(unique=True)
        project_path = peewee.TextField(null=True)
        header_json = peewee.TextField()
        indexed_at = peewee.TextField()

        class Meta:
            table_name = "sessions"

    class Entry(Base):
        rowid = RowIDField()  # the implicit rowid keys entries_fts
        entry_key = peewee.TextField(unique=True)  # the declared PRIMARY KEY
        session = peewee.ForeignKeyField(
            Session, column_name="session_id", field="session_id", on_delete="CASCADE"
        )
        entry_id = peewee.TextField()
        parent_id = peewee.TextField(null=True)
        entry_type = peewee.TextField()
        role = peewee.TextField(null=True)
        created_at = peewee.TextField(null=True)
        seq = peewee.IntegerField()
        line_number = peewee.IntegerField()
        content_hash = peewee.TextField()
        searchable_text = peewee.TextField()
        token_estimate = peewee.IntegerField()
        indexed_at = peewee.TextField()

        class Meta:
            table_name = "entries"

    class EntryFTS(FTS5Model):
        rowid = RowIDField()
        searchable_text = SearchField()
        entry_key = SearchField(unindexed=True)
        session_id = SearchField(unindexed=True)

        class Meta:
            database = db
            table_name = "entries_fts"
            options = {
                "content": "entries",
                "content_rowid": "rowid",
                "tokenize": "unicode61 remove_diacritics 2",
            }

    class SessionIndexState(Base):
        session = peewee.ForeignKeyField(
            Session,
            column_name="session_id",
            field="session_id",
            primary_key=True,
            on_delete="CASCADE",
        )
        session_file = peewee.TextField()
        header_hash = peewee.TextField()
        file_size = peewee.IntegerField()
        file_mtime_ms = peewee.FloatField()
        checkpoint_offset = peewee.IntegerField()
        checkpoint_hash_start = peewee.IntegerField(null=True)
        checkpoint_hash = peewee.TextField(null=True)
        indexed_entries = peewee.IntegerField()
        malformed_lines = peewee.IntegerField()
        resume_json = peewee.TextField()
        indexed_at = peewee.TextField()

        class Meta:
            table_name = "session_index_state"

    class ContextManifest(Base):
        manifest_id = peewee.TextField(primary_key=True)
        session_id = peewee.TextField(null=True)
        branch_leaf_id = peewee.TextField(null=True)
        created_at = peewee.TextField()
        provider = peewee.TextField(null=True)
        model = peewee.TextField(null=True)
        context_window = peewee.IntegerField(null=True)
        output_reserve = peewee.IntegerField(null=True)
        hard_input_limit = peewee.IntegerField(null=True)
        target_input_tokens = peewee.IntegerField(null=True)
        estimated_tokens = peewee.IntegerField(null=True)
        actual_tokens = peewee.IntegerField(null=True)
        pi_reported_tokens = peewee.IntegerField(null=True)
        prompt_hash = peewee.TextField(null=True)
        policy_version = peewee.TextField(null=True)
        planner_version = peewee.TextField(null=True)
        manifest_json = peewee.TextField()

        class Meta:
            table_name = "context_manifests"

    return StoreModels(
        SchemaMigration=SchemaMigration,
        Session=Session,
        Entry=Entry,
        EntryFTS=EntryFTS,
        SessionIndexState=SessionIndexState,
        ContextManifest=ContextManifest,
    )
