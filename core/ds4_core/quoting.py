"""Quoting untrusted text as data that stays on one line (docs/architecture.md "Quoted data, never
instructions").

Evidence and project-source blocks are read line by line, by models and by programs, and
not every reader splits lines the LSP way (LSP 3.17, "Text Documents": "\\n", "\\r\\n", "\\r"
only). Python's `str.splitlines()` also ends a line at U+000B, U+000C, U+001C-U+001E,
U+0085 (NEL), U+2028 and U+2029; the mandatory breaks of Unicode line breaking (UAX #14:
BK, CR, LF, NL) at U+000B, U+000C, U+0085, U+2028 and U+2029; ECMAScript's line terminators
include U+2028 and U+2029. Bidirectional controls (the `Bidi_Control` property, UAX #9:
U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) do not break lines but can make a
displayed line read differently from its characters ("Trojan Source", CVE-2021-42574). So
quoted text escapes all of them:

- `json_string` / `json_text`: JSON as `json.dumps(..., ensure_ascii=False)` writes it, with
  every `UNSAFE_CHARACTERS` character written as a `\\uXXXX` escape. The result has no line
  break for any of the rules above and no bidi control, and `json.loads` gives the value back.
- `one_line`: free text (a reason, a hash) with the same characters turned into spaces.
- `terminal_text`: a value shown in a terminal report, with the same characters escaped
  visibly (`\\x1b`, `\\u2028`).
"""

from __future__ import annotations

import json
import re
from typing import Any

BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""The `Bidi_Control` characters of Unicode (UAX #9, PropList.txt)."""

TAG_CHARACTERS = "\U000e0000-\U000e007f"
"""The Unicode tag characters (Tags block, U+E0000-U+E007F): invisible, they spell ASCII text
a model may read while a person sees nothing ("ASCII smuggling" of instructions)."""

_RAW_IN_JSON = "\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff" + BIDI_CONTROLS + TAG_CHARACTERS
# What `json.dumps(..., ensure_ascii=False)` leaves raw inside strings and quoting escapes: DEL
# and C1 controls (U+0085 NEL among them), U+2028, U+2029, U+FEFF, lone surrogates and the
# bidi controls. (C0 controls, U+000A-U+000D and U+001C-U+001E among them, are already
# escaped inside strings; outside strings only `indent` whitespace is written.)
_UNESCAPED_IN_JSON = re.compile(f"[{_RAW_IN_JSON}]")

UNSAFE_CHARACTERS = re.compile(f"[\x00-\x1f{_RAW_IN_JSON}]")
"""What quoted text never holds raw: C0 and C1 controls and DEL (line breaks of every rule:
U+000A-U+000D, U+001C-U+001E, U+0085 NEL), U+2028 LINE SEPARATOR, U+2029 PARAGRAPH SEPARATOR,
the bidi controls, U+FEFF (a byte order mark in mid-text), lone surrogates (which no UTF-8
writer accepts) and the invisible tag characters U+E0000-U+E007F."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # JSON escapes UTF-16 code units: a surrogate pair (RFC 8259, 7)
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_text(value: Any, **dumps_options: Any) -> str:
    """`value` as JSON text (`json.dumps(value, ensure_ascii=False, **dumps_options)`) with every
    `UNSAFE_CHARACTERS` character inside a string written as `\\uXXXX`. With `indent`, the
    document's own line breaks stay; every string in it is still on one line.

    `json.dumps` escapes C0 controls itself; the others only ever occur inside strings (never
    in an escape sequence, which is ASCII), so the substitution keeps the document valid and
    `json.loads` returns the same value; the one exception is a high surrogate followed by a
    low one, two code points that `json.loads` joins into one. Raises what `json.dumps` raises (TypeError, ValueError).
    """
    return _UNESCAPED_IN_JSON.sub(_escape, json.dumps(value, ensure_ascii=False, **dumps_options))


def json_string(value: str) -> str:
    """`value` as one JSON string literal on one line by every line-break rule, with no bidi
    control (`json_text` of a string). Non-ASCII letters, CJK and emoji stay as they are."""
    return json_text(value)


def one_line(text: str) -> str:
    """`text` with every `UNSAFE_CHARACTERS` character (controls, line and paragraph
    separators, bidi controls, U+FEFF, lone surrogates) turned into a space."""
    return UNSAFE_CHARACTERS.sub(" ", text)


def _visible_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:
        return f"\\U{code:08x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(value: object) -> str:
    """`str(value)` safe to print on a terminal line: every `UNSAFE_CHARACTERS` character
    (C0 and C1 controls and DEL, so ESC and with it ANSI/OSC escape sequences; line breaks of
    every rule, U+2028, U+2029; bidi controls; U+FEFF; lone surrogates) written visibly as
    `\\xNN` (below U+0100) or `\\uXXXX`, e.g. ESC as `\\x1b`, a tab as `\\x09`, U+202E as
    `\\u202e`. The result is one line that changes no terminal state and displays in the order
    of its characters. Other characters (letters of any script, emoji, backslashes) stay as
    they are, so the escaping is visible but not reversible. The CLI's text reports pass every
    value from a workspace, a session or the database through it."""
    return UNSAFE_CHARACTERS.sub(_visible_escape, str(value))
