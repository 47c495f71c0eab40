"""Excerpts masked against what the whole text says (core/ds4_core/privacy/excerpts.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.privacy import excerpts
from ds4_core.privacy.markers import parse, placeholder, render

BEGIN, END = "-----BEGIN " + "PRIVATE KEY-----", "-----END " + "PRIVATE KEY-----"


def test_a_key_block_is_hidden_in_any_window_and_an_unclosed_one_to_the_json_quote() -> None:
    text = f"a\n{BEGIN}\nQUJD\nREVG\n{END}\nb"
    [span] = excerpts.private_key_spans(text)
    assert text[span.start : span.end].startswith(BEGIN) and text[span.end :] == "\nb"
    start = text.index("REVG")
    assert excerpts.masked(text, start, len(text), [span]) == "[DS4 REDACTED PRIVATE KEY]\nb"
    quoted = f'{{"out": "{BEGIN}\\nQUJD", "next": 1}}'
    [cut] = excerpts.private_key_spans(quoted)
    assert quoted[cut.end] == '"'
    assert excerpts.private_key_spans("no key here") == []


def test_marker_spans_drop_markers_and_withhold_runs_as_render_does() -> None:
    text = "a [ds4:internal]b[/ds4:internal] c [ds4:local-only]d[ds4:sensitive]e[/ds4:sensitive][/ds4:local-only] f"
    parsed = parse(text)
    spans = excerpts.marker_spans(parsed, len(text), ("normal", "internal"))
    assert excerpts.masked(text, 0, len(text), spans) == render(text, ("normal", "internal")).text
    assert excerpts.masked(text, 0, len(text), excerpts.marker_spans(parsed, len(text))) == (
        "a b c de f"
    )
    assert excerpts.level_between(parsed, 0, 3) == "normal"
    assert excerpts.level_between(parsed, 0, text.index(" c")) == "internal"
    assert excerpts.level_between(parsed, text.index("e[/"), len(text)) == "local-only"


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(
        st.sampled_from(
            [
                "x",
                " ",
                "\n",
                "[ds4:internal]",
                "[/ds4:internal]",
                "[ds4:local-only]",
                "[/ds4:local-only]",
                "[ds4:sensitive]",
                "[/ds4:sensitive]",
                "\\",
            ]
        ),
        max_size=30,
    ),  # fmt: skip
    allowed=st.sampled_from(
        [("normal",), ("normal", "internal"), ("normal", "internal", "sensitive")]
    ),
)
def test_masking_the_whole_text_is_render(pieces: list[str], allowed: tuple[str, ...]) -> None:
    """Masked whole, a text reads as `markers.render` writes it for the same levels (the
    structure floor included)."""
    text = "".join(pieces)
    parsed = parse(text)
    spans = excerpts.marker_spans(parsed, len(text), allowed)
    expected = render(text, allowed, floor=parsed.floor).text
    assert excerpts.masked(text, 0, len(text), spans) == expected


def test_merged_spans_keep_both_replacements() -> None:
    one = excerpts.Hidden(0, 10, placeholder("local-only"))
    two = excerpts.Hidden(5, 20, "[DS4 REDACTED PRIVATE KEY]")
    [both] = excerpts.merged([one], [two])
    assert (both.start, both.end) == (
        0,
        20,
    ) and both.replacement == one.replacement + two.replacement
    assert (
        excerpts.overlapping([both], 19, 30) == [both]
        and excerpts.overlapping([both], 20, 30) == []
    )
