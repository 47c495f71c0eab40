"""Query analysis of project retrieval: a `TaskDescriptor` becomes a `QueryPlan`.

The plan holds the exact tiers' search terms (files, declared names, identifiers, phrases) and
the FTS concepts with their FTS5 MATCH text and path forms; the rules are in the docstring of
`project/search.py` ("Identifiers", "Concepts", "Files first", "Floor"). Pure functions:
nothing here reads the store.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ds4_core.retrieval.descriptor import (
    FTS_TERM_LIMIT,
    TaskDescriptor,
    fts_phrase,
    has_token_characters,
    replace_lone_surrogates,
    unique,
)

from .scoring import file_role
from .windows import fts_terms_for, identifier_subwords

MIN_STEM_CHARS = 4
FILE_WORD_LIMIT = 32
"""Request words (at most) in the whole-file bm25 query."""
_STOPWORDS = frozenset(
    "a an and are as at be been but by can could do does for from had has have how i if in "
    "into is it its me my no not of on or our so such than that the their them then there "
    "these they this those to too us was we were what when where which while who whom why "
    "will with would you your".split()
)
"""Small English stopword list: words left out of the whole-file bm25 query."""
_CHAT_WORDS = frozenset(
    "great awesome nice cool perfect excellent wonderful amazing lovely brilliant fantastic "
    "hello morning evening afternoon sorry cheers goodbye thank thanks appreciate "
    "appreciated".split()
)
"""Words of conversation (praise, greetings, thanks) that name no topic: neither the FTS
concepts nor the whole-file query use them, so "Thanks, that worked great!" is one plain word
(a lone generic keyword: nothing is searched)."""
_WEAK_SYMBOL = re.compile(r"[A-Z][a-z]+|[A-Z][A-Z0-9]*")
_ASCII_ALPHA_WORD = re.compile(r"[a-z]+")
_STEM_SUFFIXES = (
    "ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ers", "er", "ed", "es",
    "s", "ly", "e",
)  # fmt: skip
_ABBREVIATIONS = (
    ("configur", "config"), ("authenticat", "auth"), ("authoriz", "auth"), ("initiali", "init"),
    ("repositor", "repo"), ("implement", "impl"), ("environment", "env"), ("database", "db"),
    ("argument", "args"), ("parameter", "params"), ("director", "dir"), ("applicat", "app"),
    ("message", "msg"), ("request", "req"), ("response", "resp"), ("temporar", "tmp"),
    ("information", "info"), ("referenc", "ref"), ("specificat", "spec"),
    ("synchroni", "sync"), ("utilit", "util"), ("statistic", "stats"), ("administrat", "admin"),
    ("description", "desc"), ("previous", "prev"), ("maximum", "max"), ("minimum", "min"),
    ("connection", "conn"), ("context", "ctx"), ("transaction", "txn"), ("calculat", "calc"),
)  # fmt: skip
"""Code abbreviations of long words: a keyword starting with the first also matches the
second (a prefix when it has 4+ letters, else the exact word)."""
_CJK_CHAR = re.compile(
    "[\u1100-\u11ff\u3005\u3007\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]"
)
_CJK_RUN = re.compile(_CJK_CHAR.pattern + "{2,}")
_SPACE = re.compile(r"\s")
_WORD = re.compile(r"\w+")
_PATHLIKE = re.compile(r"[/\\]")
_TEST_WORDS = frozenset({"test", "tests", "testing", "tested", "spec", "specs", "pytest",
                         "unittest", "fixture", "fixtures"})  # fmt: skip
_DOC_WORDS = frozenset({"docs", "documentation", "readme", "changelog", "markdown",
                        "documented", "document"})  # fmt: skip


_DERIVATION_SUFFIXES = ("ssion", "ibility", "ability", "ables", "able", "ible", "ness", "ity", "y")
"""Derivational endings `keyword_stem` strips first (`suppression` -> `suppress`, `chainable`
-> `chain`, `validity` -> `valid`, `leaky` -> `leak`; `-y` only after a consonant)."""


def keyword_stem(word: str) -> str:
    """A light English stem of a lower-case keyword, for an FTS5 prefix query.

    Strips one derivational ending (`-ssion` -> `-ss`, `-ability`, `-ibility`, `-able(s)`,
    `-ible`, `-ness`, `-ity`, `-y` after a consonant), else one common suffix (`-ation(s)`,
    `-ment(s)`, `-ing(s)`, `-ies`, `-ied`, `-er(s)`, `-ed`, `-es`, `-s`, `-ly`, `-e`), while at
    least 4 letters remain: `invalidated` -> `invalidat`, `reloaded` -> `reload`, `caching` /
    `cache` -> `cach`, `suppression` -> `suppress`, `proxy` / `proxies` -> `prox`. Words that
    are not plain ASCII letters, or shorter than 5, are returned as they are.
    """
    if len(word) < MIN_STEM_CHARS + 1 or not _ASCII_ALPHA_WORD.fullmatch(word):
        return word
    for suffix in _DERIVATION_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_STEM_CHARS:
            if suffix == "y" and word[-2] in "aeiou":
                continue
            return word[: -(len(suffix) - 2 if suffix == "ssion" else len(suffix))]
    for suffix in _STEM_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_STEM_CHARS:
            return word[: -len(suffix)]
    return word


def _abbreviation(word: str) -> str | None:
    """The usual short form in code of a long English word (`configuration` -> `config`)."""
    for prefix, short in _ABBREVIATIONS:
        if word.startswith(prefix) and word != short:
            return short
    return None


def _has_cjk(text: str) -> bool:
    return _CJK_CHAR.search(text) is not None


def _is_weak(symbol: str, backticked: set[str]) -> bool:
    return symbol not in backticked and _WEAK_SYMBOL.fullmatch(symbol) is not None


@dataclass(frozen=True)
class _Concept:
    """One FTS query concept: `label` (shown in reasons), its FTS5 MATCH text, and how it
    matches a file path: any alternative of `path_forms` (words that must all be among the
    path's lower-case sub-words, the last one as a prefix when its flag is set). `code`: the
    term is a name in code (a word mixing letters with digits or `_`: `quuxfunc4`, `sha256`,
    `py35`), so a file holding it is as relevant as an exact match (the relevance floor)."""

    label: str
    query: str
    path_forms: tuple[tuple[tuple[str, ...], bool], ...] = ()
    code: bool = False


_CODE_WORD = re.compile(r"(?=\w*[^\W\d_])(?=\w*[\d_])\w+")


def _term_path_forms(term: str) -> tuple[tuple[tuple[str, ...], bool], ...]:
    words = tuple(w for piece in _WORD.findall(term) for w in identifier_subwords(piece))
    return ((words, False),) if words and not _has_cjk(term) else ()


@lru_cache(maxsize=65536)
def path_words(path: str) -> frozenset[str]:
    """The lower-case sub-words of a path: `src/app/configWatcher.py` -> src app config
    watcher py."""
    return frozenset(w for piece in _WORD.findall(path) for w in identifier_subwords(piece))


def _files_naming(concepts: Sequence[_Concept], paths: Iterable[str]) -> list[set[str]]:
    """For each concept, the `paths` whose words it names (`_Concept.path_forms`: all words
    of a form among the path's sub-words, the last one as a prefix when flagged)."""
    words_of = {path: path_words(path) for path in paths}
    vocabulary = frozenset().union(*words_of.values()) if words_of else frozenset()
    named: list[set[str]] = []
    for concept in concepts:
        files: set[str] = set()
        for words, prefix in concept.path_forms:
            *whole, last = words
            needed = frozenset(whole)
            if not needed <= vocabulary:
                continue
            lasts = {w for w in vocabulary if w == last or (prefix and w.startswith(last))}
            if not lasts:
                continue
            files.update(
                p for p, pw in words_of.items() if needed <= pw and not lasts.isdisjoint(pw)
            )
        named.append(files)
    return named


@dataclass(frozen=True)
class QueryPlan:
    """What `search_project` searches for, derived from a `TaskDescriptor`.

    Attributes:
        files: descriptor files (path / basename tiers).
        declared: names a window may declare (strong and weak identifiers; qualified names as
            (last segment, first segment)).
        identifiers: strong identifiers for the symbol-text tier.
        phrases: quoted phrases and backticked text with spaces (phrase tier).
        concepts: FTS concepts (at most 16).
        words: the lower-case plain words of the request (keywords and weak symbols of 4+).
        request_words: every lower-case word of the request of 2+ characters that is not a
            stopword, in order (the whole-file bm25 query; at most `FILE_WORD_LIMIT`).
        about_tests: the request is about tests (its words name them).
        about_docs: the request is about documentation.
    """

    files: tuple[str, ...]
    declared: tuple[tuple[str, str | None], ...]
    identifiers: tuple[str, ...]
    phrases: tuple[str, ...]
    concepts: tuple[_Concept, ...]
    words: frozenset[str]
    about_tests: bool
    about_docs: bool
    request_words: tuple[str, ...] = ()

    @property
    def generic(self) -> bool:
        """A lone generic keyword: one plain word and nothing else (docs/reference.md §3.10)."""
        if self.files or self.identifiers or self.phrases:
            return False
        if len(self.words) != 1:
            return False
        return not any(_has_cjk(word) for word in self.words)


def _keyword_concepts(keyword: str) -> list[_Concept]:
    if _has_cjk(keyword):
        # A CJK run in a request is a sentence more often than a word: each bigram of each
        # run is a concept, so the text need not contain the request verbatim.
        concepts: list[_Concept] = []
        for run in _CJK_RUN.findall(keyword):
            for i in range(len(run) - 1):
                bigram = run[i : i + 2]
                concepts.extend(_Concept(bigram, q) for q in fts_terms_for(bigram)[:1])
        rest = _CJK_CHAR.sub(" ", keyword).strip()
        if rest and has_token_characters(rest):
            phrases = fts_terms_for(rest)
            if phrases:
                concepts.append(_Concept(rest, " OR ".join(phrases)))
        return concepts
    if _ASCII_ALPHA_WORD.fullmatch(keyword):
        query = f"{fts_phrase(keyword_stem(keyword))} *"
        short = _abbreviation(keyword)
        if short:
            query += f" OR {fts_phrase(short)}" + (" *" if len(short) >= MIN_STEM_CHARS else "")
        forms: list[tuple[tuple[str, ...], bool]] = [((keyword_stem(keyword),), True)]
        if short:
            forms.append(((short,), len(short) >= MIN_STEM_CHARS))
        return [_Concept(keyword, query, tuple(forms))]
    phrases = fts_terms_for(keyword)
    code = _CODE_WORD.fullmatch(keyword) is not None
    return (
        [_Concept(keyword, " OR ".join(phrases), _term_path_forms(keyword), code)]
        if phrases
        else []
    )


def plan_query(descriptor: TaskDescriptor) -> QueryPlan:
    """The tiers' search terms and the FTS concepts of `descriptor` (module docstring)."""
    backticked = set(descriptor.backticked)
    strong: list[str] = []
    weak: list[str] = []
    for symbol in descriptor.symbols:
        (weak if _is_weak(symbol, backticked) else strong).append(symbol)
    # A path is a file, not an identifier (the path tiers and an FTS concept handle it).
    identifiers = unique(
        (t for t in [*strong, *descriptor.errors] if not _PATHLIKE.search(t)), None
    )
    declared: list[tuple[str, str | None]] = []
    for name in unique([*identifiers, *weak], None):
        if name.startswith("-"):
            continue
        parts = [p for p in re.split(r"::|\.", name) if p]
        if len(parts) > 1:
            declared.append((parts[-1], parts[0]))
        elif parts:
            declared.append((parts[0], None))
    phrases = unique(
        [*descriptor.phrases, *(b for b in descriptor.backticked if _SPACE.search(b))], None
    )
    keywords = [k for k in descriptor.keywords if k.lower() not in _CHAT_WORDS]
    words = frozenset(
        [k.lower() for k in keywords]
        + [w.lower() for w in weak if len(w) >= 4 and w.lower() not in _CHAT_WORDS]
    )
    concepts: list[_Concept] = []
    seen: set[str] = set()
    plain = {k.lower() for k in keywords}
    for term in unique([*identifiers, *descriptor.files, *phrases, *keywords], None):
        if term.lower() in plain and term == term.lower():
            found = _keyword_concepts(term)
        else:
            queries = fts_terms_for(term)
            found = (
                [_Concept(term, " OR ".join(queries), _term_path_forms(term))] if queries else []
            )
        for concept in found:
            if concept.query in seen:
                continue
            seen.add(concept.query)
            concepts.append(concept)
        if len(concepts) >= FTS_TERM_LIMIT:
            break
    lowered = set(words) | {t.lower() for t in descriptor.query_terms}
    return QueryPlan(
        files=descriptor.files,
        declared=tuple(declared),
        identifiers=identifiers,
        phrases=phrases,
        concepts=tuple(concepts[:FTS_TERM_LIMIT]),
        words=words,
        about_tests=bool(lowered & _TEST_WORDS),
        about_docs=bool(lowered & _DOC_WORDS)
        or any(file_role(f.replace("\\", "/")) == "doc" for f in descriptor.files),
        request_words=request_words(descriptor.objective),
    )


def request_words(text: str) -> tuple[str, ...]:
    """The whole-file bm25 words of a request: its lower-case words (`\\w+`) of 2+ characters
    that are not stopwords, unique, in order, at most `FILE_WORD_LIMIT`."""
    found = dict.fromkeys(
        w for w in _WORD.findall(replace_lone_surrogates(text).lower())
        if len(w) >= 2 and w not in _STOPWORDS and w not in _CHAT_WORDS
    )  # fmt: skip
    return tuple(found)[:FILE_WORD_LIMIT]
