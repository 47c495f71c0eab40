"""Results of history retrieval: hits, their excerpts, dedup and the budget fit.

`HistoryRetrieval` holds the `HistoryHit`s `retrieve_history` selects; `_SeenTexts` drops texts
equal to a selected one, `_fit` cuts the excerpt (`excerpt_around`) until the hit's rendered
evidence fits the tokens left (rules 5 of `retrieval/history.py`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Literal

from ds4_core.privacy.markers import has_marker, parse
from ds4_core.privacy.secrets import secret_lines
from ds4_core.retrieval.evidence import evidence_tokens
from ds4_core.retrieval.floor import BelowFloor
from ds4_core.retrieval.history_candidates import _Candidate
from ds4_core.retrieval.scoring import RankedEntry

RetrievalStatus = Literal["ok", "no-query", "disabled", "no-session"]

MIN_REMAINING_TOKENS = 48
MAX_EXCERPT_CHARS = 6000
MIN_EXCERPT_CHARS = 256
EXCERPT_SHRINK = 0.7
ELLIPSIS = "…"
_ASCII_WHITESPACE = b" \t\n\r\x0b\x0c"  # what `bytes.split()` splits on


@dataclass(frozen=True)
class HistoryHit:
    """One retrieved history entry, ready to be rendered as evidence (`render_evidence`).

    Attributes:
        entry_key: `session_id:entry_id` (the `entries` primary key).
        entry_id: the Pi entry id.
        role: the message role (`custom` for custom_message), or None.
        created_at: the entry's ISO-8601 timestamp as stored, or None.
        score: the docs/reference.md §3.2 score, rounded to 6 decimals.
        reason: e.g. `exact identifier: Foo.bar; FTS: foo; active branch`.
        excerpt: the quoted text (the whole text, or a window with "…" at each cut end).
        tokens: `chars-v2` tokens of the rendered evidence message.
        literal_priority: 2 if an exact identifier matched, 1 if only a phrase did, else 0.
        matched_terms: exact identifiers, phrases and FTS terms found, in that order.
        source_level: the privacy level the markers of the WHOLE quoted text give it
            (`privacy.markers`; `normal` without markers): an excerpt cut out of a classified
            block carries no marker of its own, so privacy judges it by this.
        source_secrets: the lines (6 or more characters) of every secret the detector finds
            in the WHOLE quoted text, when the excerpt is cut from it: a cut can drop what
            makes a secret recognisable (a key's `BEGIN` line, a `password=`), so redaction for
            a remote destination replaces these lines wherever they occur.
    """

    entry_key: str
    entry_id: str
    role: str | None
    created_at: str | None
    score: float
    reason: str
    excerpt: str
    tokens: int
    literal_priority: int
    matched_terms: tuple[str, ...] = ()
    source_level: str = "normal"
    source_secrets: tuple[str, ...] = ()


@dataclass(frozen=True)
class RetrievalStats:
    """Counters of one retrieval.

    Attributes:
        candidates: distinct entries found by the literal and FTS passes.
        duplicates: ranked entries skipped because an equal text was already selected.
        alternate_branch_candidates: candidates dropped for not being on the active branch.
        already_in_context: candidates dropped because the caller already sends them.
        latency_ms: wall time of `retrieve_history` (ms).
        below_floor: eligible candidates held back by the relevance floor (all of them; the
            best are in `HistoryRetrieval.below_floor`). With no hits and a positive count,
            nothing passed the floor.
    """

    candidates: int = 0
    duplicates: int = 0
    alternate_branch_candidates: int = 0
    already_in_context: int = 0
    latency_ms: float = 0.0
    below_floor: int = 0


@dataclass(frozen=True)
class HistoryRetrieval:
    """Result of `retrieve_history`.

    `status`: `ok` (searched; `hits` may be empty), `no-query` (the descriptor has no query
    terms), `disabled` (both passes off, or `max_results` / `max_tokens` <= 0), `no-session`
    (nothing is indexed for the session). `warnings` are user-readable sentences (e.g. the FTS
    index failed and only literal matches were used). `below_floor`: the best candidates that
    scored under the relevance floor (`retrieval/floor.py`), best first, at most
    `MAX_BELOW_FLOOR`.
    """

    status: RetrievalStatus
    hits: list[HistoryHit] = field(default_factory=list)
    stats: RetrievalStats = field(default_factory=RetrievalStats)
    warnings: list[str] = field(default_factory=list)
    below_floor: tuple[BelowFloor, ...] = ()


def first_match(text: str, terms: tuple[str, ...]) -> int:
    """Index in `text` of the earliest case-insensitive occurrence of any of `terms`, or -1."""
    lowered = text.lower()
    found = -1
    for term in terms:
        index = lowered.find(term.lower())
        if index >= 0 and (found < 0 or index < found):
            found = index
    return found


def excerpt_around(text: str, match: int, max_chars: int) -> str:
    """At most `max_chars` characters of `text` around index `match` (-1: no match).

    The whole text when it fits; otherwise a window starting `max_chars // 3` characters before
    `match` (or at 0), clamped to the text, with "…" on each cut side (docs/reference.md §3.2).
    """
    if len(text) <= max_chars:
        return text
    start = max(0, min(len(text) - max_chars, max(match, 0) - max_chars // 3))
    end = min(len(text), start + max_chars)
    return (ELLIPSIS if start > 0 else "") + text[start:end] + (ELLIPSIS if end < len(text) else "")


def _fit(item: RankedEntry[_Candidate], remaining: int) -> HistoryHit | None:
    """The hit for `item` with the largest excerpt whose evidence fits `remaining` tokens."""
    c = item.candidate
    terms = item.matched_terms
    match = first_match(c.text, terms) if len(c.text) > MIN_EXCERPT_CHARS else -1
    max_chars = min(MAX_EXCERPT_CHARS, max(MIN_EXCERPT_CHARS, remaining * 4 - 800))
    hit = HistoryHit(
        entry_key=c.entry_key,
        entry_id=c.entry_id,
        role=c.role,
        created_at=c.created_at,
        score=item.score,
        reason=item.reason,
        excerpt=excerpt_around(c.text, match, max_chars),
        tokens=0,
        literal_priority=item.literal_priority,
        matched_terms=terms,
        source_level=parse(c.text).level if has_marker(c.text) else "normal",
        source_secrets=secret_lines(c.text),
    )
    tokens = evidence_tokens(hit)
    while tokens > remaining and max_chars > MIN_EXCERPT_CHARS:
        max_chars = max(MIN_EXCERPT_CHARS, int(max_chars * EXCERPT_SHRINK))
        hit = replace(hit, excerpt=excerpt_around(c.text, match, max_chars))
        tokens = evidence_tokens(hit)
    if tokens > remaining:
        return None
    return replace(hit, tokens=tokens)


def _as_set(ids: Collection[str]) -> Collection[str]:
    return ids if isinstance(ids, set | frozenset) else set(ids)


class _SeenTexts:
    """Texts already ranked, compared by their dedup key `b" ".join(folded.split())`.

    Texts are grouped by the first 64 bytes of the key without its spaces (a function of the key,
    read from the start of the text); within a group, equal texts are equal, and the key is
    computed only for texts that differ.
    """

    def __init__(self) -> None:
        self.groups: dict[bytes, list[bytes]] = {}

    @staticmethod
    def _head(folded: bytes) -> bytes:
        head = folded[:256].translate(None, _ASCII_WHITESPACE)
        if len(head) < 64 and len(folded) > 256:
            head = folded.translate(None, _ASCII_WHITESPACE)
        return head[:64]

    def add(self, folded: bytes) -> bool:
        """Record `folded`; False when its key was already recorded."""
        head = self._head(folded)
        group = self.groups.get(head)
        if group is None:
            self.groups[head] = [folded]
            return True
        if folded in group:
            return False
        key = b" ".join(folded.split())
        if any(b" ".join(other.split()) == key for other in group):
            return False
        group.append(folded)
        return True
