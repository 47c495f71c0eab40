"""Literal matching of search terms in text: the rule history and project retrieval share.

Literal matching (a decision; ds4 uses a case-sensitive `instr` scan):

* ASCII letters compare case-insensitively, every other character exactly (SQLite's `lower()`
  rule), on UTF-8 bytes.
* A term made only of ASCII characters that starts with a letter or digit must start a word of
  the text: the character before it is not a letter, digit or combining mark (FTS5 `unicode61`'s
  word characters). So `SessionManager` matches `SessionManagerImpl` and `new SessionManager(`,
  not `createSessionManager`; `theme.ts` matches `src/theme.ts`, not `mytheme.ts`. Any other
  term (CJK, accented words, one starting with punctuation) matches anywhere.
* The same rule decides the file / symbol / error bonuses, so "found in the text" means one
  thing throughout.

`fold` gives the form compared, `LiteralTerm` a prepared term (with the FTS5 prefilter that
selects a superset of the texts it can match), `implies` when one term's matches are among
another's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ds4_core.retrieval.descriptor import is_token_char, replace_lone_surrogates

_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
_ALNUM_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_ASCII_ALNUM = frozenset(_ALNUM_CHARS)
_ASCII_ALNUM_BYTES = frozenset(_ALNUM_CHARS.encode("ascii"))


def fold(text: str) -> bytes:
    """`text` as UTF-8 with ASCII letters lowercased: the form literal matching compares.

    A substring test on this form equals SQLite's `instr(lower(a), lower(b)) > 0`; UTF-8 is
    self-synchronising, so a byte match is always a match of whole characters.
    """
    return text.encode("utf-8", "surrogatepass").lower()


@dataclass(frozen=True)
class LiteralTerm:
    """A search term prepared for literal matching (rules in the module docstring).

    Attributes:
        text: the term as the descriptor spells it.
        needle: `fold(text)`.
        word_start: the match must start a word (ASCII term starting with a letter or digit).
        prefilter: FTS5 text selecting a superset of the matching entries, or None (scan).
    """

    text: str
    needle: bytes
    word_start: bool
    prefilter: str | None

    @classmethod
    def of(cls, term: str) -> LiteralTerm:
        """Prepare `term` (lone surrogates become U+FFFD)."""
        clean = replace_lone_surrogates(term)
        ascii_only = clean.isascii()
        return cls(
            text=term,
            needle=fold(clean),
            word_start=ascii_only and clean[:1] in _ASCII_ALNUM,
            prefilter=_prefilter_query(clean) if ascii_only else None,
        )

    def occurs_in(self, folded_text: bytes) -> bool:
        """True when the term matches `folded_text` (a `fold()` result)."""
        needle = self.needle
        if not needle:
            return False
        at = folded_text.find(needle)
        if not self.word_start:
            return at >= 0
        while at >= 0:
            if at == 0 or _starts_word(folded_text, at):
                return True
            at = folded_text.find(needle, at + 1)
        return False


def _starts_word(text: bytes, at: int) -> bool:
    """True when the character before byte offset `at` of UTF-8 `text` is not a word char."""
    previous = text[at - 1]
    if previous < 0x80:
        return previous not in _ASCII_ALNUM_BYTES
    start = at - 1
    while start > 0 and 0x80 <= text[start] < 0xC0:
        start -= 1
    char = text[start:at].decode("utf-8", "replace")[:1]
    return not (char and is_token_char(char))


def _prefilter_query(term: str) -> str | None:
    """FTS5 text selecting every entry where the ASCII `term` can match (a superset).

    The term's words must appear in sequence, the last one as a prefix when the term ends with a
    letter or digit (the word may continue in the text). The first word is whole: a match starts
    a word, or follows punctuation that is part of the term. None when the term has no letter or
    digit. The text holds only `[a-z0-9 "*]`, so it is always valid FTS5 syntax.
    """
    words = _ASCII_WORD.findall(term)
    if not words:
        return None
    prefix = " *" if term[-1] in _ASCII_ALNUM else ""
    return '"' + " ".join(words).lower() + '"' + prefix


def implies(inner: LiteralTerm, outer: LiteralTerm) -> bool:
    """True when every text `outer` matches is also matched by `inner` (word-start rule kept).

    That holds when `inner.needle` occurs inside `outer.needle` at an offset where the rule of
    `inner` is guaranteed: anywhere if `inner` need not start a word; otherwise at offset 0 of an
    `outer` that itself starts a word, or right after an ASCII character that is not a letter or
    digit (`cli.ts` inside `src/cli.ts`, `ModuleJob` inside `ModuleJob.run`).
    """
    needle = inner.needle
    if not needle or len(needle) > len(outer.needle):
        return False
    at = outer.needle.find(needle)
    while at >= 0:
        if not inner.word_start:
            return True
        if at == 0:
            if outer.word_start:
                return True
        else:
            previous = outer.needle[at - 1]
            if previous < 0x80 and previous not in _ASCII_ALNUM_BYTES:
                return True
        at = outer.needle.find(needle, at + 1)
    return False
