"""Text to snippets: line windows, heuristic symbols, extra search text, snippet ids.

Rules from docs/reference.md §3.10 unless said otherwise:

* Lines end at "\\n", "\\r\\n" or "\\r" only (LSP 3.17 "Text Documents"), never at what
  `str.splitlines` also accepts (form feed, U+2028, U+0085, ...): a snippet's line numbers must
  be the editor's line numbers. Lines are 1-based and inclusive.
* Windows of 80 lines start every 80 - 12 = 68 lines; at most 200 per file; blank windows are
  skipped. Beyond the reference, a window is also bounded by characters: it ends early, before
  the line that would take it over 20,000 characters, and the next one starts after it (with
  a proportional overlap), so long lines shorten windows instead of hiding the lines after
  the cut. Only a single line over the bound is still cut, ending with
  `[DS4 snippet truncated]`.
* Beyond the reference too, the project index cuts each line over `MAX_LINE_CHARS` (5,000)
  characters to its first 5,000 followed by a marker (`cut_long_lines`): one data-URI line no
  longer keeps a file's other lines out of the index, and line numbers stay those of the
  file.
* Declared symbols come from five regex heuristics (at most 128 per window).
* `search_text` is our addition (issue 3: "do better"): FTS5's `unicode61` tokenizer keeps
  `getShippingMethod` as one token and a CJK run such as `データベース接続` as one token, so
  neither `shipping method` nor `ベース接` could match. The extra column holds identifier
  sub-words and CJK character bigrams; `fts_terms_for` turns a user term into the FTS5
  phrases that match them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate, filterfalse

from ds4_core.retrieval.descriptor import fts_phrase, has_token_characters
from ds4_core.tokens import sha256_hex

SNIPPET_LINES = 80
SNIPPET_OVERLAP = 12
MAX_WINDOWS_PER_FILE = 200
MAX_SNIPPET_CHARS = 20_000
MAX_SYMBOLS_PER_WINDOW = 128
TRUNCATION_MARKER = "[DS4 snippet truncated]"
"""Ends a window cut at `max_chars` (after a "\\n")."""
MAX_LINE_CHARS = 5_000
"""Lines longer than this many characters are cut for the project index (`cut_long_lines`);
the same bound as the minified-file rule (`filters.MAX_LINE_CHARS`, docs/reference.md §3.9)."""

# ----------------------------------------------------------------------------- lines

_LINE_BREAK = re.compile(r"\r\n?|\n")


def line_starts(text: str) -> list[int]:
    """Offsets (in code points) of the start of every line of `text`; always starts with 0.

    Lines end at "\\n", "\\r\\n" or "\\r" (LSP 3.17); form feed, vertical tab, U+0085, U+2028
    and U+2029 stay inside their line. `len(line_starts(text))` is the LSP line count: text
    ending with a line break has a final empty line, and "" has one (empty) line.
    """
    if "\r" not in text:  # the common case, at C speed: 0, then each line's length + 1
        starts = list(accumulate(map((1).__add__, map(len, text.split("\n"))), initial=0))
        starts.pop()
        return starts
    starts = [0]
    starts.extend(match.end() for match in _LINE_BREAK.finditer(text))
    return starts


def content_line_count(text: str, starts: list[int] | None = None) -> int:
    """Lines that hold text: the LSP line count without the empty line after a final break."""
    starts = line_starts(text) if starts is None else starts
    count = len(starts)
    if count > 1 and starts[-1] == len(text):
        count -= 1
    return count


def _line_end(text: str, starts: list[int], line: int) -> int:
    """Offset just past the text of 1-based `line`, before its line break."""
    if line >= len(starts):
        return len(text)
    end = starts[line]
    return end - 2 if text.startswith("\r\n", end - 2) else end - 1


def line_range_text(
    text: str, start_line: int, end_line: int, starts: list[int] | None = None
) -> str:
    """Lines `start_line`..`end_line` (1-based, inclusive, clamped to the text) as they are in
    `text`: inner line breaks kept as written, the break after `end_line` left out.

    This is exactly the text of a non-truncated `LineWindow`, so a stored snippet can be
    compared with the live text of its file. Returns "" when the range is empty.
    """
    starts = line_starts(text) if starts is None else starts
    first = max(1, start_line)
    last = min(end_line, len(starts))
    if first > last:
        return ""
    return text[starts[first - 1] : _line_end(text, starts, last)]


@dataclass(frozen=True)
class LineWindow:
    """One window of whole lines.

    Attributes:
        start_line: first line, 1-based.
        end_line: last line, 1-based, inclusive.
        text: the lines as written (inner line breaks kept, the final one left out); when
            `truncated`, the first `max_chars` characters, "\\n" and `TRUNCATION_MARKER`.
        truncated: whether `text` was cut.
    """

    start_line: int
    end_line: int
    text: str
    truncated: bool


def window_lines(
    text: str,
    size: int = SNIPPET_LINES,
    overlap: int = SNIPPET_OVERLAP,
    max_windows: int = MAX_WINDOWS_PER_FILE,
    max_chars: int = MAX_SNIPPET_CHARS,
) -> list[LineWindow]:
    """Split `text` into overlapping windows of whole lines (docs/reference.md §3.10).

    Lines end at "\\n", "\\r\\n" or "\\r" only (LSP 3.17, "Text Documents"); form feeds and
    U+2028 stay inside their line. Windows start every `size - overlap` lines and hold up to
    `size` lines and up to `max_chars` characters: a window ends before the line that would
    take it over, and the next one starts `overlap * lines / size` lines before its end (so
    every line is in a window); only a single line over `max_chars` is cut (`truncated`).
    Line numbers are 1-based and inclusive. The empty line after a final line
    break is not part of any window. The last window ends at the last line; no window lies
    wholly inside the previous one. Windows of white space only are skipped; at most
    `max_windows` are returned (the rest of a longer file is not windowed).

    Raises:
        ValueError: if `size < 1`, `overlap < 0`, `overlap >= size`, `max_windows < 0` or
            `max_chars < 1`.
    """
    if size < 1 or overlap < 0 or overlap >= size:
        raise ValueError(f"need size >= 1 and 0 <= overlap < size, got {size=} {overlap=}")
    if max_windows < 0 or max_chars < 1:
        raise ValueError(
            f"need max_windows >= 0 and max_chars >= 1, got {max_windows=} {max_chars=}"
        )
    starts = line_starts(text)
    count = content_line_count(text, starts)
    windows: list[LineWindow] = []
    start, last_end = 1, 0
    while len(windows) < max_windows and start <= count:
        end = _window_end(text, starts, start, min(count, start + size - 1), max_chars)
        if end <= last_end:  # it would lie inside the previous window: start after it
            start = last_end + 1
            continue
        chunk = text[starts[start - 1] : _line_end(text, starts, end)]
        if chunk.strip():
            truncated = len(chunk) > max_chars  # a single line over the bound
            if truncated:
                chunk = f"{chunk[:max_chars]}\n{TRUNCATION_MARKER}"
            windows.append(LineWindow(start, end, chunk, truncated))
        if end >= count:
            break
        last_end = end
        # `overlap` lines after a full window; proportionally fewer after a short one
        start = max(start + 1, end + 1 - (end - start + 1) * overlap // size)
    return windows


def _window_end(text: str, starts: list[int], start: int, end: int, max_chars: int) -> int:
    """The last line of the window from `start`: `end`, or earlier so that the window's text
    holds at most `max_chars` characters (never before `start`)."""
    base = starts[start - 1]
    while end > start and _line_end(text, starts, end) - base > max_chars:
        end -= 1
    return end


_LINE_PIECES = re.compile(r"(\r\n|\r|\n)")


def cut_line(line: str, max_chars: int = MAX_LINE_CHARS) -> str:
    """`line` (without its break) as the project index holds it: unchanged up to `max_chars`
    characters, else its first `max_chars` followed by `[DS4 line cut: N characters]` (N its
    full length)."""
    if len(line) <= max_chars:
        return line
    return f"{line[:max_chars]} [DS4 line cut: {len(line):,} characters]"


def cut_long_lines(text: str, max_chars: int = MAX_LINE_CHARS) -> tuple[str, int]:
    """`text` with every line over `max_chars` characters cut by `cut_line`, and how many
    lines were cut. Line breaks (LSP: "\\n", "\\r\\n", "\\r") and so line numbers are kept."""
    if len(text) <= max_chars:
        return text, 0
    if "\r" not in text:
        lines = text.split("\n")
        if max(map(len, lines)) <= max_chars:
            return text, 0
        cut = sum(1 for line in lines if len(line) > max_chars)
        return "\n".join(cut_line(line, max_chars) for line in lines), cut
    pieces = _LINE_PIECES.split(text)  # content, break, content, ..., content
    cut = sum(1 for line in pieces[::2] if len(line) > max_chars)
    if not cut:
        return text, 0
    pieces[::2] = [cut_line(line, max_chars) for line in pieces[::2]]
    return "".join(pieces), cut


# ----------------------------------------------------------------------------- symbols

_NAME = r"[A-Za-z_$][\w$]*"
_MODIFIERS = (
    r"(?:(?:export|default|declare|public|private|protected|internal|abstract|final|sealed|"
    r"static|partial|data|open|unsafe|typedef|readonly|pub(?:\([^)\n]*\))?)[ \t]+)*"
)
# Rules 1, 3 and 4 start a line: one pass with one named group per rule. The pattern starts
# with a literal "\n" (searched for at C speed; the text is matched with "\n" prepended)
# instead of a MULTILINE "^", which Python's engine tries at every position.
_LINE_SYMBOLS = re.compile(
    # 1. (class|interface|enum|namespace|record|struct|trait|type) Name, after optional
    #    modifiers (at a line start, so prose such as "the class of problems" does not count)
    rf"\n[ \t]*+(?:{_MODIFIERS}(?:class|interface|enum|namespace|record|struct|trait|type)"
    rf"[ \t]+(?P<type>{_NAME})"
    # 3. (export )?(const|let|var) Name followed by = or :
    rf"|(?:export[ \t]+)?(?:const|let|var)[ \t]+(?P<var>{_NAME})[ \t]*[=:]"
    # 4. (def|fn|func) Name; also `async def`, `pub fn`, Go methods `func (r *Recv) Name`
    rf"|(?:(?:async|pub(?:\([^)\n]*\))?|const|unsafe|extern)[ \t]+)*"
    rf"(?:def|fn|func)[ \t]+(?:\([^)\n]*\)[ \t]*)?(?P<def>{_NAME}))",
)
_LINE_KEYWORDS = (
    "class", "interface", "enum", "namespace", "record", "struct", "trait", "type",
    "const", "let", "var", "def", "fn",
)  # fmt: skip
# 2. (async )?function Name (also generators: function* Name), followed by ( or <T>
# The lookbehinds of rules 2 and 5 come after their keyword (same meaning: nothing of a word
# before it), so the regex engine searches for the literal keyword at C speed instead of trying
# the lookbehind at every position (about 30 times faster); `[ \t]*+` in rule 1 does not give
# back indentation to retry the alternatives (a letter must follow it anyway).
_FUNCTION_SYMBOL = re.compile(
    rf"function(?<![\w$]function)\b[ \t]*\*?[ \t]*({_NAME})(?=[ \t]*[<(])"
)
# 5. SQL CREATE [OR REPLACE] [UNIQUE|VIRTUAL|TEMP] (TABLE|VIEW|...) [IF NOT EXISTS] Name
_SQL_SYMBOL = re.compile(
    r"CREATE(?<!\wCREATE)[ \t]+(?:OR[ \t]+REPLACE[ \t]+)?"
    r"(?:(?:UNIQUE|VIRTUAL|TEMP|TEMPORARY)[ \t]+)?"
    r"(?:TABLE|VIEW|INDEX|FUNCTION|PROCEDURE|TRIGGER)[ \t]+(?:IF[ \t]+NOT[ \t]+EXISTS[ \t]+)?"
    r"((?:[\w$]+|\"[^\"\n]+\"|`[^`\n]+`|\[[^\]\n]+\])"
    r"(?:\.(?:[\w$]+|\"[^\"\n]+\"|`[^`\n]+`|\[[^\]\n]+\]))*)",
    re.IGNORECASE,
)


def _sql_name(raw: str) -> str:
    last = re.split(r"\.(?=[\w$\"`\[])", raw)[-1]
    return last.strip('"`[]')


def declared_symbols(text: str, limit: int = MAX_SYMBOLS_PER_WINDOW) -> list[str]:
    """Names declared in `text` by the heuristics of docs/reference.md §3.10, in text order.

    1. `(class|interface|enum|namespace|record|struct|trait|type) Name` (at a line start,
       after optional modifiers such as `export`, `pub`, `abstract`, `data`);
    2. `(async )?function Name` (followed by `(` or `<`, so prose is not a declaration);
    3. `(export )?(const|let|var) Name` followed by `=` or `:` at a line start;
    4. `(def|fn|func) Name` at a line start (also `async def`, `pub fn`, Go methods);
    5. SQL `CREATE [OR REPLACE] (TABLE|VIEW|INDEX|FUNCTION|PROCEDURE|TRIGGER)
       [IF NOT EXISTS] Name`, case-insensitive (a schema prefix and quotes dropped).

    Duplicates are dropped (first occurrence kept); at most `limit` names. Names never hold
    white space, so the store keeps them space-separated.
    """
    found: list[tuple[int, str]] = []
    # Substring checks first: each regex pass costs far more than `in` (C speed).
    if any(keyword in text for keyword in _LINE_KEYWORDS):
        lines = text.replace("\r", "\n") if "\r" in text else text  # same offsets
        for match in _LINE_SYMBOLS.finditer("\n" + lines):
            group = match.lastgroup
            if group is not None:
                found.append((match.start(group) - 1, match.group(group)))
    if "function" in text:
        found.extend((m.start(1), m.group(1)) for m in _FUNCTION_SYMBOL.finditer(text))
    if "create" in text or "CREATE" in text or "create" in text.lower():
        for match in _SQL_SYMBOL.finditer(text):
            name = _sql_name(match.group(1))
            if name:
                found.append((match.start(1), name))
    found.sort(key=lambda item: item[0])
    names = list(dict.fromkeys(name for _pos, name in found))
    return names[:limit]


# ----------------------------------------------------------------------------- search text

_CJK_RANGES = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3005\u3007"  # 々 〇
    "\u3040-\u30ff"  # Hiragana, Katakana (with ー)
    "\u3130-\u318f"  # Hangul Compatibility Jamo
    "\u31f0-\u31ff"  # Katakana Phonetic Extensions
    "\u3400-\u4dbf"  # CJK Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\ua960-\ua97f"  # Hangul Jamo Extended-A
    "\uac00-\ud7af"  # Hangul Syllables
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\uff66-\uff9f"  # Halfwidth Katakana
    "\U00020000-\U0003134f"  # CJK Extensions B-G
)
_CJK_CHAR = f"[{_CJK_RANGES}]"
_HAS_CJK = re.compile(_CJK_CHAR)
_CJK_SPLIT = re.compile(f"({_CJK_CHAR}+)")
_WORD = re.compile(r"\w+")
_LINE_SPLIT = re.compile(r"\r\n?|\n")
# A word (from a word start) holding a camelCase boundary, an ALLCapsWord boundary or an
# underscore between letters/digits: the identifiers whose sub-words unicode61 would hide.
# `\b` keeps this linear: inside a word there is no boundary to restart from.
# ASCII characters that cannot be part of a word -> space; `str.translate` + `str.split` find
# candidate words about ten times faster than a regex scan (which Python runs per position).
_ASCII_NON_WORD_TO_SPACE = str.maketrans(
    {chr(c): " " for c in range(128) if not (chr(c).isalnum() or chr(c) == "_")}
)
_ASCII_SUBWORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")
_PLAIN_TOKEN = re.compile(r"[^\W_]+")


def _unicode_subwords(piece: str) -> list[str]:
    """camelCase split of a word with non-ASCII letters (str.isupper / islower decide)."""
    parts: list[str] = []
    current = ""
    for index, char in enumerate(piece):
        if current and char.isupper():
            previous = piece[index - 1]
            following = piece[index + 1] if index + 1 < len(piece) else ""
            if (
                previous.islower()
                or previous.isdigit()
                or (previous.isupper() and following.islower())
            ):
                parts.append(current)
                current = ""
        current += char
    if current:
        parts.append(current)
    return parts


def identifier_subwords(word: str) -> list[str]:
    """Lower-case sub-words of an identifier: `getShippingMethod` -> get shipping method,
    `parse_http_response` -> parse http response, `HTTPServer` -> http server, `utf8Decode`
    -> utf8 decode. Digits stay with the letters before them. A plain word gives itself."""
    parts: list[str] = []
    for piece in word.split("_"):
        if not piece:
            continue
        if piece.isascii():
            parts.extend(_ASCII_SUBWORD.findall(piece))
        else:
            parts.extend(_unicode_subwords(piece))
    return [part.lower() for part in parts if part]


@lru_cache(maxsize=1 << 15)
def _subword_phrase(word: str) -> str:
    """`identifier_subwords(word)` joined by spaces, or "" when they are just the pieces
    between underscores (which unicode61 already finds)."""
    parts = identifier_subwords(word)
    pieces = sum(1 for piece in word.split("_") if piece)
    return " ".join(parts) if len(parts) > pieces else ""


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)] if len(run) > 1 else [run]


def _word_tokens(word: str, tails: dict[str, None] | None = None) -> list[str]:
    """Tokens of one `\\w+` word in search-text form: sub-words, CJK runs as bigrams (a
    one-character run as itself). The last character of a longer run goes to `tails`."""
    if not _HAS_CJK.search(word):
        return identifier_subwords(word)
    tokens: list[str] = []
    for index, piece in enumerate(_CJK_SPLIT.split(word)):
        if not piece:
            continue
        if index % 2:  # a CJK run
            tokens.extend(_bigrams(piece))
            if tails is not None and len(piece) > 1:
                tails[piece[-1]] = None
        else:
            tokens.extend(identifier_subwords(piece))
    return tokens


def search_text(text: str) -> str:
    """Extra indexed text so FTS5 finds what identifiers and CJK runs hide.

    * Every distinct identifier with a case boundary (camelCase, PascalCase, `HTTPServer`),
      as its lower-case sub-words: `getShippingMethod` -> `get shipping method`,
      `parse_httpResponse` -> `parse http response` (once per distinct sequence). Plain
      snake_case (`parse_http_response`) needs nothing: unicode61 already splits at `_`,
      so `http response` matches the content itself.
    * Every distinct line holding CJK characters, as a token stream in which each CJK run is
      written as its character bigrams (`データベース` -> `デー ータ タベ ベー ース`) and other words as
      their sub-words; so any 2+ character substring of a CJK run is a phrase of consecutive
      tokens (`fts_terms_for` builds that phrase), also across words in the same line.
    * Finally the last character of every CJK run longer than one character, so a prefix
      query for one character (`"続"*`) finds it at any position of a run.

    Deterministic; "" when there is nothing to add.
    """
    chunks = text.translate(_ASCII_NON_WORD_TO_SPACE).split()
    # All lower-case or all upper-case words (snake_case too) have no case boundary; unicode61
    # already splits them at `_`. The filters run at C speed (most words are dropped here);
    # repeated words hit `_subword_phrase`'s cache.
    cased = filterfalse(str.isupper, filterfalse(str.islower, chunks))
    phrases: dict[str, None]
    if text.isascii():
        phrases = dict.fromkeys(map(_subword_phrase, cased))
    else:
        phrases = {}
        for chunk in cased:
            for word in (chunk,) if chunk.isascii() else _WORD.findall(chunk):
                if word.isascii() or not _HAS_CJK.search(word):  # CJK: the line pass below
                    phrases[_subword_phrase(word)] = None
    phrases.pop("", None)
    out = list(phrases)
    if not text.isascii() and _HAS_CJK.search(text):
        tails: dict[str, None] = {}
        lines: dict[str, None] = {}
        for line in _LINE_SPLIT.split(text):
            if line not in lines and _HAS_CJK.search(line):
                lines[line] = None
        for line in lines:
            out.append(
                " ".join(t for word in _WORD.findall(line) for t in _word_tokens(word, tails))
            )
        if tails:
            out.append(" ".join(tails))
    return "\n".join(part for part in out if part)


def fts_terms_for(text: str) -> list[str]:
    """FTS5 phrase strings that find the user term `text` in the project index.

    Each string is one quoted FTS5 phrase (`fts_phrase` quoting, so no input can produce
    query syntax); OR them, or use `project_fts_query`. The list holds:

    * for a term without CJK characters, the term itself (`"getShippingMethod"` matches the
      content) and, when splitting identifiers changes its tokens, the sub-word phrase
      (`"get shipping method"`), which matches `search_text`; `shipping method` is a single
      phrase that matches the sub-words of `getShippingMethod`;
    * for a term with CJK characters, one phrase over `search_text` tokens: each CJK run as
      its bigrams (`ベース接` -> `"ベー ース ス接"`). A one-character run is itself inside the
      term, a prefix (`"... 接" *`) at the end; a lone one-character term is `"接" *`. A
      one-character run at the start of a longer term is left out (it would end a longer run
      in the text, which FTS5 cannot express), so the phrase is slightly looser.

    Returns [] for a term without token characters.
    """
    if not has_token_characters(text):
        return []
    if not _HAS_CJK.search(text):
        phrases = [fts_phrase(text)]
        sub = [token for word in _WORD.findall(text) for token in identifier_subwords(word)]
        if sub and sub != _PLAIN_TOKEN.findall(text.lower()):
            phrases.append(fts_phrase(" ".join(sub)))
        return phrases
    # Segments of the term in order: ("w", word piece) or ("c", CJK run).
    segments: list[tuple[str, str]] = []
    for word in _WORD.findall(text):
        for index, piece in enumerate(_CJK_SPLIT.split(word)):
            if piece:
                segments.append(("c" if index % 2 else "w", piece))
    tokens: list[str] = []
    prefix = False
    last = len(segments) - 1
    for position, (kind, piece) in enumerate(segments):
        if kind == "w":
            tokens.extend(identifier_subwords(piece))
        elif len(piece) > 1:
            tokens.extend(_bigrams(piece))
        elif position == last:
            tokens.append(piece)  # the text's run starts here and may go on: a prefix
            prefix = True
        elif position > 0:
            tokens.append(piece)  # bounded on both sides: the text's run is this character
        # else: a one-character run that starts the term; the text's run may begin earlier
    if not tokens:
        return []
    phrase = fts_phrase(" ".join(tokens))
    return [f"{phrase} *" if prefix else phrase]


def project_fts_query(terms: Iterable[str], limit: int = 32) -> str | None:
    """The FTS5 MATCH text for user `terms`: every phrase of `fts_terms_for`, OR-ed, the
    first `limit` unique phrases. None when nothing is left. Bind it (`MATCH ?`)."""
    phrases: dict[str, None] = {}
    for term in terms:
        for phrase in fts_terms_for(term):
            phrases[phrase] = None
            if len(phrases) >= limit:
                return " OR ".join(phrases)
    return " OR ".join(phrases) if phrases else None


# ----------------------------------------------------------------------------- ids


def snippet_id(
    project_path: str, file_path: str, file_hash: str, start_line: int, end_line: int
) -> str:
    """sha256 hex of project path, file path, file hash, start and end line joined by NUL
    (docs/reference.md §3.10)."""
    return sha256_hex(
        "\x00".join((project_path, file_path, file_hash, str(start_line), str(end_line)))
    )


__all__ = [
    "MAX_LINE_CHARS",
    "MAX_SNIPPET_CHARS",
    "MAX_SYMBOLS_PER_WINDOW",
    "MAX_WINDOWS_PER_FILE",
    "SNIPPET_LINES",
    "SNIPPET_OVERLAP",
    "TRUNCATION_MARKER",
    "LineWindow",
    "content_line_count",
    "cut_line",
    "cut_long_lines",
    "declared_symbols",
    "fts_terms_for",
    "identifier_subwords",
    "line_range_text",
    "line_starts",
    "project_fts_query",
    "search_text",
    "snippet_id",
    "window_lines",
]
