"""Reading a trusted workspace's commit history with `git log`, so that no program the
repository's configuration names ever runs.

`read_commits` lists the newest commits of HEAD (or of `since..HEAD`) with `git log`: each
commit's hash, committer date, message and the names of the files it changed. It runs through
`git.run_git_bounded`, so everything `project/git.py` says holds (repository configuration is
overridden on the command line, no pager, no hooks, no transport), and adds what `git log`
alone could run or read:

* signatures: `--no-show-signature` and `-c log.showSignature=false` (verifying a signature
  runs `gpg.program`); the format asks for no signature placeholder (`%G?`);
* contents: `--name-only` lists names only; `--no-textconv`, `--no-ext-diff`, `--no-renames`
  (rename detection would read blobs) and `-c diff.external=` / `-c diff.orderFile=` keep
  every diff driver, external diff and order file out;
* `--no-mailmap` and `-c log.mailmap=false` (a `mailmap.file` could be a FIFO), `--no-notes`,
  `--no-color`, `--no-decorate`, `--no-relative` unless asked (`diff.relative`), a fixed
  `--format` (overrides `format.pretty`) and `-c i18n.logOutputEncoding=UTF-8`.

Output framing: each record starts with a marker holding a nonce drawn for that run (16 random
hex digits), so no commit message or file name can forge a record boundary; the message ends
with another nonce marker, and `-z` ends each file name with NUL. `parse_log` accepts any bytes
and never raises: text is decoded as UTF-8 with replacement characters, control characters
other than tab and newline are dropped, a message is cut to `MAX_SUBJECT_CHARS` /
`MAX_BODY_BYTES`, a commit keeps its first `MAX_FILES_PER_COMMIT` file names (`files_total`
counts all) and malformed records are skipped.

Bounds: `MAX_LOG_BYTES` bytes of output and `LOG_TIMEOUT_S` seconds; a run stopped by a bound
keeps the complete records read (the newest commits) and says so (`CommitLog.complete`).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from .git import GitError, run_git, run_git_bounded

MAX_SUBJECT_CHARS = 300
"""Longest subject kept (characters); the rest of a long first paragraph is cut."""
MAX_BODY_BYTES = 4096
"""Longest body kept (UTF-8 bytes, cut at a character boundary)."""
MAX_FILES_PER_COMMIT = 200
"""File names kept per commit; `Commit.files_total` counts them all."""
MAX_PATH_CHARS = 1024
"""Longest file name kept (characters); longer names are left out."""
MAX_LOG_BYTES = 64 << 20
"""Most bytes of `git log` output read in one run."""
LOG_TIMEOUT_S = 30.0
"""Seconds one `git log` run may take; it then stops with the records read so far."""

LOG_CONFIG = (
    "log.showSignature=false",
    "log.mailmap=false",
    "log.decorate=false",
    "diff.external=",
    "diff.orderFile=/dev/null",
    "diff.relative=false",
    "diff.renames=false",
    "color.ui=false",
    "i18n.logOutputEncoding=UTF-8",
    "core.commitGraph=true",
)
"""`-c` settings of every `git log` run here (module docstring)."""
LOG_OPTIONS = (
    "--no-show-signature",
    "--no-textconv",
    "--no-ext-diff",
    "--no-renames",
    "--no-mailmap",
    "--no-notes",
    "--no-color",
    "--no-decorate",
    "--name-only",
    "-z",
)
"""Options of every `git log` run here (module docstring)."""

_HASH = re.compile(rb"[0-9a-f]{40}(?:[0-9a-f]{24})?\Z")
_DATE = re.compile(rb"[0-9]{1,12}\Z")
_DROPPED_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0, DEL and C1
_UNKNOWN_OBJECT = ("bad object", "bad revision", "unknown revision")
"""How Git names a commit it does not have (`is_ancestor`)."""
_TRAILER = re.compile(r"(?m)^[A-Za-z][A-Za-z0-9-]*-by: .*$\n?")
"""`Signed-off-by:`, `Co-authored-by:`, ... lines: names and addresses, not what changed."""


@dataclass(frozen=True, slots=True)
class Commit:
    """One commit as read from `git log`.

    Attributes:
        hash: full object id, lower-case hex (40 or 64 digits).
        committed_at: committer date, seconds since the Unix epoch (UTC).
        subject: the message's first paragraph on one line (at most `MAX_SUBJECT_CHARS`).
        body: the rest of the message without `...-by:` trailer lines (at most
            `MAX_BODY_BYTES` UTF-8 bytes).
        files: changed file paths, POSIX, relative to the folder Git ran in (the first
            `MAX_FILES_PER_COMMIT`, in Git's order); empty for a merge.
        files_total: how many file names Git listed for the commit.
    """

    hash: str
    committed_at: int
    subject: str
    body: str
    files: tuple[str, ...]
    files_total: int


@dataclass(frozen=True, slots=True)
class CommitLog:
    """What one `read_commits` run read: `commits` newest first; `complete` False when a
    bound (`MAX_LOG_BYTES`, `LOG_TIMEOUT_S`) stopped it early."""

    commits: tuple[Commit, ...]
    complete: bool


def _text(raw: bytes) -> str:
    """`raw` as text: UTF-8 with replacement characters, controls but tab/newline dropped."""
    return _DROPPED_CONTROLS.sub("", raw.decode("utf-8", "replace").replace("\r\n", "\n"))


def _cut_bytes(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, at a character boundary."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", "ignore")


def split_message(message: str) -> tuple[str, str]:
    """`(subject, body)` of a commit message: the first paragraph joined on one line (cut to
    `MAX_SUBJECT_CHARS`), and the rest without trailer lines, stripped and cut to
    `MAX_BODY_BYTES`."""
    stripped = message.strip()
    head, _, rest = stripped.partition("\n\n")
    subject = " ".join(line.strip() for line in head.split("\n") if line.strip())
    body = _TRAILER.sub("", rest).strip()
    return subject[:MAX_SUBJECT_CHARS], _cut_bytes(body, MAX_BODY_BYTES)


def _files(raw: bytes) -> tuple[tuple[str, ...], int]:
    """The file names of one record's tail (`-z` list, possibly led by newlines)."""
    names = [name for name in raw.lstrip(b"\n").split(b"\0") if name.strip(b"\n")]
    kept: list[str] = []
    for name in names:
        if len(kept) >= MAX_FILES_PER_COMMIT:
            break
        path = _text(name).strip("\n")
        if path and len(path) <= MAX_PATH_CHARS and path not in kept:
            kept.append(path)
    return tuple(kept), len(names)


def log_format(nonce: str) -> str:
    """The `--format` of `read_commits` for `nonce` (hex): start marker, hash, committer
    date, raw message, end marker; Git's `-z` then ends each file name with NUL."""
    return f"%x00%x1eDS4-{nonce}%x00%H%x00%ct%x00%B%x00%x1fDS4-{nonce}%x00"


def parse_log(output: bytes, nonce: str) -> list[Commit]:
    """The commits of `git log` output written with `log_format(nonce)`, in output order.

    Never raises: a record whose hash or date is malformed, or whose end marker is missing (a
    record cut by a bound), is skipped; text is made safe as the module docstring says.
    """
    start = b"\0\x1eDS4-" + nonce.encode("ascii") + b"\0"
    end = b"\0\x1fDS4-" + nonce.encode("ascii") + b"\0"
    commits: list[Commit] = []
    for record in output.split(start)[1:]:
        head, found, tail = record.partition(end)
        if not found:
            continue
        fields = head.split(b"\0", 2)
        if len(fields) != 3 or not _HASH.match(fields[0]) or not _DATE.match(fields[1]):
            continue
        subject, body = split_message(_text(fields[2]))
        files, total = _files(tail)
        commits.append(
            Commit(
                hash=fields[0].decode("ascii"),
                committed_at=int(fields[1]),
                subject=subject,
                body=body,
                files=files,
                files_total=total,
            )
        )
    return commits


def read_commits(
    root: Path,
    *,
    limit: int,
    since: str | None = None,
    folder_only: bool = False,
    max_bytes: int = MAX_LOG_BYTES,
    timeout_s: float = LOG_TIMEOUT_S,
) -> CommitLog:
    """The newest `limit` commits of HEAD in the repository holding `root` (newest first), or
    only those not reachable from `since` (`since..HEAD`, a full hash). With `folder_only`
    (a folder below the repository's top) only commits that changed something under `root`,
    with file names relative to it; else names are relative to the repository's top.

    Raises:
        ValueError: `limit` < 1 or `since` is not a hash.
        GitError: Git failed (no HEAD, an unknown `since`, not a repository, ...).
    """
    if limit < 1:
        raise ValueError("limit: expected an integer >= 1")
    if since is not None and not _HASH.match(since.encode("ascii", "replace")):
        raise ValueError("since: expected a full commit hash")
    nonce = secrets.token_hex(8)
    args = [
        "log",
        *LOG_OPTIONS,
        f"--format={log_format(nonce)}",
        f"--max-count={limit}",
        "--relative" if folder_only else "--no-relative",
        f"{since}..HEAD" if since else "HEAD",
        "--",
    ]
    if folder_only:
        args.append(".")
    output, complete = run_git_bounded(
        root, *args, max_bytes=max_bytes, timeout_s=timeout_s, extra_config=LOG_CONFIG
    )
    return CommitLog(tuple(parse_log(output, nonce)), complete)


def head_commit(root: Path) -> str | None:
    """HEAD's commit hash, or None before the first commit.

    Raises:
        GitError: not a repository, or Git failed.
    """
    try:
        out = run_git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    except GitError as error:
        if error.expected and "not a git repository" not in str(error):
            return None  # `-q`: no HEAD yet prints nothing and exits 1
        raise
    head = out.decode("ascii", "replace").strip()
    return head or None


def folder_prefix(root: Path) -> str:
    """`root`'s path below the repository's top (`git rev-parse --show-prefix`, "" at the
    top).

    Raises:
        GitError: not a repository, or Git failed.
    """
    return run_git(root, "rev-parse", "--show-prefix").decode("utf-8", "replace").strip("\n")


def is_ancestor(root: Path, old: str, new: str) -> bool:
    """Whether commit `old` is `new` or an ancestor of it (`git rev-list -n1 old ^new` lists
    nothing); False when `old` is unknown (a rewrite dropped it).

    Raises:
        GitError: Git failed for another reason than an unknown `old`.
    """
    try:
        out = run_git(root, "rev-list", "-n1", old, "--not", new, "--")
    except GitError as error:
        if error.expected or any(word in str(error) for word in _UNKNOWN_OBJECT):
            return False
        raise
    return not out.strip()


__all__ = [
    "LOG_CONFIG",
    "LOG_OPTIONS",
    "MAX_BODY_BYTES",
    "MAX_FILES_PER_COMMIT",
    "Commit",
    "CommitLog",
    "folder_prefix",
    "head_commit",
    "is_ancestor",
    "log_format",
    "parse_log",
    "read_commits",
    "split_message",
]
