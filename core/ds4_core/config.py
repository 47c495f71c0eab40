"""Settings: defaults, validation and merging (key names of docs/reference.md §2).

One module: each setting's default, validator and typed field are kept side by side (a key
cannot exist without its rule and its field; `_build_sections` checks it at import).

Settings are a flat mapping from dotted keys (`context.maxProjectTokens`) to values. Nested
objects from a client (`{"context": {"maxProjectTokens": 1}}`) are flattened first. A value
that fails validation is ignored with a warning naming the key, the value and the rule; the
default (or the previously valid value) stays. Unknown keys give a warning too. Nothing here
raises on user input.

Code reads settings through the typed, frozen sections of a validated `Config`
(`config.context.recent_tail_tokens`, `config.project.max_file_bytes`, `config.enabled`): one
dataclass per section of the dotted keys, snake_case fields, built once when the Config is
created. `config["context.recentTailTokens"]` (the dotted-key mapping) stays for this module's
validation layer only; a test (tests/core/test_config_sections.py) fails on dotted-key lookups
elsewhere.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from .json_bounds import ECHO_CHARS, bounded_text, echo
from .privacy.levels import LEVELS

Validator = Callable[[Any], str | None]
"""Returns None when the value is valid, else a sentence saying what is expected."""


def _bool(value: Any) -> str | None:
    return None if isinstance(value, bool) else "expected true or false"


def _int_range(lo: int | None = None, hi: int | None = None) -> Validator:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return "expected an integer"
        if lo is not None and value < lo:
            return f"expected an integer >= {lo}"
        if hi is not None and value > hi:
            return f"expected an integer <= {hi}"
        return None

    return check


def _ratio(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return "expected a number in (0, 1]"
    return None if 0 < value <= 1 else "expected a number in (0, 1]"


def _number_range(lo: float, hi: float) -> Validator:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            return f"expected a number in {lo}..{hi}"
        return None if lo <= value <= hi else f"expected a number in {lo}..{hi}"

    return check


def _choice(*options: str) -> Validator:
    def check(value: Any) -> str | None:
        return None if value in options else "expected one of " + ", ".join(options)

    return check


def _false(value: Any) -> str | None:
    return None if value is False else "expected false"


def _non_empty_string(value: Any) -> str | None:
    return None if isinstance(value, str) and value.strip() else "expected a non-empty string"


def _provider_list(value: Any) -> str | None:
    """`privacy.localProviders`: a non-empty list of provider ids, no duplicates ignoring case
    (docs/reference.md §2)."""
    if not isinstance(value, list) or not value:
        return "expected a non-empty list of provider ids"
    seen: set[str] = set()
    for item in value:
        if not isinstance(item, str) or not item.strip() or item != item.strip():
            return f"{echo(item)}: expected a provider id without surrounding spaces"
        if item.casefold() in seen:
            return f"{echo(item)} is listed twice (ids are compared ignoring case)"
        seen.add(item.casefold())
    return None


def _remote_levels(value: Any) -> str | None:
    """A list of levels a remote provider may see: no `local-only`, no duplicates."""
    if not isinstance(value, list):
        return "expected a list of levels (normal, internal, sensitive)"
    for item in value:
        if item not in LEVELS:
            return f"{echo(item)} is not a level (normal, internal, sensitive, local-only)"
        if item == "local-only":
            return "local-only content never goes to a remote provider"
    if len(set(value)) != len(value):
        return "a level is listed twice"
    return None


def _remote_providers(value: Any) -> str | None:
    """`privacy.remoteProviders`: provider id -> list of levels it may see."""
    if not isinstance(value, dict):
        return "expected an object mapping provider ids to lists of levels"
    seen: set[str] = set()
    for key, levels in value.items():
        if not isinstance(key, str) or not key.strip() or key != key.strip():
            return f"key {echo(key)} must be a provider id without surrounding spaces"
        if key.casefold() in seen:
            return f"{echo(key)} is listed twice (ids are compared ignoring case)"
        seen.add(key.casefold())
        problem = _remote_levels(levels)
        if problem:
            return f"{echo(key)}: {problem}"
    return None


_OVERRIDE_FIELDS = {
    "contextWindow": (1, 10_000_000),
    "maxOutputTokens": (1, 10_000_000),
    "safetyMarginTokens": (0, 10_000_000),
    "recentTailTokens": (0, 10_000_000),
    "maxRetrievedHistoryTokens": (0, 10_000_000),
    "maxProjectTokens": (0, 10_000_000),
}
_OVERRIDE_FLAGS = frozenset({"autoTune"})
"""Override fields that are true or false (`autoTune`, docs/model-awareness.md)."""


def _overrides(value: Any) -> str | None:
    """`modelAwareness.overrides`: keys `*`, `provider/*` or `provider/model`
    (docs/reference.md §2). The problem quotes keys through `json_bounds.echo` (a 10 MB key is
    named in 80 characters)."""
    if not isinstance(value, dict):
        return "expected an object mapping '*', 'provider/*' or 'provider/model' to limits"
    for key, limits in value.items():
        if not isinstance(key, str) or not (key == "*" or _is_model_key(key)):
            return f"key {echo(key)} must be '*', 'provider/*' or 'provider/model'"
        if not isinstance(limits, dict):
            return f"{echo(key)}: expected an object of limits"
        for name, limit in limits.items():
            if name in _OVERRIDE_FLAGS:
                if not isinstance(limit, bool):
                    return f"{echo(key)}.{name}: expected true or false"
                continue
            if name not in _OVERRIDE_FIELDS:
                known = ", ".join([*_OVERRIDE_FIELDS, *sorted(_OVERRIDE_FLAGS)])
                return f"{echo(key)}: unknown field {echo(name)} (known: {known})"
            lo, hi = _OVERRIDE_FIELDS[name]
            if isinstance(limit, bool) or not isinstance(limit, int) or not lo <= limit <= hi:
                return f"{echo(key)}.{name}: expected an integer in {lo}..{hi}"
        window, output = limits.get("contextWindow"), limits.get("maxOutputTokens")
        if isinstance(window, int) and isinstance(output, int) and output > window:
            return f"{echo(key)}: maxOutputTokens must not exceed contextWindow"
    return None


_SPACE_OR_STAR = re.compile(r"[\s*]")


def _is_model_key(key: str) -> bool:
    """`provider/model` or `provider/*`: a provider without `/`, `*` or white space, then a
    model that is `*` or has neither `*` nor white space (it may hold `/` and `:`, as
    `openrouter/anthropic/claude-sonnet-4` and `ollama/qwen3:8b` do)."""
    provider, slash, model = key.partition("/")
    if not slash or not provider or _SPACE_OR_STAR.search(provider):
        return False
    return model == "*" or bool(model) and not _SPACE_OR_STAR.search(model)


def _continuation_profiles(value: Any) -> str | None:
    """`nativeContinuation.profiles`: a non-empty list of `provider/model` or `provider/*`, no
    global `*`, no duplicates (docs/configuration.md)."""
    if not isinstance(value, list) or not value:
        return "expected a non-empty list of 'provider/model' or 'provider/*'"
    seen: set[str] = set()
    for item in value:
        if not isinstance(item, str) or not _is_model_key(item):
            return f"{echo(item)}: expected 'provider/model' or 'provider/*' (no global '*')"
        if item in seen:
            return f"{echo(item)} is listed twice"
        seen.add(item)
    return None


@dataclass(frozen=True)
class SettingSpec:
    """One setting: its default, its validator and a one-line description for the docs."""

    default: Any
    validate: Validator
    doc: str


SETTINGS: dict[str, SettingSpec] = {
    "enabled": SettingSpec(True, _bool, "Turn the engine off entirely (plans fall back)."),
    "context.mode": SettingSpec(
        "managed",
        _choice("managed", "observer"),
        "managed: plans change the messages; observer: record only.",
    ),
    "context.targetFillRatio": SettingSpec(0.7, _ratio, "Preferred share of the window to fill."),
    "context.softLimitRatio": SettingSpec(0.8, _ratio, "Soft limit as a share of the window."),
    "context.hardLimitRatio": SettingSpec(0.9, _ratio, "Hard limit as a share of the window."),
    "context.minimumOutputReserve": SettingSpec(
        8192, _int_range(0), "Tokens always left for the answer."
    ),
    "context.preferredOutputReserve": SettingSpec(
        32768, _int_range(0), "Tokens preferably left for the answer."
    ),
    "context.recentTailTokens": SettingSpec(
        64000, _int_range(0), "Budget of the verbatim recent tail."
    ),
    "context.rescueImmediatePredecessor": SettingSpec(
        True, _bool, "Keep the turn just before the tail if it only overflows the tail cap."
    ),
    "context.maxPinnedTokens": SettingSpec(16000, _int_range(0), "Cap for pinned content."),
    "context.maxMemoryTokens": SettingSpec(8000, _int_range(0), "Cap for durable memory."),
    "context.maxRetrievedHistoryTokens": SettingSpec(
        16000, _int_range(0), "Cap for historical evidence."
    ),
    "context.maxProjectTokens": SettingSpec(20000, _int_range(0), "Cap for project snippets."),
    "context.maxSummaryTokens": SettingSpec(12000, _int_range(0), "Cap for compaction summaries."),
    "retrieval.exact": SettingSpec(True, _bool, "Literal search for identifiers and phrases."),
    "retrieval.fts": SettingSpec(True, _bool, "FTS5 bm25 search."),
    "retrieval.semantic": SettingSpec(
        False, _false, "Semantic retrieval; not implemented in this version, must stay false."
    ),
    "retrieval.maxResults": SettingSpec(
        12, _int_range(1, 100), "Most historical hits per request."
    ),
    "project.enabled": SettingSpec(
        True, _bool, "Project knowledge from trusted workspace files (never when untrusted)."
    ),
    "project.maxFiles": SettingSpec(10000, _int_range(1, 100000), "Most files indexed."),
    "project.maxFileBytes": SettingSpec(512000, _int_range(0), "Largest file indexed (bytes)."),
    "project.maxTotalBytes": SettingSpec(
        50_000_000, _int_range(0), "Most bytes indexed over all files."
    ),
    "project.maxResults": SettingSpec(8, _int_range(1, 100), "Most project snippets per request."),
    "project.maxCommits": SettingSpec(
        5000, _int_range(0, 100000), "Newest commits of HEAD indexed per folder (0: no history)."
    ),
    "compaction.enabled": SettingSpec(
        True, _bool, "Serve ds4/compact (false: requests get an error, Pi compacts natively)."
    ),
    "compaction.keepRecentTokens": SettingSpec(
        20000,
        _int_range(0),
        "Recent tokens kept verbatim when ds4/compact derives the span (Pi's default, 20000).",
    ),
    "compaction.summaryTokenLimit": SettingSpec(
        4000,
        _int_range(256, 100000),
        "Largest summary node (tokens); the active root never exceeds it.",
    ),
    "compaction.maxRequestInputTokens": SettingSpec(
        64000,
        _int_range(100),
        "Largest ds4/summarize prompt (tokens); a larger span is summarized offline.",
    ),
    "compaction.summarizeTimeoutMs": SettingSpec(
        120000, _int_range(100, 3600000), "How long to wait for the client's ds4/summarize."
    ),
    "modelAwareness.enabled": SettingSpec(
        True, _bool, "Use adaptive ceilings by context window and calibrate from usage reports."
    ),
    "modelAwareness.overrides": SettingSpec(
        {}, _overrides, "Per-model limits keyed '*', 'provider/*' or 'provider/model'."
    ),
    "modelAwareness.calibrationWindow": SettingSpec(
        24, _int_range(3, 200), "Newest usage samples per model that calibration looks at."
    ),
    "modelAwareness.minimumCalibrationSamples": SettingSpec(
        3, _int_range(1, 200), "Accepted samples before a model counts as calibrated."
    ),
    "modelAwareness.calibrationRatioLowerBound": SettingSpec(
        0.5, _number_range(0.25, 4.0), "Smallest actual/estimated ratio kept as a sample."
    ),
    "modelAwareness.calibrationRatioUpperBound": SettingSpec(
        2.0, _number_range(0.25, 4.0), "Largest actual/estimated ratio kept as a sample."
    ),
    "privacy.enabled": SettingSpec(
        True,
        _bool,
        "Classify, withhold and redact what leaves for a model (on by default; DS4's is off).",
    ),
    "privacy.defaultClassification": SettingSpec(
        "normal", _choice(*LEVELS), "Level of text without markers (lower case)."
    ),
    "privacy.localProviders": SettingSpec(
        ["faux", "ollama", "llama-cpp", "lmstudio"],
        _provider_list,
        "Providers that run locally and may see every level (ids compared ignoring case).",
    ),
    "privacy.remoteDefaultAllowed": SettingSpec(
        ["normal", "internal"], _remote_levels, "Levels any other (remote) provider may see."
    ),
    "privacy.remoteProviders": SettingSpec(
        {}, _remote_providers, "Levels a named remote provider may see, instead of the default."
    ),
    "privacy.redactSecrets": SettingSpec(
        True, _bool, "Redact secrets (keys, tokens, passwords) for remote providers."
    ),
    "diagnostics.storeContextManifest": SettingSpec(
        True, _bool, "Store manifests in the database."
    ),
    "diagnostics.logLevel": SettingSpec(
        "info",
        _choice("error", "warn", "info", "debug", "trace"),
        "Log verbosity (stderr / window/logMessage).",
    ),
    "storage.databasePath": SettingSpec(
        None, _non_empty_string, "Database file (overridden by databasePath/--db/DS4_DB)."
    ),
    "storage.busyTimeoutMs": SettingSpec(5000, _int_range(1, 60000), "SQLite busy timeout."),
    "server.maxMessageBytes": SettingSpec(
        32 * 1024 * 1024,
        _int_range(4096, 1 << 30),
        "Largest LSP message body the server reads (bytes); larger ones are skipped.",
    ),
    "nativeContinuation.enabled": SettingSpec(
        False, _bool, "Decide delta or full replay for stateful APIs (needs allowProviderStorage)."
    ),
    "nativeContinuation.allowProviderStorage": SettingSpec(
        False, _bool, "Consent to the provider storing responses (`store: true`)."
    ),
    "nativeContinuation.profiles": SettingSpec(
        ["openai/*"], _continuation_profiles, "Models continued: 'provider/model' or 'provider/*'."
    ),
    "nativeContinuation.maxStateAgeMs": SettingSpec(
        1_800_000, _int_range(10_000, 86_400_000), "Oldest continuation state used (ms)."
    ),
    "nativeContinuation.retryManagedReplay": SettingSpec(
        True, _bool, "A client retries once with a full replay after a stale-handle error."
    ),
    # artifacts.* (docs/artifacts.md): large tool results stored aside, condensed for the model.
    "artifacts.enabled": SettingSpec(True, _bool, "Offload large tool results to artifacts."),
    "artifacts.maxInlineToolResultChars": SettingSpec(
        12000, _int_range(1000), "Largest tool result sent whole (characters)."
    ),
    "artifacts.excerptChars": SettingSpec(
        6000, _int_range(0), "Head and tail excerpt budget of a condensed result (characters)."
    ),
    "artifacts.maxArtifactBytes": SettingSpec(
        100_000_000, _int_range(1), "Largest tool result stored as an artifact (bytes)."
    ),
    "artifacts.maxSearchBytes": SettingSpec(
        50_000_000, _int_range(1), "Largest artifact searched (bytes)."
    ),
    "artifacts.maxSearchMatches": SettingSpec(
        12, _int_range(1, 100), "Most matches an artifact search returns."
    ),
    # memory.* (docs/memory.md): pins and memory written, planned and rendered.
    "memory.enabled": SettingSpec(True, _bool, "Plan pins and memory items into managed plans."),
    "memory.maxPinChars": SettingSpec(4000, _int_range(1, 20000), "Longest pin (characters)."),
    "memory.maxClaimChars": SettingSpec(2000, _int_range(1, 20000), "Longest claim (characters)."),
    "memory.maxResults": SettingSpec(12, _int_range(1, 100), "Most memory items in one plan."),
}


def flatten_settings(raw: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested settings objects into dotted keys.

    Objects are flattened until a known key is reached, so `modelAwareness.overrides` keeps its
    map value. `{"context": {"mode": "observer"}}` becomes `{"context.mode": "observer"}`.
    """
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        if dotted not in SETTINGS and isinstance(value, Mapping):
            flat.update(flatten_settings(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def _shown(value: Any) -> str:
    """A setting's value as the user wrote it: JSON (`true`, `"many"`, `{"a/*": {...}}`), or
    Python's repr for a value JSON cannot express; cut to `json_bounds.ECHO_CHARS`
    characters (`...` and the length when cut) and escaped like `json_bounds.bounded_text`."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    if len(text) <= ECHO_CHARS:
        return bounded_text(text)
    return f"{bounded_text(text)} ({len(text)} characters)"


# Typed sections. One frozen dataclass per section of the dotted keys; the field names are the
# keys' last parts in snake_case (`context.recentTailTokens` -> `recent_tail_tokens`).
# `_build_sections` fills them from the validated values, so a key without a field (or a field
# without a key) fails when this module is imported.


@dataclass(frozen=True, slots=True)
class ContextSettings:
    """`context.*`: how full the window gets and the caps of each part of a plan."""

    mode: Literal["managed", "observer"]
    """managed: plans change the messages; observer: plans are recorded, the messages kept."""
    target_fill_ratio: float
    """Preferred share of the context window to fill, in (0, 1]."""
    soft_limit_ratio: float
    """Soft limit as a share of the window, in (0, 1]; >= target_fill_ratio."""
    hard_limit_ratio: float
    """Hard limit as a share of the window, in (0, 1]; >= soft_limit_ratio."""
    minimum_output_reserve: int
    """Tokens always left for the answer."""
    preferred_output_reserve: int
    """Tokens preferably left for the answer (>= minimum_output_reserve)."""
    recent_tail_tokens: int
    """Budget of the verbatim recent tail, in tokens."""
    rescue_immediate_predecessor: bool
    """Keep the turn just before the tail when it only overflows the tail cap."""
    max_pinned_tokens: int
    """Cap for pinned content, in tokens."""
    max_memory_tokens: int
    """Cap for durable memory, in tokens."""
    max_retrieved_history_tokens: int
    """Cap for historical evidence, in tokens."""
    max_project_tokens: int
    """Cap for project snippets, in tokens."""
    max_summary_tokens: int
    """Cap for compaction summaries in plans, in tokens (0 keeps summaries out of plans)."""


@dataclass(frozen=True, slots=True)
class RetrievalSettings:
    """`retrieval.*`: which history searches run and how many hits they give."""

    exact: bool
    """Literal search for identifiers and phrases."""
    fts: bool
    """FTS5 bm25 search."""
    semantic: Literal[False]
    """Semantic retrieval; not implemented, always False."""
    max_results: int
    """Most historical hits per request (1..100)."""


@dataclass(frozen=True, slots=True)
class ProjectSettings:
    """`project.*`: project knowledge from trusted workspace files."""

    enabled: bool
    """Index and search trusted workspace files (never when untrusted)."""
    max_files: int
    """Most files listed and indexed (1..100000)."""
    max_file_bytes: int
    """Largest file indexed, in bytes."""
    max_total_bytes: int
    """Most bytes indexed over all files."""
    max_results: int
    """Most project snippets per request (1..100)."""
    max_commits: int
    """Newest commits of HEAD whose message and changed paths are indexed per Git folder
    (0..100000; 0 turns the Git history off: no `git log` runs, the `git` scope is
    `disabled`)."""


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """`compaction.*`: `ds4/compact` and its summaries."""

    enabled: bool
    """Serve ds4/compact (False: requests get an error, Pi compacts natively)."""
    keep_recent_tokens: int
    """Recent tokens kept verbatim when ds4/compact derives the span."""
    summary_token_limit: int
    """Largest summary node, in tokens (256..100000)."""
    max_request_input_tokens: int
    """Largest ds4/summarize prompt, in tokens; a larger span is summarized offline."""
    summarize_timeout_ms: int
    """How long to wait for the client's ds4/summarize, in milliseconds."""


@dataclass(frozen=True, slots=True)
class ModelAwarenessSettings:
    """`modelAwareness.*`: adaptive ceilings and per-model limits."""

    enabled: bool
    """Use adaptive ceilings by context window and apply `overrides`."""
    overrides: Mapping[str, Mapping[str, int]]
    """Per-model limits (tokens) keyed '*', 'provider/*' or 'provider/model'; read-only
    mappings of the validated fields of `_OVERRIDE_FIELDS` (`contextWindow`, ...) and
    `autoTune` (a bool)."""
    calibration_window: int
    """Newest usage samples per provider/model/estimator that calibration reads (3..200)."""
    minimum_calibration_samples: int
    """Accepted samples needed before the ratio is applied (1..calibration_window)."""
    calibration_ratio_lower_bound: float
    """Smallest actual/estimated ratio kept; also the applied ratio's floor (0.25..4)."""
    calibration_ratio_upper_bound: float
    """Largest actual/estimated ratio kept; also the applied ratio's ceiling (0.25..4)."""


@dataclass(frozen=True, slots=True)
class PrivacySettings:
    """`privacy.*`: classification, destinations and secret redaction (docs/privacy.md)."""

    enabled: bool
    """Classify, withhold and redact what leaves for a model."""
    default_classification: Literal["normal", "internal", "sensitive", "local-only"]
    """Level of text without markers."""
    local_providers: tuple[str, ...]
    """Provider ids that are local (compared ignoring case); they may see every level."""
    remote_default_allowed: tuple[str, ...]
    """Levels a remote provider not in `remote_providers` may see."""
    remote_providers: Mapping[str, tuple[str, ...]]
    """Remote provider id -> the levels it may see (read-only)."""
    redact_secrets: bool
    """Redact secrets for remote providers."""


@dataclass(frozen=True, slots=True)
class DiagnosticsSettings:
    """`diagnostics.*`: manifests and logging."""

    store_context_manifest: bool
    """Store manifests in the database (False: a bounded in-memory window only)."""
    log_level: Literal["error", "warn", "info", "debug", "trace"]
    """Server log verbosity (stderr / window/logMessage)."""


@dataclass(frozen=True, slots=True)
class StorageSettings:
    """`storage.*`: read when the database is opened."""

    database_path: str | None
    """Database file (overridden by databasePath/--db/DS4_DB); None: the default location."""
    busy_timeout_ms: int
    """SQLite busy timeout, in milliseconds."""


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """`server.*`: the LSP transport."""

    max_message_bytes: int
    """Largest LSP message body the server reads, in bytes; larger ones are skipped."""


@dataclass(frozen=True, slots=True)
class NativeContinuationSettings:
    """`nativeContinuation.*`: the delta-or-replay decision for stateful provider APIs
    (docs/model-awareness.md "Native continuation"). Off unless both `enabled` and
    `allow_provider_storage` are True."""

    enabled: bool
    """Decide `delta` or `full` for eligible plans (continuation stays off without
    `allow_provider_storage`)."""
    allow_provider_storage: bool
    """The user consents to the provider keeping responses (`store: true`)."""
    profiles: tuple[str, ...]
    """Models continued: `provider/model` or `provider/*` (never a global `*`)."""
    max_state_age_ms: int
    """Oldest continuation state still used, in milliseconds (10000..86400000)."""
    retry_managed_replay: bool
    """Advice to clients: after a stale-handle error before streaming, retry once in full."""

    @property
    def active(self) -> bool:
        """Both `enabled` and `allow_provider_storage`."""
        return self.enabled and self.allow_provider_storage


@dataclass(frozen=True, slots=True)
class ArtifactSettings:
    """`artifacts.*`: large tool results kept in the artifact store and condensed in the
    provider-facing copy of a plan (docs/artifacts.md)."""

    enabled: bool
    """Offload tool results longer than `max_inline_tool_result_chars` (managed plans only)."""
    max_inline_tool_result_chars: int
    """Largest combined tool-result text sent whole, in characters (>= 1000)."""
    excerpt_chars: int
    """Characters of head and tail excerpts together in a condensed block
    (<= `max_inline_tool_result_chars`)."""
    max_artifact_bytes: int
    """Largest tool result stored, in UTF-8 bytes; a larger one is condensed without a stored
    object."""
    max_search_bytes: int
    """Largest artifact searched, in bytes (<= `max_artifact_bytes`)."""
    max_search_matches: int
    """Most matches one artifact search returns (1..100)."""


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """`memory.*`: pins and memory items (docs/memory.md)."""

    enabled: bool
    """Plan active pins and memory items into managed session plans."""
    max_pin_chars: int
    """Longest pin content `ds4/pin` accepts, in characters (1..20000)."""
    max_claim_chars: int
    """Longest claim `ds4/remember` accepts, in characters (1..20000)."""
    max_results: int
    """Most memory items one plan includes (1..100); pins are not counted."""


SECTIONS: dict[str, type] = {
    "context": ContextSettings,
    "retrieval": RetrievalSettings,
    "project": ProjectSettings,
    "compaction": CompactionSettings,
    "modelAwareness": ModelAwarenessSettings,
    "privacy": PrivacySettings,
    "diagnostics": DiagnosticsSettings,
    "storage": StorageSettings,
    "server": ServerSettings,
    "nativeContinuation": NativeContinuationSettings,
    "artifacts": ArtifactSettings,
    "memory": MemorySettings,
}
"""Section prefix of the dotted keys -> its typed dataclass (attribute `snake_name(prefix)`)."""


def snake_name(camel: str) -> str:
    """`maxFileBytes` -> `max_file_bytes`, `modelAwareness` -> `model_awareness`."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower()


def typed_attribute(key: str) -> str:
    """The attribute path of a dotted key on a Config: `context.recentTailTokens` ->
    `context.recent_tail_tokens`, `enabled` -> `enabled`. Raises KeyError for an unknown key."""
    if key not in SETTINGS:
        raise KeyError(key)
    return ".".join(snake_name(part) for part in key.split("."))


def _frozen_overrides(value: Mapping[str, Mapping[str, int]]) -> Mapping[str, Mapping[str, int]]:
    return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in value.items()})


_TYPED: dict[str, Callable[[Any], Any]] = {
    "context.targetFillRatio": float,
    "context.softLimitRatio": float,
    "context.hardLimitRatio": float,
    "modelAwareness.overrides": _frozen_overrides,
    "modelAwareness.calibrationRatioLowerBound": float,
    "modelAwareness.calibrationRatioUpperBound": float,
    "privacy.localProviders": tuple,
    "nativeContinuation.profiles": tuple,
    "privacy.remoteDefaultAllowed": tuple,
    "privacy.remoteProviders": lambda value: MappingProxyType(
        {key: tuple(levels) for key, levels in value.items()}
    ),
}
"""Conversions from a validated value to its field's type (the rest are stored as they are)."""


def _build_sections(values: Mapping[str, Any]) -> dict[str, Any]:
    """Attribute name -> typed value or section for a complete validated `values`.

    Raises KeyError when `values` lacks a key of SETTINGS, TypeError when a section's fields
    and the keys of its prefix differ.
    """
    grouped: dict[str, dict[str, Any]] = {prefix: {} for prefix in SECTIONS}
    top: dict[str, Any] = {}
    for key in SETTINGS:
        value = _TYPED.get(key, _identity)(values[key])
        prefix, _, name = key.rpartition(".")
        (grouped[prefix] if prefix else top)[snake_name(name)] = value
    for prefix, section in SECTIONS.items():
        top[snake_name(prefix)] = section(**grouped[prefix])
    return top


def _identity(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Config:
    """Validated settings, immutable and shared across threads.

    Read them through the typed sections: `config.enabled`, `config.context`,
    `config.retrieval`, `config.project`, `config.compaction`, `config.model_awareness`,
    `config.privacy`, `config.diagnostics`, `config.storage`, `config.server`,
    `config.native_continuation`, `config.artifacts`, `config.memory` (e.g.
    `config.context.recent_tail_tokens`), built once in `__post_init__`. `values` (and
    `config["context.recentTailTokens"]`) is the flat dotted-key mapping of the validation
    layer in this module; code elsewhere uses the sections. `values` must hold every key of
    SETTINGS (KeyError otherwise): build a Config with `DEFAULT_CONFIG.with_settings`.
    """

    values: Mapping[str, Any] = field(
        default_factory=lambda: {k: s.default for k, s in SETTINGS.items()}
    )
    rejected_privacy: frozenset[str] = field(default=frozenset(), compare=False)
    """`privacy.*` keys whose latest value was rejected (until a valid one is given): privacy
    then withholds more, not less (`privacy.policy.destination`)."""
    enabled: bool = field(init=False, repr=False, compare=False)
    """Turn the engine off entirely (plans fall back to the original messages)."""
    context: ContextSettings = field(init=False, repr=False, compare=False)
    retrieval: RetrievalSettings = field(init=False, repr=False, compare=False)
    project: ProjectSettings = field(init=False, repr=False, compare=False)
    compaction: CompactionSettings = field(init=False, repr=False, compare=False)
    model_awareness: ModelAwarenessSettings = field(init=False, repr=False, compare=False)
    privacy: PrivacySettings = field(init=False, repr=False, compare=False)
    diagnostics: DiagnosticsSettings = field(init=False, repr=False, compare=False)
    storage: StorageSettings = field(init=False, repr=False, compare=False)
    server: ServerSettings = field(init=False, repr=False, compare=False)
    native_continuation: NativeContinuationSettings = field(init=False, repr=False, compare=False)
    artifacts: ArtifactSettings = field(init=False, repr=False, compare=False)
    memory: MemorySettings = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, value in _build_sections(self.values).items():
            object.__setattr__(self, name, value)

    def __getitem__(self, key: str) -> Any:
        """The value of a dotted key (the validation layer's view; elsewhere use the sections)."""
        return self.values[key]

    def with_settings(self, raw: Mapping[str, Any] | None) -> tuple[Config, list[str]]:
        """A new Config with `raw` applied on top of this one, plus warnings for ignored values.

        Cross-field rules of docs/reference.md §2 (target <= soft <= hard ratios, preferred output
        reserve >= minimum, minimum calibration samples <= window, ratio bounds lower < upper,
        artifact excerpts <= the inline limit and search bytes <= artifact bytes) reject the offending keys of `raw`, keeping the earlier values.
        """
        if raw is None:
            return self, []
        if not isinstance(raw, Mapping):
            return self, [f"settings: expected an object, got {type(raw).__name__}; ignored"]
        warnings: list[str] = []
        merged = dict(self.values)
        accepted: dict[str, Any] = {}
        for key, value in flatten_settings(raw).items():
            spec = SETTINGS.get(key)
            if spec is None:
                warnings.append(f"setting {echo(key)} is unknown and was ignored")
                continue
            problem = spec.validate(value)
            if problem:
                warnings.append(f"setting {key!r} = {_shown(value)} was ignored: {problem}")
                continue
            accepted[key] = value
        trial = {**merged, **accepted}
        for keys, holds, rule in _CROSS_FIELD_RULES:
            if not holds(*(trial[key] for key in keys)):
                for key in keys:
                    if accepted.pop(key, None) is not None:
                        warnings.append(f"setting {key!r} was ignored: {rule}")
                trial = {**merged, **accepted}
        local = {p.casefold() for p in trial["privacy.localProviders"]}
        both = sorted(p for p in trial["privacy.remoteProviders"] if p.casefold() in local)
        if both:
            for key in ("privacy.localProviders", "privacy.remoteProviders"):
                if accepted.pop(key, None) is not None:
                    warnings.append(
                        f"setting {key!r} was ignored: a provider may not be both local and "
                        f"remote ({', '.join(echo(p) for p in both)})"
                    )
        merged.update(accepted)
        if (
            merged["nativeContinuation.enabled"]
            and not merged["nativeContinuation.allowProviderStorage"]
        ):
            warnings.append(
                "setting 'nativeContinuation.enabled' has no effect: "
                "'nativeContinuation.allowProviderStorage' must be true too (continuation stays off)"
            )
        given = flatten_settings(raw)
        rejected = {
            key
            for key in given
            if key.startswith("privacy.") and key in SETTINGS and key not in accepted
        }
        still = (self.rejected_privacy - set(accepted)) | rejected
        return Config(merged, frozenset(still)), warnings


_CROSS_FIELD_RULES: tuple[tuple[tuple[str, ...], Callable[..., bool], str], ...] = (
    (
        ("context.targetFillRatio", "context.softLimitRatio", "context.hardLimitRatio"),
        lambda target, soft, hard: target <= soft <= hard,
        "targetFillRatio <= softLimitRatio <= hardLimitRatio must hold",
    ),
    (
        ("context.minimumOutputReserve", "context.preferredOutputReserve"),
        lambda minimum, preferred: preferred >= minimum,
        "preferredOutputReserve must be >= minimumOutputReserve",
    ),
    (
        ("modelAwareness.minimumCalibrationSamples", "modelAwareness.calibrationWindow"),
        lambda minimum, window: minimum <= window,
        "minimumCalibrationSamples must be <= calibrationWindow",
    ),
    (
        ("modelAwareness.calibrationRatioLowerBound", "modelAwareness.calibrationRatioUpperBound"),
        lambda lower, upper: lower < upper,
        "calibrationRatioLowerBound must be < calibrationRatioUpperBound",
    ),
    (
        ("artifacts.excerptChars", "artifacts.maxInlineToolResultChars"),
        lambda excerpt, inline: excerpt <= inline,
        "excerptChars must be <= maxInlineToolResultChars",
    ),
    (
        ("artifacts.maxSearchBytes", "artifacts.maxArtifactBytes"),
        lambda search, artifact: search <= artifact,
        "maxSearchBytes must be <= maxArtifactBytes",
    ),
)
"""Cross-field rules (docs/reference.md §2): the keys, whether their values hold together, and
the rule's text. A rule that fails rejects the keys of the new settings among them, keeping the
earlier values."""

DEFAULT_CONFIG = Config()
