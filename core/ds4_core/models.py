"""Context windows of well-known models, used when neither the request, `--context-window`
nor `modelAwareness.overrides` gives one.

Figures are the providers' published limits (Anthropic "Models overview", OpenAI model pages,
Google Gemini API "Models", DeepSeek API docs; read 2025-2026). A model id matches an entry when
the entry's key occurs in it at a word start (longest key first), so `us.anthropic.claude-opus-4-6-v1` and
`claude-sonnet-4-5-20250929` resolve to their families. Unknown models get
`DEFAULT_CONTEXT_WINDOW` and the plan says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_CONTEXT_WINDOW = 128_000
"""Tokens assumed for an unknown model: the smallest window common to current frontier models."""


@dataclass(frozen=True)
class KnownModel:
    """A model family's limits in tokens."""

    key: str
    context_window: int
    max_output_tokens: int


KNOWN_MODELS: tuple[KnownModel, ...] = (
    KnownModel("claude-opus-4", 200_000, 32_000),
    KnownModel("claude-sonnet-4", 200_000, 64_000),
    KnownModel("claude-haiku-4", 200_000, 64_000),
    KnownModel("claude-3-7-sonnet", 200_000, 64_000),
    KnownModel("claude-3-5-sonnet", 200_000, 8_192),
    KnownModel("claude-3-5-haiku", 200_000, 8_192),
    KnownModel("gpt-5", 400_000, 128_000),
    KnownModel("gpt-4.1", 1_047_576, 32_768),
    KnownModel("gpt-4o", 128_000, 16_384),
    KnownModel("o3", 200_000, 100_000),
    KnownModel("o4-mini", 200_000, 100_000),
    KnownModel("gemini-2.5-pro", 1_048_576, 65_536),
    KnownModel("gemini-2.5-flash", 1_048_576, 65_536),
    KnownModel("deepseek-chat", 128_000, 8_192),
    KnownModel("deepseek-reasoner", 128_000, 64_000),
)

_BY_LENGTH = sorted(KNOWN_MODELS, key=lambda m: len(m.key), reverse=True)


def lookup_model(model_id: str | None) -> KnownModel | None:
    """The entry whose key starts a word of `model_id` (case-insensitive), longest key first."""
    if not model_id:
        return None
    lowered = model_id.lower()
    for model in _BY_LENGTH:
        if re.search(r"(?:^|[^a-z0-9])" + re.escape(model.key), lowered):
            return model
    return None
