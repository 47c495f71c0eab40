"""The span a compaction summarizes (docs/compaction.md "The flow", step 2).

The span is taken from the context Pi would build for the leaf (`build_session_context`):
the messages after the branch's latest compaction summary (or from the start of the branch)
up to, not including, the first kept message. The cut never separates an assistant
`toolCall` from the `toolResult` that answers it, and never starts the kept part with a
`toolResult` (Pi's cut-point rule, docs/reference.md §P9 `session_before_compact`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..json_bounds import echo
from ..planner.groups import SUMMARY_ROLES, tool_links
from ..sessions.context import SessionContext


class SpanError(ValueError):
    """The span cannot be prepared from this input; `field` names the request field to fix
    (wire spelling), or None when the branch itself has nothing to compact."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Span:
    """A prepared compaction span.

    Attributes:
        messages: the Pi AgentMessages to summarize, in order (treat as read-only).
        source_entry_ids: the session entry ids of those messages, unique, in order.
        first_kept_entry_id: the entry whose message is the first one kept verbatim.
        first_kept_index: index of that message in the context's messages.
        previous_compaction_entry_id: the branch's latest compaction entry (whose summary is
            the branch's current root), or None when the branch has no compaction.
        previous_summary: that compaction's summary text, or "".
        tokens_before: chars-v2 tokens of the whole current context (Pi's `tokensBefore`).
        span_tokens: chars-v2 tokens of `messages`.
        kept_tokens: chars-v2 tokens of the messages kept verbatim.
        is_split_turn: the cut falls inside a turn (the first kept message is not a user
            message), as Pi's `isSplitTurn`.
    """

    messages: list[dict[str, Any]]
    source_entry_ids: tuple[str, ...]
    first_kept_entry_id: str
    first_kept_index: int
    previous_compaction_entry_id: str | None
    previous_summary: str
    tokens_before: int
    span_tokens: int
    kept_tokens: int
    is_split_turn: bool

    @property
    def message_count(self) -> int:
        """Number of messages summarized."""
        return len(self.messages)


def latest_compaction(context: SessionContext) -> tuple[int, str | None, str]:
    """Where the branch's latest compaction leaves off in `context`: (index of the first
    message after its summary, or 0; its compaction entry id, or None; its summary, or "").
    Only the leaf's own path counts (docs/reference.md §P6), never another branch."""
    for index in range(len(context.messages) - 1, -1, -1):
        message = context.messages[index]
        if message.get("role") == "compactionSummary":
            summary = message.get("summary")
            return (
                index + 1,
                context.message_entry_ids[index],
                (summary if isinstance(summary, str) else ""),
            )
    return 0, None, ""


def _split_points(messages: Sequence[dict[str, Any]]) -> set[int]:
    """Indices `c` where cutting (kept part starting at `c`) would separate a tool call from
    its result: some call at an index < c has a result at an index >= c, or the reverse."""
    calls, results = tool_links(messages)
    blocked: set[int] = set()
    for call_id, call_indices in calls.items():
        result_indices = results.get(call_id, [])
        if not result_indices:
            continue
        low = min(min(call_indices), min(result_indices))
        high = max(max(call_indices), max(result_indices))
        blocked.update(range(low + 1, high + 1))
    return blocked


def _valid_cut(
    messages: Sequence[dict[str, Any]], ids: Sequence[str | None], index: int, blocked: set[int]
) -> bool:
    message = messages[index]
    role = message.get("role")
    return (
        ids[index] is not None
        and role not in ("toolResult", "system")
        and role not in SUMMARY_ROLES
        and index not in blocked
    )


def prepare_span(
    context: SessionContext,
    message_tokens: Sequence[int],
    *,
    first_kept_entry_id: str | None,
    keep_recent_tokens: int,
) -> Span:
    """The span of the next compaction of `context`'s branch.

    Args:
        context: the leaf's context (`build_session_context`), with `message_entry_ids`.
        message_tokens: chars-v2 tokens of each context message (same length).
        first_kept_entry_id: the entry to keep from (its message and everything after stay
            verbatim); None derives it: the shortest tail of at least `keep_recent_tokens`
            tokens, extended back to the nearest valid cut.
        keep_recent_tokens: tokens kept verbatim when the cut is derived.

    Raises:
        SpanError: the id is not a message of the current context (field
            `firstKeptEntryId`), is already summarized, would split a tool call from its
            result, or leaves nothing to summarize; or the branch holds too little to compact
            (field None).
    """
    messages = context.messages
    ids = context.message_entry_ids
    start, previous_entry, previous_summary = latest_compaction(context)
    blocked = _split_points(messages)
    total = sum(message_tokens)
    if first_kept_entry_id is not None:
        positions = [i for i, eid in enumerate(ids) if eid == first_kept_entry_id]
        if not positions:
            if first_kept_entry_id in context.path_entry_ids:
                raise SpanError(
                    f"firstKeptEntryId: entry {echo(first_kept_entry_id)} is on the branch but not "
                    "in its current context (already summarized by an earlier compaction, or "
                    "not a message); choose a message after the latest compaction",
                    "firstKeptEntryId",
                )
            raise SpanError(
                f"firstKeptEntryId: no entry {echo(first_kept_entry_id)} on the active branch",
                "firstKeptEntryId",
            )
        cut = positions[0]
        if cut <= start:
            where = "after the branch's latest compaction" if previous_entry else "of the branch"
            raise SpanError(
                f"firstKeptEntryId: entry {echo(first_kept_entry_id)} leaves nothing to summarize "
                f"(it is the first message {where}); choose a later one",
                "firstKeptEntryId",
            )
        if not _valid_cut(messages, ids, cut, blocked):
            raise SpanError(
                f"firstKeptEntryId: keeping from entry {echo(first_kept_entry_id)} would separate a "
                "tool call from its result (or start with a tool result); choose the user or "
                "assistant message that starts that exchange",
                "firstKeptEntryId",
            )
    else:
        span_total = sum(message_tokens[start:])
        since = "since its latest compaction" if previous_entry else "in all"
        # The last message is always kept: the compaction entry needs a first kept entry.
        target = len(messages) - 1
        tail = message_tokens[target] if messages else 0
        while target > start and tail < keep_recent_tokens:
            target -= 1
            tail += message_tokens[target]
        cut = target
        while cut > start and not _valid_cut(messages, ids, cut, blocked):
            cut -= 1
        if cut <= start:
            if span_total <= keep_recent_tokens:
                why = (
                    f"the branch holds {span_total} tokens {since}, within "
                    f"compaction.keepRecentTokens ({keep_recent_tokens})"
                )
            else:
                why = (
                    f"keeping the newest {keep_recent_tokens} tokens (compaction.keepRecentTokens) "
                    f"of the {span_total} {since} reaches back into the first exchange, which "
                    "cannot be cut without separating a tool call from its result"
                )
            raise SpanError(f"nothing to compact: {why}; pass firstKeptEntryId to choose the span")
    span_messages = list(messages[start:cut])
    seen: set[str] = set()
    source_ids: list[str] = []
    for eid in ids[start:cut]:
        if eid is not None and eid not in seen:
            seen.add(eid)
            source_ids.append(eid)
    span_tokens = sum(message_tokens[start:cut])
    first_kept = ids[cut]
    assert first_kept is not None  # _valid_cut checked it
    return Span(
        messages=span_messages,
        source_entry_ids=tuple(source_ids),
        first_kept_entry_id=first_kept,
        first_kept_index=cut,
        previous_compaction_entry_id=previous_entry,
        previous_summary=previous_summary,
        tokens_before=total,
        span_tokens=span_tokens,
        kept_tokens=sum(message_tokens[cut:]),
        is_split_turn=messages[cut].get("role") != "user",
    )
