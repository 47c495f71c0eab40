"""Relevance floor in plans: what the searches found but did not send, and why nothing was sent.

History and project retrieval keep the best candidates that scored under their relevance floor
(`retrieval/floor.py`, `BelowFloor`). A plan lists each of them as an excluded item (kind
`history` or `project`, reason `below the relevance floor (score < floor)`), and its manifest
gets a `relevance` section saying, per scope, how many items were sent and, when none was, why
(docs/retrieval.md, "The floor").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..planner import ContextPlan
from ..planner.planner import PlanItem
from ..retrieval import HistoryRetrieval
from ..retrieval.floor import BelowFloor

if TYPE_CHECKING:
    from ..project.workspace import ValidatedSearch


def floor_items(below: Sequence[BelowFloor]) -> list[PlanItem]:
    """One excluded `PlanItem` per below-floor candidate, in the order given: kind and source
    id as the search named them, its estimated tokens, its score (the scope's own scale, 6
    decimals) and `BelowFloor.reason`."""
    return [
        PlanItem(
            kind=item.kind if item.kind != "git" else "project",
            source_id=item.source_id,
            group_id=None,
            tokens=max(0, int(item.tokens)),
            score=round(float(item.score), 6),
            reason=item.reason,
        )
        for item in below
    ]


def with_floor_exclusions(plan: ContextPlan, below: Sequence[BelowFloor]) -> ContextPlan:
    """`plan` with the below-floor candidates appended to `excluded` (and counted in
    `stats.counts.excluded`). A fallback plan is returned as it is: it sent the original
    messages and no evidence, so no candidate was left out by the floor."""
    if not below or plan.mode == "fallback":
        return plan
    items = floor_items(below)
    stats = dict(plan.stats)
    counts = dict(stats.get("counts") or {})
    if "excluded" in counts:
        counts["excluded"] = int(counts["excluded"]) + len(items)
        stats["counts"] = counts
    return replace(plan, excluded=[*plan.excluded, *items], stats=stats)


def scope_relevance(status: str, sent: int, below: Sequence[BelowFloor]) -> dict[str, Any]:
    """`{status, sent, belowFloor, floor, best, why}` for one scope (see `relevance_summary`):
    `status` the search status, `sent` the hits it returned, `below` its below-floor list."""
    floor = below[0].floor if below else None
    best = max((item.score for item in below), default=None)
    why = None
    if sent == 0:
        if status != "ok":
            why = f"the search did not run ({status})"
        elif below:
            why = (
                f"no candidate reached the relevance floor (best {best:.3f} < {floor:.3f})"
                if best is not None and floor is not None
                else "no candidate reached the relevance floor"
            )
        else:
            why = "nothing matched the request"
    return {
        "status": status,
        "sent": sent,
        "belowFloor": len(below),
        "floor": round(float(floor), 6) if floor is not None else None,
        "best": round(float(best), 6) if best is not None else None,
        "why": why,
    }


def relevance_summary(
    history: HistoryRetrieval | None, project: ValidatedSearch | None
) -> dict[str, Any]:
    """The manifest's `relevance` section: `{history?, project?}`, each `{status, sent,
    belowFloor, floor, best, why}`. A scope that was not searched is absent. `sent` counts the
    hits the search returned (the planner may still leave some out for the budget: those are
    excluded items with their own reason); `belowFloor` counts the candidates listed as below
    the floor (at most `MAX_BELOW_FLOOR`); `floor` and `best` are on the scope's own score
    scale (None when nothing fell below the floor); `why` is None when something was sent,
    else a sentence, e.g. `no candidate reached the relevance floor (best 0.210 < 0.350)`."""
    summary: dict[str, Any] = {}
    if history is not None:
        summary["history"] = scope_relevance(history.status, len(history.hits), history.below_floor)
    if project is not None:
        found = project.retrieval
        summary["project"] = scope_relevance(found.status, len(found.hits), found.below_floor)
    return summary


def below_floor_of(
    history: HistoryRetrieval | None, project: ValidatedSearch | None
) -> list[BelowFloor]:
    """Every below-floor candidate of the plan's searches: history first, then project."""
    below: list[BelowFloor] = []
    if history is not None:
        below.extend(history.below_floor)
    if project is not None:
        below.extend(project.retrieval.below_floor)
    return below


__all__ = [
    "below_floor_of",
    "floor_items",
    "relevance_summary",
    "scope_relevance",
    "with_floor_exclusions",
]
