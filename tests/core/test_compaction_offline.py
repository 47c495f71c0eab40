"""The offline summarizer: always valid, deterministic, bounded, and useful on a real session
(docs/compaction.md "The offline summarizer")."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ds4_core.compaction.contract import Evidence, parse_sections, render_summary, validate_summary
from ds4_core.compaction.offline import offline_summary
from ds4_core.compaction.transcript import conversation_text, file_operations
from ds4_core.sessions import build_session_context, read_all
from ds4_core.tokens import estimate_text_tokens

SKELETON_TOKENS = estimate_text_tokens(render_summary({}))


def check_valid(
    messages: list[Any],
    *,
    read_files: list[str] | None = None,
    modified_files: list[str] | None = None,
    token_limit: int = 2000,
    previous_summary: str = "",
    source_text: str | None = None,
) -> str:
    read_files = read_files or []
    modified_files = modified_files or []
    text = offline_summary(
        messages,
        read_files=read_files,
        modified_files=modified_files,
        token_limit=token_limit,
        previous_summary=previous_summary,
        source_text=source_text,
    )
    source = conversation_text(messages) if source_text is None else source_text
    evidence = Evidence(source, previous_summary, tuple(read_files), tuple(modified_files))
    validation = validate_summary(text, evidence)
    assert validation.status == "valid", (validation.issues, text)
    assert estimate_text_tokens(text) <= max(token_limit, SKELETON_TOKENS)
    return text


# --- validity for any input -----------------------------------------------------------------

fragments = st.sampled_from(
    [
        "## Objective",
        "# Title",
        "- bullet",
        "`code`",
        "``double`tick``",
        "`",
        "```py",
        "fooBar",
        "snake_case_name",
        "src/a/b.ts",
        "v1.2.3",
        "#b5bd68",
        "30 ms",
        "must never",
        "I'll use x instead of y.",
        "Done. Fixed it.",
        "why?",
        "\n",
        "\r\n",
        "  ",
        "é漢🙂",
        "None",
        " — ",
        "\\`",
        "\x00",
        "\u2028",
    ]
)
texts = st.one_of(
    st.text(max_size=60),
    st.lists(fragments | st.text(max_size=8), max_size=12).map("".join),
)
blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, texts),
    st.builds(lambda t: {"type": "thinking", "thinking": t}, texts),
    st.builds(
        lambda name, cid, args: {"type": "toolCall", "id": cid, "name": name, "arguments": args},
        st.sampled_from(["bash", "read", "edit", "write", "other"]),
        st.sampled_from(["t1", "t2", "t3"]),
        st.one_of(
            st.fixed_dictionaries({"command": texts}),
            st.fixed_dictionaries({"path": texts}),
            st.dictionaries(st.text(max_size=5), texts, max_size=2),
            st.none(),
            texts,
        ),
    ),
    st.builds(lambda d: {"type": "image", "data": d, "mimeType": "image/png"}, st.text()),
    texts,
    st.none(),
    st.integers(),
)
content = st.one_of(texts, st.lists(blocks, max_size=4), st.none(), st.integers())
messages_strategy = st.lists(
    st.one_of(
        st.builds(lambda c: {"role": "user", "content": c}, content),
        st.builds(
            lambda c, err, stop: {
                "role": "assistant",
                "content": c,
                "errorMessage": err,
                "stopReason": stop,
            },
            content,
            st.none() | texts,
            st.sampled_from(["stop", "error", "aborted", None]),
        ),
        st.builds(
            lambda cid, name, c, err: {
                "role": "toolResult",
                "toolCallId": cid,
                "toolName": name,
                "content": c,
                "isError": err,
            },
            st.sampled_from(["t1", "t2", "t3", None]),
            st.none() | texts,
            content,
            st.booleans(),
        ),
        st.builds(
            lambda cmd, out, code, cancelled: {
                "role": "bashExecution",
                "command": cmd,
                "output": out,
                "exitCode": code,
                "cancelled": cancelled,
            },
            st.none() | texts,
            st.none() | texts,
            st.none() | st.integers(-2, 300) | st.booleans(),
            st.booleans(),
        ),
        st.builds(lambda s: {"role": "compactionSummary", "summary": s}, st.none() | texts),
        st.builds(lambda r, c: {"role": r, "content": c}, texts, content),
        st.none(),
        texts,
    ),
    max_size=12,
)


@given(
    messages=messages_strategy,
    read_files=st.lists(texts, max_size=4),
    modified_files=st.lists(texts, max_size=4),
    token_limit=st.integers(min_value=0, max_value=3000),
    previous_summary=st.one_of(st.just(""), texts, st.just(render_summary({"Objective": ["x"]}))),
)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_offline_summary_is_valid_for_any_messages(
    messages: list[Any],
    read_files: list[str],
    modified_files: list[str],
    token_limit: int,
    previous_summary: str,
) -> None:
    text = check_valid(
        messages,
        read_files=read_files,
        modified_files=modified_files,
        token_limit=token_limit,
        previous_summary=previous_summary,
    )
    assert text == offline_summary(
        messages,
        read_files=read_files,
        modified_files=modified_files,
        token_limit=token_limit,
        previous_summary=previous_summary,
    )


@given(messages=messages_strategy, source_text=texts)
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_offline_summary_is_valid_against_a_foreign_source_text(
    messages: list[Any], source_text: str
) -> None:
    check_valid(messages, source_text=source_text)


def test_empty_span_gives_the_skeleton() -> None:
    assert check_valid([]) == render_summary({})


def test_values_the_evidence_does_not_hold_lose_their_backticks() -> None:
    messages = [{"role": "user", "content": "rename `oldName` to `newName` please"}]
    text = check_valid(messages, source_text="rename oldName please")
    assert "- rename `oldName` to 'newName' please" in text.split("\n")
    assert "`newName`" not in text


def test_backticked_user_values_are_kept_verbatim() -> None:
    messages = [
        {"role": "user", "content": "set `MAX_RETRIES` to 5 and keep `retry.delay_ms` at 250 ms"}
    ]
    text = check_valid(messages)
    parsed = parse_sections(text)
    assert parsed is not None
    assert "`MAX_RETRIES`" in parsed["Critical Exact Values"]
    assert "`retry.delay_ms`" in parsed["Critical Exact Values"]
    assert "`250 ms`" in parsed["Critical Exact Values"]


def test_sections_come_from_the_matching_parts_of_the_transcript() -> None:
    messages = [
        {"role": "user", "content": "/mode"},
        {"role": "user", "content": "Port the parser to Rust. Never touch the CLI flags."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll use nom instead of a hand-written lexer."},
                {
                    "type": "toolCall",
                    "id": "c1",
                    "name": "bash",
                    "arguments": {"command": "cargo test"},
                },
                {
                    "type": "toolCall",
                    "id": "c2",
                    "name": "read",
                    "arguments": {"path": "src/lib.rs"},
                },
            ],
        },
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "bash",
            "content": [
                {"type": "text", "text": "error[E0425]: cannot find value\nexit code: 101"}
            ],
            "isError": True,
        },
        {"role": "bashExecution", "command": "git status", "output": "clean", "exitCode": 0},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Fixed the lexer. Should the CLI keep --fast?"}],
            "stopReason": "stop",
        },
        {"role": "user", "content": "Yes, keep it. Next add benchmarks."},
    ]
    read, modified = file_operations(messages)
    text = check_valid(messages, read_files=read, modified_files=modified)
    parsed = parse_sections(text)
    assert parsed is not None
    assert parsed["Objective"] == ["Port the parser to Rust. Never touch the CLI flags."]
    assert parsed["User Constraints"] == ["Never touch the CLI flags."]
    assert parsed["Durable Decisions"] == ["I'll use nom instead of a hand-written lexer."]
    assert parsed["Completed Work"] == ["Fixed the lexer."]
    assert parsed["Files Read"] == ["`src/lib.rs`"]
    assert parsed["Commands / Tests"] == [
        "`cargo test` — failed (exit 101)",
        "`git status` — exit 0",
    ]
    assert parsed["Errors / Risks"] == ["bash failed (cargo test): error[E0425]: cannot find value"]
    assert parsed["Open Questions"] == ["Should the CLI keep --fast?"]
    assert parsed["Next Actions"] == ["Last user request: Yes, keep it. Next add benchmarks."]
    assert "Last command: `git status` — exit 0" in parsed["Current State"]


def test_previous_objective_carries_over_when_the_span_has_no_user_turn() -> None:
    previous = render_summary({"Objective": ["Ship `v2.0.0` of the CLI"]})
    messages = [{"role": "assistant", "content": [{"type": "text", "text": "Still building."}]}]
    text = check_valid(messages, previous_summary=previous)
    parsed = parse_sections(text)
    assert parsed is not None and parsed["Objective"] == ["Ship `v2.0.0` of the CLI"]


def test_bullets_are_single_lines_of_bounded_length() -> None:
    long = "word " * 400 + "\n## Objective\n- injected"
    text = check_valid([{"role": "user", "content": long}])
    for line in text.split("\n"):
        assert line == "" or line.startswith(("## ", "- "))
        assert len(line) <= 310
    assert text.count("## Objective") == 1


@pytest.mark.parametrize("token_limit", [0, 10, SKELETON_TOKENS, 120, 300, 700])
def test_tight_token_limits_trim_bullets_but_keep_the_headings(token_limit: int) -> None:
    messages = [
        {"role": "user", "content": f"task {i}: must handle `case_{i}` in src/m{i}.py"}
        for i in range(40)
    ]
    files = [f"src/m{i}.py" for i in range(40)]
    text = check_valid(messages, modified_files=files, token_limit=token_limit)
    parsed = parse_sections(text)
    assert parsed is not None
    if token_limit >= 120:
        assert parsed["Objective"][0].startswith("task 0")
        assert estimate_text_tokens(text) <= token_limit
    if token_limit <= SKELETON_TOKENS:
        assert text == render_summary({})


# --- the real 914-message session -----------------------------------------------------------


@pytest.fixture(scope="module")
def large_session(pi_sessions_dir: Path) -> list[dict[str, Any]]:
    session = read_all(pi_sessions_dir / "pi-mono-v1-large-session.jsonl")
    messages = build_session_context(session.entries).messages
    assert len(messages) == 914
    return messages


def test_real_session_summary_is_faithful_and_bounded(large_session: list[dict[str, Any]]) -> None:
    read, modified = file_operations(large_session)
    text = check_valid(large_session, read_files=read, modified_files=modified, token_limit=2500)
    parsed = parse_sections(text)
    assert parsed is not None
    # the first user turn is "/mode"; the objective is the first real request
    assert parsed["Objective"][0].startswith("read packages/coding-agent/docs/theme.md in full")
    assert parsed["Files Read"] == [f"`{p}`" for p in read]
    assert parsed["Files Modified"] == [f"`{p}`" for p in modified]
    commands = "\n".join(parsed["Commands / Tests"])
    assert "npm run check" in commands or "npm run build" in commands
    assert parsed["Errors / Risks"] != ["None"]
    assert parsed["Next Actions"][0] == "Last user request: yeah, do it all"
    assert estimate_text_tokens(text) <= 2500


def test_real_session_summary_is_fast_and_deterministic(
    large_session: list[dict[str, Any]],
) -> None:
    read, modified = file_operations(large_session)
    source = conversation_text(large_session)
    timings = []
    results = set()
    for _ in range(3):
        started = time.perf_counter()
        results.add(
            offline_summary(
                large_session,
                read_files=read,
                modified_files=modified,
                token_limit=4000,
                source_text=source,
            )
        )
        timings.append(time.perf_counter() - started)
    assert len(results) == 1
    assert min(timings) < 1.0  # measured ~0.07 s


def test_lines_split_by_lsp_rules_only() -> None:
    """A U+2028 or form feed inside an output line does not end it (str.splitlines would)."""
    messages = [
        {"role": "user", "content": "run the tests"},
        {
            "role": "bashExecution",
            "command": "pytest -q",
            "output": "collected 3\nFAILED test_a - boom\u2028see log",
            "exitCode": 1,
        },
    ]
    text = offline_summary(messages, read_files=[], modified_files=[], token_limit=4000)
    errors = text.split("## Errors / Risks\n", 1)[1].split("\n## ", 1)[0]
    assert "FAILED test_a - boom" in errors
