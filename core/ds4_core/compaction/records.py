"""The `details.ds4ContextEngine` record of a Pi compaction entry <-> summary graph nodes.

One module: writing the record (`details_record`) and reading it back
(`nodes_from_compaction_entry`) must stay an exact round trip, so both halves of the format stay
side by side.

docs/compaction.md "Details metadata (schema 2)" and docs/reference.md §3.13: the compaction
entry the client writes carries the new root's text in `summary` and, under
`details.ds4ContextEngine`, the root's fields plus every other node created by the same
operation (`embeddedNodes`), so the database can be rebuilt from the session file alone.

`details_record` writes the record; `nodes_from_compaction_entry` reads it back. The round trip
is exact: for nodes with JSON-ready metadata, reading the entry gives nodes equal to the ones
written, except `lifecycle` ("committed") and the root's `pi_entry_id` (the entry's id). The
record's documented keys carry the common case; anything the documented keys cannot express is
written under extra keys only when needed:

* `metadata` (root or embedded node): the node's whole metadata, when it differs from what the
  reader derives; otherwise extra metadata keys are written flat under their own names (e.g.
  `repairs`, `summarizer`, `fallbackReason`). The reader derives: `readFiles` and
  `modifiedFiles` (always), `isSplitTurn` and `messageCount` for a root that is the
  operation's segment (`segmentSummaryId == summaryId`; an embedded segment carries them as
  extra keys), plus every key that has no meaning of its own. So the engine's nodes (segment
  metadata with both inventories, isSplitTurn, messageCount, summarizer, repairs,
  fallbackReason; aggregate metadata with both inventories) need no `metadata` key.
* `rootSourceEntryIds`: the root's own sources, when they differ from the top-level
  `sourceEntryIds` (segment root) or from none (aggregate root).
* `operationId`: when a node's operation id is not the root's id.
* embedded `firstKeptEntryId`, `tokensBefore`, `reason`: when they differ from the root's.

Reading never raises: a schema-2 record with wrong types is treated as absent (the entry
imports as a Pi-native `branch` node with `metadata.malformedDs4Record = true`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeGuard, cast

from ..retrieval.descriptor import replace_lone_surrogates
from ..sessions.reader import SessionEntry, storable_id
from ..tokens import sha256_hex
from .contract import CONTRACT_VERSION
from .nodes import (
    DETAILS_KEY,
    DETAILS_SCHEMA_VERSION,
    PI_SUMMARY_ISSUE,
    SUMMARY_KINDS,
    SummaryKind,
    SummaryNode,
    ValidationStatus,
    pi_summary_id,
)

LEGACY_SCHEMA_VERSION = 1
"""`schemaVersion` of a legacy record: imported as one level-0 `segment`."""

_STATUSES = ("valid", "warning", "invalid")

_NODE_KEYS = frozenset(
    {
        "summaryId",
        "summaryKind",
        "graphLevel",
        "sourceHash",
        "sourceEntryIds",
        "validationStatus",
        "validationIssueCodes",
        "childSummaryIds",
        "generatedAt",
        "provider",
        "model",
        "readFiles",
        "modifiedFiles",
        "firstKeptEntryId",
        "tokensBefore",
        "reason",
        "operationId",
        "metadata",
    }
)
ROOT_KEYS = _NODE_KEYS | {
    "schemaVersion",
    "contractVersion",
    "isSplitTurn",
    "messageCount",
    "segmentSummaryId",
    "embeddedNodes",
    "rootSourceEntryIds",
    "contentHash",
}
"""Keys of the top-level record with a meaning of their own; other keys are root metadata."""
EMBEDDED_KEYS = _NODE_KEYS | {"content"}
"""Keys of an `embeddedNodes` item with a meaning of their own; others are node metadata."""

_INVENTORY_KEYS = ("readFiles", "modifiedFiles")
_ROOT_OPERATION_KEYS = ("isSplitTurn", "messageCount")


class _Malformed(ValueError):
    """A schema-2 record field has the wrong type (internal; never escapes this module)."""


class _Edited(ValueError):
    """The entry's summary is not the text the record was written for (internal)."""


def scrub_surrogates(value: Any) -> Any:
    """A copy of JSON `value` with every lone UTF-16 surrogate in its strings (keys included)
    replaced by U+FFFD: JSON allows them, but SQLite cannot store them and UTF-8 cannot encode
    them. Iterative, so any nesting depth the session reader accepts is fine."""

    def clean(item: Any) -> Any:
        return replace_lone_surrogates(item) if isinstance(item, str) else item

    if not isinstance(value, dict | list):
        return clean(value)
    top: dict[Any, Any] | list[Any] = {} if isinstance(value, dict) else []
    pending: list[tuple[Any, Any]] = [(value, top)]
    while pending:
        source, target = pending.pop()
        pairs = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in pairs:
            if isinstance(item, dict | list):
                copy: Any = {} if isinstance(item, dict) else []
                pending.append((item, copy))
            else:
                copy = clean(item)
            if isinstance(target, dict):
                target[clean(key)] = copy
            else:
                target.append(copy)
    return top


_ENTRY_ID_LIST_KEYS = ("sourceEntryIds", "rootSourceEntryIds")


def _storable_entry_ids(data: dict[str, Any]) -> dict[str, Any]:
    """`data` (a compaction entry) with the entry ids its ds4 record names (`sourceEntryIds`,
    `rootSourceEntryIds`, `firstKeptEntryId`, in the root and in `embeddedNodes`) escaped by
    `storable_id`, as the session reader escapes the entries' own ids, so they keep matching.
    Returns `data` itself when there is no such record; copies only what it changes."""
    details = data.get("details")
    if not isinstance(details, dict) or not isinstance(details.get(DETAILS_KEY), dict):
        return data
    record: dict[str, Any] = details[DETAILS_KEY]

    def escaped(obj: dict[str, Any]) -> dict[str, Any]:
        copy = dict(obj)
        for key in _ENTRY_ID_LIST_KEYS:
            ids = copy.get(key)
            if isinstance(ids, list):
                copy[key] = [storable_id(v) if isinstance(v, str) else v for v in ids]
        first_kept = copy.get("firstKeptEntryId")
        if isinstance(first_kept, str):
            copy["firstKeptEntryId"] = storable_id(first_kept)
        return copy

    record = escaped(record)
    items = record.get("embeddedNodes")
    if isinstance(items, list):
        record["embeddedNodes"] = [escaped(i) if isinstance(i, dict) else i for i in items]
    return {**data, "details": {**details, DETAILS_KEY: record}}


def _json_ready(value: Any) -> bool:
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return bool(json.loads(text) == value)


def _derived_metadata(record: Mapping[str, Any], *, root: bool) -> dict[str, Any]:
    """The metadata the reader gives a node whose record has no `metadata` key."""
    own_keys = ROOT_KEYS if root else EMBEDDED_KEYS
    metadata: dict[str, Any] = {}
    for key in _INVENTORY_KEYS:
        value = record.get(key)
        metadata[key] = [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
    if root and record.get("segmentSummaryId") == record.get("summaryId"):
        # isSplitTurn / messageCount describe the new segment's span: they are the root's
        # metadata only when the root is that segment (an embedded segment has them as extras)
        for key in _ROOT_OPERATION_KEYS:
            if key in record:
                metadata[key] = record[key]
    metadata.update((k, v) for k, v in record.items() if k not in own_keys)
    return metadata


def _attach_metadata(record: dict[str, Any], node: SummaryNode, *, root: bool) -> None:
    """Write `node.metadata` into `record`: extra keys flat when the reader would derive the
    metadata exactly from them, else the whole metadata under `metadata`."""
    if not _json_ready(node.metadata):
        try:
            json.dumps(node.metadata, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"summary node {node.summary_id!r}: its metadata is not JSON-ready ({exc})"
            ) from None
    own_keys = ROOT_KEYS if root else EMBEDDED_KEYS
    skip = set(_INVENTORY_KEYS) | (set(_ROOT_OPERATION_KEYS) if root else set())
    flat = {
        k: v
        for k, v in node.metadata.items()
        if isinstance(k, str) and k not in own_keys and k not in skip and _json_ready(v)
    }
    candidate = {**record, **flat}
    if _derived_metadata(candidate, root=root) == node.metadata:
        record.update(flat)
    else:
        record["metadata"] = json.loads(json.dumps(node.metadata, ensure_ascii=False))


def _node_fields(node: SummaryNode) -> dict[str, Any]:
    return {
        "summaryId": node.summary_id,
        "summaryKind": node.kind,
        "graphLevel": node.graph_level,
        "sourceHash": node.source_hash,
        "sourceEntryIds": list(node.source_entry_ids),
        "validationStatus": node.validation_status,
        "validationIssueCodes": list(node.validation_issue_codes),
        "childSummaryIds": list(node.child_ids),
        "generatedAt": node.created_at,
        "provider": node.provider,
        "model": node.model,
        "readFiles": node.read_files,
        "modifiedFiles": node.modified_files,
    }


def _embedded_record(node: SummaryNode, root: SummaryNode) -> dict[str, Any]:
    fields = _node_fields(node)
    record: dict[str, Any] = {
        "summaryId": fields.pop("summaryId"),
        "summaryKind": fields.pop("summaryKind"),
        "graphLevel": fields.pop("graphLevel"),
        "content": node.content,
        **fields,
    }
    if node.first_kept_entry_id != root.first_kept_entry_id:
        record["firstKeptEntryId"] = node.first_kept_entry_id
    if node.tokens_before != root.tokens_before:
        record["tokensBefore"] = node.tokens_before
    if node.reason != root.reason:
        record["reason"] = node.reason
    if node.operation_id != root.summary_id:
        record["operationId"] = node.operation_id
    _attach_metadata(record, node, root=False)
    return record


def details_record(
    root: SummaryNode,
    embedded: Sequence[SummaryNode],
    *,
    is_split_turn: bool,
    message_count: int,
    source_entry_ids: Sequence[str],
    segment_summary_id: str,
) -> dict[str, Any]:
    """The `details.ds4ContextEngine` object (schema 2) for one compaction operation.

    Args:
        root: the operation's new root (its text is the entry's `summary`, so the record
            does not repeat it).
        embedded: every other node the operation created (the new segment when the root is an
            aggregate), children before parents; written with their content.
        is_split_turn: whether the cut split a turn (Pi's `isSplitTurn`).
        message_count: messages in the summarized span.
        source_entry_ids: the entries this operation summarized (the new segment's span).
        segment_summary_id: the id of the operation's new segment (the root itself when the
            root is a segment).

    Returns a JSON-ready dict with the keys of docs/compaction.md "Details metadata"
    (`schemaVersion` 2, `contractVersion`, `summaryId`, ... `embeddedNodes`) plus the extra
    keys described in the module docstring, in that order.

    Raises:
        ValueError: when a node's metadata cannot be written as JSON.
    """
    fields = _node_fields(root)
    record: dict[str, Any] = {
        "schemaVersion": DETAILS_SCHEMA_VERSION,
        "contractVersion": CONTRACT_VERSION,
        "summaryId": root.summary_id,
        "summaryKind": root.kind,
        "graphLevel": root.graph_level,
        "sourceHash": root.source_hash,
        "sourceEntryIds": list(source_entry_ids),
        "validationStatus": root.validation_status,
        "validationIssueCodes": fields["validationIssueCodes"],
        "firstKeptEntryId": root.first_kept_entry_id,
        "tokensBefore": root.tokens_before,
        "reason": root.reason,
        "isSplitTurn": bool(is_split_turn),
        "messageCount": int(message_count),
        "generatedAt": root.created_at,
        "provider": root.provider,
        "model": root.model,
        "childSummaryIds": fields["childSummaryIds"],
        "segmentSummaryId": segment_summary_id,
        "readFiles": fields["readFiles"],
        "modifiedFiles": fields["modifiedFiles"],
        "contentHash": sha256_hex(root.content),
    }
    derived_sources = () if root.kind == "aggregate" else tuple(source_entry_ids)
    if tuple(root.source_entry_ids) != derived_sources:
        record["rootSourceEntryIds"] = list(root.source_entry_ids)
    if root.operation_id != root.summary_id:
        record["operationId"] = root.operation_id
    _attach_metadata(record, root, root=True)
    record["embeddedNodes"] = [_embedded_record(node, root) for node in embedded]
    return record


def compaction_details(
    root: SummaryNode,
    embedded: Sequence[SummaryNode],
    *,
    is_split_turn: bool,
    message_count: int,
    source_entry_ids: Sequence[str],
    segment_summary_id: str,
) -> dict[str, Any]:
    """The whole `details` object of the compaction entry: `{"readFiles": [...],
    "modifiedFiles": [...], "ds4ContextEngine": details_record(...)}`. The top-level file
    lists are the root's inventories, in the shape Pi's default compaction uses, so Pi carries
    them forward. Arguments and errors as `details_record`."""
    return {
        "readFiles": root.read_files,
        "modifiedFiles": root.modified_files,
        DETAILS_KEY: details_record(
            root,
            embedded,
            is_split_turn=is_split_turn,
            message_count=message_count,
            source_entry_ids=source_entry_ids,
            segment_summary_id=segment_summary_id,
        ),
    }


# --- reading ---------------------------------------------------------------------------------


def normalize_timestamp(value: Any) -> str:
    """An ISO-8601 timestamp as UTC with milliseconds and `Z` (`2026-11-30T12:00:00.000Z`);
    a string that does not parse is returned as is (naive times count as UTC); anything else
    gives ""."""
    if not isinstance(value, str):
        return ""
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (ValueError, OverflowError):  # unparsable, or out of range once moved to UTC
        return value


def _string_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class _Fields:
    """Typed access to one record object; wrong types raise `_Malformed`."""

    def __init__(self, obj: Mapping[str, Any], where: str) -> None:
        self.obj = obj
        self.where = where

    def bad(self, key: str) -> _Malformed:
        return _Malformed(f"{self.where}.{key}: {self.obj.get(key)!r}")

    def text(self, key: str, *, nonempty: bool = False) -> str:
        value = self.obj.get(key)
        if not isinstance(value, str) or (nonempty and not value):
            raise self.bad(key)
        return value

    def optional_text(self, key: str, default: str | None = None) -> str | None:
        if key not in self.obj:
            return default
        value = self.obj[key]
        if value is not None and not isinstance(value, str):
            raise self.bad(key)
        return value

    def text_or(self, key: str, default: str) -> str:
        return self.text(key) if key in self.obj else default

    def optional_int(self, key: str, default: int | None = None) -> int | None:
        if key not in self.obj:
            return default
        value = self.obj[key]
        if value is not None and not _is_int(value):
            raise self.bad(key)
        return cast(int | None, value)

    def strings(self, key: str) -> tuple[str, ...]:
        if key not in self.obj:
            return ()
        value = _string_list(self.obj[key])
        if value is None:
            raise self.bad(key)
        return tuple(value)

    def level(self) -> int:
        value = self.obj.get("graphLevel")
        if not _is_int(value) or value < 0:
            raise self.bad("graphLevel")
        return cast(int, value)

    def kind(self) -> SummaryKind:
        value = self.obj.get("summaryKind")
        if value not in SUMMARY_KINDS:
            raise self.bad("summaryKind")
        return cast(SummaryKind, value)

    def status(self) -> ValidationStatus:
        value = self.obj.get("validationStatus")
        if value not in _STATUSES:
            raise self.bad("validationStatus")
        return cast(ValidationStatus, value)

    def metadata(self, *, root: bool) -> dict[str, Any]:
        if "metadata" not in self.obj:
            return _derived_metadata(self.obj, root=root)
        value = self.obj["metadata"]
        if not isinstance(value, dict):
            raise self.bad("metadata")
        return dict(value)

    def check_inventories(self) -> None:
        for key in _INVENTORY_KEYS:
            self.strings(key)


def _schema2_nodes(
    session_id: str, entry: SessionEntry, summary: str, record: Mapping[str, Any]
) -> list[SummaryNode]:
    """Nodes of a schema-2 record: embedded nodes first, then the root. Raises `_Malformed`."""
    top = _Fields(record, DETAILS_KEY)
    root_id = top.text("summaryId", nonempty=True)
    kind = top.kind()
    span = top.strings("sourceEntryIds")
    if "rootSourceEntryIds" in record:
        root_sources = top.strings("rootSourceEntryIds")
    else:
        root_sources = () if kind == "aggregate" else span
    top.check_inventories()
    entry_first_kept = entry.data.get("firstKeptEntryId")
    entry_tokens = entry.data.get("tokensBefore")
    root = SummaryNode(
        summary_id=root_id,
        session_id=session_id,
        kind=kind,
        content=summary,
        source_hash=top.text("sourceHash"),
        graph_level=top.level(),
        created_at=top.text_or("generatedAt", normalize_timestamp(entry.timestamp)),
        validation_status=top.status(),
        validation_issue_codes=top.strings("validationIssueCodes"),
        provider=top.optional_text("provider"),
        model=top.optional_text("model"),
        first_kept_entry_id=top.optional_text(
            "firstKeptEntryId", entry_first_kept if isinstance(entry_first_kept, str) else None
        ),
        tokens_before=top.optional_int(
            "tokensBefore", entry_tokens if _is_int(entry_tokens) else None
        ),
        reason=top.optional_text("reason"),
        lifecycle="committed",
        pi_entry_id=entry.entry_id,
        operation_id=top.text_or("operationId", root_id),
        source_entry_ids=root_sources,
        child_ids=top.strings("childSummaryIds"),
        metadata=top.metadata(root=True),
    )
    items = record.get("embeddedNodes", [])
    if not isinstance(items, list):
        raise top.bad("embeddedNodes")
    nodes: list[SummaryNode] = []
    seen = {root_id}
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise _Malformed(f"{DETAILS_KEY}.embeddedNodes[{index}] is not an object")
        got = _Fields(item, f"{DETAILS_KEY}.embeddedNodes[{index}]")
        node_id = got.text("summaryId", nonempty=True)
        if node_id in seen:
            raise got.bad("summaryId")
        seen.add(node_id)
        got.check_inventories()
        nodes.append(
            SummaryNode(
                summary_id=node_id,
                session_id=session_id,
                kind=got.kind(),
                content=got.text("content"),
                source_hash=got.text("sourceHash"),
                graph_level=got.level(),
                created_at=got.text_or("generatedAt", root.created_at),
                validation_status=got.status(),
                validation_issue_codes=got.strings("validationIssueCodes"),
                provider=got.optional_text("provider"),
                model=got.optional_text("model"),
                first_kept_entry_id=got.optional_text("firstKeptEntryId", root.first_kept_entry_id),
                tokens_before=got.optional_int("tokensBefore", root.tokens_before),
                reason=got.optional_text("reason", root.reason),
                lifecycle="committed",
                pi_entry_id=None,
                operation_id=got.text_or("operationId", root_id),
                source_entry_ids=got.strings("sourceEntryIds"),
                child_ids=got.strings("childSummaryIds"),
                metadata=got.metadata(root=False),
            )
        )
    if "contentHash" in record:
        if top.text("contentHash") != sha256_hex(summary):
            raise _Edited("the summary was changed after ds4 wrote it")
    return [*nodes, root]


def _legacy_node(
    session_id: str, entry: SessionEntry, summary: str, record: Mapping[str, Any]
) -> SummaryNode:
    """The level-0 `segment` of a schema-1 record; missing or mistyped fields get defaults."""

    def text(key: str) -> str | None:
        value = record.get(key)
        return value if isinstance(value, str) and value else None

    summary_id = text("summaryId") or pi_summary_id(entry.entry_id)
    status = record.get("validationStatus")
    tokens = record.get("tokensBefore")
    if not _is_int(tokens):
        tokens = entry.data.get("tokensBefore")
    metadata: dict[str, Any] = {"schemaVersion": LEGACY_SCHEMA_VERSION}
    details = entry.data.get("details")
    for key in _INVENTORY_KEYS:
        files = _string_list(record.get(key))
        if files is None and isinstance(details, dict):
            files = _string_list(details.get(key))
        if files is not None:
            metadata[key] = files
    first_kept = text("firstKeptEntryId") or entry.data.get("firstKeptEntryId")
    return SummaryNode(
        summary_id=summary_id,
        session_id=session_id,
        kind="segment",
        content=summary,
        source_hash=text("sourceHash") or sha256_hex(summary),
        graph_level=0,
        created_at=text("generatedAt") or normalize_timestamp(entry.timestamp),
        validation_status=cast(ValidationStatus, status if status in _STATUSES else "warning"),
        validation_issue_codes=tuple(_string_list(record.get("validationIssueCodes")) or ()),
        provider=text("provider"),
        model=text("model"),
        first_kept_entry_id=first_kept if isinstance(first_kept, str) else None,
        tokens_before=tokens if _is_int(tokens) else None,
        reason=text("reason"),
        lifecycle="committed",
        pi_entry_id=entry.entry_id,
        operation_id=summary_id,
        source_entry_ids=tuple(_string_list(record.get("sourceEntryIds")) or ()),
        child_ids=(),
        metadata=metadata,
    )


def _pi_native_node(
    session_id: str, entry: SessionEntry, summary: str, *, malformed: bool, **flags: Any
) -> SummaryNode:
    """The `branch` node of a Pi-native compaction summary (docs/compaction.md "Graph rules");
    `flags` go into its metadata (why a ds4 record was not trusted)."""
    summary_id = pi_summary_id(entry.entry_id)
    metadata: dict[str, Any] = {}
    details = entry.data.get("details")
    if isinstance(details, dict):
        for key in _INVENTORY_KEYS:
            files = _string_list(details.get(key))
            if files is not None:
                metadata[key] = files
    if malformed:
        metadata["malformedDs4Record"] = True
    metadata.update(flags)
    first_kept = entry.data.get("firstKeptEntryId")
    tokens = entry.data.get("tokensBefore")
    return SummaryNode(
        summary_id=summary_id,
        session_id=session_id,
        kind="branch",
        content=summary,
        source_hash=sha256_hex(summary),
        graph_level=0,
        created_at=normalize_timestamp(entry.timestamp),
        validation_status="warning",
        validation_issue_codes=(PI_SUMMARY_ISSUE,),
        provider=None,
        model=None,
        first_kept_entry_id=first_kept if isinstance(first_kept, str) else None,
        tokens_before=tokens if _is_int(tokens) else None,
        reason=None,
        lifecycle="committed",
        pi_entry_id=entry.entry_id,
        operation_id=summary_id,
        source_entry_ids=(),
        child_ids=(),
        metadata=metadata,
    )


def nodes_from_compaction_entry(session_id: str, entry: SessionEntry) -> list[SummaryNode]:
    """Reconstruct the summary graph nodes a session entry carries; never raises.

    * not a `compaction` entry, or its `summary` is empty or not a string: `[]`;
    * `details.ds4ContextEngine` with `schemaVersion` 2: the embedded nodes, then the root
      (content = the entry's `summary`, `pi_entry_id` = the entry id), all `committed`,
      operation id = the root id (unless the record says otherwise);
    * `schemaVersion` 1 or absent (legacy): one level-0 `segment` (record id, or
      `pi_summary_id` when absent; record source hash, or sha256 of the summary;
      metadata `{"schemaVersion": 1}` plus the file lists when known);
    * no record (a Pi-native summary, including v1 files whose `firstKeptEntryIndex` the
      reader migrated to `firstKeptEntryId`): one `branch` node, id `pi_summary_id`, level 0,
      status `warning` with issue `imported-pi-summary-unverified`, provider/model None,
      source hash sha256 of the summary, no sources, created at the entry's timestamp
      normalized to ISO ms `Z`, metadata readFiles/modifiedFiles from `details` when they are
      string lists;
    * a record that is not an object, has another `schemaVersion`, or (schema 2) has a field
      of the wrong type: the Pi-native `branch` node with `metadata.malformedDs4Record` true.

    Children named by the record are not checked here (`store.summaries.import_committed`
    rejects an entry whose children exist nowhere).
    """
    if entry.entry_type != "compaction":
        return []
    entry = replace(entry, data=scrub_surrogates(_storable_entry_ids(entry.data)))
    summary = entry.data.get("summary")
    if not isinstance(summary, str) or not summary:
        return []
    details = entry.data.get("details")
    if not isinstance(details, dict) or DETAILS_KEY not in details:
        return [_pi_native_node(session_id, entry, summary, malformed=False)]
    record = details[DETAILS_KEY]
    if not isinstance(record, dict):
        return [_pi_native_node(session_id, entry, summary, malformed=True)]
    version = record.get("schemaVersion", LEGACY_SCHEMA_VERSION)
    if _is_int(version) and version == LEGACY_SCHEMA_VERSION:
        return [_legacy_node(session_id, entry, summary, record)]
    if _is_int(version) and version == DETAILS_SCHEMA_VERSION:
        try:
            return _schema2_nodes(session_id, entry, summary, record)
        except _Edited:
            return [
                _pi_native_node(session_id, entry, summary, malformed=False, editedDs4Summary=True)
            ]
        except _Malformed:
            pass
    return [_pi_native_node(session_id, entry, summary, malformed=True)]


def unverified_nodes(session_id: str, entry: SessionEntry, why: str) -> list[SummaryNode]:
    """The entry imported as a Pi-native `branch` node although it carries a ds4 record, with
    `metadata.untrustedDs4Record` = `why` (e.g. its children exist nowhere, or another entry
    of the session already holds its summary id with another text); [] for an entry with no
    summary. The caller decides when a record cannot be trusted."""
    if entry.entry_type != "compaction":
        return []
    entry = replace(entry, data=scrub_surrogates(entry.data))
    summary = entry.data.get("summary")
    if not isinstance(summary, str) or not summary:
        return []
    return [_pi_native_node(session_id, entry, summary, malformed=False, untrustedDs4Record=why)]


__all__ = [
    "EMBEDDED_KEYS",
    "LEGACY_SCHEMA_VERSION",
    "ROOT_KEYS",
    "compaction_details",
    "details_record",
    "nodes_from_compaction_entry",
    "scrub_surrogates",
    "unverified_nodes",
    "normalize_timestamp",
]
