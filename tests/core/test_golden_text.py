"""Golden text reports of `ds4` without `--json` (issue 10: recorded before the CLI's printers
are rewritten to read typed results; after it they must be identical, run-dependent text
normalised).

The scenario of `tests/core/test_golden_outputs.py` (the bundled session, the small trusted
workspace, a temp `--db`; `tests/golden_outputs.py`), in order on one database: plan with and
without the workspace, retrieve (history, project, both), manifest (every view, and
`--latest`), compact (the report and `--entry`), summaries (the report and `--dot`), index,
health, rebuild, and three usage errors. Each step is run with `ds4_core.cli.run` in this
process at `COLUMNS=golden.REPORT_COLUMNS`, and its argv, exit code, stdout and stderr,
normalised (`TextNormaliser`), must equal `tests/golden/text/<step>.txt`; a mismatch shows a
unified diff.

Record again (only when the change of behaviour is wanted):

    DS4_UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/core/test_golden_text.py -p no:cacheprovider
"""

from __future__ import annotations

import difflib
import io
import re
import shlex
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import golden_outputs as golden
import pytest

from ds4_core import cli

TEXT_DIR = golden.GOLDEN_DIR / "text"

ROOT_CHARS = 160
"""Length (characters) of the absolute path of the scenario's root folder. The reports wrap
text that contains paths (at `REPORT_COLUMNS`), so where a line breaks depends on the length of
the temp path; a root padded to this fixed length makes the breaks the same on every machine
and every run, and the normaliser then replaces the root by `<TMP>`."""

_ISO_TIME = re.compile(
    r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?(?![\d:])"
)
_PROMPT_HASH = re.compile(r"^(  promptHash +)[0-9a-f]{64}$", re.MULTILINE)
_SQLITE = re.compile(r"^(  sqliteVersion +)(\S+)$", re.MULTILINE)
_SHORTENED_PATH = re.compile(r"'(/[^']*)\.\.\.' \((\d+) characters\)")
_ENTRY_ID = re.compile(r'("type": ?"compaction", ?"id": ?")[0-9a-f]{8}(")')
_RETRIEVE_MS = re.compile(r"^(ds4 retrieve: status .* · )\d+\.\d\d ms$", re.MULTILINE)
_COMPACT_MS = re.compile(r"^(ds4 compact: prepared .* · )\d+\.\d ms$", re.MULTILINE)
_REBUILD_MS = re.compile(r"^(rebuilt .* entries in )\d+ ms$", re.MULTILINE)
_INDEX_HEADER_MS = re.compile(r"^(  session .* malformed  )ms +(file)$", re.MULTILINE)
_INDEX_ROW_MS = re.compile(r"^(  \S+  .*  [\d,]+  +[\d,]+  +)\d+\.\d +(\S+)$", re.MULTILINE)


@dataclass
class TextNormaliser:
    """Replaces what legitimately differs from run to run in a text report.

    `ids` is the JSON golden's `Normaliser` (reused for the temp root -> `<TMP>` and the
    manifest and summary ids -> `<manifest-N>`, `<summary-N>`, numbered by first occurrence
    over the whole scenario, so that which reports name the same id is still checked);
    `started` / `ended` the run's wall-clock bounds (seconds since the epoch).
    """

    ids: golden.Normaliser
    started: float
    ended: float

    def normalise(self, text: str) -> str:
        """`text` with only the run-dependent parts replaced:

        - the temp root -> `<TMP>`, manifest ids -> `<manifest-N>`, summary ids ->
          `<summary-N>` (`golden.Normaliser`);
        - a path the engine shortened in a message (`'/tmp/.../golden-xxx...' (174
          characters)`) whose kept start is a start of the temp root -> `'<TMP>...'`: the
          root has a fixed length, so where it is cut and the character count do not change;
        - the manifest's `promptHash` -> `<prompt-hash>`: it covers the new user message's
          timestamp (the JSON golden checks it against the plan's messages);
        - the health report's `sqliteVersion` -> `<sqlite>` when it is the SQLite library
          this Python uses;
        - the id of a `--entry` compaction entry (8 random hex characters) -> `<entry-id>`;
        - ISO-8601 times within this run -> `<now>` (the session's own dates are kept);
        - (snippet ids, a hash of the project's absolute path, appear in no text report: the
          reports name project snippets by path and lines; the compaction entry's
          `sourceHash` and `contentHash` are hashes of the session and the summary, and are
          kept);
        - durations: the `· 12.34 ms` of retrieve and compact, the `in 12 ms` of rebuild ->
          `<ms>`; and the `ms` column of the index table. That table pads every column to
          its widest cell (header included) and starts the next (`file`) after two spaces,
          so the padding after the duration changes with its number of digits: the duration
          cell and its padding are collapsed into `<ms>` plus the two-space separator, in the
          header row too. (No other column follows the duration, and the table has one row
          per file: the rows stay the same width, whatever the duration.)
        """
        text = _SHORTENED_PATH.sub(self._shortened, text)
        text = self.ids.normalise(text)
        text = _PROMPT_HASH.sub(r"\1<prompt-hash>", text)
        text = _SQLITE.sub(
            lambda m: (
                m.group(1) + ("<sqlite>" if m.group(2) == sqlite3.sqlite_version else m.group(2))
            ),
            text,
        )
        text = _ENTRY_ID.sub(r"\1<entry-id>\2", text)
        text = _ISO_TIME.sub(lambda m: "<now>" if self._in_run(m.group()) else m.group(), text)
        text = _RETRIEVE_MS.sub(r"\1<ms>", text)
        text = _COMPACT_MS.sub(r"\1<ms>", text)
        text = _REBUILD_MS.sub(r"\1<ms>", text)
        text = _INDEX_HEADER_MS.sub(r"\1<ms>  \2", text)
        return _INDEX_ROW_MS.sub(r"\1<ms>  \2", text)

    def _shortened(self, match: re.Match[str]) -> str:
        kept, count = match.groups()
        if len(kept) >= 8 and str(self.ids.tmp).startswith(kept):
            return f"'<TMP>...' ({count} characters)"
        return match.group()

    def _in_run(self, stamp: str) -> bool:
        try:
            moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            return False
        if moment.tzinfo is None:  # the reports print UTC times without the zone
            moment = moment.replace(tzinfo=UTC)
        seconds = moment.timestamp()
        return self.started - golden.CLOCK_SLACK_S <= seconds <= self.ended + golden.CLOCK_SLACK_S


@dataclass(frozen=True)
class Step:
    """One `ds4` run: its argv (with `--db`), exit code, stdout and stderr, not normalised."""

    name: str
    argv: list[str]
    code: int
    out: str
    err: str

    def report(self, normalise: Callable[[str], str]) -> str:
        """The recording of the step: the command line, exit code, stdout and stderr."""
        unterminated = "\n(no newline)" if self.out and not self.out.endswith("\n") else ""
        return (
            f"$ ds4 {normalise(shlex.join(self.argv))}\n"
            f"exit {self.code}\n"
            f"--- stdout\n{normalise(self.out)}{unterminated}\n"
            f"--- stderr\n{normalise(self.err)}"
        )


def fixed_root(tmp_path: Path) -> Path:
    """A new folder under `tmp_path` whose absolute path is `ROOT_CHARS` characters long."""
    base = str(tmp_path.resolve())
    padding = ROOT_CHARS - len(base) - len("/golden-")
    assert 0 <= padding <= 200, f"the temp path {base} is too long for ROOT_CHARS={ROOT_CHARS}"
    root = tmp_path.resolve() / f"golden-{'x' * padding}"
    root.mkdir()
    assert len(str(root)) == ROOT_CHARS
    return root


def record_text(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[Step]:
    """Run the scenario with `ds4_core.cli.run` in this process, under `root`; returns the
    steps in order."""
    session, workspace, db = golden.prepare_cli(root, monkeypatch)
    steps: list[Step] = []

    def ds4(name: str, *argv: str) -> str:
        out, err = io.StringIO(), io.StringIO()
        full = ["--db", str(db), *argv]
        code = cli.run(full, out, err)
        steps.append(Step(name, full, code, out.getvalue(), err.getvalue()))
        return out.getvalue()

    s, ws, query = str(session), str(workspace), golden.QUERY
    plan = ds4("plan", "plan", "--session", s, "--workspace", ws, "--trust", query)
    ds4("plan-no-workspace", "plan", "--session", s, query)
    ds4("retrieve-history", "retrieve", "--session", s, "--scope", "history", query)
    ds4(
        "retrieve-project",
        *("retrieve", "--workspace", ws, "--trust", "--scope", "project", query),
    )
    ds4("retrieve-both", "retrieve", "--session", s, "--workspace", ws, "--trust", query)
    found = re.search(r"\bm-[0-9a-f]{28}\b", plan)
    manifest_id = found.group() if found else "missing"
    for view in golden.MANIFEST_VIEWS:
        ds4(f"manifest-{view}", "manifest", manifest_id, "--view", view)
    ds4("manifest-latest", "manifest", "--latest", "--session", s)
    ds4("compact", "compact", "--session", s)
    ds4("compact-entry", "compact", "--session", s, "--entry")
    ds4("summaries", "summaries", "--session", s)
    ds4("summaries-dot", "summaries", "--session", s, "--dot")
    ds4("index", "index", s)
    ds4("health", "health")
    ds4("rebuild", "rebuild")
    ds4("error-missing-session", "plan", "--session", str(root / "missing.jsonl"), query)
    ds4("error-bad-scope", "retrieve", "--session", s, "--scope", "everything", query)
    ds4("error-unknown-manifest", "manifest", "m-" + "0" * 28)
    return steps


def check_text_golden(name: str, actual: str, scratch: Path) -> None:
    """Compare `actual` with `tests/golden/text/<name>.txt`, or rewrite that file when
    `DS4_UPDATE_GOLDEN=1`.

    Raises:
        AssertionError: they differ (the message is a unified diff, expected -> actual), or
            the recording is missing.
    """
    __tracebackhide__ = True  # pytest shows the message, not this function
    path = TEXT_DIR / f"{name}.txt"
    if golden.update_requested():
        TEXT_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.is_file(), f"{path} is missing; record it with {golden.UPDATE_ENV}=1"
    expected = path.read_text(encoding="utf-8")
    if expected != actual:
        written = scratch / f"{name}.actual.txt"
        written.write_text(actual, encoding="utf-8")
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            str(path.relative_to(golden.REPO)),
            str(written),
        )
        raise AssertionError(
            f"{name}: the report differs from the recording (if the change is wanted, rerun "
            f"with {golden.UPDATE_ENV}=1):\n{''.join(diff)}"
        )


def test_cli_text_reports_match_the_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = time.time()
    root = fixed_root(tmp_path)
    steps = record_text(root, monkeypatch)
    ids = golden.Normaliser(root, started, time.time())
    normaliser = TextNormaliser(ids, started, time.time())
    reports = {step.name: step.report(normaliser.normalise) for step in steps}
    failures = []
    for name, report in reports.items():
        try:
            check_text_golden(name, report, tmp_path)
        except AssertionError as exc:
            failures.append(str(exc))
    if not golden.update_requested():
        recorded = {path.stem for path in TEXT_DIR.glob("*.txt")}
        stale = sorted(recorded - set(reports))
        assert not stale, f"recordings without a step (delete them): {stale}"
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)
