"""Classification markers (privacy/markers.py): forms, escaping, the structure floor, and the
property that a marker only ever raises a classification."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.privacy.levels import LEVELS, RANK, highest, parse_level
from ds4_core.privacy.markers import (
    parse,
    placeholder,
    render,
    unwrap_classified,
    wrap_classified,
)

REMOTE = ("normal", "internal")
EVERY = LEVELS


def sent(text: str, allowed: tuple[str, ...] = REMOTE, default: str = "normal") -> str:
    parsed = parse(text, default)  # type: ignore[arg-type]
    return render(text, allowed, default=default, floor=parsed.floor, parsed=parsed).text  # type: ignore[arg-type]


def test_levels_are_ordered_and_parsed_ignoring_case() -> None:
    assert [RANK[level] for level in LEVELS] == [0, 1, 2, 3]
    assert parse_level(" Local-ONLY ") == "local-only"
    assert parse_level("secret") is None
    assert highest(["internal", "bogus"], "normal") == "internal"


def test_a_closed_block_is_withheld_and_its_tags_removed_when_allowed() -> None:
    text = "keep [ds4:local-only]launch code 4242[/ds4:local-only] and [ds4:internal]Q3[/ds4:internal]."
    assert sent(text) == f"keep {placeholder('local-only')} and Q3."
    assert sent(text, EVERY) == "keep launch code 4242 and Q3."
    assert parse(text).level == "local-only"


def test_markers_match_case_insensitively_and_the_same_level_closes() -> None:
    text = "a [DS4:Sensitive]x[/ds4:SENSITIVE] b"
    assert sent(text) == f"a {placeholder('sensitive')} b"
    assert parse(text).floor == "normal"


def test_a_leading_marker_classifies_the_rest() -> None:
    assert sent("  [ds4:sensitive] everything after") == placeholder("sensitive")
    assert sent("[ds4:internal] everything after", EVERY) == " everything after"


def test_nested_blocks_take_the_highest_level_around_them() -> None:
    text = "a [ds4:internal]x [ds4:local-only]y[/ds4:local-only] z[/ds4:internal] b"
    assert sent(text) == f"a x {placeholder('local-only')} z b"
    assert sent(text, ("normal",)) == f"a {placeholder('local-only')} b"


def test_a_backslash_escapes_a_marker() -> None:
    text = r"write \[ds4:local-only] to mark text"
    assert sent(text) == text
    assert not parse(text).marked


def test_unbalanced_markers_raise_the_whole_string() -> None:
    for text in (
        "public [ds4:local-only] never closed",
        "public [/ds4:sensitive] stray close",
        "[ds4:internal]a[ds4:sensitive]b[/ds4:internal]c[/ds4:sensitive]",  # crossing
        "[ds4:internal]closed[/ds4:internal] then [ds4:local-only]open",
    ):
        parsed = parse(text)
        assert parsed.floor != "normal", text
        assert "[DS4 " in sent(text) and "public" not in sent(text), text


def test_wrap_and_unwrap_a_summary() -> None:
    wrapped = wrap_classified("## Goal\nship it", "sensitive")
    assert parse(wrapped).level == "sensitive" and parse(wrapped).floor == "normal"
    assert unwrap_classified(wrapped) == "## Goal\nship it"
    assert unwrap_classified("## Goal") == "## Goal"


def test_hostile_strings_never_raise() -> None:
    for text in ("\ud800[ds4:internal]\x00", "[ds4:" * 10_000, "[/ds4:normal]" * 1000, ""):
        parse(text)
        sent(text)


_PIECES = st.one_of(
    st.text(alphabet="ab \\[]/:ds4", max_size=6),
    st.sampled_from(
        [f"[ds4:{level}]" for level in LEVELS]
        + [f"[/ds4:{level}]" for level in LEVELS]
        + ["[DS4:Internal]", "\\[ds4:local-only]"]
    ),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=12), st.sampled_from(LEVELS), st.sampled_from(LEVELS))
def test_a_marker_only_ever_raises(pieces: list[str], default: str, extra: str) -> None:
    text = "".join(pieces)
    parsed = parse(text, default)  # type: ignore[arg-type]
    # every segment is at least the default, and the whole is at least every segment
    assert all(RANK[segment.level] >= RANK[default] for segment in parsed.segments)
    assert RANK[parsed.level] >= max((RANK[s.level] for s in parsed.segments), default=0)
    # adding a marked block anywhere never lowers the level of the text around it
    more = parse(text + f"[ds4:{extra}]x[/ds4:{extra}]", default)  # type: ignore[arg-type]
    assert RANK[more.level] >= RANK[parsed.level]
    # what a destination receives is exactly the segments of levels it may see, plus
    # placeholders for the others: withheld text never leaks, allowed text is never lost
    for cut in range(len(LEVELS) + 1):
        allowed = LEVELS[:cut]
        out = render(text, allowed, default=default, floor=parsed.floor, parsed=parsed).text  # type: ignore[arg-type]
        expected = "".join(
            s.text for s in parsed.segments if highest((s.level,), parsed.floor) in allowed
        )
        for level in LEVELS:
            out = out.replace(placeholder(level), "")
        assert out == expected


def test_a_block_closed_across_another_raises_by_the_one_left_open() -> None:
    """`[internal]..[local-only]..[/internal]`: closing the outer block ends the inner one
    too, so the local-only block never closed: the whole string is local-only."""
    text = "[ds4:internal]a[ds4:local-only]secret[/ds4:internal] public tail"
    assert parse(text).floor == "local-only"
    assert "public tail" not in sent(text) and "secret" not in sent(text)
