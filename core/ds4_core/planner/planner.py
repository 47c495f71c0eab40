"""The managed-context planner (docs/reference.md §3.7): which messages and supplements to send.

One module: `_plan_managed` is one algorithm (about 340 lines) whose steps share the plan under
construction; the result types and the fallback plan around it are its inputs and outputs.

`plan_context` keeps the current turn, a contiguous recent tail of older turns, supplements
(pins, memory, retrieved history, project snippets) within their caps, and summaries within
theirs, so that the input stays under the budget's target and hard limits. It never splits an
atomic group (docs/reference.md §3.6). It fails open: any problem, including an exception,
gives mode `fallback` with the caller's messages unchanged and a `fallback_reason`.

Token numbers are `chars-v2` estimates; indices are 0-based positions in `messages`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from ds4_core.config import Config
from ds4_core.logs import log_failure
from ds4_core.planner.budget import ContextBudget
from ds4_core.planner.groups import SUMMARY_ROLES, AtomicGroup, build_atomic_groups
from ds4_core.planner.structure import (
    MessageStructure,
    StructureError,
    build_structure,
    split_selection_problems,
)
from ds4_core.tokens import estimate_message_tokens

log = logging.getLogger(__name__)

PlanMode = Literal["managed", "observer", "fallback"]
SupplementKind = Literal["history", "project", "memory", "pin"]
ItemKind = Literal[
    "system",
    "tool",
    "pin",
    "recent",
    "summary",
    "history",
    "project",
    "memory",
    "retrieval",
    "current",
    "background",
]

PRIORITIES: dict[str, int] = {
    "current": 1000,
    "system": 1000,
    "pin": 950,
    "recent": 100,
    "memory": 90,
    "history": 85,
    "retrieval": 85,
    "project": 80,
    "summary": 75,
    "background": 40,
}
"""Manifest priorities by item kind (docs/reference.md §3.7, "Manifest priorities")."""

SUPPLEMENT_ORDER: dict[str, int] = {"pin": 0, "memory": 1, "history": 2, "project": 3}
"""Insertion order of supplements before the last user message: pins, memory, history, project."""

OLDER_TURN_REASON = "older turn outside the recent tail; no retrieval evidence"
QUOTED_TURN_REASON = "older turn outside the recent tail; quoted as retrieved history evidence"

OLDER_ITEMS = 128
"""Older turns (messages, in whole groups, newest first) listed one by one below the recent
tail; older ones are one bulk item (`PlanItem.count`), so a plan's cost and its manifest do not
grow with the session (issue 13; the same 128 as the manifest rollup, docs/reference.md
§3.15)."""


@dataclass(frozen=True)
class Supplement:
    """Synthetic context offered to the planner: a rendered user-role message.

    `kind` is its category; `source_id` identifies what it quotes (an entry key, snippet id,
    pin or memory id) and is required for insertion; `tokens` is its estimate (computed from
    `message` when None); `score` ranks it within its category (higher first; pins carry 950);
    `classification` is its privacy level as recorded in the manifest.
    """

    kind: SupplementKind
    source_id: str
    message: dict[str, Any]
    tokens: int | None = None
    score: float = 0.0
    classification: str = "normal"


@dataclass(frozen=True)
class PlanItem:
    """One included or excluded unit: an original message or a supplement.

    `source_id` is the session entry id of the message (from `message_source_ids`), else
    `message:<index>`, or the supplement's `source_id`. `group_id` is the message's atomic group
    (`group:<start>-<end>`) or None for supplements. `tokens` is the unit's estimate; `score` is
    priority + (end index + 1) / (n + 1) rounded to 6 decimals for messages, the supplement's
    own score for supplements (docs/reference.md §3.7). `reason` is metadata, never content.

    A bulk item (`count` > 1) stands for `count` older messages left out with
    `OLDER_TURN_REASON`: the turns older than the newest `OLDER_ITEMS` messages outside the
    recent tail, from `source_id` (the oldest) to `last_source_id` (the newest), except those
    listed as items of their own; `tokens` is their sum, `score` the newest one's, `group_id`
    None.
    """

    kind: ItemKind
    source_id: str
    group_id: str | None
    tokens: int
    score: float
    reason: str
    classification: str = "normal"
    count: int = 1
    last_source_id: str | None = None


@dataclass(frozen=True)
class ContextPlan:
    """The result of `plan_context`.

    `mode` is `managed` (messages were chosen), `observer` (original messages, with a dry-run
    selection in included/excluded) or `fallback` (original messages; `fallback_reason` says
    why). `messages` is what to send; `estimated_tokens` is fixed tokens + the estimate of
    `messages`. `stats` holds `counts` (messages, groups, supplements, included, excluded,
    output), `tokens` (included tokens per item kind), `rescued_immediate_predecessor` (bool),
    `oversized_turn_exclusions` (int) and, in observer mode, `planned_tokens`.

    `current_turn_tokens` is the estimate of the current turn (the atomic groups reaching the
    last user message; 0 without a user message). `over_hard_limit` is True when fixed tokens
    + `current_turn_tokens` exceed the budget's hard input limit: no plan can fit, whatever is
    left out, so the client must shorten the request (or its system prompt and tools) or use
    a larger model. It is only ever True in mode `fallback`.
    """

    mode: PlanMode
    messages: list[dict[str, Any]]
    included: list[PlanItem]
    excluded: list[PlanItem]
    estimated_tokens: int
    fallback_reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    current_turn_tokens: int = 0
    over_hard_limit: bool = False


class _PlanFailure(Exception):
    """A reason to fall back, phrased for the user."""


def item_count(items: Sequence[PlanItem]) -> int:
    """How many messages and supplements `items` stand for (a bulk item counts its `count`)."""
    return sum(item.count for item in items)


def _score(priority: int, end_position: int, total: int) -> float:
    return round(priority + (end_position + 1) / (total + 1), 6)


def _source_ids(
    n: int, message_source_ids: Sequence[str | None] | None, warnings: list[str]
) -> list[str]:
    if message_source_ids is not None and len(message_source_ids) != n:
        warnings.append(
            f"message_source_ids has {len(message_source_ids)} entries for {n} messages; "
            "using message:<index> ids instead"
        )
        message_source_ids = None
    ids: list[str] = []
    for index in range(n):
        source = message_source_ids[index] if message_source_ids is not None else None
        ids.append(source if isinstance(source, str) and source else f"message:{index}")
    return ids


def _as_list(messages: Any) -> list[Any]:
    """The caller's list itself, a list copy of another sequence, or [] for a non-sequence."""
    if isinstance(messages, list):
        return messages
    try:
        return list(messages)
    except TypeError:
        return []


def _last_user_index(messages: Sequence[Any]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, dict) and message.get("role") == "user":
            return index
    return None


def _current_turn_tokens(
    groups: Sequence[AtomicGroup], sizes: Sequence[int], last_user: int | None
) -> int:
    """Tokens of the current turn: the groups reaching the last user message (docs/reference.md
    §3.7 step 1), or the messages from the last user message on when there are no groups."""
    if last_user is None:
        return 0
    if groups:
        return sum(group.tokens for group in groups if group.end >= last_user)
    return sum(sizes[last_user:])


def _stats(
    *,
    n: int,
    groups: int,
    supplements: int,
    included: list[PlanItem],
    excluded: list[PlanItem],
    output: int,
    rescued: bool = False,
    oversized: int = 0,
) -> dict[str, Any]:
    tokens: dict[str, int] = {}
    for item in included:
        tokens[item.kind] = tokens.get(item.kind, 0) + item.tokens
    return {
        "counts": {
            "messages": n,
            "groups": groups,
            "supplements": supplements,
            "included": len(included),
            "excluded": item_count(excluded),
            "output": output,
        },
        "tokens": tokens,
        "rescued_immediate_predecessor": rescued,
        "oversized_turn_exclusions": oversized,
    }


def plan_context(
    messages: Sequence[dict[str, Any]],
    *,
    fixed_tokens: int,
    budget: ContextBudget,
    config: Config,
    supplements: Sequence[Supplement] = (),
    message_source_ids: Sequence[str | None] | None = None,
    message_tokens: Sequence[int] | None = None,
    withheld: Mapping[int, tuple[str, str]] | None = None,
    structure: MessageStructure | None = None,
) -> ContextPlan:
    """Plan the messages of one model call (docs/reference.md §3.7). Never raises.

    `messages` are Pi AgentMessage dicts in conversation order; the last `user` message is the
    current request. `fixed_tokens` is the size of the system prompt and tool schemas (tokens).
    `supplements` are candidate synthetic messages; `message_source_ids[i]` is the entry id of
    `messages[i]` (None entries become `message:<i>`); `message_tokens[i]`, when given, is the
    precomputed estimate of `messages[i]`. `withheld` maps the index of a summary message the
    destination may not see to `(reason, classification)`: it is left out whole (privacy,
    `engine/sanitizing.py`). `structure`, when given, is `build_structure` of these messages,
    tokens and source ids (kept per session revision by the engine): the plan then costs what
    it keeps, not the whole list (`planner/structure.py`).

    Selection, against messageTarget = active_input_budget - fixed and messageHard =
    hard_input_limit - fixed:
    1. mandatory: the current group(s) (any group reaching the last user message; priority
       1000), groups carrying a `system` message (prompt/tool state, also 1000) and `pin`
       supplements (950; over `max_pinned_tokens` -> fallback); over messageHard -> fallback;
    2. recent tail: `turn` / `prefix` groups newest first while the tail (starting with the
       current groups' tokens) stays within `recent_tail_tokens` and the total within target
       and hard; the first group that does not fit closes the tail. With
       `context.rescueImmediatePredecessor`, the group just before the current turn is kept
       when it only overflows the tail cap;
    3. memory, history, project supplements by category, score descending, then source id,
       each within its category cap and the target and hard limits (others are skipped);
    4. summaries newest first within `max_summary_tokens` and the target and hard limits;
    5. validation: no tool call split from its result, the last user message selected, and
       fixed + selected <= hard_input_limit.
    The turns older than the recent tail are listed one by one for the newest `OLDER_ITEMS`
    messages (and every one quoted by a history supplement), the rest as one bulk item.
    Output keeps the original order with the selected supplements (pins, memory, history,
    project, each in the order given) just before the last user message.

    `context.mode = observer` returns the original messages with mode `observer`, still
    listing the dry-run included/excluded items. `enabled = false`, no messages, no user
    message, fixed tokens over the hard limit, or any error gives mode `fallback` with the
    original messages (the same list object when a list was passed) and no supplements.
    """
    original = _as_list(messages)
    warnings: list[str] = []
    estimated: dict[str, list[int]] = {}  # token estimates, reused by the fallback
    try:
        if not config.enabled:
            raise _PlanFailure("ds4 is disabled (setting 'enabled' is false)")
        plan, sizes = _plan_managed(
            original,
            fixed_tokens=fixed_tokens,
            budget=budget,
            config=config,
            supplements=supplements,
            message_source_ids=message_source_ids,
            message_tokens=message_tokens,
            warnings=warnings,
            estimated=estimated,
            withheld=withheld or {},
            structure=structure,
        )
        if config.context.mode == "observer":
            sent = fixed_tokens + sum(sizes)
            stats = {**plan.stats, "planned_tokens": plan.estimated_tokens}
            return replace(
                plan, mode="observer", messages=original, estimated_tokens=sent, stats=stats
            )
        return plan
    except _PlanFailure as failure:
        reason = str(failure)
    except Exception as exc:
        # fail open (docs/architecture.md "Fail open, except privacy"): any bug returns the
        # original messages
        log_failure(log, "planner error; sending the original messages unchanged", exc)
        reason = (
            f"internal planner error ({type(exc).__name__}); the original messages were sent "
            "unchanged"
        )
    return fallback_plan(
        original,
        reason,
        fixed_tokens=fixed_tokens,
        supplements=supplements,
        message_source_ids=message_source_ids,
        message_tokens=estimated.get("tokens", message_tokens),
        warnings=warnings,
        hard_input_limit=getattr(budget, "hard_input_limit", None),  # never raises
    )


def _plan_managed(
    messages: list[dict[str, Any]],
    *,
    fixed_tokens: int,
    budget: ContextBudget,
    config: Config,
    supplements: Sequence[Supplement],
    message_source_ids: Sequence[str | None] | None,
    message_tokens: Sequence[int] | None,
    warnings: list[str],
    estimated: dict[str, list[int]],
    withheld: Mapping[int, tuple[str, str]],
    structure: MessageStructure | None,
) -> tuple[ContextPlan, list[int]]:
    """The managed plan and the per-message token estimates; raises `_PlanFailure` to fall back.

    Walks the atomic groups from the newest and stops once the recent tail is closed: the
    groups older than the tail are decided in bulk from `structure`'s suffix sums, so the cost
    is that of what is kept (plus the first `OLDER_ITEMS` older messages listed one by one)."""
    n = len(messages)
    if n == 0:
        raise _PlanFailure("no messages to plan: the request carries no messages")
    if isinstance(fixed_tokens, bool) or not isinstance(fixed_tokens, int) or fixed_tokens < 0:
        raise _PlanFailure(f"fixed tokens {fixed_tokens!r} must be a non-negative integer")
    if structure is None or structure.n != n:
        if message_source_ids is not None and len(message_source_ids) != n:
            warnings.append(
                f"message_source_ids has {len(message_source_ids)} entries for {n} messages; "
                "using message:<index> ids instead"
            )
        try:
            structure = build_structure(messages, message_tokens, message_source_ids)
        except StructureError as exc:
            raise _PlanFailure(str(exc)) from exc
    last_user = _last_user_index(messages)
    if last_user is None:
        raise _PlanFailure(
            "no user message: the planner needs the current request as the last user message"
        )
    if fixed_tokens > budget.hard_input_limit:
        raise _PlanFailure(
            f"system prompt and tools ({fixed_tokens} tokens) exceed the hard input limit "
            f"({budget.hard_input_limit} tokens)"
        )

    tokens = structure.tokens
    estimated["tokens"] = tokens
    source_ids = structure.source_ids
    groups = structure.groups
    message_target = budget.active_input_budget - fixed_tokens
    message_hard = budget.hard_input_limit - fixed_tokens

    # Supplements: keep the insertable ones, in input order (docs/reference.md §3.7 step 1).
    insertable: list[tuple[int, Supplement, int]] = []
    rejected: list[PlanItem] = []
    for position, supplement in enumerate(supplements):
        kind = getattr(supplement, "kind", None)
        source_id = getattr(supplement, "source_id", None)
        problem = None
        if kind not in SUPPLEMENT_ORDER:
            problem = f"unknown supplement kind {kind!r} (expected pin, memory, history, project)"
        elif not isinstance(source_id, str) or not source_id:
            problem = "supplement without a source id is never inserted"
        elif not isinstance(supplement.message, dict):
            problem = "supplement message is not an AgentMessage object"
        elif supplement.tokens is not None and (
            isinstance(supplement.tokens, bool)
            or not isinstance(supplement.tokens, int)
            or supplement.tokens < 0
        ):
            problem = f"supplement tokens {supplement.tokens!r} must be a non-negative integer"
        if problem is not None:
            warnings.append(f"supplement {position}: {problem}")
            fallback_id = f"supplement:{position}"
            rejected.append(
                PlanItem(
                    kind=kind if kind in SUPPLEMENT_ORDER else "retrieval",
                    source_id=source_id
                    if isinstance(source_id, str) and source_id
                    else fallback_id,
                    group_id=None,
                    tokens=0,
                    score=0.0,
                    reason=problem,
                    classification=str(getattr(supplement, "classification", "normal")),
                )
            )
            continue
        size = (
            supplement.tokens
            if supplement.tokens is not None
            else estimate_message_tokens(supplement.message)
        )
        insertable.append((position, supplement, int(size)))
    shift = len(insertable)
    total_positions = n + shift

    def end_position(group: AtomicGroup) -> int:
        return group.end + shift if group.end >= last_user else group.end

    # decisions[group index] = (included?, kind, reason); groups older than the recent tail
    # get no entry: they are the bulk (`closed_from` below)
    decisions: dict[int, tuple[bool, ItemKind, str]] = {}
    supplement_decisions: dict[int, tuple[bool, str]] = {}

    # Step 4: mandatory groups and pins. The current groups are the newest by end.
    current_tokens = 0
    mandatory_tokens = 0
    for gi in structure.by_end:
        if groups[gi].end < last_user:
            break
        decisions[gi] = (True, "current", "current turn: the last user message and after")
        current_tokens += groups[gi].tokens
        mandatory_tokens += groups[gi].tokens
    for gi in sorted(structure.system_groups):
        if gi not in decisions:
            decisions[gi] = (
                True,
                "system",
                "carries a system message (prompt or tool state), always kept",
            )
            mandatory_tokens += groups[gi].tokens
    pin_tokens = sum(size for _, s, size in insertable if s.kind == "pin")
    if pin_tokens > budget.max_pinned_tokens:
        raise _PlanFailure(
            f"pinned content ({pin_tokens} tokens) exceeds context.maxPinnedTokens "
            f"({budget.max_pinned_tokens} tokens); unpin something or raise the cap"
        )
    for position, supplement, _ in insertable:
        if supplement.kind == "pin":
            supplement_decisions[position] = (True, "pinned by the user, always kept")
    mandatory_tokens += pin_tokens
    if mandatory_tokens > message_hard:
        raise _PlanFailure(
            f"the current turn, system messages and pins need {mandatory_tokens} tokens but only "
            f"{message_hard} are left under the hard input limit ({budget.hard_input_limit}) "
            f"after {fixed_tokens} fixed tokens"
        )
    total = mandatory_tokens

    # Step 5: recent tail, newest first, contiguous, with immediate-predecessor rescue. The
    # walk stops at the group that closes the tail: every older candidate is left out with
    # OLDER_TURN_REASON (counted from the suffix sums, not visited).
    tail_limit = budget.recent_tail_tokens
    recent_tokens = current_tokens
    rescue = config.context.rescue_immediate_predecessor
    rescued = False
    closed_from = len(structure.candidates)  # rank of the first older (bulk) candidate
    oversized_kept = 0  # candidates over the tail limit that were not left out
    rank = 0
    for position_in_order, gi in enumerate(structure.candidates):
        group = groups[gi]
        if gi in decisions:  # current
            oversized_kept += group.tokens > tail_limit
            continue
        within_budget = total + group.tokens <= min(message_target, message_hard)
        within_tail = recent_tokens + group.tokens <= tail_limit
        if within_tail and within_budget:
            decisions[gi] = (True, "recent", "recent tail: within the tail, target and hard limits")
            recent_tokens += group.tokens
            total += group.tokens
            oversized_kept += group.tokens > tail_limit
            rank += 1
            continue
        if rank == 0 and rescue and within_budget:
            decisions[gi] = (
                True,
                "recent",
                f"immediate predecessor rescued: over the recent tail limit ({recent_tokens} + "
                f"{group.tokens} > {tail_limit} tokens) but within the target and hard limits",
            )
            rescued = True
            recent_tokens += group.tokens
            total += group.tokens
            oversized_kept += group.tokens > tail_limit
            closed_from = position_in_order + 1
            break
        if not within_tail:
            reason = (
                f"closes the recent tail: {recent_tokens} + {group.tokens} tokens would exceed "
                f"the tail limit of {tail_limit}"
            )
        else:
            reason = (
                f"closes the recent tail: {total} + {group.tokens} tokens would exceed the "
                f"message budget of {min(message_target, message_hard)}"
            )
        decisions[gi] = (False, "background", reason)
        closed_from = position_in_order + 1
        break
    oversized = structure.oversized_candidates(tail_limit) - oversized_kept

    # Step 6: memory, history, project supplements within their caps.
    caps = {
        "memory": ("context.maxMemoryTokens", budget.max_memory_tokens),
        "history": ("context.maxRetrievedHistoryTokens", budget.max_retrieved_history_tokens),
        "project": ("context.maxProjectTokens", budget.max_project_tokens),
    }
    used = dict.fromkeys(caps, 0)
    ranked = sorted(
        (entry for entry in insertable if entry[1].kind != "pin"),
        key=lambda e: (SUPPLEMENT_ORDER[e[1].kind], -float(e[1].score), e[1].source_id),
    )
    for position, supplement, size in ranked:
        cap_name, cap = caps[supplement.kind]
        if used[supplement.kind] + size > cap:
            supplement_decisions[position] = (
                False,
                f"{supplement.kind} supplement over its category cap: {used[supplement.kind]} + "
                f"{size} > {cap} tokens ({cap_name})",
            )
        elif total + size > min(message_target, message_hard):
            supplement_decisions[position] = (
                False,
                f"would exceed the message budget: {total} + {size} > "
                f"{min(message_target, message_hard)} tokens",
            )
        else:
            supplement_decisions[position] = (True, f"{supplement.kind} evidence within its cap")
            used[supplement.kind] += size
            total += size

    # Step 7: summaries, newest first.
    summary_used = 0
    for gi in structure.summaries:
        if gi in decisions:
            continue
        group = groups[gi]
        privacy = next((withheld[i][0] for i in group.indices if i in withheld), None)
        if privacy is not None:
            decisions[gi] = (False, "summary", privacy)
        elif summary_used + group.tokens > budget.max_summary_tokens:
            decisions[gi] = (
                False,
                "summary",
                f"summary over its cap: {summary_used} + {group.tokens} > "
                f"{budget.max_summary_tokens} tokens (context.maxSummaryTokens)",
            )
        elif total + group.tokens > min(message_target, message_hard):
            decisions[gi] = (
                False,
                "summary",
                f"would exceed the message budget: {total} + {group.tokens} > "
                f"{min(message_target, message_hard)} tokens",
            )
        else:
            decisions[gi] = (True, "summary", "summary within its cap")
            summary_used += group.tokens
            total += group.tokens

    # Step 8: validation.
    selected_list = sorted(
        i for gi, decision in decisions.items() if decision[0] for i in groups[gi].indices
    )
    selected = set(selected_list)
    problems = split_selection_problems(structure, selected_list, selected)
    if problems:
        raise _PlanFailure("atomic group validation failed: " + "; ".join(problems[:3]))
    if last_user not in selected:
        raise _PlanFailure("the current user message was not selected")
    chosen_supplements = sorted(
        (entry for entry in insertable if supplement_decisions[entry[0]][0]),
        key=lambda e: (SUPPLEMENT_ORDER[e[1].kind], e[0]),
    )
    selected_tokens = sum(tokens[i] for i in selected_list) + sum(
        s for _, _, s in chosen_supplements
    )
    if fixed_tokens + selected_tokens > budget.hard_input_limit:
        raise _PlanFailure(
            f"the plan needs {fixed_tokens + selected_tokens} tokens, over the hard input limit "
            f"of {budget.hard_input_limit}"
        )

    # Entries whose text goes out as history evidence (source ids `session:entry` or `entry`).
    quoted = {
        str(supplement.source_id).rsplit(":", 1)[-1]
        for _, supplement, _ in chosen_supplements
        if supplement.kind == "history"
    }

    scores: dict[tuple[int, str], float] = {}  # (group, kind) -> score: one round() a group

    def message_item(index: int, decision: tuple[bool, ItemKind, str]) -> PlanItem:
        gi = structure.group_of[index]
        group = groups[gi]
        _, kind, reason = decision
        if reason == OLDER_TURN_REASON and source_ids[index] in quoted:
            reason = QUOTED_TURN_REASON
        score = scores.get((gi, kind))
        if score is None:
            score = scores[gi, kind] = _score(
                PRIORITIES[kind], end_position(group), total_positions
            )
        return PlanItem(
            kind=kind,
            source_id=source_ids[index],
            group_id=group.group_id,
            tokens=tokens[index],
            score=score,
            reason=reason,
            classification=withheld[index][1] if index in withheld else "normal",
        )

    def supplement_item(supplement: Supplement, size: int, reason: str) -> PlanItem:
        return PlanItem(
            kind=supplement.kind,
            source_id=supplement.source_id,
            group_id=None,
            tokens=size,
            score=round(float(supplement.score), 6),
            reason=reason,
            classification=supplement.classification,
        )

    # Older candidates: the newest `OLDER_ITEMS` messages (whole groups) and every quoted one
    # are listed one by one; the rest are one bulk item.
    older: tuple[bool, ItemKind, str] = (False, "background", OLDER_TURN_REASON)
    listed: dict[int, tuple[bool, ItemKind, str]] = {}  # message index -> decision
    for gi, decision in decisions.items():
        if not decision[0]:
            for i in groups[gi].indices:
                listed[i] = decision
    bulk_from = closed_from
    while bulk_from < len(structure.candidates) and (
        structure.suffix_messages[closed_from] - structure.suffix_messages[bulk_from] < OLDER_ITEMS
    ):
        for i in groups[structure.candidates[bulk_from]].indices:
            listed[i] = older
        bulk_from += 1
    bulk: PlanItem | None = None
    if bulk_from < len(structure.candidates):
        count = structure.suffix_messages[bulk_from]
        bulk_tokens = structure.suffix_tokens[bulk_from]
        for entry in quoted:
            for i in structure.indices_of(entry):
                if structure.in_candidates_from(structure.group_of[i], bulk_from):
                    if i not in listed:
                        listed[i] = older
                        count -= 1
                        bulk_tokens -= tokens[i]
        newest = groups[structure.candidates[bulk_from]]
        if count == 1:  # one message left (the others quoted): an item of its own, no bulk
            for rank in range(bulk_from, len(structure.candidates)):
                for i in groups[structure.candidates[rank]].indices:
                    listed.setdefault(i, older)
            count = 0
        if count > 0:
            bulk = PlanItem(
                kind="background",
                source_id=source_ids[structure.suffix_first[bulk_from]],
                group_id=None,
                tokens=bulk_tokens,
                score=_score(PRIORITIES["background"], end_position(newest), total_positions),
                reason=OLDER_TURN_REASON,
                count=count,
                last_source_id=source_ids[newest.end],
            )

    output: list[dict[str, Any]] = []
    included: list[PlanItem] = []
    excluded: list[PlanItem] = [bulk] if bulk is not None else []
    inserted = False
    for index in selected_list:
        if index >= last_user and not inserted:
            inserted = True
            for position, supplement, size in chosen_supplements:
                output.append(supplement.message)
                included.append(
                    supplement_item(supplement, size, supplement_decisions[position][1])
                )
        output.append(messages[index])
        included.append(message_item(index, decisions[structure.group_of[index]]))
    excluded.extend(message_item(index, listed[index]) for index in sorted(listed))
    for position, supplement, size in insertable:
        taken, reason = supplement_decisions[position]
        if not taken:
            excluded.append(supplement_item(supplement, size, reason))
    excluded.extend(rejected)

    plan = ContextPlan(
        mode="managed",
        messages=output,
        included=included,
        excluded=excluded,
        estimated_tokens=fixed_tokens + selected_tokens,
        fallback_reason=None,
        warnings=warnings,
        current_turn_tokens=current_tokens,
        over_hard_limit=False,  # the mandatory-tokens check above fell back otherwise
        stats=_stats(
            n=n,
            groups=len(groups),
            supplements=len(supplements),
            included=included,
            excluded=excluded,
            output=len(output),
            rescued=rescued,
            oversized=oversized,
        ),
    )
    return plan, tokens


def fallback_plan(
    messages: Sequence[dict[str, Any]],
    reason: str,
    *,
    fixed_tokens: Any = 0,
    supplements: Sequence[Supplement] = (),
    message_source_ids: Sequence[str | None] | None = None,
    message_tokens: Sequence[int] | None = None,
    warnings: list[str] | None = None,
    hard_input_limit: int | None = None,
) -> ContextPlan:
    """The fail-open plan (docs/reference.md §3.7, "Fallback plan"). Never raises.

    Mode `fallback`, `fallback_reason = reason`, `messages` is the caller's list itself (a copy
    only when another sequence type is passed); every message is listed as included (kind
    current / summary / system / background, reason "fallback: ...") and every supplement as
    excluded ("synthetic context dropped"). `estimated_tokens` is fixed + all messages; the
    hard limit is not guaranteed. `current_turn_tokens` is the estimate of the current turn;
    `over_hard_limit` is True when `hard_input_limit` (tokens) is given and fixed +
    `current_turn_tokens` exceed it. Listing items is best effort: if that fails the lists are
    empty and `current_turn_tokens` may be 0.
    """
    messages = _as_list(messages)
    warnings = [] if warnings is None else warnings
    n = len(messages)
    included: list[PlanItem] = []
    excluded: list[PlanItem] = []
    group_count = 0
    message_total = 0
    current_turn = 0
    try:
        if message_tokens is not None and len(message_tokens) == n:
            sizes = [int(t) for t in message_tokens]
        else:
            sizes = [estimate_message_tokens(m) if isinstance(m, dict) else 0 for m in messages]
        message_total = sum(sizes)
        source_ids = _source_ids(n, message_source_ids, [])
        group_ids: list[str | None] = [None] * n
        groups: list[AtomicGroup] = []
        if all(isinstance(m, dict) for m in messages):
            groups = build_atomic_groups(messages, message_tokens=sizes)
            group_count = len(groups)
            for group in groups:
                for i in group.indices:
                    group_ids[i] = group.group_id
        last_user = _last_user_index(messages)
        current_turn = _current_turn_tokens(groups, sizes, last_user)
        for index, message in enumerate(messages):
            role = message.get("role") if isinstance(message, dict) else None
            kind: ItemKind
            if role in SUMMARY_ROLES:
                kind = "summary"
            elif role == "system":
                kind = "system"
            elif last_user is not None and index >= last_user:
                kind = "current"
            else:
                kind = "background"
            included.append(
                PlanItem(
                    kind=kind,
                    source_id=source_ids[index],
                    group_id=group_ids[index],
                    tokens=sizes[index],
                    score=_score(PRIORITIES[kind], index, n),
                    reason="fallback: original message sent unchanged",
                )
            )
        for position, supplement in enumerate(supplements):
            supplement_kind = getattr(supplement, "kind", "retrieval")
            source_id = getattr(supplement, "source_id", None)
            size = getattr(supplement, "tokens", None)
            fallback_id = f"supplement:{position}"
            excluded.append(
                PlanItem(
                    kind=cast(SupplementKind, supplement_kind)
                    if supplement_kind in SUPPLEMENT_ORDER
                    else "retrieval",
                    source_id=source_id
                    if isinstance(source_id, str) and source_id
                    else fallback_id,
                    group_id=None,
                    tokens=size if isinstance(size, int) else 0,
                    score=round(float(getattr(supplement, "score", 0.0)), 6),
                    reason="fallback: synthetic context dropped",
                    classification=str(getattr(supplement, "classification", "normal")),
                )
            )
    except Exception as exc:  # the fallback itself must never raise
        log_failure(log, "could not list the items of a fallback plan", exc)
        included, excluded = [], []
    fixed = fixed_tokens if isinstance(fixed_tokens, int) and fixed_tokens > 0 else 0
    over = isinstance(hard_input_limit, int) and fixed + current_turn > hard_input_limit
    return ContextPlan(
        mode="fallback",
        messages=messages,
        included=included,
        excluded=excluded,
        estimated_tokens=fixed + message_total,
        fallback_reason=reason,
        warnings=warnings,
        current_turn_tokens=current_turn,
        over_hard_limit=over,
        stats=_stats(
            n=n,
            groups=group_count,
            supplements=len(supplements) if hasattr(supplements, "__len__") else 0,
            included=included,
            excluded=excluded,
            output=n,
        ),
    )
