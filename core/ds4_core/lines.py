"""Line splitting by LSP rules, shared by the core.

Lines end at "\\n", "\\r\\n" or "\\r" only (LSP 3.17, "Text Documents"). `str.splitlines()`
also splits on form feed, vertical tab, U+0085, U+2028, U+2029 and more, which would make our
line numbers and line-based parsing disagree with editors (docs/reference.md §L1).
"""

from __future__ import annotations

import re

LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""A line terminator: "\\r\\n", "\\r" or "\\n"."""


def split_lines(text: str) -> list[str]:
    """`text` split into lines, terminators removed. Like `str.split("\\n")`, "" gives [""] and
    a text ending with a terminator gives a final "" (the LSP line count)."""
    if "\r" not in text:  # the common case, at C speed
        return text.split("\n")
    return LINE_BREAK.split(text)
