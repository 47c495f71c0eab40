"""The commit-history index of a trusted workspace folder, kept up to date as HEAD moves.

`sync_commits` runs with the project sync (`ProjectWorkspace.sync`, a full sync in a Git work
tree). It reads HEAD and compares it with the HEAD the index was built at
(`project_commit_state`):

* the same HEAD (and the same `project.maxCommits` and folder): nothing is read;
* the old HEAD is an ancestor of the new one (commits were added, a fast-forward or a merge):
  only `old..new` is read (`git log old..HEAD`) and appended;
* otherwise (a rebase, a reset, a branch switch to unrelated history, a changed limit): the
  newest `max_commits` commits are read again and replace the folder's rows.

Beyond `max_commits` rows the oldest (by order of indexing) are dropped. Every commit message
goes through the secret detector used for file content (`privacy.secrets.secret_reason`): a commit
whose subject or body looks like it holds a secret is kept without its message (hash, date
and changed paths only; `withheld` records the detector's reason, never the value), and a
changed path that itself looks like a secret is left out. Tables: `store/commit_schema.py`.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType

from ..privacy.secrets import secret_reason
from ..store import Store
from ..store.database import utc_now_iso
from .commits import Commit, folder_prefix, head_commit, is_ancestor, read_commits

DEFAULT_MAX_COMMITS = 5000
"""Commits indexed per folder when `project.maxCommits` is not set."""

_WORD = re.compile(r"[^\W_]+")
IDENTIFIER = re.compile(
    r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[A-Za-z]+[a-z0-9][A-Z][A-Za-z0-9]*"
)
"""A snake_case or camelCase identifier (ASCII), matched whole against one token of
`identifiers` (searching text with it directly rescans each letter run from every start:
quadratic on a long run of letters)."""
_TOKEN = re.compile(r"[A-Za-z0-9_]+")
MAX_IDENTIFIER_CHARS = 128
"""A longer run of letters, digits and `_` is not taken for an identifier (a hash, a blob)."""


def identifiers(text: str) -> list[str]:
    """The snake_case and camelCase identifiers of `text` (`IDENTIFIER`), in order, found in
    time linear in the text's length."""
    return [
        token
        for token in _TOKEN.findall(text)
        if len(token) <= MAX_IDENTIFIER_CHARS and IDENTIFIER.fullmatch(token)
    ]


_HUMP = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def identifier_parts(identifier: str) -> list[str]:
    """The lower-case parts of an identifier, split at `_` and at camelCase humps
    (`parseHTTPHeader_v2` -> `parse http header v 2`)."""
    return [part.lower() for part in _HUMP.findall(identifier.replace("_", " "))]


@dataclass(frozen=True, slots=True)
class CommitSync:
    """What one `sync_commits` did.

    Attributes:
        head: the HEAD indexed (None: no commit yet, the index is empty).
        indexed: commits read and written by this sync.
        dropped: rows removed (beyond the limit, or replaced by a full re-read).
        total: commits the folder's index holds now.
        full: whether the history was read again from HEAD (first sync, rewrite, new limit).
        withheld: commits of this sync kept without their message (it looked like a secret).
        complete: False when a bound (bytes, time) stopped `git log` early.
    """

    head: str | None
    indexed: int
    dropped: int
    total: int
    full: bool
    withheld: int = 0
    complete: bool = True


def project_key(project_path: str) -> str:
    """The FTS token naming a folder's commits (`k` + 16 hex digits of its path's SHA-256):
    a MATCH with it stays inside the folder."""
    return "k" + hashlib.sha256(project_path.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def sub_words(text: str) -> list[str]:
    """The lower-case parts of the camelCase and snake_case identifiers in `text`
    (`linkUrl parse_header` -> `link url parse header`), in order, without repeats."""
    seen: dict[str, None] = {}
    for identifier in identifiers(text):
        for part in identifier_parts(identifier):
            seen.setdefault(part, None)
    return list(seen)


def path_words(path: str) -> list[str]:
    """The words of a path: its parts split at non-letters/digits and at camelCase humps
    (`httpx/_multipart.py` -> `httpx multipart py`)."""
    words: dict[str, None] = {}
    for word in _WORD.findall(path):
        words.setdefault(word.lower(), None)
        for part in _HUMP.findall(word):
            words.setdefault(part.lower(), None)
    return list(words)


def secret_reasons(texts: list[str]) -> list[str | None]:
    """`secret_reason` of each text, one call per text. (Checking texts joined in
    batches would be faster but is only as safe as every rule of the detector being local to
    a line; a rule that looks at the rest of a text could let one commit's neighbours hide its
    secret, so each message is checked alone.)"""
    return [secret_reason(text) for text in texts]


def _row(
    project_path: str, key: str, seq: int, commit: Commit, reason: str | None, paths_flagged: bool
) -> tuple[object, ...]:
    """The `project_commits` row of `commit`: without its message when `reason` (the secret
    detector's), without the paths that look secret when `paths_flagged`."""
    files = commit.files
    if paths_flagged:
        files = tuple(path for path in files if secret_reason(path) is None)
    subject, body = ("", "") if reason else (commit.subject, commit.body)
    extra = [*sub_words(f"{subject}\n{body}")]
    for path in files:
        extra += path_words(path)
    return (
        project_path,
        commit.hash,
        seq,
        commit.committed_at,
        subject,
        body,
        json.dumps(list(files), ensure_ascii=False),
        commit.files_total,
        reason,
        key,
        " ".join(dict.fromkeys(extra)),
    )


_INSERT = (
    "INSERT OR IGNORE INTO project_commits (project_path, hash, seq, committed_at, subject, "
    "body, files_json, files_total, withheld, project_key, extra_words) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _write(
    conn: sqlite3.Connection,
    project_path: str,
    commits: tuple[Commit, ...],
    *,
    full: bool,
    max_commits: int,
) -> tuple[int, int, int]:
    """Write `commits` (newest first) in the open transaction; returns (written, dropped,
    withheld)."""
    dropped = 0
    if full:
        dropped = conn.execute(
            "DELETE FROM project_commits WHERE project_path = ?", (project_path,)
        ).rowcount
        conn.execute("DELETE FROM project_commit_files WHERE project_path = ?", (project_path,))
        top = 0
    else:
        found = conn.execute(
            "SELECT max(seq) FROM project_commits WHERE project_path = ?", (project_path,)
        ).fetchone()[0]
        top = int(found or 0)
    key = project_key(project_path)
    reasons = secret_reasons([f"{c.subject}\n{c.body}" for c in commits])
    flagged = secret_reasons(["\n".join(c.files) for c in commits])
    rows = [
        _row(
            project_path,
            key,
            top + len(commits) - position,
            commit,
            reasons[position],
            flagged[position] is not None,
        )
        for position, commit in enumerate(commits)
    ]
    written = conn.executemany(_INSERT, rows).rowcount
    conn.executemany(
        "INSERT OR IGNORE INTO project_commit_files (project_path, file_path, hash) "
        "VALUES (?, ?, ?)",
        [(project_path, path, row[1]) for row in rows for path in json.loads(str(row[6]))],
    )
    cut = conn.execute(
        "SELECT seq FROM project_commits WHERE project_path = ? ORDER BY seq DESC LIMIT 1 OFFSET ?",
        (project_path, max_commits),
    ).fetchone()
    if cut is not None:
        old = [
            hash_
            for (hash_,) in conn.execute(
                "SELECT hash FROM project_commits WHERE project_path = ? AND seq <= ?",
                (project_path, cut[0]),
            )
        ]
        conn.executemany(
            "DELETE FROM project_commits WHERE project_path = ? AND hash = ?",
            [(project_path, h) for h in old],
        )
        conn.executemany(
            "DELETE FROM project_commit_files WHERE project_path = ? AND hash = ?",
            [(project_path, h) for h in old],
        )
        dropped += len(old)
    withheld = sum(1 for row in rows if row[8] is not None)
    return max(written, 0), dropped, withheld


def commit_count(store: Store, project_path: str) -> int:
    """How many commits the folder's index holds."""
    return int(
        store.connection()
        .execute("SELECT count(*) FROM project_commits WHERE project_path = ?", (project_path,))
        .fetchone()[0]
    )


def indexed_head(store: Store, project_path: str) -> str | None:
    """The HEAD the folder's commit index was built at, or None (never indexed)."""
    row = (
        store.connection()
        .execute("SELECT head FROM project_commit_state WHERE project_path = ?", (project_path,))
        .fetchone()
    )
    return str(row[0]) if row else None


def clear_commits(store: Store, project_path: str) -> int:
    """Forget the folder's commit index (no Git, no commit yet); returns the rows removed."""
    with store.write() as conn:
        removed = conn.execute(
            "DELETE FROM project_commits WHERE project_path = ?", (project_path,)
        ).rowcount
        conn.execute("DELETE FROM project_commit_files WHERE project_path = ?", (project_path,))
        conn.execute("DELETE FROM project_commit_state WHERE project_path = ?", (project_path,))
    return max(removed, 0)


def sync_commits(
    store: Store,
    root: Path,
    *,
    max_commits: int = DEFAULT_MAX_COMMITS,
    head: str | None | EllipsisType = ...,
    force: bool = False,
) -> CommitSync:
    """Bring the commit index of the folder `root` (canonical; its `project_path`) up to
    HEAD (module docstring). `head` is HEAD's hash as the caller just read it (None: no commit
    yet), so an unchanged HEAD costs no Git process at all; `...` (the default) reads it.
    `force` reads the whole history again whatever the indexed HEAD (`ds4.rebuildIndex`).
    Git runs outside the write lock; the rows and the state are written in one transaction,
    so a failure leaves the previous index.

    Raises:
        ValueError: `max_commits` < 1.
        GitError: Git failed (not a repository, a timeout before any output, ...).
        sqlite3.Error / peewee errors: from the store (a locked database, ...).
    """
    if max_commits < 1:
        raise ValueError("max_commits: expected an integer >= 1")
    project_path = str(root)
    if isinstance(head, EllipsisType):
        head = head_commit(root)
    if head is None:
        dropped = clear_commits(store, project_path)
        return CommitSync(head=None, indexed=0, dropped=dropped, total=0, full=True)
    state = (
        store.connection()
        .execute(
            "SELECT head, max_commits, prefix FROM project_commit_state WHERE project_path = ?",
            (project_path,),
        )
        .fetchone()
    )
    if force:
        state = None
    if state is not None and state[0] == head and int(state[1]) == max_commits:
        # The folder's place in its repository only changes with a new `.git` above or
        # below it, which Git sees as another HEAD (or none): nothing to read.
        return CommitSync(
            head=head, indexed=0, dropped=0, total=commit_count(store, project_path), full=False
        )
    prefix = folder_prefix(root)
    same_setup = state is not None and int(state[1]) == max_commits and str(state[2]) == prefix
    full = not (same_setup and is_ancestor(root, str(state[0]), head))
    log = None
    if not full:
        log = read_commits(root, limit=max_commits, since=str(state[0]), folder_only=bool(prefix))
        if not log.complete or len(log.commits) >= max_commits:
            full, log = True, None  # a gap or the whole window: read it all again
    if log is None:
        log = read_commits(root, limit=max_commits, folder_only=bool(prefix))
    with store.write() as conn:
        written, dropped, withheld = _write(
            conn, project_path, log.commits, full=full, max_commits=max_commits
        )
        conn.execute(
            "INSERT INTO project_commit_state (project_path, head, max_commits, prefix, "
            "indexed_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (project_path) DO UPDATE SET "
            "head = excluded.head, max_commits = excluded.max_commits, prefix = excluded.prefix, "
            "indexed_at = excluded.indexed_at",
            (project_path, head, max_commits, prefix, utc_now_iso()),
        )
    return CommitSync(
        head=head,
        indexed=written,
        dropped=dropped,
        total=commit_count(store, project_path),
        full=full,
        withheld=withheld,
        complete=log.complete,
    )


__all__ = [
    "DEFAULT_MAX_COMMITS",
    "CommitSync",
    "clear_commits",
    "commit_count",
    "identifier_parts",
    "indexed_head",
    "path_words",
    "project_key",
    "sub_words",
    "sync_commits",
]
