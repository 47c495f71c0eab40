"""The offline summarizer: a deterministic twelve-section summary built from the transcript
itself, used when no model summary is available or valid (docs/compaction.md "The offline
summarizer"; docs/reference.md §3.13).

One module: the offline summarizer is one pass over a digest of the transcript (`_digest`) feeding
one builder per section, and the builders share `_Candidate`, `_bullet` and the final fit.

Where each section comes from:

- Objective: the first substantive user turn (a bare slash command such as `/mode` is not
  one); with no user turn in the span, the previous summary's objective.
- User Constraints: user sentences with a constraint word (must, never, always, don't, only,
  make sure, ...).
- Durable Decisions: assistant sentences stating a decision, approach or cause.
- Completed Work: assistant sentences reporting work done (done, fixed, added, I've, ...).
- Current State: the opening of the last assistant text and the outcome of the last command.
- Files Read / Files Modified: the known inventories, as code spans.
- Commands / Tests: commands of tool calls with a `command` argument (Pi's `bash`) and of
  `bashExecution` messages, with their outcome (exit code, failed, cancelled) where known.
- Errors / Risks: tool results marked `isError` and assistant `errorMessage`s.
- Open Questions: question sentences of the last two user turns and what followed them.
- Next Actions: the last substantive user request, and a stated next step of the last
  assistant text.
- Critical Exact Values: identifiers (camelCase, PascalCase, snake_case), paths and file
  names, versions, hashes and hex colors, numbers with units, and spans the user or the
  assistant wrapped in backticks.

Every bullet is one line of at most `MAX_BULLET_CHARS` characters. Backticks survive only
around a value that `Evidence.supports` (a literal or JSON-escaped occurrence in the
evidence); every other backtick becomes an apostrophe. The result fits `token_limit` tokens
(`estimate_text_tokens`) by keeping the most important bullets, never less than the twelve
headings with `- None`.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..lines import split_lines
from ..retrieval.descriptor import text_of_message
from ..tokens import estimate_text_quarters, estimate_text_tokens
from .contract import (
    FILES_MODIFIED,
    FILES_READ,
    NONE_BULLET,
    SECTIONS,
    Evidence,
    clean_file_list,
    code_span,
    code_spans,
    collapse_whitespace,
    parse_sections,
    render_summary,
    validate_summary,
)
from .transcript import conversation_text

OFFLINE_PROVIDER = "ds4"
"""`provider` recorded for offline summaries."""
OFFLINE_MODEL = "offline-v1"
"""`model` recorded for offline summaries."""

MAX_BULLET_CHARS = 300
"""Longest bullet text, in characters (longer text is cut at a word and ends with "…")."""
MAX_VALUE_CHARS = 120
"""Longest exact value kept in backticks, in characters."""
MAX_COMMAND_CHARS = 200
"""Longest command shown as a code span; longer ones are shown cut, without backticks."""

SECTION_CAPS: dict[str, int] = {
    "Objective": 2,
    "User Constraints": 8,
    "Durable Decisions": 8,
    "Completed Work": 10,
    "Current State": 3,
    "Files Read": 100,
    "Files Modified": 100,
    "Commands / Tests": 12,
    "Errors / Risks": 8,
    "Open Questions": 5,
    "Next Actions": 3,
    "Critical Exact Values": 20,
}
"""Most bullets per section before the token budget is applied."""

_SECTION_WEIGHTS: dict[str, float] = {
    "Objective": 8.0,
    "User Constraints": 2.0,
    "Durable Decisions": 2.0,
    "Completed Work": 2.0,
    "Current State": 4.0,
    "Files Read": 1.5,
    "Files Modified": 3.0,
    "Commands / Tests": 2.0,
    "Errors / Risks": 2.0,
    "Open Questions": 1.5,
    "Next Actions": 6.0,
    "Critical Exact Values": 2.0,
}
"""How fast a section's bullets claim the token budget: the k-th most important bullet of a
section ranks at k / weight, and bullets are kept in rank order while they fit."""

_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_SLASH_COMMAND_RE = re.compile(r"/\S*")
_CONSTRAINT_RE = re.compile(
    r"\b(must|never|always|don'?t|do not|should(?:n'?t)?|no need|make sure|only|without|"
    r"avoid|prefer|need(?:s)? to|has to|have to|not allowed)\b",
    re.IGNORECASE,
)
_DECISION_RE = re.compile(
    r"\b(decid\w*|instead of|approach|solution|we'll use|i'll use|will use|going with|"
    r"chose|choose|switch(?:ed)? to|the fix is|plan is|root cause|the (?:issue|problem|bug) "
    r"(?:is|was))\b",
    re.IGNORECASE,
)
_COMPLETED_RE = re.compile(
    r"^(?:done|fixed|added|updated|created|removed|implemented|ported|changed|moved|renamed|"
    r"refactored|replaced|wrote|deleted|installed|built|released|published|committed|"
    r"all (?:tests|checks) pass)\b|\b(?:i've|i have|we've|successfully|now (?:uses|works|"
    r"passes|builds|compiles))\b",
    re.IGNORECASE,
)
_NEXT_RE = re.compile(r"^(?:next|let me|i'll|i will|now (?:i|let)|then i|remaining)\b", re.I)
_TEST_RE = re.compile(
    r"\b(test|tests|pytest|jest|vitest|mocha|check|lint|tsc|mypy|ruff|eslint|build|cargo|"
    r"go vet|make)\b",
    re.IGNORECASE,
)
_EXIT_RE = re.compile(r"(?:exit(?:ed)? with code|exit code:?|exit status)\s*(-?\d+)", re.I)

_EXTENSIONS = (
    "ts|tsx|js|jsx|mjs|cjs|json|jsonl|md|py|pyi|rs|go|java|kt|c|h|cc|cpp|hpp|cs|rb|php|sh|"
    "bash|zsh|toml|yaml|yml|ini|cfg|txt|html|css|scss|sql|lock|xml|svg|png|jpg|gif|lua|vim|el|"
    "swift|m|mm|scala|ex|exs|erl|hs|ml|dart|vue|svelte|proto|gradle|env"
)
_VALUE_PATTERNS: tuple[re.Pattern[str], ...] = (
    # the first two are paths: paths with a directory part, file names with a common extension
    re.compile(r"(?<![\w/.~-])(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+"),
    re.compile(rf"(?<![\w/.-])[\w@+-][\w.@+-]*\.(?:{_EXTENSIONS})\b"),
    # camelCase, PascalCase with two or more humps, snake_case, SCREAMING_CASE
    re.compile(r"\b[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+\b"),
    re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b"),
    re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b"),
    # versions, hex colors, hashes
    re.compile(r"\bv?\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?\b"),
    re.compile(r"#[0-9a-fA-F]{6}\b|#[0-9a-fA-F]{3}\b"),
    re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{6,40}\b"),
    # numbers with units
    re.compile(
        r"\b\d+(?:\.\d+)? ?(?:ms|s|sec|secs|seconds?|minutes?|mins?|hours?|h|KB|MB|GB|kB|KiB|"
        r"MiB|GiB|px|tokens?|chars?|characters?|lines?|bytes?|files?)\b|\b\d+(?:\.\d+)?%"
    ),
)


@dataclass(frozen=True)
class _Candidate:
    section: str
    position: tuple[int, int]  # (message index, order within it): chronological rendering
    rank: int  # 0 = most important in its section
    text: str


# --- text helpers ---------------------------------------------------------------------------


def _cut(text: str, limit: int = MAX_BULLET_CHARS) -> str:
    """`text` collapsed to one line, cut at a word boundary to at most `limit` characters."""
    text = collapse_whitespace(text)
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"


def _backticks_to_quotes(text: str) -> str:
    """`text` with each backtick as an apostrophe, so prose never opens a code span."""
    return text.replace("`", "'")


def _is_value(value: str) -> bool:
    """A value that may be written as a single-backtick code span."""
    return (
        bool(value)
        and value == value.strip()
        and "`" not in value
        and len(value) <= MAX_VALUE_CHARS
        and not any(ch in value for ch in "\n\r")
    )


def _inline(text: str, evidence: Evidence) -> str:
    """One bullet line: single-backtick spans whose text the evidence supports stay, every
    other backtick becomes an apostrophe."""
    if "`" not in text:
        return text
    out: list[str] = []
    cursor = 0
    for span in code_spans(text):
        out.append(_backticks_to_quotes(text[cursor : span.start]))
        raw = text[span.start : span.end]
        single = raw.startswith("`") and not raw.startswith("``")
        if single and _is_value(span.text) and evidence.supports(span.text):
            out.append(raw)
        else:
            out.append(_backticks_to_quotes(raw))
        cursor = span.end
    out.append(_backticks_to_quotes(text[cursor:]))
    return "".join(out)


def _bullet(text: str, evidence: Evidence, limit: int = MAX_BULLET_CHARS) -> str:
    return _inline(_cut(text, limit), evidence)


def _value_bullet(value: str, evidence: Evidence) -> str | None:
    """`value` as a code span when it is a supported value, else None."""
    if _is_value(value) and evidence.supports(value):
        return f"`{value}`"
    return None


def _sentences(text: str) -> list[str]:
    return [s for s in (collapse_whitespace(part) for part in _SENTENCE_RE.split(text)) if s]


# --- the digest of a span -------------------------------------------------------------------


@dataclass
class _Turn:
    index: int
    role: str
    text: str


@dataclass
class _Command:
    index: int
    command: str
    outcome: str  # "" when unknown


@dataclass
class _Digest:
    user: list[_Turn]
    assistant: list[_Turn]
    commands: list[_Command]
    errors: list[_Turn]  # role holds the failing tool / "assistant"


def _is_substantive(text: str) -> bool:
    """A user turn that states something: not empty and not a bare slash command."""
    stripped = text.strip()
    return bool(stripped) and not _SLASH_COMMAND_RE.fullmatch(stripped)


def _outcome_of_result(message: Mapping[str, Any]) -> str:
    text = text_of_message(message)
    match = _EXIT_RE.search(text)
    if message.get("isError") is True:
        return f"failed (exit {match.group(1)})" if match else "failed"
    return f"exit {match.group(1)}" if match else "ok"


def _digest(messages: Sequence[Mapping[str, Any]]) -> _Digest:
    digest = _Digest([], [], [], [])
    pending: dict[str, _Command] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role == "user":
            digest.user.append(_Turn(index, "user", text_of_message(message)))
        elif role == "assistant":
            text = text_of_message(message)
            if text.strip():
                digest.assistant.append(_Turn(index, "assistant", text))
            content = message.get("content")
            for block in content if isinstance(content, list) else ():
                if not isinstance(block, Mapping) or block.get("type") != "toolCall":
                    continue
                arguments = block.get("arguments")
                if not isinstance(arguments, Mapping):
                    continue
                command = arguments.get("command")
                if isinstance(command, str) and command.strip():
                    run = _Command(index, command, "")
                    digest.commands.append(run)
                    call_id = block.get("id")
                    if isinstance(call_id, str):
                        pending[call_id] = run
            error = message.get("errorMessage")
            if isinstance(error, str) and error.strip():
                stop = message.get("stopReason")
                label = f"assistant turn {stop}" if isinstance(stop, str) else "assistant error"
                digest.errors.append(_Turn(index, label, error))
        elif role == "toolResult":
            call_id = message.get("toolCallId")
            entry = pending.pop(call_id, None) if isinstance(call_id, str) else None
            if entry is not None:
                entry.outcome = _outcome_of_result(message)
            if message.get("isError") is True:
                name = message.get("toolName")
                label = f"{name} failed" if isinstance(name, str) and name else "tool failed"
                if entry is not None:
                    label = f"{label} ({_cut(entry.command, 80)})"
                text = text_of_message(message).strip()
                digest.errors.append(_Turn(index, label, text))
        elif role == "bashExecution":
            command = message.get("command")
            if not isinstance(command, str) or not command.strip():
                continue
            exit_code = message.get("exitCode")
            if message.get("cancelled") is True:
                outcome = "cancelled"
            elif isinstance(exit_code, int) and not isinstance(exit_code, bool):
                outcome = f"exit {exit_code}"
            else:
                outcome = ""
            digest.commands.append(_Command(index, command, outcome))
            if outcome not in ("", "exit 0"):
                output = message.get("output")
                tail = (
                    split_lines(output.strip())[-1]
                    if isinstance(output, str) and output.strip()
                    else ""
                )
                digest.errors.append(_Turn(index, f"command {outcome} ({_cut(command, 80)})", tail))
    return digest


# --- sections -------------------------------------------------------------------------------


def _ranked(section: str, items: Sequence[tuple[tuple[int, int], str]]) -> list[_Candidate]:
    """Candidates from (position, text) items ordered most important first; empty and
    repeated texts dropped; at most the section's cap."""
    seen: set[str] = set()
    out: list[_Candidate] = []
    for position, text in items:
        key = text.casefold()
        if not text or key in seen or key == NONE_BULLET.casefold():
            continue
        seen.add(key)
        out.append(_Candidate(section, position, len(out), text))
        if len(out) >= SECTION_CAPS[section]:
            break
    return out


def _sentence_items(
    turns: Iterable[_Turn], pattern: re.Pattern[str], evidence: Evidence, *, questions: bool
) -> list[tuple[tuple[int, int], str]]:
    """(position, bullet) of the sentences matching `pattern`, newest first."""
    items: list[tuple[tuple[int, int], str]] = []
    for turn in turns:
        for order, sentence in enumerate(_sentences(turn.text)):
            if sentence.endswith("?") != questions:
                continue
            if pattern.search(sentence):
                items.append(((turn.index, order), _bullet(sentence, evidence)))
    items.reverse()
    return items


def _objective(digest: _Digest, evidence: Evidence, previous_summary: str) -> list[_Candidate]:
    substantive = [t for t in digest.user if _is_substantive(t.text)]
    if substantive:
        first = substantive[0]
        return _ranked("Objective", [((first.index, 0), _bullet(first.text, evidence))])
    previous = parse_sections(previous_summary) if previous_summary.strip() else None
    if previous is None:
        return []
    items = [((-1, i), _bullet(b, evidence)) for i, b in enumerate(previous["Objective"])]
    return _ranked("Objective", items)


def _current_state(digest: _Digest, evidence: Evidence) -> list[_Candidate]:
    items: list[tuple[tuple[int, int], str]] = []
    if digest.assistant:
        last = digest.assistant[-1]
        opening = [s for s in _sentences(last.text) if not s.endswith("?")][:2]
        if opening:
            items.append(((last.index, 0), _bullet(" ".join(opening), evidence)))
    if digest.commands:
        command = digest.commands[-1]
        shown = _command_text(command, evidence)
        items.append(((command.index, 1), _bullet(f"Last command: {shown}", evidence)))
    return _ranked("Current State", items)


def _command_text(command: _Command, evidence: Evidence) -> str:
    one_line = "\n" not in command.command and "\r" not in command.command
    if one_line and len(command.command) <= MAX_COMMAND_CHARS:
        span = _value_bullet(command.command.strip(), evidence)
        if span is not None:
            suffix = f" — {command.outcome}" if command.outcome else ""
            return span + suffix
    suffix = f" — {command.outcome}" if command.outcome else ""
    return _backticks_to_quotes(_cut(command.command, MAX_COMMAND_CHARS)) + suffix


def _commands(digest: _Digest, evidence: Evidence) -> list[_Candidate]:
    latest: dict[str, _Command] = {}
    for command in digest.commands:
        key = collapse_whitespace(command.command)
        latest.pop(key, None)
        latest[key] = command  # a repeated command moves to its latest run
    ordered = sorted(
        latest.values(),
        key=lambda c: (_TEST_RE.search(c.command) is None, -c.index),
    )
    items = [((c.index, 0), _command_text(c, evidence)) for c in ordered]
    return _ranked("Commands / Tests", items)


def _errors(digest: _Digest, evidence: Evidence) -> list[_Candidate]:
    items: list[tuple[tuple[int, int], str]] = []
    for error in reversed(digest.errors):
        first_line = next((line for line in split_lines(error.text) if line.strip()), "")
        text = f"{error.role}: {first_line}" if first_line else error.role
        items.append(((error.index, 0), _bullet(text, evidence, 240)))
    return _ranked("Errors / Risks", items)


def _open_questions(digest: _Digest, evidence: Evidence) -> list[_Candidate]:
    users = [t for t in digest.user if _is_substantive(t.text)]
    start = users[-2].index if len(users) >= 2 else (users[-1].index if users else 0)
    recent = [t for t in [*digest.user, *digest.assistant] if t.index >= start]
    recent.sort(key=lambda t: t.index)
    items = _sentence_items(recent, re.compile(r"."), evidence, questions=True)
    return _ranked("Open Questions", items)


def _next_actions(digest: _Digest, evidence: Evidence) -> list[_Candidate]:
    items: list[tuple[tuple[int, int], str]] = []
    users = [t for t in digest.user if _is_substantive(t.text)]
    if users:
        last = users[-1]
        items.append(((last.index, 0), _bullet(f"Last user request: {last.text}", evidence)))
    if digest.assistant:
        last_text = digest.assistant[-1]
        for order, sentence in enumerate(_sentences(last_text.text)):
            if _NEXT_RE.search(sentence) and not sentence.endswith("?"):
                items.append(((last_text.index, order + 1), _bullet(sentence, evidence)))
                break
    return _ranked("Next Actions", items)


def _exact_values(digest: _Digest, evidence: Evidence, files: frozenset[str]) -> list[_Candidate]:
    stats: dict[str, list[int]] = {}  # value -> [user mentions, mentions, first index, last]
    turns = sorted([*digest.user, *digest.assistant], key=lambda t: t.index)
    for turn in turns:
        found: list[str] = []
        for line in split_lines(turn.text):
            found.extend(span.text for span in code_spans(line) if "\n" not in span.text)
        path_matches = sorted(
            (m for p in _VALUE_PATTERNS[:2] for m in p.finditer(turn.text)), key=lambda m: m.start()
        )
        found.extend(m.group(0) for m in path_matches)
        starts = [m.start() for m in path_matches]
        reach = list(itertools.accumulate((m.end() for m in path_matches), max))
        for pattern in _VALUE_PATTERNS[2:]:
            # a part of a path (`mod_3` of `src/mod_3.py`) is not a value of its own
            for m in pattern.finditer(turn.text):
                at = bisect.bisect_right(starts, m.start()) - 1
                if at < 0 or reach[at] < m.end():
                    found.append(m.group(0))
        for value in found:
            value = value.rstrip(".,:;")
            if len(value) < 3 or value in files:
                continue
            entry = stats.setdefault(value, [0, 0, turn.index, turn.index])
            entry[0] += turn.role == "user"
            entry[1] += 1
            entry[3] = turn.index
    ordered = sorted(stats.items(), key=lambda kv: (-kv[1][0], -kv[1][1], -kv[1][3], kv[0]))
    items: list[tuple[tuple[int, int], str]] = []
    for value, entry in ordered:
        bullet = _value_bullet(value, evidence)
        if bullet is not None:
            items.append(((entry[2], 0), bullet))
            if len(items) >= SECTION_CAPS["Critical Exact Values"]:
                break
    return _ranked("Critical Exact Values", items)


def _files(section: str, paths: Sequence[str]) -> list[_Candidate]:
    clean = clean_file_list(paths)
    recent_first = list(enumerate(clean))[::-1][: SECTION_CAPS[section]]
    return [
        _Candidate(section, (position, 0), rank, code_span(path))
        for rank, (position, path) in enumerate(recent_first)
    ]


# --- assembly -------------------------------------------------------------------------------


def _fit(candidates: Sequence[_Candidate], token_limit: int) -> dict[str, list[str]]:
    """Keep candidates in rank order while the rendered text stays within `token_limit`
    tokens; render each section's kept bullets chronologically."""
    budget = max(0, token_limit) * 4  # quarter tokens: tokens are ceil(quarters / 4)
    used = estimate_text_quarters(render_summary({}))
    none_line = estimate_text_quarters("- " + NONE_BULLET)
    index_of = {name: i for i, name in enumerate(SECTIONS)}
    kept: dict[str, list[_Candidate]] = {name: [] for name in SECTIONS}
    order = sorted(
        candidates,
        key=lambda c: (c.rank / _SECTION_WEIGHTS[c.section], index_of[c.section], c.rank),
    )
    for candidate in order:
        line = estimate_text_quarters("- " + candidate.text)
        delta = line - none_line if not kept[candidate.section] else line + 1
        if used + delta <= budget:
            kept[candidate.section].append(candidate)
            used += delta
    return {
        name: [c.text for c in sorted(kept[name], key=lambda c: c.position)] for name in SECTIONS
    }


def _without_backticks(sections: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    return {
        name: list(bullets)
        if name in (FILES_READ, FILES_MODIFIED)
        else [_backticks_to_quotes(b) for b in bullets]
        for name, bullets in sections.items()
    }


def offline_summary(
    messages: Sequence[Mapping[str, Any]],
    *,
    read_files: Sequence[str],
    modified_files: Sequence[str],
    token_limit: int,
    previous_summary: str = "",
    source_text: str | None = None,
) -> str:
    """A deterministic twelve-section summary of `messages` (Pi `AgentMessage` dicts).

    Args:
        messages: the span; anything is tolerated (non-mappings, `None` content, odd blocks).
        read_files, modified_files: the known inventories (entries that are not clean paths,
            see `contract.is_clean_path`, are not listed).
        token_limit: the most tokens (`estimate_text_tokens`) of the result; when even the
            twelve headings with `- None` exceed it, that skeleton is returned anyway.
        previous_summary: the summary the span continues from (evidence; its objective is
            used when the span has no user turn).
        source_text: the evidence text; defaults to `conversation_text(messages)`.

    Returns:
        Text for which `validate_summary(text, Evidence(source_text, previous_summary,
        tuple(read_files), tuple(modified_files)))` has status "valid": no errors and no
        warnings. The same input always gives the same text. Never raises on any messages.
    """
    items = [m for m in messages if isinstance(m, Mapping)]
    source = conversation_text(items) if source_text is None else source_text
    evidence = Evidence(source, previous_summary, tuple(read_files), tuple(modified_files))
    digest = _digest(items)
    files = frozenset(p for p in (*read_files, *modified_files) if isinstance(p, str))
    candidates = [
        *_objective(digest, evidence, previous_summary),
        *_ranked(
            "User Constraints",
            _sentence_items(digest.user, _CONSTRAINT_RE, evidence, questions=False),
        ),
        *_ranked(
            "Durable Decisions",
            _sentence_items(digest.assistant, _DECISION_RE, evidence, questions=False),
        ),
        *_ranked(
            "Completed Work",
            _sentence_items(digest.assistant, _COMPLETED_RE, evidence, questions=False),
        ),
        *_current_state(digest, evidence),
        *_files(FILES_READ, read_files),
        *_files(FILES_MODIFIED, modified_files),
        *_commands(digest, evidence),
        *_errors(digest, evidence),
        *_open_questions(digest, evidence),
        *_next_actions(digest, evidence),
        *_exact_values(digest, evidence, files),
    ]
    sections = _fit(candidates, token_limit)
    text = render_summary(sections)
    if validate_summary(text, evidence).status == "valid" and (
        estimate_text_tokens(text) <= token_limit or not any(sections.values())
    ):
        return text
    # Never expected; the guarantees hold by construction. Degrade rather than break it.
    text = render_summary(_without_backticks(sections))
    if validate_summary(text, evidence).status == "valid":
        return text
    return render_summary({})
