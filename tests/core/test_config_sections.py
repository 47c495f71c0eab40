"""Typed settings sections (core/ds4_core/config.py): one field per setting, precise types, and
no dotted-key lookups (`config["context.mode"]`) outside config.py."""

from __future__ import annotations

import dataclasses
import io
import operator
import tokenize
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest

from ds4_core.config import DEFAULT_CONFIG, SECTIONS, SETTINGS, Config, snake_name, typed_attribute

REPO = Path(__file__).resolve().parents[2]

NON_DEFAULT: dict[str, Any] = {
    "enabled": False,
    "context.mode": "observer",
    "context.targetFillRatio": 1,  # an integer ratio becomes the float 1.0
    "context.softLimitRatio": 1,
    "context.hardLimitRatio": 1,
    "context.minimumOutputReserve": 1000,
    "context.preferredOutputReserve": 2000,
    "context.recentTailTokens": 3,
    "context.rescueImmediatePredecessor": False,
    "context.maxPinnedTokens": 4,
    "context.maxMemoryTokens": 5,
    "context.maxRetrievedHistoryTokens": 6,
    "context.maxProjectTokens": 7,
    "context.maxSummaryTokens": 0,
    "retrieval.exact": False,
    "retrieval.fts": False,
    "retrieval.semantic": False,
    "retrieval.maxResults": 99,
    "project.enabled": False,
    "project.maxFiles": 11,
    "project.maxFileBytes": 12,
    "project.maxTotalBytes": 13,
    "project.maxResults": 14,
    "project.maxCommits": 0,
    "compaction.enabled": False,
    "compaction.keepRecentTokens": 15,
    "compaction.summaryTokenLimit": 256,
    "compaction.maxRequestInputTokens": 100,
    "compaction.summarizeTimeoutMs": 100,
    "modelAwareness.enabled": False,
    "modelAwareness.overrides": {"*": {"contextWindow": 9000}, "p/m": {"maxOutputTokens": 10}},
    "modelAwareness.calibrationWindow": 40,
    "modelAwareness.minimumCalibrationSamples": 5,
    "modelAwareness.calibrationRatioLowerBound": 1,  # an integer bound becomes the float 1.0
    "modelAwareness.calibrationRatioUpperBound": 3,
    "diagnostics.storeContextManifest": False,
    "diagnostics.logLevel": "trace",
    "storage.databasePath": "/tmp/x.db",
    "storage.busyTimeoutMs": 1,
    "server.maxMessageBytes": 4096,
    "privacy.enabled": False,
    "privacy.defaultClassification": "internal",
    "privacy.localProviders": ["ollama", "my-gpu-box"],
    "privacy.remoteDefaultAllowed": ["normal"],
    "privacy.remoteProviders": {"openrouter": ["normal"], "azure": ["normal", "sensitive"]},
    "privacy.redactSecrets": False,
    "nativeContinuation.enabled": True,
    "nativeContinuation.allowProviderStorage": True,
    "nativeContinuation.profiles": ["openai/gpt-x", "azure/*"],
    "nativeContinuation.maxStateAgeMs": 10_000,
    "nativeContinuation.retryManagedReplay": False,
    "artifacts.enabled": False,
    "artifacts.maxInlineToolResultChars": 1000,
    "artifacts.excerptChars": 1000,
    "artifacts.maxArtifactBytes": 2000,
    "artifacts.maxSearchBytes": 2000,
    "artifacts.maxSearchMatches": 100,
    "memory.enabled": False,
    "memory.maxPinChars": 20000,
    "memory.maxClaimChars": 1,
    "memory.maxResults": 100,
}
"""A valid value other than the default for every setting (when there is one)."""


def configured() -> Config:
    config, warnings = DEFAULT_CONFIG.with_settings(NON_DEFAULT)
    assert warnings == []
    return config


def plain(value: Any) -> Any:
    """A typed field's value as JSON gives it (tuples as lists, read-only maps as dicts)."""
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


def conforms(value: Any, hint: Any) -> bool:
    """Whether `value` has exactly the annotated type (bool is not an int, int not a float,
    and a Mapping must be read-only)."""
    origin = get_origin(hint)
    if origin is Literal:
        return any(type(value) is type(arg) and value == arg for arg in get_args(hint))
    if origin in (Union, types.UnionType):
        return any(conforms(value, arg) for arg in get_args(hint))
    if origin is Mapping:
        key_type, value_type = get_args(hint)
        return isinstance(value, types.MappingProxyType) and all(
            conforms(k, key_type) and conforms(v, value_type) for k, v in value.items()
        )
    if hint is type(None):
        return value is None
    if origin is tuple:
        (item_type, _) = get_args(hint)
        return type(value) is tuple and all(conforms(v, item_type) for v in value)
    if hint in (bool, int, float, str):
        return type(value) is hint
    raise AssertionError(f"no check for the annotation {hint!r}")


def test_every_setting_has_its_own_typed_field() -> None:
    assert set(NON_DEFAULT) == set(SETTINGS), "give every setting a value in NON_DEFAULT"
    sections = {snake_name(prefix) for prefix in SECTIONS}
    leaves = [
        f.name
        for f in dataclasses.fields(Config)
        if f.name not in ("values", "rejected_privacy") and f.name not in sections
    ]
    for name in sorted(sections):
        section = type(getattr(DEFAULT_CONFIG, name))
        assert dataclasses.is_dataclass(section) and section.__dataclass_params__.frozen  # type: ignore[attr-defined]
        leaves += [f"{name}.{f.name}" for f in dataclasses.fields(section)]
    assert sorted(leaves) == sorted(typed_attribute(key) for key in SETTINGS)
    assert typed_attribute("context.recentTailTokens") == "context.recent_tail_tokens"
    assert typed_attribute("modelAwareness.overrides") == "model_awareness.overrides"
    assert typed_attribute("enabled") == "enabled"
    with pytest.raises(KeyError):
        typed_attribute("context.nope")


@pytest.mark.parametrize("config", [DEFAULT_CONFIG, configured()], ids=["default", "set"])
def test_typed_fields_equal_the_validated_values_and_have_their_types(config: Config) -> None:
    for key in SETTINGS:
        path = typed_attribute(key)
        owner_path, _, name = path.rpartition(".")
        owner = operator.attrgetter(owner_path)(config) if owner_path else config
        value = getattr(owner, name)
        assert plain(value) == config.values[key], key
        hint = get_type_hints(type(owner))[name]
        assert conforms(value, hint), f"{path} = {value!r} is not a {hint}"


def test_sections_follow_with_settings_and_are_immutable() -> None:
    config = configured()
    assert config.context.recent_tail_tokens == 3 and config.context.target_fill_ratio == 1.0
    assert config.model_awareness.overrides["p/m"] == {"maxOutputTokens": 10}
    assert DEFAULT_CONFIG.context.recent_tail_tokens == 64000  # the default is not touched
    again, _ = config.with_settings({"context": {"recentTailTokens": 8}})
    assert again.context.recent_tail_tokens == 8 and config.context.recent_tail_tokens == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.context.recent_tail_tokens = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.enabled = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.model_awareness.overrides["*"]["contextWindow"] = 1  # type: ignore[index]
    # The flat mapping (the validation and wire shape) keeps the values as given (plain JSON).
    assert all(type(config.values[key]) is type(value) for key, value in NON_DEFAULT.items())


# Files allowed to read settings by dotted key outside config.py: none. (While issue 10 moved
# the engine, CLI and LSP layers, their old modules were listed here until converted.)
ALLOWED_DOTTED_LOOKUPS: set[str] = set()

DOTTED_KEYS = {key for key in SETTINGS if "." in key}


def dotted_lookups(source: str) -> list[int]:
    """Lines of `config[...]` / `config()[...]` subscripts (any name ending in `config`) and
    of `[KEY]` / `.get(KEY` with a dotted settings key as a string literal."""
    tokens = [
        t
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)
    ]
    found: list[int] = []
    for i, tok in enumerate(tokens):
        after = [t.string for t in tokens[i + 1 : i + 4]]
        if tok.type == tokenize.NAME and tok.string.endswith("config"):
            if after[:1] == ["["] or after[:3] == ["(", ")", "["]:
                found.append(tok.start[0])
        elif tok.type == tokenize.STRING and tok.string.strip("\"'") in DOTTED_KEYS:
            before = [t.string for t in tokens[max(0, i - 2) : i]]
            if (before[-1:] == ["["] and after[:1] == ["]"]) or before == ["get", "("]:
                found.append(tok.start[0])
    return sorted(set(found))


def test_no_dotted_key_lookups_outside_config_py() -> None:
    offending: list[str] = []
    clean_allowed: list[str] = []
    for top in ("core", "ds4_lsp", "tests", "bench"):
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel == "core/ds4_core/config.py" or "/.venv/" in rel:
                continue
            lines = dotted_lookups(path.read_text(encoding="utf-8"))
            if rel in ALLOWED_DOTTED_LOOKUPS:
                if not lines:
                    clean_allowed.append(rel)
                continue
            offending += [f"{rel}:{line}" for line in lines]
    assert offending == [], "read settings through the typed sections (config.context....)"
    assert clean_allowed == [], "these have no lookups left: remove them from the allow-list"


def test_the_lookup_scanner_sees_the_forms_it_forbids() -> None:
    source = (
        'a = config["context.mode"]\n'
        'b = self._config()["project.enabled"]\n'
        "c = engine.config[NAME]\n"
        'd = values.get("retrieval.fts")\n'
        "e = \"x = config['context.mode']\"\n"  # text inside a string is not a lookup
        "f = config.context.mode\n"
    )
    assert dotted_lookups(source) == [1, 2, 3, 4]
