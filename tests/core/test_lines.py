"""`split_lines`: LSP line rules (`\\n`, `\\r\\n`, `\\r` only), not `str.splitlines()`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ds4_core.lines import split_lines
from ds4_core.project.windows import line_starts

texts = st.text(alphabet=st.sampled_from(list("ab \n\r\f\v\x1c\x85\u2028\u2029")), max_size=40)


@given(texts)
def test_lines_are_the_lsp_lines(text: str) -> None:
    starts = line_starts(text)
    ends = [*starts[1:], len(text)]
    expected = [
        text[a:b].rstrip("\r\n") if b > a else "" for a, b in zip(starts, ends, strict=True)
    ]
    # a "\r\n" terminator is removed whole; a lone "\r" or "\n" too
    assert split_lines(text) == expected
    assert "\n".join(split_lines(text)) == text.replace("\r\n", "\n").replace("\r", "\n")


def test_other_separators_stay_inside_their_line() -> None:
    assert split_lines("a\fb\vc\x85d\u2028e\u2029f") == ["a\fb\vc\x85d\u2028e\u2029f"]
    assert split_lines("a\r\nb\rc\nd\n") == ["a", "b", "c", "d", ""]
    assert split_lines("") == [""]
