"""Golden outputs: the scenario both golden tests run, the normaliser for what legitimately
changes from run to run, and the comparison with a readable diff.

The golden tests (`tests/core/test_golden_outputs.py` for `ds4 ... --json`,
`tests/lsp/test_golden_lsp.py` for the LSP answers) record what the CLI and the server answer
on the bundled Pi session and a small trusted workspace, and compare later runs with the
recording in `tests/golden/*.json`. They exist so that a restructuring can prove that behaviour
did not change (issue 10).

Regenerate the recordings only on purpose, after checking that the change in behaviour is
wanted:

    DS4_UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/core/test_golden_outputs.py \
        tests/lsp/test_golden_lsp.py -p no:cacheprovider

Normalised (and only these; everything else, messages, scores, reasons, token counts,
warnings, key sets, must be equal):

- the temp directory of the run, in every string, becomes `<TMP>`;
- ids minted at random or from the clock: manifest ids (`m-` + 28 hex) and summary ids
  (`s-` + 16 hex) anywhere in a string, and the values of `snippetId` (a hash of the project's
  absolute path) wherever they occur (`sourceId` of a manifest item), become `<manifest-N>`,
  `<summary-N>`, `<snippet-N>`, numbered by first occurrence in the whole recording (keys
  visited in sorted order), so that which answers name the same id is still checked;
- the values of `DURATION_KEYS` (a non-negative number) become `<ms>`;
- the values of `CLOCK_KEYS` that are times within this run (ISO-8601 strings, or epoch
  milliseconds) become `<now>`; times outside the run (the session's own dates) are kept;
- a `promptHash` equal to the hash of a plan's messages (the stable JSON of `{system: null,
  tools: null, messages}`, sha256, docs/reference.md §3.15) becomes `<prompt-hash of plan
  messages>`: it covers the new user message's timestamp, which is the clock;
- `sqliteVersion` becomes `<sqlite>` when it is the SQLite library this Python uses.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from git_repos import isolate_git

REPO = Path(__file__).resolve().parent.parent
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
BUNDLED_SESSION = REPO / "examples" / "pi-mono-v1-large-session.jsonl"
UPDATE_ENV = "DS4_UPDATE_GOLDEN"

SESSION_NAME = "session.jsonl"
WORKSPACE_NAME = "ws"
QUERY = "which selector files did we port to the theme system?"
"""The request of the plan and the query of every retrieve (words of both the session's
history and the workspace)."""

WORKSPACE_FILES = {
    "src/theme.py": (
        "def theme_color(name):\n"
        '    """Return the theme colour for name."""\n'
        '    return {"accent": "#ff8800"}.get(name, "#000000")\n'
    ),
    "src/selector.py": (
        "class UserMessageSelector:\n"
        '    """Port of user-message-selector.ts: the oauth selector pattern."""\n'
        "\n"
        "    def render(self, theme):\n"
        '        return theme.fg("accent", "> ")\n'
    ),
    "docs/notes.md": (
        "# Selector notes\n\nThe user message selector follows the oauth selector pattern.\n"
    ),
}
"""The trusted workspace: three small files, no Git."""

REPORT_COLUMNS = 100
"""`COLUMNS` of every CLI run: the width the text reports were recorded at (the CLI's
`REPORT_WIDTH` then), fixed here so that a terminal's width never changes them."""

MANIFEST_VIEWS = ("summary", "included", "excluded", "full")

DURATION_KEYS = frozenset({"durationMs", "latencyMs"})
CLOCK_KEYS = frozenset({"createdAt", "generatedAt", "indexedAt", "timestamp"})
SNIPPET_ID_KEYS = frozenset({"snippetId"})
CLOCK_SLACK_S = 5.0

_MANIFEST_ID = re.compile(r"\bm-[0-9a-f]{28}\b")
_SUMMARY_ID = re.compile(r"\bs-[0-9a-f]{16}\b")


def update_requested() -> bool:
    """Whether this run rewrites the recordings (`DS4_UPDATE_GOLDEN=1`)."""
    return os.environ.get(UPDATE_ENV, "") not in ("", "0")


def make_inputs(root: Path) -> tuple[Path, Path]:
    """Copy the bundled session to `root/session.jsonl` and write the workspace `root/ws`;
    returns (session file, workspace folder)."""
    session = root / SESSION_NAME
    shutil.copyfile(BUNDLED_SESSION, session)
    session.chmod(0o644)
    workspace = root / WORKSPACE_NAME
    for relative, text in WORKSPACE_FILES.items():
        path = workspace / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return session, workspace


def prepare_cli(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """Set up the CLI scenario under `root`: no `DS4_DB`, `COLUMNS` at `REPORT_COLUMNS` (so
    text reports wrap the same everywhere), Git isolated in `root/home` and
    stopped at `root`, and the inputs of `make_inputs`; returns (session file, workspace
    folder, database path `root/state/context.db`, not created yet)."""
    monkeypatch.delenv("DS4_DB", raising=False)
    monkeypatch.setenv("COLUMNS", str(REPORT_COLUMNS))
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(root))
    isolate_git(root / "home", monkeypatch)
    session, workspace = make_inputs(root)
    return session, workspace, root / "state" / "context.db"


def prompt_hash(messages: list[Any]) -> str:
    """sha256 hex of the stable JSON of `{system: null, tools: null, messages}`."""
    stable = json.dumps(
        {"system": None, "tools": None, "messages": messages},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(stable.encode("utf-8")).hexdigest()


@dataclass
class Normaliser:
    """Replaces what legitimately differs from run to run (see the module docstring).

    `tmp` is the run's temp directory; `started` / `ended` the run's wall-clock bounds
    (seconds since the epoch); `prompt_hashes` the hashes of the plans' messages.
    """

    tmp: Path
    started: float
    ended: float
    prompt_hashes: set[str] = field(default_factory=set)
    _ids: dict[str, str] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)

    def normalise(self, value: Any) -> Any:
        """A normalised copy of the JSON value `value`."""
        self._collect_snippet_ids(value)
        return self._walk(value, None)

    def _collect_snippet_ids(self, value: Any) -> None:
        for key, item in _items_sorted(value):
            if key in SNIPPET_ID_KEYS and isinstance(item, str):
                self._placeholder("snippet", item)

    def _placeholder(self, kind: str, raw: str) -> str:
        if raw not in self._ids:
            self._counts[kind] = self._counts.get(kind, 0) + 1
            self._ids[raw] = f"<{kind}-{self._counts[kind]}>"
        return self._ids[raw]

    def _walk(self, value: Any, key: str | None) -> Any:
        if isinstance(value, dict):
            # visit keys sorted (placeholders numbered independently of key order), keep order
            done = {k: self._walk(value[k], k) for k in sorted(value)}
            return {k: done[k] for k in value}
        if isinstance(value, list):
            return [self._walk(item, key) for item in value]
        if key in DURATION_KEYS and _is_number(value) and value >= 0:
            return "<ms>"
        if key in CLOCK_KEYS and self._in_run(value):
            return "<now>"
        if key == "promptHash" and value in self.prompt_hashes:
            return "<prompt-hash of plan messages>"
        if key == "sqliteVersion" and value == sqlite3.sqlite_version:
            return "<sqlite>"
        if isinstance(value, str):
            return self._string(value)
        return value

    def _string(self, text: str) -> str:
        if text in self._ids:
            return self._ids[text]
        for root in {str(self.tmp.resolve()), str(self.tmp)}:
            text = text.replace(root, "<TMP>")
        text = _MANIFEST_ID.sub(lambda m: self._placeholder("manifest", m.group()), text)
        return _SUMMARY_ID.sub(lambda m: self._placeholder("summary", m.group()), text)

    def _in_run(self, value: Any) -> bool:
        if _is_number(value):
            seconds = value / 1000
        elif isinstance(value, str) and value.endswith("Z"):
            try:
                seconds = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                return False
        else:
            return False
        return self.started - CLOCK_SLACK_S <= seconds <= self.ended + CLOCK_SLACK_S


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _items_sorted(value: Any) -> Iterator[tuple[str | None, Any]]:
    """Every (key, value) pair of a JSON value, depth first, keys sorted."""
    if isinstance(value, dict):
        for key in sorted(value):
            yield key, value[key]
            yield from _items_sorted(value[key])
    elif isinstance(value, list):
        for item in value:
            yield None, item
            yield from _items_sorted(item)


# ------------------------------------------------------------------------------ comparison


def differences(expected: Any, actual: Any, path: str = "$") -> Iterator[str]:
    """Each place where `actual` differs from `expected`, as `path: expected ... got ...`.

    Objects compare by key set and values (not key order), arrays by length and items, and
    scalars by type and value (`1` differs from `1.0` and from `true`).
    """
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in expected:
            if key not in actual:
                yield f"{path}.{key}: missing (expected {_short(expected[key])})"
            else:
                yield from differences(expected[key], actual[key], f"{path}.{key}")
        for key in actual:
            if key not in expected:
                yield f"{path}.{key}: unexpected key (got {_short(actual[key])})"
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            yield f"{path}: expected {len(expected)} items, got {len(actual)}"
        for index, (old, new) in enumerate(zip(expected, actual, strict=False)):
            yield from differences(old, new, f"{path}[{index}]")
    elif type(expected) is not type(actual) or expected != actual:
        yield f"{path}: expected {_short(expected)}, got {_short(actual)}"


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def check_golden(name: str, actual: Any, scratch: Path, shown: int = 25) -> None:
    """Compare `actual` with `tests/golden/<name>.json`, or rewrite that file when
    `DS4_UPDATE_GOLDEN=1`.

    Raises:
        AssertionError: they differ (the message lists the first `shown` differing paths and
            where the whole actual recording was written), or the recording is missing.
    """
    __tracebackhide__ = True  # pytest shows the message, not this function
    golden = GOLDEN_DIR / f"{name}.json"
    text = json.dumps(actual, indent=1, ensure_ascii=False) + "\n"
    if update_requested():
        GOLDEN_DIR.mkdir(exist_ok=True)
        golden.write_text(text, encoding="utf-8")
        return
    assert golden.is_file(), f"{golden} is missing; record it with {UPDATE_ENV}=1"
    expected = json.loads(golden.read_text(encoding="utf-8"))
    found = list(differences(expected, actual))
    if found:
        written = scratch / f"{name}.actual.json"
        written.write_text(text, encoding="utf-8")
        listed = "\n".join(f"  {line}" for line in found[:shown])
        more = f"\n  ... and {len(found) - shown} more" if len(found) > shown else ""
        raise AssertionError(
            f"{len(found)} difference(s) from {golden.relative_to(REPO)} "
            f"(whole actual output: {written}; if the change is wanted, rerun with "
            f"{UPDATE_ENV}=1):\n{listed}{more}"
        )
