"""What a request is about: the `TaskDescriptor` and the FTS5 query text built from it.

`describe_task` follows docs/reference.md §3.1: the input is the text of the last user message,
trimmed and cut to 20,000 characters; backticked spans, quoted phrases, file paths, qualified
names, `--flags`, word candidates, error codes, technologies and keywords are pulled out with the
reference's regular expressions and folded into `exact_identifiers`, `entities` and
`query_terms`.

Regex dialect notes (the reference's expressions are JavaScript):

- JavaScript `\\w`, `\\d` and `\\b` are ASCII-only even with the `u` flag, so every pattern that
  uses them is compiled here with `re.ASCII`.
- The keyword pattern `[\\p{L}\\p{N}_-]{4,}` is written `[\\w-]{4,}` without `re.ASCII`: in
  Python, `\\w` on `str` is exactly `[\\p{L}\\p{N}_]` (checked over every code point against
  `unicodedata.category`, Unicode 14), so the two classes are the same set.
- JavaScript `\\s` and `String.prototype.trim` use the ECMAScript white-space set, spelled out
  in `_JS_SPACE` (it differs from Python's `str.isspace` on U+FEFF, U+001C..U+001F and U+0085).
- Lengths and the 20,000 / 500 cuts count code points (JavaScript counts UTF-16 units; the two
  differ only for characters outside the BMP).
- The file-path and qualified-name patterns backtrack quadratically on long runs of the
  characters they accept (4-6 s on a 20,000-character base64 blob in CPython). When a text has
  such a run (longer than `_REGEX_SAFE_RUN`), they are evaluated by `_find_file_paths` /
  `_find_qualified_names`, linear scans that return exactly the matches `re.findall` would
  (tests check them against the regular expressions on generated text); otherwise the regular
  expressions run as they are (faster on ordinary text).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

MAX_INPUT_CHARS = 20_000
OBJECTIVE_CHARS = 500
DEFAULT_UNIQUE_LIMIT = 24
PHRASE_LIMIT = 8
FILE_LIMIT = 16
SYMBOL_LIMIT = 20
ERROR_LIMIT = 12
KEYWORD_LIMIT = 20
FTS_TERM_LIMIT = 16

FILLER_WORDS: frozenset[str] = frozenset(
    """
    also actually anything everything something thing things like maybe much many really
    seem seems some still used uses using called calling very getting going goes here
    """.split()
)
"""English words that are not in the reference's STOPWORDS but say nothing about *what* a
request is about ("how is X used", "where is it called"); as keywords they pulled in entries
whose only match was the filler (a decision beyond docs/reference.md §3.1)."""

STOPWORDS: frozenset[str] = frozenset(
    """
    about after again aggiungi allora anche ancora avere before come considerare continua
    continue could della delle degli detto devi dobbiamo does doing done dove essere fare fix
    from grazie have into just make molto nella nello okay ovvero perche pero please poco
    procedi procediamo proceed prosegui quale quella quelle quelli quello questo questa quindi
    should stato stata stati state than that thanks their them then there these this those
    tutta tutto voglio want were what when where which with would your
    """.split()
)
"""English + Italian stopwords of docs/reference.md §3.1 (lowercase)."""

TECHNOLOGIES: tuple[str, ...] = (
    "typescript", "javascript", "node", "sqlite", "sql", "react", "python", "dotnet", "csharp",
    "java", "rust", "golang", "docker", "kubernetes", "azure", "aws", "postgres", "mysql",
    "redis", "git", "pi",
)  # fmt: skip
"""Technologies recognised in a request, in the reference's order (docs/reference.md §3.1)."""

# ECMAScript WhiteSpace + LineTerminator (what JavaScript's `\s` and `trim()` use).
_JS_SPACE_CHARS = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_JS_SPACE = "[" + re.escape(_JS_SPACE_CHARS) + "]"
_SURROGATE = re.compile("[\ud800-\udfff]")

_BACKTICKED = re.compile(r"`([^`\n]{2,160})`")
_DOUBLE_QUOTED = re.compile(r'"([^"\n]{4,200})"')
_SINGLE_QUOTED = re.compile(r"'([^'\n]{4,200})'")
# Qualified names (docs/reference.md §3.1); kept for the equivalence test, evaluated by
# `_find_qualified_names` in linear time (the regex is quadratic on inputs like "a$a$a$...").
QUALIFIED_PATTERN = re.compile(r"\b([A-Za-z_$][\w$]*(?:(?:::|\.)[A-Za-z_$][\w$]*)+)\b", re.ASCII)
_FLAG = re.compile(r"(?:^|" + _JS_SPACE + r")(--[a-z0-9][a-z0-9-]*)\b", re.ASCII | re.IGNORECASE)
_WORD_CANDIDATE = re.compile(r"\b([A-Za-z_$][A-Za-z0-9_$-]{2,})\b", re.ASCII)
_HAS_SPACE = re.compile(_JS_SPACE)
_SYMBOL_PUNCT = re.compile(r"[_$-]")
_CAMEL_HUMP = re.compile(r"[a-z][A-Z]")
_PASCAL_CASE = re.compile(r"[A-Z][A-Za-z0-9]+", re.ASCII)
_ERROR_CODE = re.compile(r"(?:ERR(?:OR)?|SQLITE|HTTP|CS|TS|E)[-_]?[A-Z0-9_]{2,}", re.ASCII)
_ERROR_NAME = re.compile(r"ENOENT|EACCES|ECONNRESET|ETIMEDOUT|SIG[A-Z]+", re.ASCII)
_KEYWORD = re.compile(r"[\w-]{4,}")
_ALL_DIGITS = re.compile(r"[0-9]+")
_TECHNOLOGY_PATTERNS = tuple(
    (name, re.compile(r"(?:^|[^a-z0-9])" + name + r"(?:[^a-z0-9]|$)")) for name in TECHNOLOGIES
)

# File paths (docs/reference.md §3.1):
#   ((?:[A-Za-z]:)?(?:\.{0,2}[\\/])?(?:[\w.@+-]+[\\/])*[\w.@+-]+\.[A-Za-z0-9]{1,12})
# kept for the equivalence test; `_find_file_paths` evaluates it in linear time.
FILE_PATH_PATTERN = re.compile(
    r"((?:[A-Za-z]:)?(?:\.{0,2}[\\/])?(?:[\w.@+-]+[\\/])*[\w.@+-]+\.[A-Za-z0-9]{1,12})", re.ASCII
)
_PATH_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.@+-")
_EXT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_SEPARATORS = frozenset("/\\")
_MAX_EXT = 12
_REGEX_SAFE_RUN = 64  # longest run for which the backtracking regexes stay fast (<= ~20 ms)
_PATH_RUN = re.compile(r"[A-Za-z0-9_.@+\-/\\:]+")
_NAME_RUN = re.compile(r"[A-Za-z0-9_$.:]+")
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_NAME_CHARS = _WORD_CHARS | {"$"}
_NAME_HEADS = _LETTERS | {"_", "$"}


@dataclass(frozen=True)
class TaskDescriptor:
    """The searchable facets of one request (docs/reference.md §3.1).

    Every field is a tuple of strings in first-occurrence order, deduplicated case-insensitively
    (first spelling kept). `objective` is the first 500 characters of the trimmed request.
    `backticked`, `qualified` and `flags` are the raw extractions that feed `symbols`;
    `exact_identifiers` (<= 24) drive the literal pass of history retrieval, `query_terms`
    (<= 24) the FTS pass, `entities` (<= 24) add technologies for display and ranking.
    """

    objective: str = ""
    backticked: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    qualified: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    technologies: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    exact_identifiers: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    query_terms: tuple[str, ...] = ()


def js_trim(text: str) -> str:
    """`text` without leading/trailing ECMAScript white space (JavaScript `String.trim`)."""
    return text.strip(_JS_SPACE_CHARS)


def replace_lone_surrogates(text: str) -> str:
    """`text` with unpaired UTF-16 surrogates (legal in JSON, not in UTF-8) replaced by U+FFFD.

    Such strings cannot be bound as SQLite parameters; session JSON can contain them.
    """
    return _SURROGATE.sub("\ufffd", text)


def unique(values: Iterable[str], limit: int | None = DEFAULT_UNIQUE_LIMIT) -> tuple[str, ...]:
    """Trimmed, non-empty `values`, deduplicated case-insensitively, first spelling kept.

    Stops after `limit` values (None: no limit). docs/reference.md §3.1 `unique()`.
    """
    seen: set[str] = set()
    result: list[str] = []
    if limit is not None and limit <= 0:
        return ()
    for raw in values:
        value = js_trim(raw)
        key = value.lower()
        if not value or key in seen:
            continue
        seen.add(key)
        result.append(value)
        if limit is not None and len(result) >= limit:
            break
    return tuple(result)


def _group_one(pattern: re.Pattern[str], text: str) -> list[str]:
    return [m.group(1) for m in pattern.finditer(text) if m.group(1)]


def _find_file_paths(text: str) -> list[str]:
    """All non-overlapping matches of `FILE_PATH_PATTERN` in `text`, in O(len(text)).

    The pattern is D? S? (X+ Sep)* X+ '.' E{1,12} with D = drive letter + ':', S = up to two
    dots and a separator, X = `[\\w.@+-]` (ASCII), Sep = `/` or `\\`, E = `[A-Za-z0-9]`.
    Segment boundaries are forced (X excludes the separators), so at a body start the
    backtracking engine settles on the farthest segment of the separator-linked chain that holds
    a '.' followed by an E character (not as its first character), on the last such '.' in that
    segment, and on up to 12 E characters after it. Those choices are precomputed per maximal
    X-run, right to left, so each start position costs O(1).
    """
    n = len(text)
    if n == 0 or "." not in text:
        return []
    in_path = [ch in _PATH_CHARS for ch in text]
    ext_len = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        if text[i] in _EXT_CHARS:
            ext_len[i] = min(_MAX_EXT, ext_len[i + 1] + 1)
    run_start = [0] * n
    runs: list[tuple[int, int]] = []  # maximal X-runs [start, end)
    i = 0
    while i < n:
        if not in_path[i]:
            i += 1
            continue
        start = i
        while i < n and in_path[i]:
            i += 1
        runs.append((start, i))
        for k in range(start, i):
            run_start[k] = start
    # Per run: last '.' followed by an extension character (the dot can't be first in the run
    # when the run starts the body; callers re-check against their own start).
    last_dot: dict[int, int] = {}
    next_run: dict[int, int] = {}
    for start, end in runs:
        dot = -1
        for k in range(end - 2, start - 1, -1):
            if text[k] == "." and ext_len[k + 1] > 0:
                dot = k
                break
        last_dot[start] = dot
        if end + 1 < n and text[end] in _SEPARATORS and in_path[end + 1]:
            next_run[start] = end + 1
    # Farthest match end reachable from each run's own start through its chain.
    farthest: dict[int, int | None] = {}
    for start, _end in reversed(runs):
        following = next_run.get(start)
        best = farthest.get(following) if following is not None else None
        if best is None:
            dot = last_dot[start]
            best = dot + 1 + ext_len[dot + 1] if dot >= start + 1 else None
        farthest[start] = best

    def body(q: int) -> int | None:
        if q >= n or not in_path[q]:
            return None
        start = run_start[q]
        following = next_run.get(start)
        if following is not None and farthest[following] is not None:
            return farthest[following]
        dot = last_dot[start]
        return dot + 1 + ext_len[dot + 1] if dot >= q + 1 else None

    def after_drive(q: int) -> int | None:
        # (?:\.{0,2}[\\/])? then the body; at most one dot count can be followed by a separator.
        for dots in (2, 1, 0):
            if q + dots < n and text[q + dots] in _SEPARATORS and text[q : q + dots] == "." * dots:
                end = body(q + dots + 1)
                if end is not None:
                    return end
                break
        return body(q)

    found: list[str] = []
    p = 0
    while p < n:
        match_end: int | None = None
        if p + 1 < n and text[p] in _LETTERS and text[p + 1] == ":":
            match_end = after_drive(p + 2)
        if match_end is None:
            match_end = after_drive(p)
        if match_end is None:
            p += 1
            continue
        found.append(text[p:match_end])
        p = match_end
    return found


def _find_qualified_names(text: str) -> list[str]:
    """All non-overlapping matches of `QUALIFIED_PATTERN` in `text`, in O(len(text)).

    The pattern is \\b H W* ((:: | .) H W*)+ \\b with H = `[A-Za-z_$]`, W = `[\\w$]` (ASCII).
    Segments are maximal W-runs joined by "::" or "." (neither is in W), so the engine only
    ever backtracks inside the last segment looking for a word boundary, and failing that drops
    the last segment. The farthest such boundary along each chain of runs is precomputed right
    to left, so each start position costs O(1).
    """
    n = len(text)
    if n < 3 or ("." not in text and "::" not in text):
        return []
    is_word = [ch in _WORD_CHARS for ch in text]

    def boundary(x: int) -> bool:
        before = is_word[x - 1] if x > 0 else False
        after = is_word[x] if x < n else False
        return before != after

    runs: list[tuple[int, int]] = []
    run_end = [0] * n
    i = 0
    while i < n:
        if text[i] not in _NAME_CHARS:
            i += 1
            continue
        start = i
        while i < n and text[i] in _NAME_CHARS:
            i += 1
        runs.append((start, i))
        for k in range(start, i):
            run_end[k] = i

    def next_segment(end: int) -> int | None:
        if text.startswith("::", end) and end + 2 < n and text[end + 2] in _NAME_HEADS:
            return end + 2
        if end < n and text[end] == "." and end + 1 < n and text[end + 1] in _NAME_HEADS:
            return end + 1
        return None

    farthest: dict[int, int | None] = {}  # run start -> farthest boundary along its chain
    for start, end in reversed(runs):
        following = next_segment(end)
        best = farthest.get(following) if following is not None else None
        if best is None:
            best = next((x for x in range(end, start, -1) if boundary(x)), None)
        farthest[start] = best
    found: list[str] = []
    p = 0
    while p < n:
        if text[p] in _NAME_HEADS and boundary(p):
            following = next_segment(run_end[p])
            match_end = farthest.get(following) if following is not None else None
            if match_end is not None:
                found.append(text[p:match_end])
                p = match_end
                continue
        p += 1
    return found


def _safe_findall(
    pattern: re.Pattern[str],
    run: re.Pattern[str],
    linear: Callable[[str], list[str]],
    text: str,
) -> list[str]:
    """`pattern.findall(text)` without its quadratic worst case.

    `run` matches the maximal runs of characters `pattern` can consume; a match never crosses a
    run boundary and the character before a run is never a word character, so matching run by
    run gives the same list. Short runs use the regex, long ones the `linear` matcher.
    """
    runs = run.findall(text)
    if max(map(len, runs), default=0) <= _REGEX_SAFE_RUN:
        return pattern.findall(text)
    found: list[str] = []
    for piece in runs:
        found.extend(pattern.findall(piece) if len(piece) <= _REGEX_SAFE_RUN else linear(piece))
    return found


def file_paths(text: str) -> list[str]:
    """All matches of `FILE_PATH_PATTERN` in `text`, in linear time on any input."""
    return _safe_findall(FILE_PATH_PATTERN, _PATH_RUN, _find_file_paths, text)


def qualified_names(text: str) -> list[str]:
    """All matches of `QUALIFIED_PATTERN` in `text`, in linear time on any input."""
    return _safe_findall(QUALIFIED_PATTERN, _NAME_RUN, _find_qualified_names, text)


def _is_symbol_word(value: str) -> bool:
    """docs/reference.md §3.1, except that a plain capitalised word ("Let", "Theme") or an
    all-capitals word ("AND", "WHAT") is not a symbol: in prose those are sentence starts and
    emphasis, and as exact identifiers they would outrank real evidence by 100 points. A
    PascalCase word still counts when it has a digit (`Http2`) or mixed inner capitals
    (`XMLParser`); camel humps (`DynamicBorder`) always count."""
    if value.lower() in STOPWORDS:
        return False
    if _SYMBOL_PUNCT.search(value) or _CAMEL_HUMP.search(value):
        return True
    if not _PASCAL_CASE.fullmatch(value):
        return False
    tail = value[1:]
    return any(c.isdigit() for c in value) or not (tail.islower() or value.isupper())


_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]{2,}")
"""Runs of Han, kana and Hangul characters. unicode61 (FTS5) indexes such a run as one token,
so words inside it can only be found literally."""
CJK_TERM_LIMIT = 8


def cjk_terms(text: str) -> tuple[str, ...]:
    """Literal search terms for CJK text: each run of up to 4 characters as is; a longer run
    (a sentence: CJK writes no spaces) as consecutive character pairs, since most words are
    two characters; at most `CJK_TERM_LIMIT`, first occurrences first."""
    terms: list[str] = []
    for run in _CJK_RUN.findall(text):
        if len(run) <= 4:
            terms.append(run)
        else:
            terms.extend(run[i : i + 2] for i in range(0, len(run) - 1, 2))
    return unique(terms, CJK_TERM_LIMIT)


def _is_error_word(value: str) -> bool:
    return bool(_ERROR_CODE.fullmatch(value) or _ERROR_NAME.fullmatch(value))


def describe_task(text: str) -> TaskDescriptor:
    """Extract the `TaskDescriptor` of a request text (docs/reference.md §3.1).

    `text` is trimmed and cut to 20,000 characters first; unpaired surrogates become U+FFFD.
    Never raises for any `str`; an empty or blank text gives an empty descriptor (no query
    terms), which retrieval reports as status `no-query`.
    """
    bounded = replace_lone_surrogates(js_trim(text))[:MAX_INPUT_CHARS]
    backticked = unique(_group_one(_BACKTICKED, bounded), None)
    phrases = unique(
        _group_one(_DOUBLE_QUOTED, bounded) + _group_one(_SINGLE_QUOTED, bounded), PHRASE_LIMIT
    )
    # CJK words cannot be told apart by FTS5's unicode61 tokenizer: search them literally, as
    # phrases (a decision beyond docs/reference.md §3.1; docs/architecture.md).
    phrases = unique([*phrases, *cjk_terms(bounded)], PHRASE_LIMIT + CJK_TERM_LIMIT)
    files = unique(file_paths(bounded), FILE_LIMIT)
    qualified = unique(qualified_names(bounded), None)
    flags = unique(
        (v for v in (js_trim(f) for f in _group_one(_FLAG, bounded)) if v.startswith("--")), None
    )
    words = list(dict.fromkeys(_group_one(_WORD_CANDIDATE, bounded)))  # first occurrences
    symbols = unique(
        [
            *(v for v in backticked if not _HAS_SPACE.search(v)),
            *qualified,
            *flags,
            *(w for w in words if _is_symbol_word(w)),
        ],
        SYMBOL_LIMIT,
    )
    errors = unique((w for w in words if _is_error_word(w)), ERROR_LIMIT)
    lower = bounded.lower()
    technologies = tuple(name for name, pattern in _TECHNOLOGY_PATTERNS if pattern.search(lower))
    keywords = unique(
        (
            w
            for w in _KEYWORD.findall(lower)
            if w not in STOPWORDS and w not in FILLER_WORDS and not _ALL_DIGITS.fullmatch(w)
        ),
        KEYWORD_LIMIT,
    )
    exact_identifiers = unique([*backticked, *files, *symbols, *errors])
    entities = unique([*exact_identifiers, *technologies])
    query_terms = unique([*exact_identifiers, *phrases, *keywords])
    return TaskDescriptor(
        objective=bounded[:OBJECTIVE_CHARS],
        backticked=backticked,
        phrases=phrases,
        files=files,
        qualified=qualified,
        flags=flags,
        symbols=symbols,
        errors=errors,
        technologies=technologies,
        keywords=keywords,
        exact_identifiers=exact_identifiers,
        entities=entities,
        query_terms=query_terms,
    )


def is_token_char(ch: str) -> bool:
    """True when FTS5 `unicode61 remove_diacritics 2` treats `ch` as part of a word.

    Token characters are Unicode categories L*, N* and Co (the tokenizer's default), plus Mn
    (combining marks: with `remove_diacritics` they stay inside the word and are folded away;
    checked against SQLite 3.40). Everything else separates words.
    """
    category = unicodedata.category(ch)
    return category[0] in "LN" or category in ("Co", "Mn")


def has_token_characters(term: str) -> bool:
    """True when `term` holds a character FTS5 `unicode61` indexes (L*, N*, Co).

    A term without one would be an empty phrase: valid FTS5, but it can never match.
    """
    for ch in term:
        category = unicodedata.category(ch)
        if category[0] in "LN" or category == "Co":
            return True
    return False


def fts_phrase(term: str) -> str:
    """`term` as one FTS5 string: NUL -> space, lone surrogates -> U+FFFD, `"` doubled, quoted.

    FTS5 reads its query as a C string, so an embedded NUL would end it early ("unterminated
    string"); NUL is a separator for `unicode61` anyway, so a space tokenizes the same.
    """
    clean = replace_lone_surrogates(term).replace("\x00", " ")
    return '"' + clean.replace('"', '""') + '"'


def build_fts_query(terms: Iterable[str], limit: int = FTS_TERM_LIMIT) -> str | None:
    """The FTS5 MATCH text for `terms`: the first `limit` usable unique terms, OR-ed.

    Terms are deduplicated like `unique()`; terms with no token characters are dropped; each
    kept term becomes one quoted string (`fts_phrase`), so no input can produce FTS5 syntax
    (`AND`, `NEAR`, `*`, `^`, `:`, parentheses are all inside quotes). Returns None when no term
    is left. The result must reach SQLite as a bound parameter (`MATCH ?`), never spliced into
    SQL (docs/reference.md §3.1; docs/architecture.md "Storage rules").
    """
    phrases: list[str] = []
    if limit <= 0:
        return None
    for term in unique(terms, None):
        if not has_token_characters(term):
            continue
        phrases.append(fts_phrase(term))
        if len(phrases) >= limit:
            break
    return " OR ".join(phrases) if phrases else None


def text_of_message(message: Any) -> str:
    """The text of a Pi `AgentMessage`: string content as is, else its `text` blocks.

    Only blocks with `type == "text"` and a string `text` count; they are joined with "\\n".
    Anything that is not a message with such content gives "" (docs/reference.md §3.1).
    """
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return "\n".join(parts)


def last_user_text(messages: Sequence[Any]) -> str:
    """The trimmed text of the last message with `role == "user"`, or "" if there is none."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return js_trim(text_of_message(message))
    return ""
