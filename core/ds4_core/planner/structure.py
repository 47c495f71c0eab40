"""What the planner knows about a message list before any budget: built once per session
revision, so a plan costs what it keeps, not what the session holds (issue 13).

`MessageStructure` holds, for one list of messages, everything `plan_context` derives from the
messages alone: token estimates, source ids, tool links, atomic groups (docs/reference.md §3.6)
and the indexes the tail walk needs (groups by end, suffix sums, sorted sizes). With it, a plan
walks the groups from the newest and stops once the recent tail is closed; the older groups are
accounted for in bulk from the suffix sums. Building it is linear in the messages; the engine
keeps one per session context (`engine/sessions.py`) and extends it by the new request with
`appended` (a copy of its lists, no walk over the messages).

Indices are 0-based positions in the message list; tokens are `chars-v2` estimates.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ds4_core.planner.groups import (
    AtomicGroup,
    build_atomic_groups,
    tool_call_ids,
    tool_links,
    tool_result_id,
)
from ds4_core.tokens import estimate_message_tokens

_NO_INDEX = 1 << 62
"""`suffix_first` past the last candidate: larger than any message index."""


class StructureError(ValueError):
    """The messages cannot be planned (a message is not an object, a token count is missing)."""


@dataclass(frozen=True)
class MessageStructure:
    """Budget-independent facts about `n` messages (see the module docstring). Immutable by
    contract: callers never mutate its lists.

    `tokens[i]` / `source_ids[i]` belong to message i (`message:<i>` when it has no entry id);
    `groups` are its atomic groups ordered by start and `group_of[i]` the group of message i;
    `by_end` lists every group index by end, newest first; `candidates` the groups the recent
    tail may take (neither summaries nor carriers of a `system` message), newest first;
    `suffix_messages[r]` / `suffix_tokens[r]` count the messages / tokens of `candidates[r:]`
    and `suffix_first[r]` is the smallest message index among them (`_NO_INDEX` for none); `candidate_rrank[gi]` is
    group gi's rank in `candidates` counted from the oldest (-1: not a candidate), so that
    group gi is in `candidates[r:]` exactly when `0 <= candidate_rrank[gi] <
    len(candidates) - r`;
    `sorted_candidate_tokens` their sizes ascending; `summaries` the summary groups, newest
    first; `system_groups` the groups carrying a `system` message; `linked` maps the index of
    each message with tool links to `(call ids, result id)`; `positions` maps each source id to
    its message indices.
    """

    n: int
    tokens: list[int]
    source_ids: list[str]
    links: tuple[dict[str, list[int]], dict[str, list[int]]]
    groups: list[AtomicGroup]
    group_of: list[int]
    by_end: list[int]
    candidates: list[int]
    suffix_messages: list[int]
    suffix_tokens: list[int]
    suffix_first: list[int]
    candidate_rrank: list[int]
    sorted_candidate_tokens: list[int]
    summaries: list[int]
    system_groups: frozenset[int]
    linked: dict[int, tuple[tuple[str, ...], str | None]]
    positions: dict[str, list[int]] = field(default_factory=dict)
    appended_positions: dict[str, list[int]] = field(default_factory=dict)

    def indices_of(self, source_id: str) -> list[int]:
        """The indices of the messages with `source_id` (empty when none has it)."""
        return [*self.positions.get(source_id, ()), *self.appended_positions.get(source_id, ())]

    def summary_indices(self) -> list[int]:
        """Indices of the summary messages (the members of `summaries`), ascending."""
        return sorted(i for gi in self.summaries for i in self.groups[gi].indices)

    def in_candidates_from(self, group: int, rank: int) -> bool:
        """Whether group index `group` is one of `candidates[rank:]` (O(1))."""
        rrank = self.candidate_rrank[group]
        return 0 <= rrank < len(self.candidates) - rank

    def oversized_candidates(self, limit: int) -> int:
        """How many candidate groups are larger than `limit` tokens (O(log groups))."""
        return len(self.sorted_candidate_tokens) - bisect.bisect_right(
            self.sorted_candidate_tokens, limit
        )

    def appended(
        self, message: dict[str, Any], tokens: int, source_id: str | None
    ) -> MessageStructure:
        """This structure with one more message at index `n`: a new request (a `user` message
        without tool links, which always starts its own group). Copies the lists (no walk over
        the messages).

        Raises:
            StructureError: `message` is not a user message without tool links (callers then
                build the structure of the whole list with `build_structure`).
        """
        if message.get("role") != "user" or tool_call_ids(message) or tool_result_id(message):
            raise StructureError("only a user message can be appended to a structure")
        index = self.n
        source = source_id if isinstance(source_id, str) and source_id else f"message:{index}"
        group = AtomicGroup(
            group_id=f"group:{index}-{index}",
            kind="turn",
            start=index,
            end=index,
            indices=(index,),
            tokens=tokens,
            reason="user message starts a turn",
        )
        gi = len(self.groups)
        appended_positions = {key: list(value) for key, value in self.appended_positions.items()}
        appended_positions.setdefault(source, []).append(index)
        # the new group is the newest: first by end, first candidate (its sizes join the sums)
        return MessageStructure(
            n=index + 1,
            tokens=[*self.tokens, tokens],
            source_ids=[*self.source_ids, source],
            links=self.links,
            groups=[*self.groups, group],
            group_of=[*self.group_of, gi],
            by_end=[gi, *self.by_end],
            candidates=[gi, *self.candidates],
            suffix_messages=[self.suffix_messages[0] + 1, *self.suffix_messages],
            suffix_tokens=[self.suffix_tokens[0] + tokens, *self.suffix_tokens],
            suffix_first=[min(index, self.suffix_first[0]), *self.suffix_first],
            candidate_rrank=[*self.candidate_rrank, len(self.candidates)],
            sorted_candidate_tokens=_inserted(self.sorted_candidate_tokens, tokens),
            summaries=self.summaries,
            system_groups=self.system_groups,
            linked=self.linked,
            positions=self.positions,
            appended_positions=appended_positions,
        )

    def extended(
        self,
        messages: Sequence[Any],
        message_tokens: Sequence[int],
        message_source_ids: Sequence[str | None],
    ) -> MessageStructure:
        """The structure of `messages`: this structure's `n` messages followed by more (a
        session that grew). `message_tokens` / `message_source_ids` cover the new messages
        only. Only the newest group and the new messages are walked again, when the newest
        group is a turn of consecutive messages starting with a `user` message and no new
        message links to a tool call of an older group; otherwise the whole list is built
        again (`build_structure`). Either way the result equals `build_structure(messages,
        ...)` (a property test checks it).

        Raises:
            StructureError: as `build_structure` (a new message is not an object, or the token
                list has another length than the new messages).
        """
        n_old = self.n
        added = messages[n_old:]
        if len(message_tokens) != len(added) or len(message_source_ids) != len(added):
            raise StructureError(
                f"message_tokens has {len(message_tokens)} entries for {len(added)} messages"
            )
        tokens = [*self.tokens, *(int(t) for t in message_tokens)]
        ids: list[str | None] = [
            *self.source_ids,
            *(
                source if isinstance(source, str) and source else f"message:{n_old + offset}"
                for offset, source in enumerate(message_source_ids)
            ),
        ]
        if not self.groups or not added:
            return build_structure(messages, tokens, ids)
        last_gi = len(self.groups) - 1
        last = self.groups[last_gi]
        k = last.start
        first = messages[k]
        if (
            last.end != n_old - 1
            or len(last.indices) != n_old - k
            or not isinstance(first, dict)
            or first.get("role") != "user"
        ):
            return build_structure(messages, tokens, ids)
        window = build_structure(messages[k:], tokens[k:], ids[k:])
        calls, results = self.links
        for call_id in (*window.links[0], *window.links[1]):
            if any(i < k for i in (*calls.get(call_id, ()), *results.get(call_id, ()))):
                return build_structure(messages, tokens, ids)  # links an older group
        return self._joined(window, k, last_gi)

    def _joined(self, window: MessageStructure, k: int, last_gi: int) -> MessageStructure:
        """This structure with its newest group (index `last_gi`, messages `k..n-1`) replaced
        by `window`, the structure of the messages from `k` on (see `extended`)."""
        base = len(self.groups) - 1  # group index of the window's first group
        groups = [*self.groups[:-1], *(_shifted(g, k) for g in window.groups)]
        was_candidate = bool(self.candidates) and self.candidates[0] == last_gi
        older = self.candidates[1:] if was_candidate else self.candidates
        cut = 1 if was_candidate else 0
        window_candidates = [base + gi for gi in window.candidates]
        count = len(window.candidates)
        suffix_messages = [
            m + self.suffix_messages[cut] for m in window.suffix_messages[:count]
        ] + self.suffix_messages[cut:]
        suffix_tokens = [t + self.suffix_tokens[cut] for t in window.suffix_tokens[:count]] + (
            self.suffix_tokens[cut:]
        )
        suffix_first = [
            min(f + k, self.suffix_first[cut]) for f in window.suffix_first[:count]
        ] + self.suffix_first[cut:]
        sorted_tokens = list(self.sorted_candidate_tokens)
        if was_candidate:
            del sorted_tokens[bisect.bisect_left(sorted_tokens, self.groups[last_gi].tokens)]
        for value in window.sorted_candidate_tokens:
            bisect.insort(sorted_tokens, value)
        calls = dict(self.links[0])
        results = dict(self.links[1])
        for table, found in ((calls, window.links[0]), (results, window.links[1])):
            for call_id, indices in found.items():
                table[call_id] = [i + k for i in indices]
        linked = dict(self.linked)
        linked.update((i + k, value) for i, value in window.linked.items())
        appended_positions = {key: list(value) for key, value in self.appended_positions.items()}
        for index in range(self.n, k + window.n):
            appended_positions.setdefault(window.source_ids[index - k], []).append(index)
        return MessageStructure(
            n=k + window.n,
            tokens=[*self.tokens[:k], *window.tokens],
            source_ids=[*self.source_ids[:k], *window.source_ids],
            links=(calls, results),
            groups=groups,
            group_of=[*self.group_of[:k], *(base + gi for gi in window.group_of)],
            by_end=[*(base + gi for gi in window.by_end), *self.by_end[1:]],
            candidates=[*window_candidates, *older],
            suffix_messages=suffix_messages,
            suffix_tokens=suffix_tokens,
            suffix_first=suffix_first,
            candidate_rrank=[
                *self.candidate_rrank[:-1],
                *(len(older) + r if r >= 0 else -1 for r in window.candidate_rrank),
            ],
            sorted_candidate_tokens=sorted_tokens,
            summaries=[*(base + gi for gi in window.summaries), *self.summaries],
            system_groups=frozenset(
                [*(g for g in self.system_groups if g != last_gi)]
                + [base + gi for gi in window.system_groups]
            ),
            linked=linked,
            positions=self.positions,
            appended_positions=appended_positions,
        )


def _shifted(group: AtomicGroup, k: int) -> AtomicGroup:
    """`group` of a structure built from message `k` on, with indices of the whole list."""
    return AtomicGroup(
        group_id=f"group:{group.start + k}-{group.end + k}",
        kind=group.kind,
        start=group.start + k,
        end=group.end + k,
        indices=tuple(i + k for i in group.indices),
        tokens=group.tokens,
        reason=group.reason,
    )


def _inserted(ordered: list[int], value: int) -> list[int]:
    copy = list(ordered)
    bisect.insort(copy, value)
    return copy


def build_structure(
    messages: Sequence[Any],
    message_tokens: Sequence[int] | None = None,
    message_source_ids: Sequence[str | None] | None = None,
) -> MessageStructure:
    """The structure of `messages` (linear in their number; see the module docstring).

    `message_tokens[i]`, when given, is the estimate of `messages[i]`; `message_source_ids[i]`
    its entry id (None or a list of another length: `message:<i>` ids, as `plan_context` uses).

    Raises:
        StructureError: a message is not an object (dict), or `message_tokens` has another
            length than `messages`.
    """
    n = len(messages)
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise StructureError(
                f"message {index} is a {type(message).__name__}, not an AgentMessage object"
            )
    if message_tokens is not None:
        if len(message_tokens) != n:
            raise StructureError(
                f"message_tokens has {len(message_tokens)} entries for {n} messages"
            )
        tokens = [int(t) for t in message_tokens]
    else:
        tokens = [estimate_message_tokens(m) for m in messages]
    if message_source_ids is not None and len(message_source_ids) != n:
        message_source_ids = None
    source_ids: list[str] = []
    positions: dict[str, list[int]] = {}
    for index in range(n):
        source = message_source_ids[index] if message_source_ids is not None else None
        resolved = source if isinstance(source, str) and source else f"message:{index}"
        source_ids.append(resolved)
        positions.setdefault(resolved, []).append(index)
    links = tool_links(messages)
    groups = build_atomic_groups(messages, message_tokens=tokens, links=links)
    group_of = [0] * n
    for gi, group in enumerate(groups):
        for i in group.indices:
            group_of[i] = gi
    system = frozenset(
        gi
        for gi, group in enumerate(groups)
        if any(messages[i].get("role") == "system" for i in group.indices)
    )
    by_end = sorted(range(len(groups)), key=lambda gi: groups[gi].end, reverse=True)
    candidates = [gi for gi in by_end if groups[gi].kind != "summary" and gi not in system]
    summaries = [gi for gi in by_end if groups[gi].kind == "summary" and gi not in system]
    suffix_messages = [0] * (len(candidates) + 1)
    suffix_tokens = [0] * (len(candidates) + 1)
    suffix_first = [_NO_INDEX] * (len(candidates) + 1)
    candidate_rrank = [-1] * len(groups)
    for rank in range(len(candidates) - 1, -1, -1):
        group = groups[candidates[rank]]
        suffix_messages[rank] = suffix_messages[rank + 1] + len(group.indices)
        suffix_tokens[rank] = suffix_tokens[rank + 1] + group.tokens
        suffix_first[rank] = min(suffix_first[rank + 1], group.start)
        candidate_rrank[candidates[rank]] = len(candidates) - 1 - rank
    linked: dict[int, tuple[tuple[str, ...], str | None]] = {}
    calls, results = links
    for call_id, indices in calls.items():
        for i in indices:
            ids, result = linked.get(i, ((), None))
            if call_id not in ids:
                linked[i] = ((*ids, call_id), result)
    for call_id, indices in results.items():
        for i in indices:
            ids, _ = linked.get(i, ((), None))
            linked[i] = (ids, call_id)
    return MessageStructure(
        n=n,
        tokens=tokens,
        source_ids=source_ids,
        links=links,
        groups=groups,
        group_of=group_of,
        by_end=by_end,
        candidates=candidates,
        suffix_messages=suffix_messages,
        suffix_tokens=suffix_tokens,
        suffix_first=suffix_first,
        candidate_rrank=candidate_rrank,
        sorted_candidate_tokens=sorted(groups[gi].tokens for gi in candidates),
        summaries=summaries,
        system_groups=system,
        linked=linked,
        positions=positions,
    )


def split_selection_problems(
    structure: MessageStructure, selected: Sequence[int], chosen: set[int]
) -> list[str]:
    """Tool calls split by a selection, looking only at the `selected` indices (ascending;
    `chosen` is the same set): the problems `groups.selection_problems` reports, found in
    O(selected + their links) instead of O(all links)."""
    calls, results = structure.links
    problems: list[str] = []
    for index in selected:
        found = structure.linked.get(index)
        if found is None:
            continue
        call_ids, result_id = found
        for call_id in call_ids:
            for result_index in results.get(call_id, ()):
                if result_index not in chosen:
                    problems.append(
                        f"tool call {call_id!r} at message {index} is selected but its "
                        f"result at message {result_index} is not"
                    )
        if result_id is not None:
            for call_index in calls.get(result_id, ()):
                if call_index not in chosen:
                    problems.append(
                        f"tool result for {result_id!r} at message {index} is selected but "
                        f"its call at message {call_index} is not"
                    )
    return problems
