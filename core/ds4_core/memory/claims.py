"""Claim keys and polarity: when two memory claims contradict each other (docs/memory.md
"Conflicts"; docs/reference.md §3.16).

Pure. The automatic keys (the rule and its reasons are in docs/memory.md "Conflicts"):

1. A claim is cut into clauses at semicolons, line breaks and sentence ends (`.`, `!` or `?`
   followed by white space), and at a comma when the text after it is a keyed clause itself
   ("timeout = 30, retries = 3" is two clauses, "ports = 80, 443" one).
2. A clause shaped "X defaults to Y", "X = Y" or "X is Y" (tried in that order, the first
   occurrence of the separator, case-insensitive) has the key X and the value Y when X is a
   name: one backticked or quoted term, or one to `MAX_NAME_WORDS` words, none of them a
   pronoun, a demonstrative or a verb-like function word (`GENERIC_WORDS`,
   `FUNCTION_WORDS`), not all of them determiners ("it", "there", "this", "the" never key).
3. The "is" form also needs a value, not prose: one to `MAX_VALUE_WORDS` words, none a
   generic word, a function word or a preposition ("X is in src/x.ts" has no key).

Keys and values are normalised: case folded, backticks and quotes around them dropped, runs of
white space made one space, a final full stop dropped (backticks anywhere). Two claims
conflict when they share a key whose values differ (a key said twice in one claim has the set
of its values). They also conflict when they say the same thing with opposite polarity ("X is
enabled" / "X is disabled", "enable X" / "disable X"): the claim with its polarity word
removed is the same, and one word is of the enabled family, the other of the disabled family.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

MAX_KEY_CHARS = 120
"""A key longer than this is prose: such a clause gets no key."""

MAX_NAME_WORDS = 4
"""The most words of a key made of plain words ("the default export mode")."""

MAX_VALUE_WORDS = 3
"""The most words of the value of an "X is Y" clause ("PostgreSQL 16", "a Redis instance")."""

GENERIC_WORDS = frozenset(
    "i me we us you he him his she her hers it its they them their theirs one someone anyone "
    "everyone nobody something anything everything nothing there here this that these those "
    "what which who whom whose whatever whoever".split()
)
"""Words that point at something said elsewhere: a key holding one is not a name."""

DETERMINERS = frozenset(
    "the a an my our your some any each every all both no another other such".split()
)
"""Words that may start a name ("our database") but are not one alone."""

FUNCTION_WORDS = frozenset(
    "am is are was were be been being do does did has have had can could should would must may "
    "might will shall not never to and or nor but if unless when whenever while because so "
    "although though since until whereas than then also only just".split()
)
"""Verb-like and joining words: a key or an "is" value holding one is prose."""

PREPOSITIONS = frozenset(
    "in on at for from with without by of over under about into onto via per after before "
    "between during through across against among around near inside outside within upon like "
    "as".split()
)
"""Words that make an "is" value prose ("in src/parser.ts", "slow on large files")."""

_SEPARATORS = (
    re.compile(r"\s+defaults\s+to\s+", re.IGNORECASE),
    re.compile(r"\s*=\s*"),
    re.compile(r"\s+is\s+", re.IGNORECASE),
)
_IS = _SEPARATORS[2]
_CLAUSE_END = re.compile(r"[;\r\n]+|(?<=[.!?])\s+")
_TOKEN = re.compile(r"`[^`]*`|\"[^\"]*\"|“[^”]*”|\S+")
_TERM = re.compile(r"\s*(?:`[^`]+`|\"[^\"]+\"|'[^']+'|“[^”]+”)\s*")
_NAME_WORD = re.compile(r"\w[\w.+/:#@()\[\]-]*")
_SPACE = re.compile(r"\s+")
_QUOTES = "`'\"“”‘’"
_PUNCTUATION = _QUOTES + "()[]{},:;!?."
_ENABLED = frozenset({"enabled", "enable", "on", "true"})
_DISABLED = frozenset({"disabled", "disable", "off", "false"})
_WORD = re.compile(r"[\w.-]+")


def normalize(text: str) -> str:
    """`text` case-folded, backticks dropped, spaces collapsed, surrounding quotes and a final
    full stop dropped (the form keys and values are compared in)."""
    folded = _SPACE.sub(" ", text.casefold().replace("`", "")).strip()
    folded = folded.rstrip(".").strip()
    return folded.strip(_QUOTES).strip()


@dataclass(frozen=True, slots=True)
class ClaimShape:
    """What a claim says, for conflict checks.

    Attributes:
        key: the first key of `pairs` (the item's key: stored, shown, indexed), or None.
        value: the value of that first pair, or None without a key.
        polarity: `enabled`, `disabled` or None (no polarity word, or both families).
        subject: the normalised claim without its polarity words (compared across claims of
            opposite polarity).
        text: the whole claim normalised (identical claims are duplicates, not conflicts).
        pairs: every normalised `(key, value)` of the claim, in clause order, without repeats
            (an explicit key is the only pair).
    """

    key: str | None
    value: str | None
    polarity: str | None
    subject: str
    text: str
    pairs: tuple[tuple[str, str], ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        """The distinct keys of `pairs`, in clause order (each is a conflict slot)."""
        return tuple(dict.fromkeys(key for key, _ in self.pairs))

    def values_of(self, key: str) -> frozenset[str]:
        """The values `pairs` give `key` (empty when the claim does not have it)."""
        return frozenset(value for name, value in self.pairs if name == key)


def _is_name(subject: str) -> bool:
    """Whether `subject` (raw, before `normalize`) can be a key (rule 2 of the docstring)."""
    if _TERM.fullmatch(subject):
        return True
    tokens = _TOKEN.findall(subject)
    if not 1 <= len(tokens) <= MAX_NAME_WORDS:
        return False
    words = []
    for token in tokens:
        bare = token.strip(_QUOTES)
        if not bare or (token == bare and not _NAME_WORD.fullmatch(bare)):
            return False
        words.append(bare.strip(_PUNCTUATION).casefold())  # "a." is the determiner "a"
    if any(word in GENERIC_WORDS or word in FUNCTION_WORDS for word in words):
        return False
    return not all(word in DETERMINERS for word in words)


def _is_value(value: str) -> bool:
    """Whether `value` (raw) is a value rather than prose, for "X is Y" (rule 3)."""
    tokens = _TOKEN.findall(value.strip().rstrip("."))
    if not 1 <= len(tokens) <= MAX_VALUE_WORDS:
        return False
    prose = GENERIC_WORDS | FUNCTION_WORDS | PREPOSITIONS
    return not any(token.strip(_PUNCTUATION).casefold() in prose for token in tokens)


def _clause_pair(clause: str) -> tuple[str, str] | None:
    """`(key, value)` of one clause, or None (rules 2 and 3 of the module docstring)."""
    for separator in _SEPARATORS:
        match = separator.search(clause)
        if match is None:
            continue
        subject, rest = clause[: match.start()], clause[match.end() :]
        key, value = normalize(subject), normalize(rest)
        if not key or not value or len(key) > MAX_KEY_CHARS or not _is_name(subject):
            return None
        if key in GENERIC_WORDS or key in DETERMINERS or key in FUNCTION_WORDS:
            return None  # a quoted `it` is still no name
        if separator is _IS and not _is_value(rest):
            return None
        return key, value
    return None


def _clauses(claim: str) -> list[str]:
    """The clauses of `claim` (rule 1 of the module docstring)."""
    clauses: list[str] = []
    for sentence in _CLAUSE_END.split(claim):
        parts = sentence.split(",")
        merged = [parts[0]]
        for part in parts[1:]:
            if _clause_pair(part) is not None:
                merged.append(part)
            else:
                merged[-1] += "," + part
        clauses.extend(part for part in merged if part.strip())
    return clauses


def claim_keys(claim: str) -> tuple[tuple[str, str], ...]:
    """Every `(key, value)` of `claim`, in clause order, without repeats (the rule is in the
    module docstring and docs/memory.md "Conflicts"); empty when no clause has a key.

    >>> claim_keys("timeout = 30 seconds; retries = 3")
    (('timeout', '30 seconds'), ('retries', '3'))
    >>> claim_keys("It is forbidden to push to main")
    ()
    """
    pairs = (_clause_pair(clause) for clause in _clauses(claim))
    return tuple(dict.fromkeys(pair for pair in pairs if pair is not None))


def claim_key(claim: str) -> tuple[str, str] | None:
    """The first `(key, value)` of `claim_keys(claim)`, else None.

    >>> claim_key("`retries` defaults to 3.")
    ('retries', '3')
    """
    pairs = claim_keys(claim)
    return pairs[0] if pairs else None


SHAPES_KEPT = 8192
"""Claim shapes kept between replays (`shape_claim`): every sync that meets a mutation entry,
and every memory write, replays all stored claims again."""

CACHED_CLAIM_CHARS = 2000
"""Longest claim whose shape is kept (the default `memory.maxClaimChars`): the cache holds at
most `SHAPES_KEPT` x this many characters."""


def shape_claim(claim: str, explicit_key: str | None = None) -> ClaimShape:
    """The `ClaimShape` of `claim`; `explicit_key` (an item's `key`) replaces the automatic
    keys, the value then being the automatic value when the claim has exactly one, else the
    whole normalised claim. Pure;
    the shapes of claims up to `CACHED_CLAIM_CHARS` are kept (`SHAPES_KEPT` of them)."""
    if len(claim) <= CACHED_CLAIM_CHARS:
        return _kept_shape(claim, explicit_key)
    return _shape_claim(claim, explicit_key)


@lru_cache(maxsize=SHAPES_KEPT)
def _kept_shape(claim: str, explicit_key: str | None) -> ClaimShape:
    return _shape_claim(claim, explicit_key)


def _shape_claim(claim: str, explicit_key: str | None) -> ClaimShape:
    text = normalize(claim)
    pairs = claim_keys(claim)
    if explicit_key is not None and normalize(explicit_key):
        explicit_value = pairs[0][1] if len(pairs) == 1 else text
        pairs = ((normalize(explicit_key), explicit_value),)
    key = pairs[0][0] if pairs else None
    value = pairs[0][1] if pairs else None
    words = _WORD.findall(text)
    enabled = any(word in _ENABLED for word in words)
    disabled = any(word in _DISABLED for word in words)
    polarity = (
        "enabled" if enabled and not disabled else "disabled" if disabled and not enabled else None
    )
    subject = " ".join(w for w in words if w not in _ENABLED and w not in _DISABLED)
    return ClaimShape(key, value, polarity, subject, text, pairs)


def conflict_reason(new: ClaimShape, old: ClaimShape) -> str | None:
    """Why `new` contradicts `old` (`same key` or `opposite polarity`), or None when it does
    not (identical claims do not conflict: they are duplicates)."""
    if new.text == old.text:
        return None
    for key in new.keys:
        theirs = old.values_of(key)
        if theirs and theirs != new.values_of(key):
            return f"same key '{key}' with another value"
    if (
        new.polarity is not None
        and old.polarity is not None
        and new.polarity != old.polarity
        and new.subject == old.subject
    ):
        return "opposite polarity (enabled/disabled)"
    return None
