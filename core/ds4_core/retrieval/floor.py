"""The relevance floor: candidates a search scored but will not send, and why.

History and project retrieval both score their candidates by how much of the request they
carry (docs/retrieval.md, "The floor"). A candidate under the floor is not sent, however much
budget is left, so an unrelated request gets no evidence at all. Each search keeps the best of
those candidates as `BelowFloor` records; the plan's manifest lists them as excluded items with
`reason` = `BelowFloor.reason`, so a user can see what was found and why it stayed out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FloorKind = Literal["history", "project", "git"]
FloorRule = Literal["floor", "relative"]

MAX_BELOW_FLOOR = 16
"""How many below-floor candidates a search keeps for the manifest (the best scored first)."""


@dataclass(frozen=True, slots=True)
class BelowFloor:
    """One candidate that scored under the relevance floor.

    Attributes:
        kind: the scope it came from (`history`, `project` or `git`).
        source_id: its id in that scope: the entry key `session:entry` (history), the snippet
            id (project) or the commit hash (git).
        score: its relevance (the scope's own scale; the same scale as `floor`).
        floor: the floor it had to reach.
        tokens: estimated `chars-v2` tokens it would have cost (0 when not measured).
        rule: `floor` (its relevance is under the scope's absolute floor) or `relative` (it
            reached the floor but scored under the share `floor` of the best hit's score;
            `score` is then its share of the best).
    """

    kind: FloorKind
    source_id: str
    score: float
    floor: float
    tokens: int = 0
    rule: FloorRule = "floor"

    @property
    def reason(self) -> str:
        """E.g. `below the relevance floor (0.210 < 0.350)`, or for the relative rule
        `below the relative floor (0.520 of the best hit's score < 0.700)`."""
        if self.rule == "relative":
            return (
                f"below the relative floor ({self.score:.3f} of the best hit's score"
                f" < {self.floor:.3f})"
            )
        return f"below the relevance floor ({self.score:.3f} < {self.floor:.3f})"


__all__ = ["MAX_BELOW_FLOOR", "BelowFloor", "FloorKind", "FloorRule"]
