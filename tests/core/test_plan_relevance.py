"""The relevance floor in plans: below-floor candidates become excluded manifest items, and the
manifest's `relevance` section says per scope what was sent and, when nothing was, why.

Runs a real plan of the bundled real session on a real SQLite file; the history search is
wrapped so that its result carries below-floor candidates (whatever today's ranker finds).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ds4_core.cli.printers.retrieve import print_retrieve
from ds4_core.engine import ContextEngine
from ds4_core.engine import planning as engine_planning
from ds4_core.engine.relevance import floor_items, relevance_summary, with_floor_exclusions
from ds4_core.planner import ContextPlan
from ds4_core.requests import ManifestRequest, PlanRequest, RetrieveRequest, SessionRef
from ds4_core.retrieval import HistoryRetrieval
from ds4_core.retrieval.floor import BelowFloor

V1_LARGE = "pi-mono-v1-large-session.jsonl"


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[ContextEngine]:
    engine = ContextEngine(database_path=tmp_path / "context.db")
    yield engine
    engine.close()


def _below(n: int, kind: str = "history") -> tuple[BelowFloor, ...]:
    return tuple(
        BelowFloor(kind, f"s:e{i}", score=0.3 - i / 100, floor=0.35, tokens=40 + i)  # type: ignore[arg-type]
        for i in range(n)
    )


def _plan_with(
    engine: ContextEngine,
    pi_sessions_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    keep_hits: bool,
    below: tuple[BelowFloor, ...],
    in_context: int | None = None,
) -> dict[str, Any]:
    real = engine_planning.retrieve_history

    def wrapped(*args: Any, **kwargs: Any) -> HistoryRetrieval:
        found = real(*args, **kwargs)
        stats = found.stats
        if in_context is not None:
            stats = replace(stats, already_in_context=in_context)
        return replace(found, hits=found.hits if keep_hits else [], below_floor=below, stats=stats)

    monkeypatch.setattr(engine_planning, "retrieve_history", wrapped)
    ref = SessionRef(str(pi_sessions_dir / V1_LARGE))
    result = engine.plan(
        PlanRequest(session=ref, request="Write a haiku about the sea, please.")
    ).to_wire()
    manifest = engine.manifest(ManifestRequest(id=result["manifestId"], view="full")).to_wire()
    assert result["stats"]["excluded"] == sum(i.get("count", 1) for i in manifest["excluded"])
    return manifest


def test_below_floor_candidates_are_excluded_items_with_the_floor_as_reason(
    engine: ContextEngine, pi_sessions_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = _plan_with(engine, pi_sessions_dir, monkeypatch, keep_hits=False, below=_below(3))
    floor_excluded = [i for i in manifest["excluded"] if "relevance floor" in i["reason"]]
    assert [i["sourceId"] for i in floor_excluded] == ["s:e0", "s:e1", "s:e2"]
    assert floor_excluded[0] == {
        "kind": "history",
        "sourceId": "s:e0",
        "groupId": None,
        "classification": "normal",
        "tokens": 40,
        "score": 0.3,
        "reason": "below the relevance floor (0.300 < 0.350)",
    }
    assert not any(i["kind"] == "history" for i in manifest["included"])
    assert manifest["relevance"]["history"] == {
        "status": "ok",
        "sent": 0,
        "belowFloor": 3,
        "floor": 0.35,
        "best": 0.3,
        "why": "no candidate reached the relevance floor (best 0.300 < 0.350)",
    }


def test_relevance_says_nothing_matched_when_no_candidate_was_found(
    engine: ContextEngine, pi_sessions_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = _plan_with(
        engine, pi_sessions_dir, monkeypatch, keep_hits=False, below=(), in_context=0
    )
    history = manifest["relevance"]["history"]
    assert history["sent"] == 0 and history["floor"] is None
    assert history["why"] == "nothing matched the request"
    assert not any("relevance floor" in i["reason"] for i in manifest["excluded"])


def test_relevance_says_when_every_match_is_already_in_the_context(
    engine: ContextEngine, pi_sessions_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = _plan_with(
        engine, pi_sessions_dir, monkeypatch, keep_hits=False, below=(), in_context=3
    )
    assert manifest["relevance"]["history"]["why"] == "every match is already in the context"


def test_relevance_never_contradicts_its_numbers() -> None:
    """A below-floor entry may score over the floor when the request's best-ranked entries
    kept it shut; the relative rule names its own floor."""
    gate = (BelowFloor("history", "s:a", score=0.56, floor=0.4),)
    why = relevance_summary(HistoryRetrieval(status="ok", below_floor=gate), None)
    assert (
        why["history"]["why"]
        == "the best-ranked candidates stayed under the relevance floor (0.400)"
    )
    relative = (BelowFloor("history", "s:b", score=0.5, floor=0.7, rule="relative"),)
    why = relevance_summary(HistoryRetrieval(status="ok", below_floor=relative), None)
    assert why["history"]["why"] == "no candidate scored within 0.700 of the best"
    assert why["history"]["floor"] is None and why["history"]["best"] is None


def test_relevance_why_is_null_when_evidence_was_sent(
    engine: ContextEngine, pi_sessions_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = SessionRef(str(pi_sessions_dir / V1_LARGE))
    result = engine.plan(
        PlanRequest(
            session=ref, request="which patterns did we say user-message-selector.ts follows?"
        )
    ).to_wire()
    manifest = engine.manifest(ManifestRequest(id=result["manifestId"], view="full")).to_wire()
    history = manifest["relevance"]["history"]
    assert history["sent"] > 0 and history["why"] is None
    assert "project" not in manifest["relevance"]  # no workspace: the scope was not searched


def test_fallback_plans_list_no_floor_exclusions() -> None:
    plan = ContextPlan(mode="fallback", messages=[], included=[], excluded=[], estimated_tokens=0)
    assert with_floor_exclusions(plan, _below(2)) is plan


def test_floor_items_keep_order_and_clamp_tokens() -> None:
    below = (BelowFloor("project", "snip", score=1.23456789, floor=2.0, tokens=-5),)
    [item] = floor_items(below)
    assert (item.kind, item.source_id, item.tokens, item.score) == ("project", "snip", 0, 1.234568)
    assert item.reason == "below the relevance floor (1.235 < 2.000)"


def test_relevance_summary_reports_a_search_that_did_not_run() -> None:
    summary = relevance_summary(HistoryRetrieval(status="no-query"), None)
    assert summary == {
        "history": {
            "status": "no-query",
            "sent": 0,
            "belowFloor": 0,
            "floor": None,
            "best": None,
            "why": "the search did not run (no-query)",
        }
    }


def test_retrieve_answers_say_why_nothing_was_sent(
    engine: ContextEngine, pi_sessions_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = engine_planning.retrieve_history

    def wrapped(*args: Any, **kwargs: Any) -> HistoryRetrieval:
        return replace(real(*args, **kwargs), hits=[], below_floor=_below(2))

    monkeypatch.setattr(engine_planning, "retrieve_history", wrapped)
    ref = SessionRef(str(pi_sessions_dir / V1_LARGE))
    result = engine.retrieve(RetrieveRequest(session=ref, query="Write a haiku about the sea."))
    assert result.history == ()
    wire = result.to_wire()
    assert wire["relevance"]["history"]["why"] == (
        "no candidate reached the relevance floor (best 0.300 < 0.350)"
    )
    assert "project" not in wire["relevance"]  # the project scope was not asked for
    out = io.StringIO()
    print_retrieve(result, out)
    assert "History: nothing sent: no candidate reached the relevance floor" in out.getvalue()
