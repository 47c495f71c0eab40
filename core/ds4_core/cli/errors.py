"""Exit codes of `ds4` and the messages of the errors it reports (engine wording in CLI terms)."""

from __future__ import annotations

import re

from ..engine import ContextEngine
from ..requests import RequestError
from ..store.database import database_locked_message

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3
EXIT_INTERRUPTED = 130
"""Ctrl-C, as a shell reports a process killed by SIGINT (128 + 2)."""

_OPTION_OF_FIELD: dict[str, dict[str, str]] = {
    "plan": {
        "file": "--session",
        "session.file": "--session",
        "session.leafId": "--leaf",
        "model.contextWindow": "--context-window",
        "fixedTokens": "--fixed-tokens",
        "workspace": "--workspace",
    },
    "retrieve": {
        "file": "--session",
        "session.file": "--session",
        "session.leafId": "--leaf",
        "maxResults": "--max-results",
        "workspace": "--workspace",
    },
    "manifest": {"session.file": "--session", "view": "--view"},
    "compact": {
        "file": "--session",
        "session.file": "--session",
        "session.leafId": "--leaf",
        "firstKeptEntryId": "--first-kept",
        "reason": "--reason",
    },
    "usage": {
        "manifestId": "--manifest",
        "usage.input": "--input",
        "usage.output": "--output",
        "usage.cacheRead": "--cache-read",
        "usage.cacheWrite": "--cache-write",
        "provider": "--model",
        "model": "--model",
        "stopReason": "--stop-reason",
        "usage": "--input",
    },
    "session": {
        "session.file": "FILE",
        "session.leafId": "--parent",
        "parentId": "--parent",
        "messages": "--messages",
        "title": "--title",
        "sessionId": "--id",
        "cwd": "--cwd",
    },
    "artifacts": {
        "artifactId": "--artifact",
        "session.file": "--session",
        "session.leafId": "--leaf",
        "maxMatches": "--max-matches",
        "query": "QUERY",
        "force": "--force",
    },
    "summaries": {
        "file": "--session",
        "session.file": "--session",
        "session.leafId": "--leaf",
        "output": "--output",
    },
}
"""Engine request fields (wire spelling) -> the `ds4` option that supplies them, per command."""


_MEMORY_ADVICE = (
    (re.compile(r" \(params\.(?:pinId|memoryId|supersedes)\)"), ""),
    (re.compile(r'params\.supersedes: "([^"]*)"'), r"--supersedes \1"),
    (re.compile(r'params\.scope: "([^"]*)"'), r"--scope \1"),
    (re.compile(r"params\.supersedes"), "--supersedes"),
    (re.compile(r"params\.(?:pinId|memoryId)"), "ID"),
)
"""The wire names in a memory write's refusal (`memory/writes.py`) -> the `ds4 pin|unpin|
remember|forget` arguments that supply them."""


def usage_message(exc: RequestError, command: str) -> str:
    """The engine's message for a bad input to `command` (`plan`, `retrieve`, ...), naming the
    CLI option (`--leaf`) instead of the wire field (`session.leafId`) when there is one."""
    text = str(exc)
    if exc.field:
        text = text.removeprefix(f"{exc.field}:").strip()
    if command in ("pin", "unpin", "remember", "forget"):
        for pattern, argument in _MEMORY_ADVICE:
            text = pattern.sub(argument, text)
    option = _OPTION_OF_FIELD.get(command, {}).get(exc.field or "")
    return f"{option}: {text}" if option else text


def locked_message(engine: ContextEngine) -> str:
    """What to say when `engine`'s database stayed locked by another writer past
    `storage.busyTimeoutMs` (not damage, so no `ds4 rebuild` hint)."""
    return database_locked_message(engine.database_path, engine.config.storage.busy_timeout_ms)
