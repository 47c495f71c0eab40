"""Budgets, atomic groups and the managed-context planner (docs/reference.md §3.4-§3.7)."""

from ds4_core.planner.budget import (
    ADAPTIVE_CEILINGS,
    OVERRIDE_FIELDS,
    ContextBudget,
    ModelProfile,
    adaptive_ceilings,
    calculate_budget,
    default_safety_margin,
    profile_with_overrides,
    resolve_overrides,
)
from ds4_core.planner.groups import (
    AtomicGroup,
    build_atomic_groups,
    selection_problems,
    tool_call_ids,
    tool_links,
    tool_result_id,
    validate_atomic_selection,
)
from ds4_core.planner.planner import (
    PRIORITIES,
    ContextPlan,
    PlanItem,
    Supplement,
    fallback_plan,
    plan_context,
)

__all__ = [
    "ADAPTIVE_CEILINGS",
    "OVERRIDE_FIELDS",
    "PRIORITIES",
    "AtomicGroup",
    "ContextBudget",
    "ContextPlan",
    "ModelProfile",
    "PlanItem",
    "Supplement",
    "adaptive_ceilings",
    "build_atomic_groups",
    "calculate_budget",
    "default_safety_margin",
    "fallback_plan",
    "plan_context",
    "profile_with_overrides",
    "resolve_overrides",
    "selection_problems",
    "tool_call_ids",
    "tool_links",
    "tool_result_id",
    "validate_atomic_selection",
]
