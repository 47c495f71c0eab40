"""The history entries a retrieval reads (`_Candidate`) and how terms are matched in them.

`_Candidate` is one `entries` row with what the literal and FTS passes found in it; `_Pool`
matches a term in many candidates with one scan; `_count_descriptor_matches` records the
descriptor files, symbols and errors each eligible candidate holds (the scorer's bonus
evidence, `retrieval/scoring.py`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Protocol

from ds4_core.retrieval.descriptor import TaskDescriptor
from ds4_core.retrieval.literal import LiteralTerm, _starts_word


class _Candidate:
    """One entry read from the store, and what the passes found in it."""

    __slots__ = (
        "rowid", "entry_key", "entry_id", "role", "created_at", "token_estimate", "raw",
        "folded", "exact", "phrases", "fts_terms", "fts_rank", "files_found", "symbols_found",
        "errors_found", "_text",
    )  # fmt: skip

    def __init__(self, row: tuple) -> None:
        self.rowid: int = row[0]
        self.entry_key: str = row[1]
        self.entry_id: str = row[2]
        self.role: str | None = row[3]
        self.created_at: str | None = row[4]
        self.token_estimate = int(row[5] or 0)
        self.raw: bytes = row[6]  # the stored UTF-8 of searchable_text
        self.folded: bytes = self.raw.lower()  # = fold(self.text)
        self.exact: list[str] = []
        self.phrases: list[str] = []
        self.fts_terms: list[str] = []
        self.fts_rank: int | None = None
        self.files_found = 0  # request files, symbols, errors the text holds (eligible only)
        self.symbols_found = 0
        self.errors_found = 0
        self._text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.raw.decode("utf-8", "replace")  # the store writes valid UTF-8
        return self._text


class _Pool:
    """Candidates in rowid order, their folded texts joined by NUL: one `find` scan per term."""

    def __init__(self, candidates: Iterable[_Candidate]) -> None:
        self.candidates = sorted(candidates, key=lambda c: c.rowid)
        self.rowids = [c.rowid for c in self.candidates]
        self._corpus: tuple[bytes, list[int]] | None = None

    def _joined(self) -> tuple[bytes, list[int]]:
        if self._corpus is None:
            starts: list[int] = []
            at = 0
            for c in self.candidates:
                starts.append(at)
                at += len(c.folded) + 1
            self._corpus = (b"\x00".join(c.folded for c in self.candidates), starts)
        return self._corpus

    def matching(self, term: LiteralTerm, below: int | None = None) -> set[int]:
        """Rowids of the candidates (under rowid `below`, if given) that `term` matches.

        Same result as `term.occurs_in` on each: a needle without NUL cannot match across the
        NUL separators, and a match right after a separator starts a word, as one at offset 0
        of its text does.
        """
        needle = term.needle
        count = len(self.rowids) if below is None else bisect_left(self.rowids, below)
        if not needle or not count:
            return set()
        if 0 in needle:
            return {c.rowid for c in self.candidates[:count] if term.occurs_in(c.folded)}
        corpus, starts = self._joined()
        end = starts[count] - 1 if count < len(starts) else len(corpus)
        rowids = self.rowids
        found: set[int] = set()
        find = corpus.find
        at = find(needle, 0, end)
        while at >= 0:
            if term.word_start and at > 0 and not _starts_word(corpus, at):
                at = find(needle, at + 1, end)
                continue
            index = bisect_right(starts, at) - 1
            found.add(rowids[index])
            if index + 1 >= count:
                break
            at = find(needle, starts[index + 1], end)
        return found


class TermMatcher(Protocol):
    """What `_count_descriptor_matches` needs of a search (`history._Search`): the rowids of the
    candidates in a pool that a literal term matches."""

    def matching(self, term: LiteralTerm, pool: _Pool) -> set[int]: ...


def _count_descriptor_matches(
    search: TermMatcher, eligible: list[_Candidate], descriptor: TaskDescriptor
) -> None:
    """Count, on each eligible candidate, the descriptor files, symbols and errors its text holds
    (`files_found`, `symbols_found`, `errors_found`: the scorer's bonus evidence).

    A term is matched once (`_Search.matching`, over a `_Pool` of the eligible candidates) and
    counts for every list that names it.
    """
    by_rowid = {c.rowid: c for c in eligible}
    matching: dict[str, set[int]] = {}
    pool: _Pool | None = None
    for terms, kind in ((descriptor.files, 0), (descriptor.symbols, 1), (descriptor.errors, 2)):
        for text in terms:
            rowids = matching.get(text)
            if rowids is None:
                if pool is None:
                    pool = _Pool(eligible)
                rowids = matching[text] = search.matching(LiteralTerm.of(text), pool)
            for rowid in rowids:
                c = by_rowid.get(rowid)
                if c is None:
                    continue
                if kind == 0:
                    c.files_found += 1
                elif kind == 1:
                    c.symbols_found += 1
                else:
                    c.errors_found += 1
