"""The model keys of `modelAwareness.overrides` and `nativeContinuation.profiles`: a provider
without `/`, `*` or white space, then `*` or a model id (which may hold `/` and `:`); a key with
a stray space or a wildcard elsewhere never matches any model, so it is refused, naming it."""

from __future__ import annotations

import pytest

from ds4_core.config import DEFAULT_CONFIG


@pytest.mark.parametrize(
    "key", ["openai/*", "openai/gpt-5", "openrouter/anthropic/claude-sonnet-4", "ollama/qwen3:8b"]
)
def test_model_keys_that_name_models_are_taken(key: str) -> None:
    config, warnings = DEFAULT_CONFIG.with_settings(
        {"nativeContinuation": {"profiles": [key]}, "modelAwareness": {"overrides": {key: {}}}}
    )
    assert warnings == []
    assert config.native_continuation.profiles == (key,)
    assert key in config.model_awareness.overrides


@pytest.mark.parametrize(
    "key", ["*/*", "*/gpt-5", "openai/ gpt-5", "open ai/x", "a/b*", "a/", "/b"]
)
def test_model_keys_that_match_nothing_are_refused_naming_them(key: str) -> None:
    for settings, name in (
        ({"nativeContinuation": {"profiles": [key]}}, "nativeContinuation.profiles"),
        ({"modelAwareness": {"overrides": {key: {}}}}, "modelAwareness.overrides"),
    ):
        config, warnings = DEFAULT_CONFIG.with_settings(settings)
        assert len(warnings) == 1 and name in warnings[0] and repr(key) in warnings[0], warnings
        assert config == DEFAULT_CONFIG
