"""Privacy on the paths a first version missed (found by review and a trial run): a private key
cut by an excerpt, tool data (argument keys and values under structural-looking keys), the
words of a withheld request, custom summary instructions, the offline summary's exact values,
settings that were rejected, privacy turned off, and deeply nested markers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from privacy_corpus import SECRETS, pem_block
from session_files import SessionWriter

from ds4_core.config import DEFAULT_CONFIG
from ds4_core.engine import ContextEngine
from ds4_core.privacy.markers import parse
from ds4_core.privacy.policy import destination
from ds4_core.privacy.sanitizer import Sanitizer
from ds4_core.requests import (
    CompactRequest,
    ManifestRequest,
    ModelSpec,
    PlanRequest,
    RetrieveRequest,
    SessionRef,
)

REMOTE = ModelSpec(provider="openai", id="gpt-4o", context_window=8000, max_output_tokens=1000)
GITHUB = next(value for kind, _, value in SECRETS if kind == "GitHub token")


def filler(writer: SessionWriter, turns: int = 40) -> None:
    for n in range(1, turns + 1):
        writer.turn(n)


@pytest.fixture
def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    built = ContextEngine(database_path=tmp_path / "db" / "context.db")
    yield built
    built.close()


@pytest.mark.parametrize("words_after", [720, 750, 760])
def test_a_private_key_cut_by_an_excerpt_is_still_redacted(  # type: ignore[no-untyped-def]
    engine, tmp_path: Path, words_after: int
) -> None:
    """The excerpt starts inside the key's body (its `BEGIN` line cut off): the body lines,
    whole or cut, are still redacted."""
    block, body = pem_block("RSA", "cut-by-excerpt")
    after = " ".join(f"more{n}" for n in range(words_after))
    session = tmp_path / "s.jsonl"
    writer = SessionWriter(session)
    writer.user(f"deploy key, keep it:\nsome words\n{block}\n{after} quokkagate rollout")
    writer.assistant("noted")
    filler(writer)
    found = engine.retrieve(
        RetrieveRequest(query="quokkagate rollout", session=SessionRef(str(session)), model=REMOTE)
    ).to_wire()
    assert found["history"], "the entry is found (the test needs its excerpt)"
    planned = engine.plan(
        PlanRequest(session=SessionRef(str(session)), request="quokkagate rollout?", model=REMOTE)
    ).to_wire()
    pieces = {line[i : i + 12] for line in body.splitlines() for i in range(len(line) - 11)}
    for answer in (found, planned):
        text = json.dumps(answer)
        assert [piece for piece in pieces if piece in text] == []


def test_tool_data_is_content_whatever_its_keys_are_named() -> None:
    message = {
        "role": "assistant",
        "content": [
            {
                "type": "toolCall",
                "id": "c1",
                "name": "deploy",
                "arguments": {
                    "name": GITHUB,
                    "[ds4:local-only]keyword4455[/ds4:local-only]": 1,
                    GITHUB: "as a key",
                },
            }
        ],
    }
    out = Sanitizer(destination(DEFAULT_CONFIG, "openai")).message(message).value
    text = json.dumps(out)
    assert GITHUB not in text and "keyword4455" not in text
    assert out["content"][0]["name"] == "deploy" and out["content"][0]["id"] == "c1"


def test_a_tool_name_is_structure() -> None:
    message = {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "read",
        "content": [{"type": "text", "text": "public [ds4:local-only] never closed"}],
    }
    out = Sanitizer(destination(DEFAULT_CONFIG, "openai")).message(message).value
    assert out["toolName"] == "read" and "never closed" not in json.dumps(out)


def test_withheld_request_words_never_pick_or_name_evidence(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = tmp_path / "s.jsonl"
    writer = SessionWriter(session)
    writer.user("the platypusbridge acquisition closes friday")
    writer.assistant("noted the platypusbridge acquisition")
    filler(writer)
    planned = engine.plan(
        PlanRequest(
            session=SessionRef(str(session)),
            request="[ds4:local-only]platypusbridge acquisition[/ds4:local-only] continue",
            model=REMOTE,
        )
    ).to_wire()
    assert "platypusbridge" not in json.dumps(planned)


def test_summary_instructions_and_offline_values_hold_no_secret(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = tmp_path / "s.jsonl"
    writer = SessionWriter(session)
    writer.user(f"use `{GITHUB}` for the release and `export OPENAI_API_KEY={SECRETS[0][2]}`")
    writer.assistant("ok")
    filler(writer, 6)
    prompts: list[str] = []

    def summarizer(call: Any) -> Any:
        prompts.append(call.prompt)
        raise RuntimeError("offline, please")

    result = engine.compact(
        CompactRequest(
            session=SessionRef(str(session)),
            first_kept_entry_id=writer.leaf,
            custom_instructions=f"keep {GITHUB} and [ds4:local-only]instrword77[/ds4:local-only]",
            model=ModelSpec(provider="openai"),
        ),
        summarizer,
    ).to_wire()
    assert prompts and GITHUB not in prompts[0] and "instrword77" not in prompts[0]
    summary = result["compaction"]["summary"]
    assert result["summarizer"] == "offline"
    assert GITHUB not in summary and SECRETS[0][2] not in summary
    assert GITHUB[4:] not in summary  # not even without its prefix


def test_a_rejected_privacy_setting_withholds_more_not_less() -> None:
    config, warnings = DEFAULT_CONFIG.with_settings(
        {"privacy": {"remoteProviders": {"openrouter": ["normal"], "ollama": ["normal"]}}}
    )
    assert warnings and config.rejected_privacy == {"privacy.remoteProviders"}
    assert destination(config, "openrouter").allowed == ("normal",)
    assert destination(config, "openai").allowed == ("normal",)
    fixed, _ = config.with_settings({"privacy": {"remoteProviders": {"openrouter": ["normal"]}}})
    assert fixed.rejected_privacy == frozenset()
    assert destination(fixed, "openai").allowed == ("normal", "internal")


def test_privacy_off_says_so_on_the_wire() -> None:
    config, _ = DEFAULT_CONFIG.with_settings({"privacy.enabled": False})
    wire = destination(config, "openai").to_wire()
    assert wire["allowed"] == ["normal", "internal", "sensitive", "local-only"]
    assert wire["redactSecrets"] is False


def test_deeply_nested_and_many_markers_parse_in_one_pass() -> None:
    nested = "[ds4:internal]x" * 20000 + "[/ds4:internal]" * 20000
    parsed = parse(nested)
    assert parsed.floor == "normal" and {s.level for s in parsed.segments} == {"internal"}
    unclosed = parse("[ds4:internal]x" * 20000)
    assert unclosed.floor == "internal"


def test_secrets_in_tool_data_objects_are_redacted() -> None:
    arguments = {
        "env": {"DB_PASSWORD": "Zk4rT9pLw2Qx"},
        "headers": {"Authorization": "Bearer abcdefghijklmnopq"},
        "argv": ["deploy", "--password", "Pq8wE3rT6yU1"],
        "password": 987654321012,
        "pw": "Gh4jK7lZ1xC3",
        "X-API-Key": "Xa7pQ2mZ9kL4",
        "path": "src/tokens.py",
    }
    message = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c", "name": "deploy", "arguments": arguments}],
    }
    out = Sanitizer(destination(DEFAULT_CONFIG, "openai")).message(message).value
    sent = json.dumps(out)
    for value in ("Zk4rT9pLw2Qx", "abcdefghijklmnopq", "Pq8wE3rT6yU1", "987654321012"):
        assert value not in sent
    for value in ("Gh4jK7lZ1xC3", "Xa7pQ2mZ9kL4"):
        assert value not in sent
    assert out["content"][0]["arguments"]["path"] == "src/tokens.py"
    local = Sanitizer(destination(DEFAULT_CONFIG, "ollama")).message(message).value
    assert local["content"][0]["arguments"] == arguments


@pytest.mark.parametrize(
    "line",
    [
        "password=Hunter2Xyz99 (see docs)",
        "api_key=ApIkEy4455zQ [ds4:local-only]q[/ds4:local-only]",
        "client_secret=Cs7dF2gH5jK8 [dev]",
    ],
)
def test_a_value_followed_by_a_bracket_is_still_a_secret(line: str) -> None:
    value = line.split("=", 1)[1].split(" ", 1)[0]
    out = Sanitizer(destination(DEFAULT_CONFIG, "openai")).text(line)
    assert value not in out and "[DS4 REDACTED SECRET]" in out


def test_a_secret_in_the_request_never_picks_or_names_evidence(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    session = tmp_path / "s.jsonl"
    writer = SessionWriter(session)
    writer.user("the galago db login uses password GaLaGo7Qz91x for now")
    writer.assistant("noted the galago login")
    filler(writer)
    planned = engine.plan(
        PlanRequest(
            session=SessionRef(str(session)),
            request="galago db login fails with password=GaLaGo7Qz91x",
            model=REMOTE,
        )
    ).to_wire()
    assert "GaLaGo7Qz91x" not in json.dumps(planned)
    manifest = engine.manifest(ManifestRequest(id=planned["manifestId"], view="full")).to_wire()
    assert "GaLaGo7Qz91x" not in json.dumps(manifest)


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ("run: mysqldump --password WaLlAbY5566zQ db", "WaLlAbY5566zQ"),
        ('["pg_dump", "--password", "Xq9zLm22Pw"]', "Xq9zLm22Pw"),
        ('{"pw":"Gh4jK7lZ1xC3", "signingKey": "Sk9dLs8Qw22"}', "Gh4jK7lZ1xC3"),
        ('{"pw":"Gh4jK7lZ1xC3", "signingKey": "Sk9dLs8Qw22"}', "Sk9dLs8Qw22"),
        ('password="Hunter2Xyz99', "Hunter2Xyz99"),
    ],
)
def test_command_line_json_and_cut_shapes_are_redacted(line: str, value: str) -> None:
    out = Sanitizer(destination(DEFAULT_CONFIG, "openai")).text(line)
    assert value not in out


def test_variables_and_placeholders_in_those_shapes_stay() -> None:
    for line in ('--password "$PW"', "--token <your token>", "def f(password: str, token: int)"):
        assert Sanitizer(destination(DEFAULT_CONFIG, "openai")).text(line) == line


def test_a_secret_repeated_bare_in_other_messages_is_redacted_everywhere(  # type: ignore[no-untyped-def]
    engine, tmp_path: Path
) -> None:
    session = tmp_path / "s.jsonl"
    writer = SessionWriter(session)
    writer.user("connect to echidna, password=Echidna7Qz91 for the admin")
    writer.assistant(
        "ok, I'll connect to echidna with Echidna7Qz91",
        [("c1", "bash", {"command": "psql -h echidna -W Echidna7Qz91"})],
    )
    writer.tool_result("c1", "bash", "logged in as admin (Echidna7Qz91 accepted)")
    writer.assistant("connected")
    planned = engine.plan(
        PlanRequest(
            session=SessionRef(str(session)),
            request="next",
            model=ModelSpec(provider="openai", id="gpt-4o", context_window=200000),
        )
    ).to_wire()
    assert "Echidna7Qz91" not in json.dumps(planned)
    assert planned["privacy"]["redacted"] >= 4
