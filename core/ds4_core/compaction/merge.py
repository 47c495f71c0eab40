"""The aggregate text: a deterministic, bounded merge of two child summaries
(docs/compaction.md "Graph rules"; docs/reference.md §3.13).

Every bullet of the result comes from a child, so the result validates without errors against
`Evidence(older + "\\n\\n" + newer, read_files=..., modified_files=...)`. The size bound, with
the oldest bullets dropped first, is what keeps the active root flat however many compactions
a session goes through.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from ..lines import split_lines
from ..tokens import estimate_text_quarters, estimate_text_tokens
from .contract import (
    FILE_SECTIONS,
    FILES_MODIFIED,
    FILES_READ,
    NONE_BULLET,
    SECTIONS,
    clean_file_list,
    code_span,
    is_fence,
    is_heading,
    parse_sections,
    render_bullet,
)

MERGE_PROVIDER = "ds4"
"""`provider` recorded for aggregate nodes."""
MERGE_MODEL = "merge-v1"
"""`model` recorded for aggregate nodes."""

STATE_SECTIONS: tuple[str, ...] = ("Current State", "Open Questions", "Next Actions")
"""Sections describing the present: the newer child's bullets replace the older's (the older's
stay only when the newer holds just `- None`). Every other non-file section is chronological:
older bullets, then newer ones, deduplicated."""

_FALLBACK_SECTION = "Completed Work"
_OBJECTIVE = "Objective"


def _close_fence(text: str) -> str:
    """`text` with a closing fence appended when its lines leave a code fence open, so a
    bullet can never swallow the sections after it."""
    open_fence = False
    for line in split_lines(text):
        if is_fence(line):
            open_fence = not open_fence
    return text + "\n```" if open_fence else text


def _fallback_bullets(text: str) -> list[str]:
    """Bullets from a child that is not a twelve-section summary (e.g. a Pi-native summary):
    its non-empty, non-heading lines, a leading "- " or "* " removed; a fenced block (with
    whatever looks like a heading inside it) stays together as one multi-line bullet."""
    bullets: list[str] = []
    fence: list[str] | None = None
    for raw in split_lines(text):
        line = raw.rstrip()
        if fence is not None:
            fence.append(line)
            if is_fence(line):
                bullets.append("\n".join(fence))
                fence = None
            continue
        stripped = line.strip()
        if not stripped:
            continue
        if is_heading(line):
            continue
        if stripped.startswith(("- ", "* ")):
            stripped = stripped[2:].strip()
        elif stripped in ("-", "*"):
            continue
        if not stripped:
            continue
        if is_fence(stripped):
            fence = [stripped]
            continue
        bullets.append(stripped)
    if fence is not None:  # unclosed: close it after its last non-blank line
        while fence and not fence[-1].strip():
            fence.pop()
        bullets.append("\n".join([*fence, "```"]))
    return bullets


def _child_sections(text: str) -> dict[str, list[str]]:
    """A child's real bullets per section (no blank or `- None` bullets); an unparsable child
    contributes its lines to Completed Work only."""
    parsed = parse_sections(text)
    if parsed is None:
        return {name: [] for name in SECTIONS} | {_FALLBACK_SECTION: _fallback_bullets(text)}
    return {
        name: [_close_fence(b) for b in bullets if b.strip() and b.strip() != NONE_BULLET]
        for name, bullets in parsed.items()
    }


def _dedup(bullets: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for bullet in bullets:
        key = " ".join(bullet.split()).casefold()
        if key not in seen:
            seen.add(key)
            out.append(bullet)
    return out


class _Bounded:
    """Sections as rendered bullet lines, with the rendered text's weight in quarter tokens
    (`estimate_text_quarters`, additive) kept up to date, so dropping one bullet costs O(1)
    bookkeeping."""

    def __init__(self, sections: dict[str, list[str]]) -> None:
        self.bullets: dict[str, deque[str]] = {}
        self.body: dict[str, int] = {}  # quarter tokens of the rendered bullets, newlines incl.
        for name in SECTIONS:
            rendered = deque(render_bullet(b) for b in sections[name] if b.strip())
            self.bullets[name] = rendered
            self.body[name] = (
                sum(estimate_text_quarters(b) + 1 for b in rendered) - 1 if rendered else 0
            )
        self.none = estimate_text_quarters("- " + NONE_BULLET)
        self.fixed = sum(estimate_text_quarters(f"## {name}\n") for name in SECTIONS) + 2 * (
            len(SECTIONS) - 1
        )

    def length(self) -> int:
        return self.fixed + sum(self.body[n] if self.bullets[n] else self.none for n in SECTIONS)

    def drop_one(self) -> bool:
        """Drop the oldest bullet of the largest section, the objective's first bullet last.
        False when nothing is left to drop."""
        candidates = [
            name
            for name in SECTIONS
            if self.bullets[name] and (name != _OBJECTIVE or len(self.bullets[name]) > 1)
        ]
        if not candidates:
            if not self.bullets[_OBJECTIVE]:
                return False
            candidates = [_OBJECTIVE]
        name = max(candidates, key=lambda n: (self.body[n], -SECTIONS.index(n)))
        queue = self.bullets[name]
        if name == _OBJECTIVE and len(queue) > 1:
            dropped = queue[1]
            del queue[1]
        else:
            dropped = queue.popleft()
        self.body[name] = self.body[name] - estimate_text_quarters(dropped) - (1 if queue else 0)
        if not queue:
            self.body[name] = 0
        return True

    def render(self) -> str:
        blocks = [
            "\n".join([f"## {name}", *(self.bullets[name] or ["- " + NONE_BULLET])])
            for name in SECTIONS
        ]
        return "\n\n".join(blocks)


def merge_summaries(
    older: str,
    newer: str,
    *,
    read_files: Sequence[str],
    modified_files: Sequence[str],
    token_limit: int,
) -> str:
    """The aggregate summary of `older` (the previous root) and `newer` (the new segment).

    Per section: Objective, User Constraints, Durable Decisions, Completed Work,
    Commands / Tests, Errors / Risks and Critical Exact Values keep the older bullets, then the
    newer ones, deduplicated (whitespace and case folded); Current State, Open Questions and
    Next Actions take the newer child's bullets (the older's when the newer has only
    `- None`). Files Read / Files Modified list `read_files` / `modified_files` (pass the
    union; entries that are not clean paths are left out). `- None` never stands next to a
    real bullet. A child that does not parse into the twelve sections (e.g. a Pi-native
    summary) contributes its non-empty, non-heading lines as Completed Work bullets.

    Bound: while the text is over `token_limit` tokens (`estimate_text_tokens`), the oldest
    bullet of the largest section (by characters, file sections included) is dropped, the
    objective's first bullet last. When even the twelve headings with `- None` exceed the
    limit, that skeleton is returned.

    Returns:
        The merged text; it validates without errors against `Evidence(older + "\\n\\n" +
        newer, "", tuple(read_files), tuple(modified_files))`. Deterministic; never raises on
        any text.
    """
    old = _child_sections(older)
    new = _child_sections(newer)
    sections: dict[str, list[str]] = {}
    for name in SECTIONS:
        if name in FILE_SECTIONS:
            continue
        if name in STATE_SECTIONS:
            sections[name] = _dedup(new[name] or old[name])
        else:
            sections[name] = _dedup([*old[name], *new[name]])
    sections[FILES_READ] = [code_span(p) for p in clean_file_list(read_files)]
    sections[FILES_MODIFIED] = [code_span(p) for p in clean_file_list(modified_files)]
    bounded = _Bounded(sections)
    budget = max(0, token_limit) * 4  # quarter tokens: tokens are ceil(quarters / 4)
    while bounded.length() > budget and bounded.drop_one():
        pass
    text = bounded.render()
    # The bookkeeping mirrors the rendering exactly; this loop only guards that claim.
    while estimate_text_tokens(text) > token_limit and bounded.drop_one():
        text = bounded.render()
    return text
