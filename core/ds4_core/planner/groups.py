"""Atomic message groups: the units the planner keeps or drops whole (docs/reference.md §3.6).

A group never separates an assistant `toolCall` block from the `toolResult` message that
answers it: providers reject a request whose tool call has no result or whose result has no
call. Indices are 0-based positions in the message list.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ds4_core.tokens import estimate_message_tokens

GroupKind = Literal["prefix", "turn", "summary"]

SUMMARY_ROLES = frozenset({"compactionSummary", "branchSummary"})


@dataclass(frozen=True)
class AtomicGroup:
    """Messages that must be selected together.

    `group_id` is `group:<start>-<end>`; `start` / `end` are the smallest and largest message
    index (inclusive); `indices` lists every member in ascending order (a group merged through a
    tool call can skip over another group's messages); `tokens` is the sum of the members'
    estimates; `reason` says why the group exists (and what was merged into it).
    """

    group_id: str
    kind: GroupKind
    start: int
    end: int
    indices: tuple[int, ...]
    tokens: int
    reason: str


def tool_call_ids(message: Any) -> list[str]:
    """Ids of the `toolCall` blocks of an assistant message (empty for anything else)."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return []
    content = message.get("content")
    if not isinstance(content, list):
        return []
    ids: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "toolCall":
            call_id = block.get("id")
            if isinstance(call_id, str) and call_id:
                ids.append(call_id)
    return ids


def tool_result_id(message: Any) -> str | None:
    """The `toolCallId` of a `toolResult` message, or None."""
    if not isinstance(message, dict) or message.get("role") != "toolResult":
        return None
    call_id = message.get("toolCallId")
    return call_id if isinstance(call_id, str) and call_id else None


def tool_links(
    messages: Sequence[Any],
) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """(calls, results): message indices of the toolCall blocks and toolResult messages per id.

    An assistant message with two calls of the same id appears twice in that id's list.
    """
    calls: dict[str, list[int]] = {}
    results: dict[str, list[int]] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant":
            for call_id in tool_call_ids(message):
                calls.setdefault(call_id, []).append(index)
        elif role == "toolResult":
            result_id = tool_result_id(message)
            if result_id is not None:
                results.setdefault(result_id, []).append(index)
    return calls, results


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None


def build_atomic_groups(
    messages: Sequence[dict[str, Any]],
    *,
    message_tokens: Sequence[int] | None = None,
    links: tuple[dict[str, list[int]], dict[str, list[int]]] | None = None,
) -> list[AtomicGroup]:
    """Split `messages` into atomic groups, ordered by their first index (docs/reference.md §3.6).

    Walk: a `compactionSummary` / `branchSummary` message is its own `summary` group; a `user`
    message starts a `turn` group that collects the messages after it; messages before the
    first user message form a `prefix` group. Messages that follow a summary but precede the
    next user message form a group of their own (`prefix` before the first user message, else
    `turn`). Then groups linked by a tool call (assistant `toolCall.id` == `toolResult.toolCallId`)
    are merged with union-find; the merged kind is `turn` if any member is a turn, `summary` if
    all are summaries, else `prefix`.

    `message_tokens[i]`, when given, is the token estimate of `messages[i]` (saves estimating
    twice); otherwise `estimate_message_tokens` is used. `links`, when given, is
    `tool_links(messages)` computed by the caller.

    Raises:
        ValueError: if `message_tokens` has a different length from `messages`.
    """
    n = len(messages)
    if message_tokens is None:
        message_tokens = [
            estimate_message_tokens(m) if isinstance(m, dict) else 0 for m in messages
        ]
    elif len(message_tokens) != n:
        raise ValueError(
            f"message_tokens has {len(message_tokens)} entries for {n} messages; "
            "pass one estimate per message"
        )

    # 1. Initial groups from the walk.
    group_of = [0] * n
    kinds: list[str] = []
    reasons: list[str] = []
    current: int | None = None
    seen_user = False
    for index, message in enumerate(messages):
        role = _role(message)
        if role in SUMMARY_ROLES:
            kinds.append("summary")
            reasons.append(f"{role} message")
            group_of[index] = len(kinds) - 1
            current = None
            continue
        if role == "user":
            seen_user = True
            kinds.append("turn")
            reasons.append("user message starts a turn")
            current = len(kinds) - 1
        elif current is None:
            if seen_user:
                kinds.append("turn")
                reasons.append("messages after a summary continue a turn")
            else:
                kinds.append("prefix")
                reasons.append("messages before the first user message")
            current = len(kinds) - 1
        group_of[index] = current

    # 2. Union-find over tool call ids.
    parent = list(range(len(kinds)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    calls, results = links if links is not None else tool_links(messages)
    first_group_of_id: dict[str, int] = {}
    merged_via: dict[int, list[str]] = {}
    for call_id, linked in (*calls.items(), *results.items()):
        for index in linked:
            group = group_of[index]
            other = first_group_of_id.setdefault(call_id, group)
            a, b = find(other), find(group)
            if a != b:
                low, high = min(a, b), max(a, b)
                parent[high] = low
                merged_via.setdefault(low, []).append(call_id)
                merged_via[low].extend(merged_via.pop(high, []))

    # 3. Collect members per root.
    members: dict[int, list[int]] = {}
    for index in range(n):
        members.setdefault(find(group_of[index]), []).append(index)
    root_kinds: dict[int, set[str]] = {}
    for group, initial_kind in enumerate(kinds):
        root_kinds.setdefault(find(group), set()).add(initial_kind)

    groups: list[AtomicGroup] = []
    for root, indices in members.items():
        member_kinds = root_kinds[root]
        if "turn" in member_kinds:
            kind: GroupKind = "turn"
        elif member_kinds == {"summary"}:
            kind = "summary"
        else:
            kind = "prefix"
        reason = reasons[root]
        if root in merged_via:
            call_ids = ", ".join(sorted(set(merged_via[root])))
            reason += f"; merged with later messages through tool call(s) {call_ids}"
        start, end = indices[0], indices[-1]
        groups.append(
            AtomicGroup(
                group_id=f"group:{start}-{end}",
                kind=kind,
                start=start,
                end=end,
                indices=tuple(indices),
                tokens=sum(message_tokens[i] for i in indices),
                reason=reason,
            )
        )
    groups.sort(key=lambda g: g.start)
    return groups


def validate_atomic_selection(
    messages: Sequence[dict[str, Any]], selected: Iterable[int]
) -> list[str]:
    """Problems with sending only `messages[i] for i in selected` (docs/reference.md §3.6).

    Flags a selected tool call whose result (any of them, when an id repeats) is present in
    `messages` but not selected, a selected tool result whose call is present but not selected,
    and indices outside `messages`. A call with no result anywhere in `messages`, or a result
    with no call anywhere, is a property of the input rather than of the selection (an aborted
    turn, say) and is not flagged. Returns an empty list when the selection is sound; never
    raises on odd messages.
    """
    n = len(messages)
    chosen = set(selected)
    problems = [
        f"selected index {i} is outside the {n} messages" for i in sorted(chosen) if not 0 <= i < n
    ]
    problems.extend(selection_problems(chosen, *tool_links(messages)))
    return problems


def selection_problems(
    chosen: set[int], calls: dict[str, list[int]], results: dict[str, list[int]]
) -> list[str]:
    """Split tool calls in a selection, given the links of `tool_links` (see
    `validate_atomic_selection`, which is this plus an index range check)."""
    problems: list[str] = []
    for call_id, call_indices in calls.items():
        result_indices = results.get(call_id, [])
        for call_index in call_indices:
            if call_index not in chosen:
                continue
            for result_index in result_indices:
                if result_index not in chosen:
                    problems.append(
                        f"tool call {call_id!r} at message {call_index} is selected but its "
                        f"result at message {result_index} is not"
                    )
        for result_index in result_indices:
            if result_index not in chosen:
                continue
            for call_index in call_indices:
                if call_index not in chosen:
                    problems.append(
                        f"tool result for {call_id!r} at message {result_index} is selected but "
                        f"its call at message {call_index} is not"
                    )
    return problems
