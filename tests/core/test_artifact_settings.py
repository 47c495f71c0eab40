"""`artifacts.*` settings (core/ds4_core/config.py): defaults, ranges and the cross-field rules
of docs/reference.md §2 (excerpts fit the inline limit, search bytes fit artifact bytes)."""

from __future__ import annotations

from typing import Any

import pytest

from ds4_core.config import DEFAULT_CONFIG


def test_defaults_are_the_references() -> None:
    artifacts = DEFAULT_CONFIG.artifacts
    assert artifacts.enabled is True
    assert artifacts.max_inline_tool_result_chars == 12000
    assert artifacts.excerpt_chars == 6000
    assert (artifacts.max_artifact_bytes, artifacts.max_search_bytes) == (100_000_000, 50_000_000)
    assert artifacts.max_search_matches == 12


@pytest.mark.parametrize(
    ("settings", "rule"),
    [
        ({"maxInlineToolResultChars": 999}, "expected an integer >= 1000"),
        ({"maxSearchMatches": 0}, "expected an integer >= 1"),
        ({"maxSearchMatches": 101}, "expected an integer <= 100"),
        ({"excerptChars": -1}, "expected an integer >= 0"),
        ({"enabled": "yes"}, "expected true or false"),
        ({"excerptChars": 12001}, "excerptChars must be <= maxInlineToolResultChars"),
        ({"maxInlineToolResultChars": 5000}, "excerptChars must be <= maxInlineToolResultChars"),
        ({"maxSearchBytes": 100_000_001}, "maxSearchBytes must be <= maxArtifactBytes"),
        ({"maxArtifactBytes": 1000}, "maxSearchBytes must be <= maxArtifactBytes"),
    ],
)
def test_a_bad_value_is_ignored_naming_the_rule(settings: dict[str, Any], rule: str) -> None:
    config, warnings = DEFAULT_CONFIG.with_settings({"artifacts": settings})
    assert config.artifacts == DEFAULT_CONFIG.artifacts
    assert len(warnings) == 1 and rule in warnings[0]
    assert f"artifacts.{next(iter(settings))}" in warnings[0]


def test_both_sides_of_a_rule_may_move_together() -> None:
    config, warnings = DEFAULT_CONFIG.with_settings(
        {"artifacts": {"maxInlineToolResultChars": 2000, "excerptChars": 1500}}
    )
    assert warnings == []
    assert (config.artifacts.max_inline_tool_result_chars, config.artifacts.excerpt_chars) == (
        2000,
        1500,
    )
