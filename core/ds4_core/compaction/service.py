"""One compaction: summary, validation, graph nodes, prepared batch, and the compaction entry
the client writes (docs/reference.md §3.13; docs/compaction.md).

The engine prepares the span and resolves the previous root; this module turns them into a
`prepared` batch (a `segment`, plus an `aggregate` over `[previousRoot, segment]` when the
branch already has a root) and the typed result of `ds4/compact` (`ds4_core.results`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..config import Config
from ..logs import describe_failure
from ..privacy.levels import highest
from ..privacy.markers import parse, unwrap_classified, wrap_classified
from ..privacy.sanitizer import without_secrets
from ..requests import SummarizeCall, Summarizer
from ..results import (
    CompactionEntry,
    CompactResult,
    CompactSpan,
    CompactValidation,
    SessionInfo,
    SummaryTokens,
)
from ..retrieval.descriptor import replace_lone_surrogates
from ..store import summaries as summary_repo
from ..store.database import Store, utc_now_iso
from ..tokens import estimate_text_tokens
from .contract import (
    Evidence,
    Validation,
    aggregate_source_hash,
    build_prompt,
    repair_summary,
    segment_source_hash,
    validate_summary,
)
from .merge import MERGE_MODEL, MERGE_PROVIDER, merge_summaries
from .nodes import SummaryNode, new_summary_id
from .offline import OFFLINE_MODEL, OFFLINE_PROVIDER, offline_summary
from .records import compaction_details, scrub_surrogates
from .span import Span
from .transcript import MAX_TOOL_TEXT_CHARS, conversation_text, file_operations

log = logging.getLogger(__name__)

MAX_INVENTORY_FILES = 100
"""Most files kept in an aggregate's read / modified inventory (the most recent ones), so the
details each compaction entry carries stay bounded however long the session grows."""

NO_SUMMARIZER_REASON = (
    "no model summarizer was offered (an LSP client offers one by declaring "
    "capabilities.experimental.ds4.summarize)"
)


@dataclass(frozen=True)
class SummaryChoice:
    """The segment text and where it came from.

    Attributes:
        text: the summary (valid, or with warnings only).
        initial: validation of the text as the summarizer gave it (before repairs).
        final: validation of `text`.
        repairs: names of the repairs applied (docs/compaction.md).
        summarizer: "client" or "offline".
        fallback_reason: why the offline summary was used, or None.
        provider, model: who wrote the text.
    """

    text: str
    initial: Validation
    final: Validation
    repairs: tuple[str, ...]
    summarizer: str
    fallback_reason: str | None
    provider: str | None
    model: str | None


def _token_limit(config: Config) -> int:
    """The largest summary node, in tokens: `compaction.summaryTokenLimit`, and never more than
    `context.maxSummaryTokens` (so the planner can always include the active root)."""
    limit = config.compaction.summary_token_limit
    cap = config.context.max_summary_tokens
    return max(1, min(limit, cap)) if cap > 0 else limit


PROMPT_TOOL_TEXT_CHARS: tuple[int, ...] = (MAX_TOOL_TEXT_CHARS, 1000, 250, 0)
"""Caps on each tool output in the summary prompt, tried in order until the prompt fits
`compaction.maxRequestInputTokens` (docs/compaction.md "Limits")."""


def _fitting_prompt(
    span: Span,
    *,
    source_text: str,
    read_files: Sequence[str],
    modified_files: Sequence[str],
    token_limit: int,
    request_limit: int,
    custom_instructions: str | None,
) -> tuple[str | None, int]:
    """The first prompt within `request_limit` tokens, tool output capped per
    `PROMPT_TOOL_TEXT_CHARS`; (None, tokens of the smallest) when none fits."""
    tokens = 0
    for cap in PROMPT_TOOL_TEXT_CHARS:
        text = (
            source_text
            if cap == MAX_TOOL_TEXT_CHARS
            else conversation_text(span.messages, tool_text_chars=cap)
        )
        prompt = build_prompt(
            conversation_text=text,
            previous_summary=span.previous_summary,
            read_files=read_files,
            modified_files=modified_files,
            token_limit=token_limit,
            custom_instructions=custom_instructions,
        )
        tokens = estimate_text_tokens(prompt)
        if tokens <= request_limit:
            return prompt, tokens
    return None, tokens


def choose_summary(
    span: Span,
    *,
    source_text: str,
    read_files: Sequence[str],
    modified_files: Sequence[str],
    source_hash: str,
    session_id: str,
    token_limit: int,
    config: Config,
    summarizer: Summarizer | None,
    custom_instructions: str | None = None,
    prompt_span: Span | None = None,
    prompt_files: tuple[Sequence[str], Sequence[str]] | None = None,
) -> SummaryChoice:
    """The segment's summary: the summarizer's (validated, repaired where the reference
    repairs) or, when it is absent, fails, times out, answers invalid text, or the prompt is
    over `compaction.maxRequestInputTokens`, the offline summary (always valid).

    `prompt_span` is `span` as the summarizer's destination may see it (privacy: markers
    rendered, secrets redacted; docs/privacy.md) and `prompt_files` its (read, modified) file
    inventories: the prompt is built from them and the summarizer's answer validated and
    repaired against them (it saw nothing else); the offline summary comes from `span`."""
    evidence = Evidence(
        source_text, span.previous_summary, tuple(read_files), tuple(modified_files)
    )
    shown = prompt_span if prompt_span is not None else span
    shown_read, shown_modified = prompt_files or (read_files, modified_files)
    shown_text = source_text if shown is span else conversation_text(shown.messages)
    shown_evidence = Evidence(
        shown_text, shown.previous_summary, tuple(shown_read), tuple(shown_modified)
    )
    reason: str | None = NO_SUMMARIZER_REASON
    initial: Validation | None = None
    if summarizer is not None:
        request_limit = config.compaction.max_request_input_tokens
        prompt, prompt_tokens = _fitting_prompt(
            shown,
            source_text=shown_text,
            read_files=shown_read,
            modified_files=shown_modified,
            token_limit=token_limit,
            request_limit=request_limit,
            custom_instructions=custom_instructions,
        )
        if prompt is None:
            reason = (
                f"the summary prompt has {prompt_tokens} tokens even without tool output, over "
                f"compaction.maxRequestInputTokens ({request_limit}); summarized offline"
            )
        else:
            call = SummarizeCall(
                summary_kind="segment",
                prompt=prompt,
                source_hash=source_hash,
                token_limit=token_limit,
                session_id=session_id,
                source_entry_ids=span.source_entry_ids,
                read_files=tuple(shown_read),
                modified_files=tuple(shown_modified),
            )
            try:
                answer = summarizer(call)
            except Exception as exc:  # any failure: the offline summary stands in
                reason = str(exc) or type(exc).__name__
                log.info("summarizer failed: error=%s", describe_failure(exc))
            else:
                repaired = repair_summary(replace_lone_surrogates(answer.summary), shown_evidence)
                initial = repaired.initial
                tokens = estimate_text_tokens(repaired.text)
                if not repaired.accepted:
                    reason = (
                        "the client's summary failed validation ("
                        + ", ".join(repaired.initial.codes)
                        + f"): {repaired.reason}"
                    )
                elif tokens > token_limit:
                    reason = (
                        f"the client's summary has {tokens} tokens, over the limit of "
                        f"{token_limit} (compaction.summaryTokenLimit)"
                    )
                else:
                    return SummaryChoice(
                        repaired.text,
                        repaired.initial,
                        repaired.validation,
                        repaired.repairs,
                        "client",
                        None,
                        answer.provider,
                        answer.model,
                    )
    if config.privacy.enabled and config.privacy.redact_secrets:
        # the offline summary copies exact values (keys, tokens) out of the span: written from
        # the span without its secrets, it never carries one (the later plans quote it)
        messages = [without_secrets(m) for m in span.messages]
        previous = without_secrets(span.previous_summary)
        source_text = conversation_text(messages)
        evidence = Evidence(source_text, previous, tuple(read_files), tuple(modified_files))
    else:
        messages, previous = list(span.messages), span.previous_summary
    text = offline_summary(
        messages,
        read_files=read_files,
        modified_files=modified_files,
        token_limit=token_limit,
        previous_summary=previous,
        source_text=source_text,
    )
    final = validate_summary(text, evidence)
    return SummaryChoice(
        text,
        initial if initial is not None else final,
        final,
        (),
        "offline",
        reason,
        OFFLINE_PROVIDER,
        OFFLINE_MODEL,
    )


def _recent_union(older: Sequence[str], newer: Sequence[str], limit: int) -> list[str]:
    """`older` then `newer`, deduplicated (a repeated file moves to its latest position), the
    last `limit` kept."""
    order: dict[str, None] = {}
    for path in [*older, *newer]:
        order.pop(path, None)
        order[path] = None
    return list(order)[-limit:]


@dataclass(frozen=True)
class PreparedCompaction:
    """The outcome of `prepare_compaction`: the stored nodes, and what `result` turns into
    the `ds4/compact` answer (the span summarized, the summary chosen, the previous root and
    the summary's token limit)."""

    root: SummaryNode
    segment: SummaryNode
    span: Span
    choice: SummaryChoice
    previous_root: SummaryNode | None
    token_limit: int

    def result(self, session: SessionInfo, duration_ms: float) -> CompactResult:
        """The `ds4/compact` result (docs/protocol.md) with the compaction entry to write, for
        `session` (the session compacted) and `duration_ms` (the whole call, milliseconds)."""
        return _result(
            self.span,
            self.choice,
            self.root,
            self.segment,
            self.previous_root,
            self.token_limit,
            session,
            duration_ms,
        )


def prepare_compaction(
    store: Store,
    *,
    session_id: str,
    span: Span,
    reason: str,
    previous_root: SummaryNode | None,
    config: Config,
    summarizer: Summarizer | None,
    custom_instructions: str | None = None,
    after_insert: Callable[[SummaryNode], None] | None = None,
    prompt_span: Span | None = None,
    prompt_files: tuple[Sequence[str], Sequence[str]] | None = None,
    privacy_level: str = "normal",
    client_level: str = "normal",
) -> PreparedCompaction:
    """Summarize `span`, build the segment (and aggregate) and store them as `prepared`.

    Args:
        store: the open store.
        session_id: the Pi session id.
        span: from `prepare_span`.
        reason: manual | threshold | overflow.
        previous_root: the branch's current root node (resolved from the branch's latest
            compaction entry), or None.
        config: settings snapshot (compaction.*, context.maxSummaryTokens).
        summarizer: the client's model, or None for the offline summarizer.
        custom_instructions: extra instructions for the summarizer prompt.
        after_insert: test hook passed to `insert_prepared` (failure injection).
        prompt_span: `span` as the summarizer's destination may see it, `prompt_files` its
            file inventories (`choose_summary`).
        privacy_level: the highest privacy level of the span's text (docs/privacy.md); above
            `normal`, an offline summary (written from the span itself) is wrapped in
            `[ds4:LEVEL]...[/ds4:LEVEL]`; `client_level`, the highest level the summarizer
            could see, wraps the client's summary; an aggregate is wrapped in the highest
            level of its children (docs/reference.md §3.13).

    Returns:
        The nodes, and `PreparedCompaction.result` for the `CompactResult`.

    Raises:
        sqlite3.Error / peewee errors: the batch could not be stored (nothing of it remains).
        ValueError: a node the store refuses (e.g. the previous root is not stored for the
            session); nothing of the batch remains.
    """
    # Lone UTF-16 surrogates (legal in JSON session lines) cannot be hashed as UTF-8 or stored
    # by SQLite: they become U+FFFD in everything derived from the span, consistently.
    messages = [scrub_surrogates(m) for m in span.messages]
    span = replace(
        span, messages=messages, previous_summary=replace_lone_surrogates(span.previous_summary)
    )
    source_text = conversation_text(span.messages)
    read_files, modified_files = file_operations(span.messages)
    source_hash = segment_source_hash(
        source_text, span.previous_summary, span.source_entry_ids, read_files, modified_files
    )
    token_limit = _token_limit(config)
    choice = choose_summary(
        span,
        source_text=source_text,
        read_files=read_files,
        modified_files=modified_files,
        source_hash=source_hash,
        session_id=session_id,
        token_limit=token_limit,
        config=config,
        summarizer=summarizer,
        custom_instructions=custom_instructions,
        prompt_span=(
            replace(prompt_span, messages=[scrub_surrogates(m) for m in prompt_span.messages])
            if prompt_span is not None
            else None
        ),
        prompt_files=prompt_files,
    )
    wrap_level = client_level if choice.summarizer == "client" else privacy_level
    if wrap_level != "normal":
        choice = replace(choice, text=wrap_classified(choice.text, wrap_level))
    generated_at = utc_now_iso()
    segment = _segment_node(
        session_id, span, reason, choice, source_hash, read_files, modified_files, generated_at
    )
    nodes = [segment]
    root = segment
    if previous_root is not None:
        root = _aggregate_node(previous_root, segment, token_limit, generated_at)
        segment = replace(segment, operation_id=root.summary_id)
        nodes = [segment, root]
    summary_repo.insert_prepared(store, nodes, after_insert=after_insert)
    return PreparedCompaction(root, segment, span, choice, previous_root, token_limit)


def _segment_node(
    session_id: str,
    span: Span,
    reason: str,
    choice: SummaryChoice,
    source_hash: str,
    read_files: Sequence[str],
    modified_files: Sequence[str],
    generated_at: str,
) -> SummaryNode:
    """The level-0 node of the span (its own operation until an aggregate takes it in)."""
    segment_id = new_summary_id()
    metadata: dict[str, Any] = {
        "readFiles": list(read_files),
        "modifiedFiles": list(modified_files),
        "isSplitTurn": span.is_split_turn,
        "messageCount": span.message_count,
        "summarizer": choice.summarizer,
        "repairs": list(choice.repairs),
    }
    if choice.fallback_reason is not None:
        metadata["fallbackReason"] = choice.fallback_reason
    return SummaryNode(
        summary_id=segment_id,
        session_id=session_id,
        kind="segment",
        content=choice.text,
        source_hash=source_hash,
        graph_level=0,
        created_at=generated_at,
        validation_status=choice.final.status,
        validation_issue_codes=tuple(choice.initial.codes),
        provider=choice.provider,
        model=choice.model,
        first_kept_entry_id=span.first_kept_entry_id,
        tokens_before=span.tokens_before,
        reason=reason,
        lifecycle="prepared",
        operation_id=segment_id,
        source_entry_ids=span.source_entry_ids,
        metadata=metadata,
    )


def _aggregate_node(
    previous_root: SummaryNode, segment: SummaryNode, token_limit: int, generated_at: str
) -> SummaryNode:
    """The aggregate over `[previous_root, segment]` (docs/reference.md §3.13): their merged
    text within `token_limit` tokens, the union of their inventories (the most recent
    `MAX_INVENTORY_FILES` each), one level above both."""
    aggregate_id = new_summary_id()
    modified = _recent_union(
        previous_root.modified_files, segment.modified_files, MAX_INVENTORY_FILES
    )
    read = [
        path
        for path in _recent_union(previous_root.read_files, segment.read_files, MAX_INVENTORY_FILES)
        if path not in set(modified)
    ]
    inherited = highest(parse(child.content).level for child in (previous_root, segment))
    content = merge_summaries(
        unwrap_classified(previous_root.content),
        unwrap_classified(segment.content),
        read_files=read,
        modified_files=modified,
        token_limit=token_limit,
    )
    evidence = Evidence(
        previous_root.content + "\n\n" + segment.content, "", tuple(read), tuple(modified)
    )
    validation = validate_summary(content, evidence)
    if inherited != "normal":
        content = wrap_classified(content, inherited)
    children = (previous_root, segment)
    return SummaryNode(
        summary_id=aggregate_id,
        session_id=segment.session_id,
        kind="aggregate",
        content=content,
        source_hash=aggregate_source_hash(
            [(c.summary_id, c.kind, c.source_hash, c.graph_level) for c in children]
        ),
        graph_level=max(c.graph_level for c in children) + 1,
        created_at=generated_at,
        validation_status=validation.status,
        validation_issue_codes=tuple(validation.codes),
        provider=MERGE_PROVIDER,
        model=MERGE_MODEL,
        first_kept_entry_id=segment.first_kept_entry_id,
        tokens_before=segment.tokens_before,
        reason=segment.reason,
        lifecycle="prepared",
        operation_id=aggregate_id,
        child_ids=tuple(c.summary_id for c in children),
        metadata={"readFiles": read, "modifiedFiles": modified},
    )


def _result(
    span: Span,
    choice: SummaryChoice,
    root: SummaryNode,
    segment: SummaryNode,
    previous_root: SummaryNode | None,
    token_limit: int,
    session: SessionInfo,
    duration_ms: float,
) -> CompactResult:
    """The `ds4/compact` result (docs/protocol.md), with the compaction entry to write."""
    embedded = [segment] if root is not segment else []
    details = compaction_details(
        root,
        embedded,
        is_split_turn=span.is_split_turn,
        message_count=span.message_count,
        source_entry_ids=span.source_entry_ids,
        segment_summary_id=segment.summary_id,
    )
    warnings: list[str] = []
    if choice.fallback_reason is not None and choice.fallback_reason != NO_SUMMARIZER_REASON:
        warnings.append(f"offline summary used: {choice.fallback_reason}")
    if root.validation_status == "invalid":  # a merge bug, never expected: say it
        warnings.append(
            "the aggregate summary failed validation: " + ", ".join(root.validation_issue_codes)
        )
    return CompactResult(
        compaction=CompactionEntry(
            summary=root.content,
            first_kept_entry_id=span.first_kept_entry_id,
            tokens_before=span.tokens_before,
            details=details,
        ),
        summary_id=root.summary_id,
        segment_summary_id=segment.summary_id,
        operation_id=root.operation_id,
        summary_kind=root.kind,
        graph_level=root.graph_level,
        summarizer=choice.summarizer,
        fallback_reason=choice.fallback_reason,
        validation=CompactValidation(
            status=choice.final.status,
            issue_codes=tuple(choice.initial.codes),
            repairs=tuple(choice.repairs),
        ),
        span=CompactSpan(
            message_count=span.message_count,
            tokens=span.span_tokens,
            kept_tokens=span.kept_tokens,
            is_split_turn=span.is_split_turn,
            first_kept_entry_id=span.first_kept_entry_id,
            previous_summary_id=previous_root.summary_id if previous_root else None,
            source_entry_count=len(span.source_entry_ids),
        ),
        tokens=SummaryTokens(summary=estimate_text_tokens(root.content), limit=token_limit),
        warnings=tuple(warnings),
        session=session,
        duration_ms=duration_ms,
    )
