"""Aggregate text: the deterministic, bounded merge of two child summaries
(docs/compaction.md "Graph rules")."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ds4_core.compaction.contract import Evidence, parse_sections, render_summary, validate_summary
from ds4_core.compaction.merge import merge_summaries
from ds4_core.compaction.offline import offline_summary
from ds4_core.tokens import estimate_text_tokens

SKELETON_TOKENS = estimate_text_tokens(render_summary({}))


def merged(
    older: str,
    newer: str,
    read_files: list[str] | None = None,
    modified_files: list[str] | None = None,
    token_limit: int = 4000,
) -> dict[str, list[str]]:
    read_files = read_files or []
    modified_files = modified_files or []
    text = merge_summaries(
        older, newer, read_files=read_files, modified_files=modified_files, token_limit=token_limit
    )
    evidence = Evidence(older + "\n\n" + newer, "", tuple(read_files), tuple(modified_files))
    validation = validate_summary(text, evidence)
    assert validation.status == "valid", (validation.issues, text)
    assert estimate_text_tokens(text) <= max(token_limit, SKELETON_TOKENS)
    parsed = parse_sections(text)
    assert parsed is not None
    return parsed


OLDER = render_summary(
    {
        "Objective": ["Port the parser"],
        "User Constraints": ["Never touch `cli.py`"],
        "Completed Work": ["Lexer done", "Tests added"],
        "Current State": ["Lexer compiles"],
        "Open Questions": ["Keep `--fast`?"],
        "Next Actions": ["Write the parser"],
        "Critical Exact Values": ["`TOKEN_MAX = 64`"],
        "Files Read": ["`old.py`"],
    }
)
NEWER = render_summary(
    {
        "Objective": ["Port the parser", "Also add benchmarks"],
        "Completed Work": ["tests added", "Parser written"],
        "Current State": ["Parser passes `cargo test`"],
        "Next Actions": ["Add benchmarks"],
        "Critical Exact Values": ["`TOKEN_MAX = 64`", "`bench_parse`"],
    }
)


def test_chronological_sections_keep_older_then_newer_deduplicated() -> None:
    parsed = merged(OLDER, NEWER)
    assert parsed["Objective"] == ["Port the parser", "Also add benchmarks"]
    assert parsed["User Constraints"] == ["Never touch `cli.py`"]
    assert parsed["Completed Work"] == ["Lexer done", "Tests added", "Parser written"]
    assert parsed["Critical Exact Values"] == ["`TOKEN_MAX = 64`", "`bench_parse`"]


def test_state_sections_take_the_newer_child_unless_it_has_none() -> None:
    parsed = merged(OLDER, NEWER)
    assert parsed["Current State"] == ["Parser passes `cargo test`"]
    assert parsed["Next Actions"] == ["Add benchmarks"]
    assert parsed["Open Questions"] == ["Keep `--fast`?"]  # the newer says "- None"


def test_none_never_stands_next_to_a_real_bullet() -> None:
    parsed = merged(OLDER, NEWER)
    for name, bullets in parsed.items():
        assert bullets == ["None"] or "None" not in bullets, name
    assert parsed["Errors / Risks"] == ["None"]


def test_file_sections_are_the_given_inventories() -> None:
    parsed = merged(OLDER, NEWER, read_files=["a.py", "bad\npath"], modified_files=["b.py"])
    assert parsed["Files Read"] == ["`a.py`"]
    assert parsed["Files Modified"] == ["`b.py`"]


def test_a_pi_native_child_contributes_its_lines_as_completed_work() -> None:
    native = (
        "## Goal\nShip the theme work\n\n## Progress\n### Done\n- [x] Ported `theme.ts`\n"
        "* Added tokens\n\n```ts\nconst x = `y`;\n## not a heading\n"
    )
    parsed = merged(OLDER, native)
    assert parsed["Completed Work"] == [
        "Lexer done",
        "Tests added",
        "Ship the theme work",
        "[x] Ported `theme.ts`",
        "Added tokens",
        "```ts\n  const x = `y`;\n  ## not a heading\n  ```",
    ]
    assert parsed["Current State"] == ["Lexer compiles"]  # the native child has no state
    assert parsed["Next Actions"] == ["Write the parser"]


def test_merging_is_deterministic() -> None:
    first = merge_summaries(OLDER, NEWER, read_files=["a"], modified_files=[], token_limit=300)
    again = merge_summaries(OLDER, NEWER, read_files=["a"], modified_files=[], token_limit=300)
    assert first == again


def test_over_the_limit_the_oldest_bullets_go_first_and_the_objective_stays() -> None:
    older = render_summary(
        {
            "Objective": ["The original task"],
            "Completed Work": [f"old step {i}" for i in range(30)],
            "Critical Exact Values": [f"old value {i}" for i in range(10)],
        }
    )
    newer = render_summary(
        {
            "Objective": ["A later refinement"],
            "Completed Work": [f"new step {i}" for i in range(30)],
            "Critical Exact Values": [f"new value {i}" for i in range(10)],
        }
    )
    files = [f"src/file_{i}.py" for i in range(30)]
    parsed = merged(older, newer, modified_files=files, token_limit=300)
    assert parsed["Objective"][0] == "The original task"
    work = parsed["Completed Work"]
    assert work[-1] == "new step 29" and "old step 0" not in work
    assert work == sorted(work, key=lambda b: (not b.startswith("old"), int(b.split()[-1])))
    modified = parsed["Files Modified"]
    assert modified[-1] == "`src/file_29.py`" and "`src/file_0.py`" not in modified


def test_a_limit_below_the_skeleton_gives_the_skeleton() -> None:
    text = merge_summaries(OLDER, NEWER, read_files=["a.py"], modified_files=[], token_limit=5)
    assert text == render_summary({})


def test_an_unclosed_fence_in_a_child_cannot_swallow_later_sections() -> None:
    native = "Notes\n```python\nprint(1)\n"
    parsed = merged(native, NEWER)
    assert parsed["Completed Work"][:2] == ["Notes", "```python\n  print(1)\n  ```"]
    assert parsed["Next Actions"] == ["Add benchmarks"]


children = st.one_of(
    st.text(max_size=200),
    st.lists(
        st.sampled_from(
            [
                "## Objective",
                "## Completed Work",
                "## Goal",
                "# Title",
                "- `value`",
                "- plain",
                "* star",
                "  continued `x`",
                "```",
                "```js",
                "- ```",
                "`",
                "",
                "- None",
                "text ``a`b`` here",
            ]
        ),
        max_size=30,
    ).map("\n".join),
    st.builds(
        lambda bullets: render_summary({"Completed Work": bullets, "Objective": bullets[:1]}),
        st.lists(st.text(min_size=1, max_size=40), max_size=5),
    ),
)


@given(
    older=children,
    newer=children,
    read_files=st.lists(st.text(max_size=20), max_size=3),
    modified_files=st.lists(st.text(max_size=20), max_size=3),
    token_limit=st.integers(min_value=0, max_value=800),
)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_any_two_children_merge_into_a_valid_bounded_summary(
    older: str, newer: str, read_files: list[str], modified_files: list[str], token_limit: int
) -> None:
    merged(older, newer, read_files, modified_files, token_limit)


def _segment(i: int) -> str:
    messages = [
        {"role": "user", "content": f"fix `value_{i}` in src/mod_{i}.py; must keep {i} ms"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"I'll use `helper_{i}` instead. Done: fixed it."},
                {
                    "type": "toolCall",
                    "id": f"c{i}",
                    "name": "bash",
                    "arguments": {"command": f"pytest -k t{i}"},
                },
            ],
        },
    ]
    return offline_summary(
        messages, read_files=[], modified_files=[f"src/mod_{i}.py"], token_limit=800
    )


def test_a_thousand_compactions_keep_the_root_bounded() -> None:
    token_limit = 1200
    root = _segment(0)
    modified: list[str] = ["src/mod_0.py"]
    for i in range(1, 1001):
        segment = _segment(i)
        modified = [*modified, f"src/mod_{i}.py"][-100:]
        text = merge_summaries(
            root, segment, read_files=[], modified_files=modified, token_limit=token_limit
        )
        assert estimate_text_tokens(text) <= token_limit
        if i % 100 == 0:
            evidence = Evidence(root + "\n\n" + segment, "", (), tuple(modified))
            assert validate_summary(text, evidence).status == "valid"
        root = text
    parsed = parse_sections(root)
    assert parsed is not None
    assert parsed["Objective"][0].startswith("fix `value_0`")  # the original task survives
    assert "`value_1000`" in parsed["Critical Exact Values"]  # the newest values are there
    assert parsed["Files Modified"][-1] == "`src/mod_1000.py`"
