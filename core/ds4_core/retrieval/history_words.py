"""The request's search units for history relevance (`retrieval/history_relevance.py`).

A unit is one thing of the request that an entry may share with it, as two FTS5 expressions:
one for `entries_fts` (the entry's own tokens) and one for `entries_subwords` (its camelCase
humps and CJK character pairs, migration 9). Units come from the request's first 500
characters (`TaskDescriptor.objective`) and its exact identifiers:

* an exact identifier of several tokens (a path, `tui-renderer.ts`) is one phrase unit in both
  tables (unless its tokens are part of one taken already, or hold one);
* any other word of letters and digits, lower-cased, that is not a stop word
  (`STOP_WORDS`: the descriptor's stop and filler words plus English function words and the
  verbs people ask with) is a word unit. A word of `MIN_STEM` or more characters matches by
  its stem as a prefix (`stem`: a small suffix stripper of our own, so `parsed`, `parsing` and
  `parser` all meet `pars*`; `boundary` meets `boundaries`), in both tables, so `link` also
  meets the hump of `mdLinkUrl`; a shorter word matches whole;
* a word holding CJK becomes its non-CJK parts (word units) and its CJK runs: a run of up to
  4 characters as one unit, a longer one (CJK writes no spaces) as consecutive character
  pairs; each is matched in `entries_subwords` only, as the phrase of its overlapping pairs
  (`主题设置` -> `"主题 题设 设置"`); a CJK exact identifier (`连接池` in backticks) likewise.
  Non-CJK letters glued to CJK become their own word (`itgc` in `修复了gen-itgc的悬空引用`).

At most `MAX_UNITS` units, first occurrences first, each once. Pure and deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ds4_core.retrieval.descriptor import FILLER_WORDS, STOPWORDS, TaskDescriptor, fts_phrase
from ds4_core.sessions.subwords import cjk_pairs

MAX_UNITS = 16
MIN_STEM = 4
"""Words shorter than this match whole: a prefix of 1-3 letters meets far too many words."""

STOP_WORDS: frozenset[str] = (
    STOPWORDS
    | FILLER_WORDS
    | frozenset(
        """
        a an and are as at be been being but by can did do for had has he her him his how i if
        in is it its me my no not of on or our ours she so the to too up us was we what who
        whom why will you yours yourself ive im dont didnt doesnt isnt wasnt whats thats youre
        lets let tell show explain give know think said say says ask asked one two any all each
        other own same now new get got put way back over out off again ever once only more most
        some such own both few while until because though although between through during
        above below down under further here there where which whose yes yeah ok okay hi hello
        hey thank thanks please sure pls end ended happen happened happens turn turned
        anywhere everywhere somewhere nowhere anyone anybody actually really right exactly
        every need needs needed kind sort lot lots bit quite just even ever already yet
        whether instead before after first last next later earlier then today tomorrow
        yesterday tonight morning night
        """.split()
    )
)
"""Words that never make a unit: they say how a request asks, not what it is about."""

_WORD = re.compile(r"[^\W_]+")
_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK = re.compile(f"[{_CJK_CHARS}]")
_CJK_RUN = re.compile(f"[{_CJK_CHARS}]+")
_CJK_OR_NOT = re.compile(f"[{_CJK_CHARS}]+|[^{_CJK_CHARS}]+")
_SUFFIXES = (
    "ations", "ation", "ings", "ing", "edly", "ies", "ied", "ers", "ed", "es", "er", "ly", "s",
)  # fmt: skip


def stem(word: str) -> str:
    """`word` (lower case) without one inflectional suffix, keeping at least `MIN_STEM`
    characters (a plural `s` down to 3: `urls` -> `url`), then without a final `e` / `y` / `i`
    when 5 or more remain (`parsing` -> `pars`, `boundaries` -> `boundar`, `colors` -> `color`,
    `theme` -> `theme`)."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_STEM:
            word = word[: -len(suffix)]
            break
    else:
        if word.endswith("s") and not word.endswith("ss") and len(word) > MIN_STEM - 1:
            return word[:-1]  # a short plural: `urls` -> `url`
    if len(word) > 5 and word[-1] in "eyi":
        word = word[:-1]
    return word


@dataclass(frozen=True)
class Unit:
    """One search unit: `text` for display, `fts` for `entries_fts` (None: not searched
    there), `sub` for `entries_subwords` (None: not searched there); `identifier`: the request
    names it as an exact identifier (`TaskDescriptor.exact_identifiers`: a path, a camelCase or
    snake_case name, a backticked term)."""

    text: str
    fts: str | None
    sub: str | None
    identifier: bool = False


def word_unit(word: str, identifier: str | None = None) -> Unit:
    """The unit of one lower-case word (module docstring); `identifier`: the word as the
    request wrote it when it names an exact identifier (shown instead of `word`)."""
    if len(word) >= MIN_STEM:
        expression = fts_phrase(stem(word)) + "*"
    else:
        expression = fts_phrase(word)
    return Unit(identifier or word, expression, expression, identifier is not None)


def cjk_unit(run: str, identifier: bool = False) -> Unit | None:
    """The unit of a CJK `run`: the phrase of its overlapping character pairs in
    `entries_subwords` (which stores a run as those pairs, in order); None for one character."""
    if len(run) < 2:
        return None
    pairs = cjk_pairs(run)
    return Unit(run, None, fts_phrase(" ".join(pairs)), identifier)


def _cjk_terms(run: str) -> list[str]:
    """A run of up to 4 CJK characters as is; a longer one (a sentence) as consecutive
    character pairs (the descriptor's rule, `descriptor.cjk_terms`)."""
    if len(run) <= 4:
        return [run]
    return [run[i : i + 2] for i in range(0, len(run) - 1, 2)]


def request_units(descriptor: TaskDescriptor) -> list[Unit]:
    """The units of a request (module docstring), at most `MAX_UNITS`."""
    units: dict[str, Unit] = {}
    consumed: set[str] = set()
    named: dict[str, str] = {}  # one-token exact identifiers: lower case -> as written
    for identifier in descriptor.exact_identifiers:
        tokens = [t.lower() for t in _WORD.findall(identifier)]
        key = " ".join(tokens)
        if len(tokens) == 1 and _CJK_RUN.fullmatch(tokens[0]):
            unit = cjk_unit(tokens[0], True)
            if unit is not None:
                units.setdefault(tokens[0], unit)
                consumed.add(tokens[0])
        elif len(tokens) >= 2 and not any(key in other or other in key for other in units):
            units[key] = Unit(identifier, fts_phrase(key), fts_phrase(key), True)
            consumed.update(tokens)
        elif len(tokens) == 1:
            named.setdefault(tokens[0], identifier)
    for token in _WORD.findall(descriptor.objective.lower()):
        if _CJK.search(token):
            for part in _CJK_OR_NOT.findall(token):
                if not _CJK.match(part):
                    if part not in STOP_WORDS and part not in consumed and len(part) >= 2:
                        units.setdefault(part, word_unit(part, named.get(part)))
                    continue
                if part in consumed:
                    continue
                for term in _cjk_terms(part):
                    unit = cjk_unit(term)
                    if unit is not None:
                        units.setdefault(term, unit)
            continue
        if token in STOP_WORDS or token in consumed or len(token) < 2 or token.isdigit():
            continue
        units.setdefault(token, word_unit(token, named.get(token)))
    return list(units.values())[:MAX_UNITS]


__all__ = [
    "MAX_UNITS",
    "MIN_STEM",
    "STOP_WORDS",
    "Unit",
    "request_units",
    "cjk_unit",
    "stem",
    "word_unit",
]
