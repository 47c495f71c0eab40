"""Which files of a project exist and may be indexed (docs/reference.md §3.9, "Discovery").

One module: the Git listing and the fallback walk (with its own gitignore engine: `_Rule`,
`_Level`, `_Walk`) must give the same answer, and both feed the same selection and path checks
(`_select`, `_select_within`), so the rules that must agree stay side by side.

With Git, the candidates are what `git ls-files -co --exclude-standard` lists: tracked files
plus untracked files that no ignore rule excludes. Git runs only through
`ds4_core.project.git`, which never lets the repository's configuration start a program
(no `git status`; "modified" is decided there). Without Git (not installed, not a
repository, or any Git command failing or timing out), a deterministic directory walk gives
the same answer Git would:

- ignore rules come from `.gitignore` in every directory walked (patterns relative to their
  own directory), the repository's `.git/info/exclude` and the user's global ignore file
  (`$XDG_CONFIG_HOME/git/ignore`, else `~/.config/git/ignore`; a `core.excludesFile` set in
  Git's configuration is not read). Precedence is Git's: within a file the last matching line
  wins; a deeper `.gitignore` overrides a shallower one, which overrides `info/exclude`, which
  overrides the global file. When the root is a subdirectory of a repository, the
  `.gitignore` files between the repository's top and the root apply as well.
- Pattern syntax (globs, `**`, anchoring, `!` negation, trailing `/`) is `pathspec`'s
  gitignore implementation; each pattern is evaluated against each path directly, never via
  an ancestor, so an excluded directory is never entered and everything under it stays
  excluded even when a later `!` rule names a file inside it (Git's rule).
- A line `pathspec` cannot compile (such as a lone `\\`) is skipped with a warning naming the
  ignore file and line; the rest of the file still applies.
- `.git` entries are never candidates, and a directory holding a repository of its own (a
  nested clone) is not entered, as with Git.

When the root lies in a repository that ignores it (or a directory above it) and tracks
nothing under it, such as `~/.pyenv/versions/...` under pyenv's own repository or a project
under a dotfiles repository at `~` that ignores `*`, the root is listed as if it were in no
repository (the global ignore file and the `.gitignore` files at and below the root), with a
warning naming the enclosing repository. A listing that ends empty while the root holds files
gets a warning saying why (everything skipped, or everything excluded by ignore rules).

Either way, symbolic links are never followed (they are reported as skipped with reason
`symlink`), no path outside the canonical root is listed, and `filters.path_exclusion`
applies to every candidate. Candidates are taken in sorted path order and the bounds
(`max_files`, `max_total_bytes`) stop the listing with `truncated=True`.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast

from pathspec import GitIgnoreSpec, RegexPattern

from ds4_core.logs import errno_name
from ds4_core.project.filters import path_exclusion
from ds4_core.project.git import (
    GitError,
    blocking_repository_file,
    common_directory,
    index_mtime_ns,
    read_head_tree,
    read_index,
    read_small_regular,
    repository_signature,
    run_git,
    worktree_changes,
)

DEFAULT_MAX_FILES = 10_000
"""Files listed at most (docs/reference.md §3.9, `maxFiles`)."""

DEFAULT_MAX_FILE_BYTES = 512_000
"""Largest file listed, in bytes; larger files are skipped as `oversized`."""

DEFAULT_MAX_TOTAL_BYTES = 50_000_000
"""Sum of listed file sizes at most, in bytes."""

MAX_WALK_DIRECTORIES = 50_000
"""Directories the walk visits at most before it stops with `truncated=True`."""

_UTF8_BOM = "\ufeff"


class ProjectRootError(ValueError):
    """The requested project root cannot be indexed (missing, not a directory, the
    filesystem root or the home directory itself). The message says which and what to do."""


@dataclass(frozen=True, slots=True)
class DiscoveredFile:
    """One file that may be indexed.

    Attributes:
        rel_path: POSIX path relative to the canonical project root.
        size_bytes: size from `lstat`, in bytes.
        mtime_ns: modification time from `lstat`, in nanoseconds since the epoch.
        tracked: the file is in Git's index (False without Git).
        modified: it is staged, changed in the working tree or untracked, as `git status`
            would report it (`git.worktree_changes`; False without Git).
    """

    rel_path: str
    size_bytes: int
    mtime_ns: int
    tracked: bool
    modified: bool


@dataclass(frozen=True, slots=True)
class GitState:
    """The repository state at discovery time.

    Attributes:
        branch: the checked-out branch (short name), or None when HEAD is detached.
        head: the commit id of HEAD, or None before the first commit.
        dirty: any change under the root, untracked files included.
        changed_paths: changed paths under the root (staged, unstaged, deleted, untracked),
            relative to it, sorted.
    """

    branch: str | None
    head: str | None
    dirty: bool
    changed_paths: tuple[str, ...]


@dataclass(slots=True)
class Discovery:
    """The outcome of `discover_project`.

    Attributes:
        root: the canonical project root.
        files: files that may be indexed, sorted by `rel_path`.
        skipped: `(rel_path, reason)` for candidates left out, sorted; a directory left out as
            a whole (an ignored directory name, a nested repository) appears once, with a
            trailing `/`. Files excluded by ignore rules are not candidates and not listed.
        git: the repository state, or None when the walk was used.
        warnings: problems worth showing a user (malformed ignore lines, Git failures, bounds).
        truncated: a bound stopped the listing early.
    """

    root: Path
    files: list[DiscoveredFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    git: GitState | None = None
    warnings: list[str] = field(default_factory=list)
    truncated: bool = False


def discover_project(
    root: Path,
    *,
    max_files: int = DEFAULT_MAX_FILES,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    use_git: bool = True,
) -> Discovery:
    """List the files under `root` that may be indexed, with Git when possible.

    Candidates (see the module docstring) are taken in sorted order. Each one passes
    `path_exclusion`, must be a regular file that is not a symbolic link and sits under no
    symbolic link (else skipped as `symlink` / `not a regular file`), and must be at most
    `max_file_bytes` bytes (else `oversized`). Listing stops, with `truncated=True` and a
    warning, before the file that would exceed `max_files` files or `max_total_bytes` bytes in
    total. Contents are not read here (`filters.read_indexable` does that).

    Raises:
        ProjectRootError: `root` does not exist or is not a directory, or it is the
            filesystem root or the home directory itself.
    """
    canonical = _canonical_root(root)
    discovery = Discovery(root=canonical)
    listing = _git_listing(canonical, discovery.warnings) if use_git else None
    ignored_by: Path | None = None
    if isinstance(listing, _IgnoredByEnclosing):
        ignored_by, listing = listing.top, None
    if listing is not None:
        discovery.git = listing.state
        _select(
            discovery,
            listing.candidates,
            listing.tracked,
            frozenset(listing.state.changed_paths),
            max_files,
            max_file_bytes,
            max_total_bytes,
        )
    else:
        walk = _Walk(canonical, discovery.warnings, ignored_by=ignored_by)
        empty: frozenset[str] = frozenset()
        _select(
            discovery,
            walk.candidates(),
            empty,
            empty,
            max_files,
            max_file_bytes,
            max_total_bytes,
        )
        if walk.truncated:
            discovery.truncated = True
            discovery.warnings.append(
                f"stopped walking after {MAX_WALK_DIRECTORIES} directories; files in the"
                " remaining directories are not listed"
            )
    if not discovery.files and not discovery.truncated:
        _explain_empty(discovery)
    discovery.skipped.sort()
    return discovery


def _explain_empty(discovery: Discovery) -> None:
    """Add a warning when nothing was listed although the root holds files."""
    if not _has_any_file(discovery.root):
        return
    if discovery.skipped:
        reasons = sorted({reason for _, reason in discovery.skipped})
        shown = ", ".join(reasons[:5]) + (", ..." if len(reasons) > 5 else "")
        discovery.warnings.append(
            f"no file can be indexed: all {len(discovery.skipped)} candidates were skipped"
            f" ({shown}); everything else is excluded by ignore rules"
        )
    else:
        discovery.warnings.append(
            "no file can be indexed: the folder has files, but ignore rules (.gitignore files,"
            " .git/info/exclude or the global Git ignore file) exclude all of them"
        )


def _has_any_file(root: Path, limit: int = 10_000) -> bool:
    """True when a regular file or a link sits under `root` (outside `.git`); looks at no more
    than `limit` directory entries."""
    pending = [root]
    seen = 0
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as iterator:
                for entry in iterator:
                    seen += 1
                    if seen > limit:
                        return False
                    if entry.name == ".git":
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(Path(entry.path))
                        elif entry.is_file(follow_symlinks=False) or entry.is_symlink():
                            return True
                    except OSError:
                        continue
        except OSError:
            continue
    return False


def _canonical_root(root: Path) -> Path:
    try:
        canonical = Path(root).expanduser().resolve(strict=True)
    except (OSError, RuntimeError) as error:
        detail = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise ProjectRootError(
            f"ds4: cannot index project root '{root}': {detail}; open an existing project folder"
        ) from error
    if not canonical.is_dir():
        raise ProjectRootError(
            f"ds4: cannot index project root '{canonical}': it is not a directory;"
            " open the project folder instead"
        )
    if canonical == Path(canonical.anchor):
        raise ProjectRootError(
            f"ds4: refusing to index '{canonical}': it is the filesystem root;"
            " open a project folder instead"
        )
    try:
        home = Path.home().resolve()
    except (OSError, RuntimeError):
        home = None
    if home is not None and canonical == home:
        raise ProjectRootError(
            f"ds4: refusing to index '{canonical}': it is the home directory itself;"
            " open a project folder instead"
        )
    return canonical


def _select(
    discovery: Discovery,
    candidates: Iterable[str],
    tracked: frozenset[str],
    changed: frozenset[str],
    max_files: int,
    max_file_bytes: int,
    max_total_bytes: int,
) -> None:
    """Check candidates in order and fill `discovery.files` / `skipped` within the bounds; a
    name that is not valid UTF-8 is skipped (`NOT_UTF8_REASON`) and named in one warning."""
    unnamed: list[str] = []
    _select_within(
        discovery,
        candidates,
        tracked,
        changed,
        max_files,
        max_file_bytes,
        max_total_bytes,
        unnamed,
    )
    if unnamed:
        listed = ", ".join(unnamed[:MAX_NAMES_LISTED]) + (
            ", ..." if len(unnamed) > MAX_NAMES_LISTED else ""
        )
        discovery.warnings.append(
            f"{len(unnamed)} path(s) have a name that is not valid UTF-8 and are not indexed"
            f" (rename them to index them): {listed}"
        )


def _select_within(
    discovery: Discovery,
    candidates: Iterable[str],
    tracked: frozenset[str],
    changed: frozenset[str],
    max_files: int,
    max_file_bytes: int,
    max_total_bytes: int,
    unnamed: list[str],
) -> None:
    """`_select`'s loop; appends the shown form of each non-UTF-8 name to `unnamed`."""
    root = discovery.root
    skipped_dirs: set[str] = set()
    real_dirs: dict[str, bool] = {"": True}
    total_bytes = 0
    for rel_path in candidates:
        if not is_utf8_name(rel_path):  # the index, the wire and quotes are UTF-8 text
            shown = printable_name(rel_path)
            discovery.skipped.append((shown, NOT_UTF8_REASON))
            unnamed.append(shown)
            continue
        if rel_path.endswith("/"):  # a directory left out as a whole
            if rel_path not in skipped_dirs:
                skipped_dirs.add(rel_path)
                why = path_exclusion(rel_path) or "nested repository"
                discovery.skipped.append((rel_path, why))
            continue
        reason = path_exclusion(rel_path)
        if reason is not None:
            if reason.startswith("ignored directory "):
                directory = _excluded_directory(rel_path)
                if directory not in skipped_dirs:
                    skipped_dirs.add(directory)
                    discovery.skipped.append((directory, reason))
            else:
                discovery.skipped.append((rel_path, reason))
            continue
        if not _parents_are_real_directories(root, rel_path, real_dirs):
            discovery.skipped.append((rel_path, "symlink"))
            continue
        try:
            info = os.lstat(root / rel_path)
        except FileNotFoundError:
            continue  # tracked but deleted from the working tree: nothing to index
        except OSError as error:
            discovery.skipped.append((rel_path, f"unreadable: {errno_name(error)}"))
            continue
        if stat.S_ISLNK(info.st_mode):
            discovery.skipped.append((rel_path, "symlink"))
            continue
        if not stat.S_ISREG(info.st_mode):
            discovery.skipped.append((rel_path, "not a regular file"))
            continue
        if info.st_size > max_file_bytes:
            discovery.skipped.append((rel_path, "oversized"))
            continue
        if len(discovery.files) >= max_files:
            discovery.truncated = True
            discovery.warnings.append(
                f"listed the first {max_files} files (maxFiles); '{rel_path}' and later"
                " files are not listed"
            )
            return
        if total_bytes + info.st_size > max_total_bytes:
            discovery.truncated = True
            discovery.warnings.append(
                f"listed {len(discovery.files)} files of {total_bytes} bytes in total"
                f" (max {max_total_bytes}); '{rel_path}' and later files are not listed"
            )
            return
        total_bytes += info.st_size
        discovery.files.append(
            DiscoveredFile(
                rel_path=rel_path,
                size_bytes=info.st_size,
                mtime_ns=info.st_mtime_ns,
                tracked=rel_path in tracked,
                modified=rel_path in changed,
            )
        )


NOT_UTF8_REASON = "name not UTF-8"
"""Skip reason of a path whose name is not valid UTF-8 (the file system gave bytes that
decode only with `surrogateescape`): such a path cannot be stored, sent or quoted as text."""

MAX_NAMES_LISTED = 10
"""Non-UTF-8 names shown in the discovery warning; the rest are counted."""


def is_utf8_name(path: str) -> bool:
    """True when `path` (as `os.fsdecode` gives it) encodes to UTF-8: it holds no lone
    surrogate, which is how `surrogateescape` carries bytes that are not UTF-8."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable_name(path: str) -> str:
    """`path` with each byte that is not UTF-8 shown as `\\xNN` (for messages only)."""
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no byte stands for (Windows names): show it
        return path.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def _excluded_directory(rel_path: str) -> str:
    """The first directory of `rel_path` that `path_exclusion` excludes, with a trailing `/`."""
    parts = rel_path.split("/")
    for index in range(1, len(parts)):
        prefix = "/".join(parts[:index]) + "/"
        if path_exclusion(prefix) is not None:
            return prefix
    return rel_path


def _parents_are_real_directories(root: Path, rel_path: str, cache: dict[str, bool]) -> bool:
    """True when every directory between `root` and `rel_path` is a directory, not a link.

    Git lists paths from its index even when a directory of the working tree has since been
    replaced by a symbolic link; following such a link could leave the root.
    """
    parts = rel_path.split("/")[:-1]
    for index in range(1, len(parts) + 1):
        parent = "/".join(parts[:index])
        known = cache.get(parent)
        if known is None:
            try:
                known = stat.S_ISDIR(os.lstat(root / parent).st_mode)
            except OSError:
                known = False
            cache[parent] = known
        if not known:
            return False
    return True


# --- Git ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _GitListing:
    candidates: list[str]
    tracked: frozenset[str]
    state: GitState


@dataclass(frozen=True, slots=True)
class _IgnoredByEnclosing:
    """The root lies in a repository (whose work tree starts at `top`) that ignores it."""

    top: Path


def _git_listing(root: Path, warnings: list[str]) -> _GitListing | _IgnoredByEnclosing | None:
    """Ask Git for the candidates and state; None (and maybe a warning) to use the walk, or
    `_IgnoredByEnclosing` when the repository ignores the root itself (or a directory above
    it) and tracks nothing under it: the walk then applies only the root's own ignore files.

    Git runs only through `ds4_core.project.git` (no command that can start a program the
    repository's configuration names); "modified" comes from `worktree_changes`, not from
    `git status`.

    Git is not run when a file it would open is a FIFO, socket or device
    (`git.blocking_repository_file`: Git's blocking `open` would stall until `GIT_TIMEOUT_S`),
    nor after a Git command timed out for this root until the repository's `index` or `HEAD`
    changes (`_TIMED_OUT`); a warning says so each time."""
    blocking = blocking_repository_file(root) or _blocking_ignore_file_below(root)
    if blocking is not None:
        warnings.append(
            f"'{blocking}' is not a regular file (a FIFO, socket or device) and Git would wait"
            " on it; listing files without Git"
        )
        return None
    signature = repository_signature(root)
    key = str(root)
    if key in _TIMED_OUT:
        if _TIMED_OUT[key] == signature:
            warnings.append(
                f"git timed out in '{root}' at an earlier sync; listing files without Git until"
                " the repository's index or HEAD changes"
            )
            return None
        del _TIMED_OUT[key]
    try:
        return _run_git_listing(root, warnings)
    except GitError as error:
        if error.timed_out:
            if len(_TIMED_OUT) >= _TIMED_OUT_MAX:
                _TIMED_OUT.clear()
            _TIMED_OUT[key] = signature
        if not error.expected:
            warnings.append(f"git failed in '{root}' ({error}); listing files without Git")
        return None


MAX_PRECHECK_DIRECTORIES = 2_000
"""Directories below the root whose `.gitignore` is checked (`stat` only) before Git runs."""


def _blocking_ignore_file_below(root: Path) -> Path | None:
    """A `.gitignore` below `root` that is neither a regular file nor a directory (Git's
    untracked walk would block opening it), or None. Directories are visited breadth first,
    at most `MAX_PRECHECK_DIRECTORIES`, skipping `.git` and nested repositories (Git does not
    enter them); beyond that a file that stalls Git makes it time out once (`_TIMED_OUT`)."""
    pending = deque([root])
    visited = 0
    while pending and visited < MAX_PRECHECK_DIRECTORIES:
        directory = pending.popleft()
        visited += 1
        try:
            with os.scandir(directory) as iterator:
                entries = list(iterator)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != ".git" and not os.path.lexists(Path(entry.path, ".git")):
                        pending.append(Path(entry.path))
                elif entry.name == ".gitignore" and directory != root:
                    mode = os.stat(entry.path).st_mode  # Git follows a link here
                    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                        return Path(entry.path)
            except OSError:
                continue
    return None


_TIMED_OUT: dict[str, tuple[tuple[int, int, int], ...] | None] = {}
"""Roots where a Git command timed out (after `GIT_TIMEOUT_S` seconds), with the
`git.repository_signature` at that time: later discoveries of the root use the walk at once,
until the signature changes, instead of waiting again."""
_TIMED_OUT_MAX = 1_000


def _run_git_listing(root: Path, warnings: list[str]) -> _GitListing | _IgnoredByEnclosing | None:
    """`_git_listing`'s Git commands.

    Raises:
        GitError: a command failed or timed out (`expected` only when the folder is in no
            repository, or Git is missing).
    """
    prefix = os.fsdecode(run_git(root, "rev-parse", "--show-prefix")).strip("\n")
    try:
        entries = read_index(root)
        untracked = _split_z(run_git(root, "ls-files", "--others", "--exclude-standard", "-z"))
        head = _git_optional(root, "rev-parse", "--verify", "-q", "HEAD")
        branch = _git_optional(root, "symbolic-ref", "--short", "-q", "HEAD")
        index_time = index_mtime_ns(root)
    except GitError as error:  # inside a repository every failure is worth a warning
        raise GitError(str(error), timed_out=error.timed_out) from error
    head_tree: dict[str, tuple[str, str]] | None = {}
    if head is not None:
        try:
            head_tree = read_head_tree(root)
        except GitError as error:  # e.g. a partial clone missing a tree: never fetched
            head_tree = None
            warnings.append(f"git cannot read HEAD's tree ({error}); staged changes not shown")
    tracked = {entry.path for entry in entries}
    if prefix and not tracked and not untracked and _git_ignores_root(root):
        try:
            top = Path(os.fsdecode(run_git(root, "rev-parse", "--show-toplevel")).strip("\n"))
        except GitError:
            top = root.parents[len(Path(prefix).parts) - 1]
        return _IgnoredByEnclosing(top)
    changed = worktree_changes(root, entries, head_tree, index_time)
    changed.update(untracked)
    tracked_set = frozenset(path for path in tracked if _is_safe_relative(path))
    candidates = sorted(tracked_set | {p for p in untracked if _is_safe_relative(p)})
    state = GitState(
        branch=branch,
        head=head,
        dirty=bool(changed),
        changed_paths=tuple(
            sorted({p.rstrip("/") for p in changed if _is_safe_relative(p) and is_utf8_name(p)})
        ),
    )
    return _GitListing(candidates=candidates, tracked=tracked_set, state=state)


def _git_ignores_root(root: Path) -> bool:
    """Does the repository's ignore configuration exclude `root` (or a directory above it)?"""
    try:
        run_git(root, "check-ignore", "-q", "--", ".")
    except GitError:
        return False  # exit status 1: not ignored (or any failure: keep Git's answer)
    return True


def _git_optional(root: Path, *args: str) -> str | None:
    """Output of a Git query that legitimately fails (no commit yet, detached HEAD)."""
    try:
        output = run_git(root, *args)
    except GitError as error:
        if error.expected:
            return None
        raise
    value = os.fsdecode(output).strip()
    return value or None


def _split_z(output: bytes) -> list[str]:
    return [os.fsdecode(item) for item in output.split(b"\0") if item]


def _is_safe_relative(rel_path: str) -> bool:
    if not rel_path or rel_path.startswith("/"):
        return False
    return all(part not in ("", ".", "..") for part in rel_path.rstrip("/").split("/"))


# --- The walk ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Rule:
    """One compiled ignore pattern, evaluated directly against a path (never an ancestor)."""

    exclude: bool  # False for a `!` pattern
    kind: Literal["path", "dir", "prefix", "all", "all-dirs", "other"]
    regex: re.Pattern[str] | None

    def matches(self, path: str, is_dir: bool) -> bool:
        """Does this pattern name `path` itself? `path` is relative to the rule's base."""
        if self.kind == "all":
            return True
        if self.kind == "all-dirs":
            return is_dir
        assert self.regex is not None
        if self.kind == "path":
            return self.regex.match(path) is not None
        if self.kind == "dir":
            return is_dir and self.regex.match(path) is not None
        if self.kind == "prefix":
            return self.regex.search(path) is not None
        # A form this module does not know (a different pathspec version): pathspec's own
        # "this path or one of its directories" reading.
        return self.regex.search(path + "/" if is_dir else path) is not None


# The pattern class GitIgnoreSpec compiles lines with (GitIgnoreSpecPattern in pathspec 1.x),
# used directly: building a whole spec per line costs about a hundred times more.
_PATTERN_CLASS = cast(
    Callable[[str], RegexPattern], type(GitIgnoreSpec.from_lines(["x"]).patterns[0])
)

# pathspec >= 1.0 (GitIgnoreSpecPattern) ends its regular expressions in one of these ways.
_ANY_TAIL = "(?:(?P<ps_d>/)|$)"  # the last segment names a file or a directory
_DIR_TAIL = "(?P<ps_d>/)"  # a pattern with a trailing slash: directories only


def _escape_units(line: str) -> list[str]:
    """`line` split into characters, a backslash and the character it escapes kept together
    (a trailing lone backslash stays a unit of its own)."""
    units: list[str] = []
    index = 0
    while index < len(line):
        width = 2 if line[index] == "\\" and index + 1 < len(line) else 1
        units.append(line[index : index + width])
        index += width
    return units


def _trim_trailing_spaces(line: str) -> str:
    """Git's trimming of an ignore line (`trim_trailing_spaces` in Git's dir.c): trailing
    spaces go unless escaped with a backslash; TABs and other whitespace stay."""
    units = _escape_units(line)
    while units and units[-1] == " ":
        units.pop()
    return "".join(units)


def _keep_trailing_whitespace(line: str) -> str:
    """`line` with its trailing whitespace (escaped or not) written as one-character
    brackets (`foo\\t` becomes `foo[\\t]`): pathspec strips all trailing whitespace
    (`str.rstrip`), while Git, after `_trim_trailing_spaces`, keeps it as part of the name."""
    units = _escape_units(line)
    end = len(units)
    while end and units[end - 1][-1].isspace():
        end -= 1
    return "".join(units[:end]) + "".join(f"[{unit[-1]}]" for unit in units[end:])


@functools.lru_cache(maxsize=4096)
def _compile_rule(line: str) -> _Rule | None:
    """Compile one ignore line; None for blank lines, comments and lines Git discards.

    Raises:
        ValueError: the line is not a pattern pathspec can compile.
    """
    line = _trim_trailing_spaces(line)
    body = line[1:] if line.startswith("!") else line
    if re.search(r"(?:^|/)\*\*/$", body) and body != "**/":
        # pathspec folds "foo/**/" into "foo/"; Git means the directories *under* foo.
        line = line[:-3] + "**/*/"
    pattern = _PATTERN_CLASS(_keep_trailing_whitespace(line))
    if pattern.include is None or pattern.regex is None:
        return None  # a comment, a blank line, or a pattern Git discards
    exclude = bool(pattern.include)
    source = pattern.regex.pattern
    if not isinstance(source, str):
        raise ValueError("unexpected bytes pattern")
    if source == ".":
        return _Rule(exclude, "all", None)
    if source == _DIR_TAIL:
        return _Rule(exclude, "all-dirs", None)
    if source.endswith(_ANY_TAIL):
        return _Rule(exclude, "path", re.compile(source[: -len(_ANY_TAIL)] + r"\Z"))
    if source.endswith(_DIR_TAIL):
        return _Rule(exclude, "dir", re.compile(source[: -len(_DIR_TAIL)] + r"\Z"))
    if source.endswith("/"):
        return _Rule(exclude, "prefix", re.compile(source))
    return _Rule(exclude, "other", re.compile(source))


@dataclass(frozen=True, slots=True)
class _Level:
    """The rules of one ignore file, relative to `base` (a repository-relative directory)."""

    base: str
    rules: tuple[_Rule, ...]


def _parse_ignore_file(path: Path, display: str, warnings: list[str]) -> tuple[_Rule, ...]:
    """Compile an ignore file; unreadable files and malformed lines become warnings."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ()
    except OSError as error:
        warnings.append(f"{display}: cannot read ignore file ({errno_name(error)}); ignored")
        return ()
    if stat.S_ISLNK(info.st_mode):
        warnings.append(f"{display}: ignore file is a symbolic link; not followed, ignored")
        return ()
    if stat.S_ISDIR(info.st_mode):
        return ()  # Git reads nothing from a directory named .gitignore either
    if not stat.S_ISREG(info.st_mode):
        warnings.append(
            f"{display}: ignore file is not a regular file (a FIFO, socket or device);"
            " not opened, ignored"
        )
        return ()
    try:  # O_NONBLOCK: a FIFO swapped in after the lstat cannot stall the walk
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        with os.fdopen(os.open(path, flags), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return ()
            data = handle.read()
    except OSError as error:
        warnings.append(f"{display}: cannot read ignore file ({errno_name(error)}); ignored")
        return ()
    text = data.decode("utf-8", "surrogateescape")
    if text.startswith(_UTF8_BOM):
        text = text[1:]
    rules: list[_Rule] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw[:-1] if raw.endswith("\r") else raw
        try:
            rule = _compile_rule(line)
        except Exception as error:  # any failure: one bad line must not drop the file
            warnings.append(
                f"{display}:{number}: skipped malformed ignore pattern {line!r} ({error})"
            )
            continue
        if rule is not None:
            rules.append(rule)
    return tuple(rules)


def _excluded(levels: list[_Level], path: str, is_dir: bool) -> bool:
    """Git's verdict for `path` (repository-relative): the last matching rule of the deepest
    level that has one decides."""
    for level in reversed(levels):
        if level.base:
            if not path.startswith(level.base + "/"):
                continue
            relative = path[len(level.base) + 1 :]
        else:
            relative = path
        for rule in reversed(level.rules):
            if rule.matches(relative, is_dir):
                return rule.exclude
    return False


def _is_nested_repository(directory: Path) -> bool:
    marker = directory / ".git"
    try:
        info = os.lstat(marker)
    except OSError:
        return False
    if stat.S_ISDIR(info.st_mode):
        return (marker / "HEAD").is_file()
    if stat.S_ISREG(info.st_mode):
        return (read_small_regular(marker, 8) or b"") == b"gitdir: "
    return False


def _git_directory(top: Path) -> Path | None:
    """The repository directory for a work tree at `top` (`.git`, or where a `.git` file
    points)."""
    marker = top / ".git"
    try:
        info = os.lstat(marker)
    except OSError:
        return None
    if stat.S_ISDIR(info.st_mode):
        return marker
    if not stat.S_ISREG(info.st_mode):
        return None
    content = read_small_regular(marker)
    if content is None or not content.startswith(b"gitdir:"):
        return None
    git_dir = (top / os.fsdecode(content[len(b"gitdir:") :]).strip()).resolve()
    return common_directory(git_dir)  # a linked work tree keeps info/exclude there


def _global_ignore_file() -> Path | None:
    config_home = os.environ.get("XDG_CONFIG_HOME")
    if config_home:
        return Path(config_home) / "git" / "ignore"
    home = os.environ.get("HOME")
    return Path(home) / ".config" / "git" / "ignore" if home else None


class _Walk:
    """The deterministic walk: candidates in sorted path order, ignore rules as Git applies
    them. Symbolic links are reported, never entered; a directory seen twice (a bind-mount
    loop) is not entered again."""

    def __init__(self, root: Path, warnings: list[str], *, ignored_by: Path | None = None) -> None:
        self.root = root
        self.warnings = warnings
        self._ignored_by = ignored_by
        self.truncated = False
        self._directories = 0
        self._seen: set[tuple[int, int]] = set()

    def candidates(self) -> Iterator[str]:
        """Yield root-relative candidate paths in sorted order (a nested repository as
        `dir/`, a symbolic link as its own path for the caller to report)."""
        if self._ignored_by is not None:
            self._warn_ignored_by(self._ignored_by)
            yield from self._walk(self.root, "", "", self._isolated_levels())
            return
        top = self._repository_top()
        levels: list[_Level] = []
        global_file = _global_ignore_file()
        if global_file is not None:
            rules = _parse_ignore_file(global_file, str(global_file), self.warnings)
            levels.append(_Level("", rules))
        if top is not None:
            git_dir = _git_directory(top)
            if git_dir is not None:
                exclude = git_dir / "info" / "exclude"
                display = ".git/info/exclude" if top == self.root else str(exclude)
                levels.append(_Level("", _parse_ignore_file(exclude, display, self.warnings)))
        else:
            top = self.root
        # Directories from the repository top down to the root: their .gitignore files apply,
        # and if one of them is itself ignored nothing under the root is a candidate.
        prefix = ""
        directory = top
        levels.append(self._level(directory, prefix))
        for part in self.root.relative_to(top).parts:
            prefix = f"{prefix}/{part}" if prefix else part
            directory = directory / part
            if _excluded(levels, prefix, is_dir=True):
                # The enclosing repository ignores the root (or a directory above it): list
                # the root as if it were in no repository, with a warning.
                self._warn_ignored_by(top)
                yield from self._walk(self.root, "", "", self._isolated_levels())
                return
            levels.append(self._level(directory, prefix))
        yield from self._walk(self.root, prefix, "", levels)

    def _isolated_levels(self) -> list[_Level]:
        """Ignore rules for a root in no repository: the global file and the root's own."""
        levels: list[_Level] = []
        global_file = _global_ignore_file()
        if global_file is not None:
            rules = _parse_ignore_file(global_file, str(global_file), self.warnings)
            levels.append(_Level("", rules))
        levels.append(self._level(self.root, ""))
        return levels

    def _warn_ignored_by(self, top: Path) -> None:
        self.warnings.append(
            f"the enclosing Git repository at '{top}' ignores this folder, so its ignore rules"
            " were not applied; files are listed using only the ignore files in this folder"
            " and below"
        )

    def _repository_top(self) -> Path | None:
        for directory in (self.root, *self.root.parents):
            if os.path.lexists(directory / ".git"):
                return directory
        return None

    def _level(self, directory: Path, base: str) -> _Level:
        display_dir = os.path.relpath(directory, self.root)
        display = ".gitignore" if display_dir == "." else f"{display_dir}/.gitignore"
        return _Level(base, _parse_ignore_file(directory / ".gitignore", display, self.warnings))

    def _walk(
        self, directory: Path, repo_path: str, rel_dir: str, levels: list[_Level]
    ) -> Iterator[str]:
        try:
            info = os.lstat(directory)
        except OSError as error:
            self.warnings.append(f"cannot read directory '{rel_dir or '.'}' ({errno_name(error)})")
            return
        key = (info.st_dev, info.st_ino)
        if key in self._seen:
            self.warnings.append(f"directory '{rel_dir}' was already visited (a loop); skipped")
            return
        self._seen.add(key)
        self._directories += 1
        if self._directories > MAX_WALK_DIRECTORIES:
            self.truncated = True
            return
        try:
            with os.scandir(directory) as iterator:
                entries = [(entry.name, self._kind(entry)) for entry in iterator]
        except OSError as error:
            self.warnings.append(f"cannot list directory '{rel_dir or '.'}' ({errno_name(error)})")
            return
        # Sorting by name, with "/" after a directory's name, yields full paths in sorted
        # order from a depth-first walk.
        entries.sort(key=lambda item: item[0] + "/" if item[1] == "dir" else item[0])
        for name, kind in entries:
            if name == ".git" or kind == "other":
                continue
            rel_path = f"{rel_dir}/{name}" if rel_dir else name
            path_in_repo = f"{repo_path}/{name}" if repo_path else name
            is_dir = kind == "dir"
            if _excluded(levels, path_in_repo, is_dir):
                continue
            if not is_dir:
                yield rel_path  # a regular file, or a symbolic link for the caller to report
                continue
            child = directory / name
            if path_exclusion(rel_path + "/") is not None or _is_nested_repository(child):
                yield rel_path + "/"  # reported once, as a directory, by the caller
                continue
            child_levels = [*levels, self._level(child, path_in_repo)]
            yield from self._walk(child, path_in_repo, rel_path, child_levels)
            if self.truncated:
                return

    @staticmethod
    def _kind(entry: os.DirEntry[str]) -> str:
        try:
            if entry.is_symlink():
                return "file"  # Git lists a link as a file; the caller skips it
            if entry.is_dir(follow_symlinks=False):
                return "dir"
            if entry.is_file(follow_symlinks=False):
                return "file"
        except OSError:
            return "file"  # let the caller's lstat report why it cannot be read
        return "other"  # FIFOs, sockets, devices: Git does not list them either
