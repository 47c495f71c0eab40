"""The active branch of a session and the messages Pi would send for it.

Implements docs/reference.md §P6 (`getBranch`, `buildSessionContext`):

1. Leaf: the last entry in file order by default; an explicit `None` means "before the first
   entry" (empty context). Unlike Pi, an explicit id that is not in the session is an error
   (`UnknownLeafError`) so that callers can report it instead of silently using another branch.
2. Path: walk `parentId` from the leaf to a root and reverse (root first). A missing parent, a
   self-parent or a cycle ends the walk. Duplicate ids resolve last-wins (docs/reference.md
   §P8.6).
3. Settings over the whole path: thinking level = last `thinking_level_change` (default
   `"off"`); model = last `model_change` (`provider`, `modelId`) or assistant message
   (`provider`, `model`).
4. Last compaction C on the path: context entries are C, then the path from
   `C.firstKeptEntryId` up to C (nothing when that id is not before C on the path, e.g. a
   retain-none compaction naming itself; system-role messages there are always dropped, with
   or without a `systemMessage` on C, as Pi 1.6 `buildSessionContext` keeps only the
   non-system entries of the kept range), then everything after C. Older compactions emit
   nothing.
5. `context_edit`: for each target the last edit among the context entries wins; `null` drops
   the target, `{content}` replaces its content.
6. Entry -> messages: `message` -> its message; C -> `[systemMessage?, compactionSummary]`;
   `branch_summary` with a non-empty summary -> `branchSummary`; `custom_message` -> `custom`
   (`content` `[]` when the entry has none, `display` only when the entry has it, as Pi copies
   the fields and `JSON.stringify` omits undefined ones); everything else -> nothing.

`bashExecution` messages are kept even with `excludeFromContext: true`: Pi drops them only when
converting to LLM messages (`convertToLlm`), which is the caller's concern.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from ds4_core.json_bounds import echo
from ds4_core.sessions.reader import SessionEntry, SessionFormatError, storable_id
from ds4_core.tokens import stable_json

DEFAULT_THINKING_LEVEL = "off"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_EDITABLE_ROLES = frozenset({"user", "assistant", "toolResult"})
_BLOCK_CONTENT_ROLES = frozenset({"user", "assistant", "toolResult"})


class _Leaf(enum.Enum):
    LAST = "last entry in file order"


LAST_ENTRY: Literal[_Leaf.LAST] = _Leaf.LAST
"""Default `leaf_id`: the last entry in file order (docs/reference.md §P6)."""

LeafId = str | None | Literal[_Leaf.LAST]


class UnknownLeafError(SessionFormatError):
    """An explicit leaf id names no entry of the session.

    Attributes:
        leaf_id: the id that was asked for.
    """

    def __init__(self, leaf_id: str) -> None:
        super().__init__(
            f"leaf entry {echo(leaf_id)} is not in this session; pass the id of an entry of the "
            "session, or omit the leaf to use the last entry"
        )
        self.leaf_id = leaf_id


@dataclass(slots=True)
class SessionContext:
    """The context Pi would build for a leaf (docs/reference.md §P6).

    Attributes:
        messages: Pi `AgentMessage` dicts in order (roles user, assistant, toolResult,
            bashExecution, custom, system, compactionSummary, branchSummary, or unknown roles
            kept opaque). Dicts are shallow copies; do not rely on identity with entry data.
        message_entry_ids: `message_entry_ids[i]` is the id of the entry that produced
            `messages[i]` (a compaction's systemMessage and summary both map to it).
        leaf_id: the resolved leaf id (`None` for an empty session or an explicit `None`).
        model: `(provider, model_id)` in effect at the leaf, or `None`.
        thinking_level: the thinking level at the leaf (`"off"` by default).
        path_entry_ids: ids of the active path, root first.
    """

    messages: list[dict[str, Any]]
    message_entry_ids: list[str | None]
    leaf_id: str | None
    model: tuple[str, str] | None
    thinking_level: str
    path_entry_ids: list[str]


def _index_by_id(entries: Sequence[SessionEntry]) -> dict[str, SessionEntry]:
    return {entry.entry_id: entry for entry in entries}  # last wins on duplicate ids


def _walk_to_root(by_id: dict[str, SessionEntry], leaf: SessionEntry) -> list[SessionEntry]:
    path: list[SessionEntry] = []
    visited: set[str] = set()
    current: SessionEntry | None = leaf
    while current is not None and current.entry_id not in visited:
        visited.add(current.entry_id)
        path.append(current)
        parent_id = current.parent_id
        if parent_id is None or parent_id == current.entry_id:
            break
        current = by_id.get(parent_id)
    path.reverse()
    return path


def active_path(
    entries: Sequence[SessionEntry], leaf_id: LeafId = LAST_ENTRY
) -> list[SessionEntry]:
    """The entries from a root to the leaf, root first (docs/reference.md §P6, `getBranch`).

    Args:
        entries: all entries of the session in file order.
        leaf_id: the leaf entry id; `LAST_ENTRY` (default) = the last entry in file order;
            `None` = before the first entry (empty path).

    A missing parent, a self-parent (`parentId == id`) or a cycle ends the walk; duplicate ids
    resolve to the last entry with that id.

    Raises:
        UnknownLeafError: `leaf_id` is a string that names no entry.
    """
    if leaf_id is None:
        return []
    by_id = _index_by_id(entries)
    if leaf_id is LAST_ENTRY:
        if not entries:
            return []
        leaf = entries[-1]
    else:
        found = by_id.get(leaf_id)
        if found is None:
            raise UnknownLeafError(leaf_id)
        leaf = found
    return _walk_to_root(by_id, leaf)


def _assistant_model(entry: SessionEntry) -> tuple[str, str] | None:
    message = entry.data.get("message")
    if type(message) is dict and message.get("role") == "assistant":
        provider, model = message.get("provider"), message.get("model")
        if isinstance(provider, str) and isinstance(model, str):
            return provider, model
    return None


def current_model(path: Sequence[SessionEntry]) -> tuple[str, str] | None:
    """`(provider, model_id)` in effect at the end of `path` (root first), or `None`.

    The last `model_change` (`provider`, `modelId`) or assistant message (`provider`, `model`)
    wins (docs/reference.md §P6, step 2); entries whose fields are not strings are ignored.
    Both names go through `storable_id` (a lone surrogate becomes its escape as text), since
    they reach the stored plan manifest.
    """
    for entry in reversed(path):
        kind = entry.entry_type
        if kind == "model_change":
            provider, model_id = entry.data.get("provider"), entry.data.get("modelId")
            if isinstance(provider, str) and isinstance(model_id, str):
                return storable_id(provider), storable_id(model_id)
        elif kind == "message":
            found = _assistant_model(entry)
            if found is not None:
                return storable_id(found[0]), storable_id(found[1])
    return None


def current_thinking_level(path: Sequence[SessionEntry]) -> str:
    """The thinking level at the end of `path`: the last `thinking_level_change`, else `"off"`.

    A non-string level (third-party writers write `null`) counts as `"off"`.
    """
    for entry in reversed(path):
        if entry.entry_type == "thinking_level_change":
            level = entry.data.get("thinkingLevel")
            return storable_id(level) if isinstance(level, str) else DEFAULT_THINKING_LEVEL
    return DEFAULT_THINKING_LEVEL


def iso_to_ms(timestamp: Any) -> int | None:
    """Unix milliseconds of an ISO-8601 timestamp string (UTC assumed when no offset is
    given), or `None` when it is missing or unparsable."""
    if not isinstance(timestamp, str):
        return None
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _ONE_MS


def _message_role(entry: SessionEntry) -> str | None:
    message = entry.data.get("message")
    if type(message) is dict:
        role = message.get("role")
        return role if isinstance(role, str) else None
    return None


def _context_entries(path: list[SessionEntry]) -> tuple[list[SessionEntry], SessionEntry | None]:
    """Context entries (step 3) and the compaction in effect, if any."""
    compaction_index = -1
    for index in range(len(path) - 1, -1, -1):
        if path[index].entry_type == "compaction":
            compaction_index = index
            break
    if compaction_index < 0:
        return list(path), None
    compaction = path[compaction_index]
    first_kept_id = compaction.data.get("firstKeptEntryId")
    kept: list[SessionEntry] = []
    if isinstance(first_kept_id, str):
        # Ids on a path are unique (the walk stops at a repeated id); the kept entry is
        # usually just before the compaction, so search backwards.
        for index in range(compaction_index - 1, -1, -1):
            if path[index].entry_id == first_kept_id:
                kept = path[index:compaction_index]
                break
    kept = [entry for entry in kept if _message_role(entry) != "system"]
    return [compaction, *kept, *path[compaction_index + 1 :]], compaction


def _collect_edits(entries: list[SessionEntry]) -> dict[str, dict[str, Any] | None]:
    """targetId -> replacement (`None` = drop) of the valid `context_edit`s, last one wins."""
    edits: dict[str, dict[str, Any] | None] = {}
    for entry in entries:
        if entry.entry_type != "context_edit":
            continue
        target = entry.data.get("targetId")
        if not isinstance(target, str) or "replacement" not in entry.data:
            continue
        replacement = entry.data["replacement"]
        if replacement is None:
            edits[target] = None
        elif type(replacement) is dict and "content" in replacement:
            edits[target] = replacement
    return edits


def _edited_content(role: Any, replacement: dict[str, Any]) -> Any:
    content = replacement["content"]
    if isinstance(content, str) and role in ("assistant", "toolResult"):
        return [{"type": "text", "text": content}]
    return content


def build_session_context(
    entries: Sequence[SessionEntry], leaf_id: LeafId = LAST_ENTRY
) -> SessionContext:
    """The messages Pi would send for the branch ending at `leaf_id` (docs/reference.md §P6).

    Args:
        entries: all entries of the session in file order (as `SessionReader` yields them).
        leaf_id: `LAST_ENTRY` (default, the last entry in file order), an entry id, or `None`
            for the empty context before the first entry.

    Returns:
        A `SessionContext`; see the module docstring for the rules. Entry data is not mutated.

    Raises:
        UnknownLeafError: `leaf_id` is a string that names no entry.
    """
    return context_for_path(active_path(entries, leaf_id))


def context_for_path(path: list[SessionEntry], thinking_level: str | None = None) -> SessionContext:
    """The messages Pi would send for `path` (root first, as `active_path` returns it); the
    rules of `build_session_context`, for a caller that already has the path (and, optionally,
    its `current_thinking_level`)."""
    if not path:
        return SessionContext([], [], None, None, DEFAULT_THINKING_LEVEL, [])
    context_entries, compaction = _context_entries(path)
    edits = _collect_edits(context_entries)

    messages: list[dict[str, Any]] = []
    source_ids: list[str | None] = []
    for entry in context_entries:
        kind = entry.entry_type
        data = entry.data
        if kind == "message":
            copy = _entry_message(entry, edits)
            if copy is not None:
                messages.append(copy)
                source_ids.append(entry.entry_id)
        elif kind == "compaction":
            if entry is not compaction:
                continue  # an older compaction inside the kept range
            system_message = data.get("systemMessage")
            if type(system_message) is dict:
                messages.append(dict(system_message))
                source_ids.append(entry.entry_id)
            messages.append(
                {
                    "role": "compactionSummary",
                    "summary": data.get("summary", ""),
                    "tokensBefore": data.get("tokensBefore"),
                    "timestamp": iso_to_ms(entry.timestamp),
                }
            )
            source_ids.append(entry.entry_id)
        elif kind == "branch_summary":
            summary = data.get("summary")
            if isinstance(summary, str) and summary:
                messages.append(
                    {
                        "role": "branchSummary",
                        "summary": summary,
                        "fromId": data.get("fromId"),
                        "timestamp": iso_to_ms(entry.timestamp),
                    }
                )
                source_ids.append(entry.entry_id)
        elif kind == "custom_message":
            content = data.get("content")
            if entry.entry_id in edits:
                replacement = edits[entry.entry_id]
                if replacement is None:
                    continue
                content = _edited_content("custom", replacement)
            message = {
                "role": "custom",
                "customType": data.get("customType"),
                "content": [] if content is None else content,
            }
            if "display" in data:
                message["display"] = data["display"]
            if "details" in data:
                message["details"] = data["details"]
            message["timestamp"] = iso_to_ms(entry.timestamp)
            messages.append(message)
            source_ids.append(entry.entry_id)
        # custom, label, session_info, model_change, thinking_level_change, usage,
        # context_edit and unknown types contribute nothing.

    return SessionContext(
        messages=messages,
        message_entry_ids=source_ids,
        leaf_id=path[-1].entry_id,
        model=current_model(path),
        thinking_level=thinking_level
        if thinking_level is not None
        else current_thinking_level(path),
        path_entry_ids=[entry.entry_id for entry in path],
    )


def _entry_message(
    entry: SessionEntry, edits: Mapping[str, dict[str, Any] | None]
) -> dict[str, Any] | None:
    """The AgentMessage of a `message` entry as the context sends it (a copy, with its
    `context_edit` applied and missing content filled in), or None when it sends none."""
    message = entry.data.get("message")
    if type(message) is not dict:
        return None
    role = message.get("role")
    copy = dict(message)
    if entry.entry_id in edits and role in _EDITABLE_ROLES:
        replacement = edits[entry.entry_id]
        if replacement is None:
            return None
        copy["content"] = _edited_content(role, replacement)
    elif copy.get("content") is None:  # old or hand-edited files (docs/reference.md §P5)
        if role == "system":
            copy["content"] = ""
        elif role in _BLOCK_CONTENT_ROLES:
            copy["content"] = []
    return copy


APPENDABLE_TYPES = frozenset(
    {
        "message",
        "custom",
        "label",
        "session_info",
        "model_change",
        "thinking_level_change",
        "usage",
    }
)
"""Entry types whose append extends a context without changing what it already holds
(`extend_context`); a compaction, a branch summary, a custom message or a context edit (which
may change earlier messages) makes the context be built again."""


def extend_context(
    previous: SessionContext, path: list[SessionEntry], thinking_level: str
) -> SessionContext | None:
    """The context of `path` built from `previous`, the context of a prefix of it, when that
    is sound; else None (build it with `context_for_path`).

    Sound when `path` is `previous`'s path (same last entry at the same depth: paths are
    parent chains, so the whole prefix is the same) followed by entries of
    `APPENDABLE_TYPES` only, and the caller knows that `previous` applied no `context_edit`
    (an edit may name an entry appended later). The result equals `context_for_path(path,
    thinking_level)` and shares `previous`'s message objects (its lists are new)."""
    known = len(previous.path_entry_ids)
    if known == 0 or len(path) <= known or path[known - 1].entry_id != previous.leaf_id:
        return None
    added = path[known:]
    if any(entry.entry_type not in APPENDABLE_TYPES for entry in added):
        return None
    messages = list(previous.messages)
    source_ids = list(previous.message_entry_ids)
    for entry in added:
        if entry.entry_type == "message":
            message = _entry_message(entry, {})
            if message is not None:
                messages.append(message)
                source_ids.append(entry.entry_id)
    return SessionContext(
        messages=messages,
        message_entry_ids=source_ids,
        leaf_id=path[-1].entry_id,
        model=current_model(added) or previous.model,
        thinking_level=thinking_level,
        path_entry_ids=[*previous.path_entry_ids, *(entry.entry_id for entry in added)],
    )


def has_context_edit(path: Sequence[SessionEntry]) -> bool:
    """Whether `path` holds a `context_edit` entry (then `extend_context` may not be used)."""
    return any(entry.entry_type == "context_edit" for entry in path)


def match_messages(
    messages: list[dict[str, Any]], context: SessionContext
) -> tuple[list[dict[str, Any]], list[str | None]]:
    """Map caller-supplied messages to session entry ids by fingerprint (stable JSON).

    ds4 maps the `context` hook's messages back to entries the same way (docs/reference.md §5).
    Unmatched messages get None.
    """
    by_fingerprint: dict[str, list[str]] = {}
    for message, entry_id in zip(context.messages, context.message_entry_ids, strict=False):
        if entry_id is not None:
            by_fingerprint.setdefault(stable_json(message), []).append(entry_id)
    ids: list[str | None] = []
    for message in messages:
        candidates = by_fingerprint.get(stable_json(message))
        ids.append(candidates.pop(0) if candidates else None)
    return list(messages), ids
