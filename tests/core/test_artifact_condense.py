"""The condensed block of a large tool result (core/ds4_core/artifacts/condense.py): bounded by
its budget, quoted data only, redacted, and the original message never changed."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.artifacts.condense import (
    END_LINE,
    FIXED_CHARS,
    START_LINE,
    condense_tool_result,
    is_large_tool_result,
    tool_result_text,
)
from ds4_core.privacy.levels import RANK
from ds4_core.privacy.markers import render

ARTIFACT = "ab" * 32
PIECES = list('ab \t"\\/.:é中') + ["\n", "\r", "\u2028", "\x85", "\u202e", "\x00", "😀"]
HOSTILE = st.lists(st.sampled_from([*PIECES, END_LINE, "src/a.py "]), max_size=1500).map("".join)


def message(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": "toolu_01",
        "toolName": "bash",
        "content": [{"type": "text", "text": text}],
        "isError": False,
        **extra,
    }


def block_of(result: Any) -> str:
    text = result.message["content"][0]["text"]
    assert isinstance(text, str)
    return text


def fields(block: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in block.split("\n")[2:-1])


@settings(max_examples=300, deadline=None)
@given(text=HOSTILE, excerpt_chars=st.integers(0, 1500), error=st.booleans())
def test_a_block_is_bounded_quoted_and_leaves_the_message_alone(
    text: str, excerpt_chars: int, error: bool
) -> None:
    original = message(text, isError=error, details={"exitCode": 1})
    before = copy.deepcopy(original)
    result = condense_tool_result(original, artifact_id=ARTIFACT, excerpt_chars=excerpt_chars)
    assert original == before
    block = block_of(result)
    assert len(block) <= excerpt_chars + FIXED_CHARS
    lines = block.split("\n")
    assert lines[0] == START_LINE and lines[-1] == END_LINE and lines.count(END_LINE) == 1
    assert len(lines) == 15 and len(block.splitlines()) == 15  # no data line breaks any rule
    assert "\u202e" not in block
    values = fields(block)
    quoted = [values[k] for k in ("Error JSON", "Head JSON", "Tail JSON")]
    decoded = [json.loads(v) for v in quoted]
    if excerpt_chars >= 10:
        assert sum(len(v) for v in quoted if v != "null") <= excerpt_chars
    head, tail = decoded[1], decoded[2]
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + len(tail) <= len(text)
    assert values["Original size"].startswith(f"{len(text)} characters")
    assert result.message["details"] == {"exitCode": 1} and result.original_chars == len(text)


def test_a_large_result_shows_its_head_tail_error_and_paths() -> None:
    lines = [f"src/pkg/mod{i}.py:{i}: warning: unused name" for i in range(3000)]
    text = "Traceback: error in tests/test_app.py\n" + "\n".join(lines) + "\nFAILED 1 test"
    result = condense_tool_result(
        message(text, isError=True), artifact_id=ARTIFACT, excerpt_chars=6000
    )
    values = fields(block_of(result))
    assert values["Tool"] == '"bash"' and values["Tool call"] == '"toolu_01"'
    assert values["Status"] == "error"
    assert values["Errors/warnings"] == "1 errors, 3000 warnings"
    paths = json.loads(values["Paths JSON"])
    assert paths[:2] == ["tests/test_app.py", "src/pkg/mod0.py"] and len(paths) == 12
    assert values["Artifact ID"] == ARTIFACT
    assert values["Artifact URI"] == f"artifact://sha256/{ARTIFACT}"
    assert json.loads(values["Error JSON"]) == "Traceback: error in tests/test_app.py"
    assert json.loads(values["Tail JSON"]).endswith("FAILED 1 test")
    head, tail = json.loads(values["Head JSON"]), json.loads(values["Tail JSON"])
    omitted = int(values["Omitted"].split()[0])
    assert omitted == len(text) - len(head) - len(tail) > 0


def test_secrets_in_excerpts_error_and_paths_are_redacted() -> None:
    key = "sk-" + "proj" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    text = f"error: auth failed with {key}\n" + "x" * 20000 + f"\ntoken {key} again\n"
    block = block_of(condense_tool_result(message(text), artifact_id=None, excerpt_chars=6000))
    assert key not in block and "REDACTED" in block
    assert fields(block)["Artifact ID"] == "none (not stored)"


def test_only_text_parts_count_and_other_parts_are_kept() -> None:
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    big = message("")
    big["content"] = [
        {"type": "text", "text": "a" * 700},
        image,
        {"type": "text", "text": "b" * 700},
    ]
    assert tool_result_text(big) == "a" * 700 + "\n" + "b" * 700
    assert is_large_tool_result(big, 1000) and not is_large_tool_result(big, 1401)
    assert not is_large_tool_result({**big, "role": "user"}, 1000)
    condensed = condense_tool_result(big, artifact_id=ARTIFACT, excerpt_chars=100).message
    assert condensed["content"][1:] == [image]


KEY_KINDS = ("RSA PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY")


def pem_block(kind: str, seed: int, lines: int) -> tuple[str, list[str]]:
    """A PEM private key block of `lines` 64-character body lines (distinct per seed)."""
    body = [
        base64.b64encode(hashlib.sha512(f"{seed}-{i}".encode()).digest()[:48]).decode()
        for i in range(lines)
    ]
    return "-----BEGIN " + kind + "-----\n" + "\n".join(
        body
    ) + "\n-----END " + kind + "-----\n", body


@settings(max_examples=150, deadline=None)
@given(
    before=st.integers(0, 60_000),
    after=st.integers(0, 60_000),
    lines=st.integers(1, 80),
    kind=st.sampled_from(KEY_KINDS),
    excerpt_chars=st.integers(0, 20_000),
    error=st.booleans(),
    seed=st.integers(0, 10**6),
)
def test_no_private_key_line_anywhere_in_a_large_output_reaches_the_block(
    before: int, after: int, lines: int, kind: str, excerpt_chars: int, error: bool, seed: int
) -> None:
    """Wherever a PEM block sits in the output (head, tail, across either cut, the omitted
    middle, the error line), no line of its body is in the block (review 15A #1)."""
    pem, body = pem_block(kind, seed, lines)
    filler = "build step ok error src/a.py\n"
    text = (
        (filler * (before // len(filler) + 1))[:before] + pem + (filler * (after // 29 + 1))[:after]
    )
    block = block_of(
        condense_tool_result(
            message(text, isError=error), artifact_id=ARTIFACT, excerpt_chars=excerpt_chars
        )
    )
    shown = json.dumps(block)
    assert [line for line in body if line in block or line.replace("/", "\\/") in shown] == []


@settings(max_examples=100, deadline=None)
@given(
    before=st.integers(0, 40_000),
    after=st.integers(0, 40_000),
    level=st.sampled_from(["internal", "sensitive", "local-only"]),
    excerpt_chars=st.integers(0, 12_000),
    error=st.booleans(),
)
def test_a_classified_block_anywhere_keeps_its_level_in_the_block(
    before: int, after: int, level: str, excerpt_chars: int, error: bool
) -> None:
    """What the block quotes from a `[ds4:LEVEL]` block is withheld wherever the original's
    would be: rendered for a destination that may not see LEVEL, none of it shows (review
    15A #2: error line, paths, head and tail)."""
    filler = "compile ok\n"
    secret = "error: zqxclassified in deals/zqxsecret.pdf\n"
    text = (
        (filler * (before // len(filler) + 1))[:before]
        + f"[ds4:{level}]\n{secret}[/ds4:{level}]\n"
        + (filler * (after // len(filler) + 1))[:after]
    )
    block = block_of(
        condense_tool_result(
            message(text, isError=error), artifact_id=ARTIFACT, excerpt_chars=excerpt_chars
        )
    )
    allowed = [x for x in ("normal", "internal", "sensitive") if RANK[x] < RANK[level]]
    rendered = render(block, allowed).text
    assert "zqxclassified" not in rendered and "zqxsecret" not in rendered
    assert "Artifact ID: " + ARTIFACT in rendered
    assert len(rendered.split("\n")) == 15  # a withheld line leaves its placeholder in place
    seen = render(block, ["normal", "internal", "sensitive", "local-only"]).text
    assert len(seen.split("\n")) == 15 and "[ds4:" not in seen
