"""Turns of a session as evidence for their conclusions (`retrieval/history_relevance.py`).

In a Pi session a user's message opens a turn, and the agent's last assistant message before
the next user message closes it: that message is the turn's conclusion (the agent loop stops
when the model answers without calling a tool), usually the answer a person later asks about.
Its own words rarely repeat the question, while the turn as a whole (the user's request, the
tool calls, their results) holds them. So the request's units are also counted per turn: a turn
matches a unit when any of its entries does, and its evidence is the summed weight of the
distinct units it matches. The conclusion of each of the best `TURN_LIMIT` turns (the last
assistant message of the turn on the active branch) gets `TURN_WEIGHT` x the turn's score x
(best entry score / best turn score, so the two scales meet) on top of its own, and the turn's
relevance (for the floor) when that is higher (`history_relevance._score_conclusions`), so a
short "Done! Changed dimGray to #585858" is found by the request that led to it.

Turn score: evidence x (0.5 + coverage) x 1 / (1 + TURN_SLOPE ln(1 + entries / TURN_UNIT)): a
long turn matches more units by chance. Entries before the first user message form turn 0.

Reads: the user messages' `seq` of the session (index `entries_session_role`, migration 9) and
one indexed range query per best turn; the matching entries are the scored ones of
`history_relevance` (their `seq` read with them).
"""

from __future__ import annotations

import math
import sqlite3
from bisect import bisect_right
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

TURN_LIMIT = 12
TURN_WEIGHT = 0.45
TURN_UNIT = 12
TURN_SLOPE = 0.3

_USER_SEQS_SQL = (  # index-only (`entries_session_role`): role 'user' is a message's
    "SELECT seq FROM entries WHERE session_id = ? AND role = 'user' ORDER BY seq"
)
_CONCLUSION_SQL = (
    "SELECT rowid, entry_id FROM entries WHERE session_id = ? AND role = 'assistant' "
    "AND entry_type = 'message' AND seq >= ? AND seq < ? ORDER BY seq DESC LIMIT 8"
)


@dataclass(frozen=True, slots=True)
class TurnEvidence:
    """One turn's conclusion and what the turn shares with the request.

    Attributes:
        conclusion: rowid of the turn's last assistant message.
        evidence: summed weights of the distinct units the turn's entries match.
        coverage: evidence / the request's total weight.
        score: the turn score (module docstring).
        units: the units matched, in request order.
    """

    conclusion: int
    evidence: float
    coverage: float
    score: float
    units: tuple[str, ...]


def turn_evidence(
    conn: sqlite3.Connection,
    session_id: str,
    matched_by: Mapping[int, Sequence[str]],
    seqs: Mapping[int, int],
    weights: Mapping[str, float],
    total: float,
    branch: Collection[str] | None = None,
) -> list[TurnEvidence]:
    """The best `TURN_LIMIT` turns of `session_id` with a conclusion, best first.

    `matched_by`: rowid -> the units (display text) the entry matches, for the session's
    scored entries; `seqs`: their `seq`; `weights`: unit -> weight; `total`: the request's
    total weight (> 0); `branch`: entry ids of the active branch (None: all), where the
    conclusion must lie (the last of the turn's 8 last assistant messages that does).
    """
    if not matched_by or total <= 0:
        return []
    starts = [row[0] for row in conn.execute(_USER_SEQS_SQL, (session_id,))]
    turns: dict[int, set[str]] = {}
    for rowid, units in matched_by.items():
        seq = seqs.get(rowid)
        if seq is not None:
            turns.setdefault(bisect_right(starts, seq), set()).update(units)
    order = list(weights)
    scored: list[tuple[float, int, float, tuple[str, ...]]] = []
    for turn, shared in turns.items():
        evidence = sum(weights[u] for u in shared)
        begin = starts[turn - 1] if turn > 0 else -1
        end = starts[turn] if turn < len(starts) else None
        entries = (end if end is not None else begin + 4 * TURN_UNIT) - begin
        factor = 1.0 / (1.0 + TURN_SLOPE * math.log1p(max(1, entries) / TURN_UNIT))
        score = evidence * (0.5 + evidence / total) * factor
        scored.append((score, turn, evidence, tuple(u for u in order if u in shared)))
    scored.sort(key=lambda item: (-item[0], -item[1]))
    out: list[TurnEvidence] = []
    for score, turn, evidence, units in scored:
        if len(out) >= TURN_LIMIT:
            break
        begin = starts[turn - 1] if turn > 0 else -1
        end = starts[turn] if turn < len(starts) else 2**62
        rows = conn.execute(_CONCLUSION_SQL, (session_id, begin, end)).fetchall()
        row = next((r for r in rows if branch is None or r[1] in branch), None)
        if row is not None:
            out.append(TurnEvidence(row[0], evidence, evidence / total, score, units))
    return out


__all__ = ["TURN_LIMIT", "TURN_WEIGHT", "TurnEvidence", "turn_evidence"]
