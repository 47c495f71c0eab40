"""Git for project discovery, run so that a repository's configuration never starts a program.

Trusting a workspace means its files may be read, never that its configuration may run
programs. Git configuration names programs in many places: `core.fsmonitor` (run whenever the
index is read, so by `git ls-files` and `git status`), clean/smudge/process filters and
textconv drivers chosen by `.gitattributes` (run when Git compares a working-tree file with
the index, as `git status` does), hooks (`core.hooksPath`, `.git/hooks`), pagers,
`diff.external`, `core.sshCommand`, credential helpers and `core.askPass` (run by the lazy
fetch of a partial clone), aliases, and any of these arriving through `include.path` or
`includeIf`, or from the repository a `.git` file points to. So discovery:

1. runs only commands that never read working-tree contents through Git and never diff:
   `rev-parse`, `symbolic-ref`, `ls-files` (the index, with its stat data, and the walk for
   untracked files), `ls-tree` and `check-ignore`; never `status`, `diff`, `add` or `fetch`.
   Reading the commit history (`project/commits.py`) adds `rev-list` and `log` with a fixed
   format and `--name-only` (names of changed files, never their contents), signatures,
   textconv, external diff, mailmap, notes, rename detection and color turned off by option
   and by `-c` setting (`commits.LOG_CONFIG`, `commits.LOG_OPTIONS`);
2. runs each with `GIT_SAFE_CONFIG` on the command line (configuration given with `-c` wins
   over every configuration file, included ones too, and is passed on to any Git process
   Git starts itself), `--no-pager`, `--no-optional-locks` (nothing is written, so no
   `post-index-change` hook), `--no-replace-objects`, stdin closed and no terminal prompt;
3. decides "modified" itself (`worktree_changes`) with `git status`'s rules: a file whose
   `lstat` matches the stat data Git recorded in the index is unchanged, and one whose size
   differs from the recorded size is modified, both without reading it; any other tracked
   file is hashed as a Git blob (`sha1("blob <size>\\0" + bytes)`, SHA-256 in a SHA-256
   repository) and compared with the index's object id.

What step 3 cannot see, because it would mean running the repository's programs: the output
of clean filters (a filtered file whose stat data no longer matches counts as modified unless
its bytes equal the stored blob) and changes inside submodules. Line-ending conversion is
approximated: a file of the recorded size that equals the stored blob once its CRLF line
endings become LF counts as unchanged. A change of the executable bit alone is not reported.
"""

from __future__ import annotations

import hashlib
import os
import re
import selectors
import stat
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

GIT_TIMEOUT_S = 20.0
"""Seconds one Git command may take before discovery falls back to the walk."""

GIT_SAFE_CONFIG = (
    "core.fsmonitor=false",  # no fsmonitor hook or daemon when the index is read
    "core.untrackedCache=false",  # the untracked walk trusts no cached (fsmonitor) data
    f"core.hooksPath={os.devnull}",  # no hook can be found
    "credential.helper=",  # the empty value clears the list of helpers
    "core.askPass=",  # no askpass program
    "protocol.allow=never",  # no transport (GIT_ALLOW_PROTOCOL in `run_git` makes it final)
    "safe.bareRepository=explicit",  # a bare repository planted in the folder is not used
    "core.quotePath=false",
)
"""Configuration passed with `-c` to every Git command discovery runs (see the module
docstring). Pagers, `diff.external`, textconv, filters and aliases need no entry: no command
run here consults them (`--no-pager` covers pagers)."""

_ENV_DROP = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "PAGER",
)

_MATCH_CACHE: dict[tuple[str, str, int, int, int, int], bool] = {}
"""Hash comparisons already made: (path, oid, size, mtime_ns, ctime_ns, inode) -> "the file
is that blob". A file touched without changing (stat data newer than the index's) is then
read once, not at every sync; Git would refresh its index instead, which discovery never
writes."""
_MATCH_CACHE_MAX = 100_000
_CACHE_SETTLED_NS = 2_000_000_000
"""A result is cached only for a file last modified this long (ns) before it was read, so a
write in the same clock tick as the read is never hidden (Git's racy-clean concern)."""

_HASH_CHUNK_BYTES = 1 << 20
_CRLF_CHECK_MAX_BYTES = 64 << 20
"""Largest file (bytes) whose CRLF-to-LF form is hashed when its raw bytes differ."""


class GitError(Exception):
    """A Git command failed. `expected` marks failures that are normal, not worth a warning
    (Git is not installed, the folder is not in a work tree, no commit or branch yet)."""

    def __init__(self, message: str, *, expected: bool = False, timed_out: bool = False) -> None:
        super().__init__(message)
        self.expected = expected
        self.timed_out = timed_out


def _git_environment() -> dict[str, str]:
    """The environment of every Git command run here (see `run_git`)."""
    env = {key: value for key, value in os.environ.items() if key not in _ENV_DROP}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_NO_REPLACE_OBJECTS"] = "1"
    env["GIT_NO_LAZY_FETCH"] = "1"  # Git >= 2.44: a partial clone never fetches
    # Older Gits: no transport at all. `protocol.allow=never` alone is not enough, since a
    # repository's `protocol.<name>.allow=always` overrides it; GIT_ALLOW_PROTOCOL overrides
    # every protocol setting (git-config(1), "protocol.allow") and lists none that exists.
    env["GIT_ALLOW_PROTOCOL"] = "ds4-none"
    env["LC_ALL"] = "C"
    return env


def _git_command(root: Path, args: tuple[str, ...], extra_config: tuple[str, ...]) -> list[str]:
    """`git` with the global options and `GIT_SAFE_CONFIG` (+ `extra_config`) before `args`."""
    command = ["git", "--no-pager", "--no-optional-locks", "--no-replace-objects"]
    for setting in (*GIT_SAFE_CONFIG, *extra_config):
        command += ["-c", setting]
    return [*command, "-C", str(root), *args]


def _failure(args: tuple[str, ...], returncode: int, stderr: bytes) -> GitError:
    """The `GitError` of a command that exited with `returncode` (see `run_git`)."""
    message = stderr.decode("utf-8", "replace").strip()
    lines = message.split("\n")
    detail = lines[-1] if lines else f"exit status {returncode}"
    expected = not message or "not a git repository" in message
    return GitError(f"`git {args[0]}`: {detail}", expected=expected)


def run_git(root: Path, *args: str) -> bytes:
    """Run `git <args>` in `root` with `GIT_SAFE_CONFIG` and return its standard output.

    Only for the read-only commands named in the module docstring; the caller must not pass
    a command that reads working-tree contents through Git (status, diff, add).

    Raises:
        GitError: Git is missing (`expected`), exits non-zero (`expected` when the folder is
            not in a repository or Git printed nothing), times out after `GIT_TIMEOUT_S`
            seconds, or cannot be started.
    """
    try:
        completed = subprocess.run(
            _git_command(root, args, ()),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=_git_environment(),
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise GitError(
            f"`git {args[0]}` timed out after {GIT_TIMEOUT_S:g} s", timed_out=True
        ) from error
    except FileNotFoundError as error:
        raise GitError("git is not installed", expected=True) from error
    except OSError as error:
        raise GitError(f"cannot run git: {error.strerror or error}") from error
    if completed.returncode != 0:
        raise _failure(args, completed.returncode, completed.stderr)
    return completed.stdout


_STDERR_KEEP_BYTES = 64 << 10
"""Standard error kept from a bounded command (its last line names the failure)."""


def run_git_bounded(
    root: Path,
    *args: str,
    max_bytes: int,
    timeout_s: float = GIT_TIMEOUT_S,
    extra_config: tuple[str, ...] = (),
) -> tuple[bytes, bool]:
    """Run `git <args>` like `run_git`, reading at most `max_bytes` bytes of its standard
    output and for at most `timeout_s` seconds; `extra_config` adds `-c` settings after
    `GIT_SAFE_CONFIG` (so they win over it and over every configuration file).

    Returns `(output, complete)`: `complete` is False when a bound stopped the reading
    (the process is then killed and `output` is what was read, cut at `max_bytes`).

    Raises:
        GitError: as `run_git` (missing Git, a non-zero exit of a command read to its end,
            no output at all before the timeout, or Git cannot be started).
    """
    try:
        process = subprocess.Popen(
            _git_command(root, args, extra_config),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_git_environment(),
        )
    except FileNotFoundError as error:
        raise GitError("git is not installed", expected=True) from error
    except OSError as error:
        raise GitError(f"cannot run git: {error.strerror or error}") from error
    assert process.stdout is not None and process.stderr is not None
    chunks: list[bytes] = []
    errors = bytearray()
    size = 0
    complete = True
    deadline = time.monotonic() + timeout_s
    open_streams = {
        process.stdout.fileno(): process.stdout,
        process.stderr.fileno(): process.stderr,
    }
    with selectors.DefaultSelector() as selector:
        for stream in open_streams.values():
            selector.register(stream, selectors.EVENT_READ)
        try:
            while open_streams:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    complete = False
                    break
                for key, _events in selector.select(remaining):
                    stream = open_streams[key.fd]
                    data = os.read(key.fd, 1 << 16)
                    if not data:
                        selector.unregister(stream)
                        del open_streams[key.fd]
                    elif stream is process.stderr:
                        errors += data
                        del errors[:-_STDERR_KEEP_BYTES]
                    else:
                        chunks.append(data)
                        size += len(data)
                if size >= max_bytes:
                    complete = False
                    break
        finally:
            if open_streams or not complete:
                process.kill()
            process.wait()
            process.stdout.close()
            process.stderr.close()
    output = b"".join(chunks)[:max_bytes]
    if not complete:
        if not output and size == 0 and time.monotonic() >= deadline:
            raise GitError(f"`git {args[0]}` timed out after {timeout_s:g} s", timed_out=True)
        return output, False
    if process.returncode != 0:
        raise _failure(args, process.returncode, bytes(errors))
    return output, True


_GIT_DIR_FILES = ("HEAD", "index", "config", "config.worktree", "commondir", "packed-refs")
"""Files of the repository directory Git may open before it lists anything."""
_COMMON_DIR_FILES = ("config", "packed-refs", "info/exclude", "info/attributes")
"""Files of the common directory (the repository directory unless `commondir` names another,
as in a linked work tree) Git may open."""
_TREE_FILES = (".gitignore", ".gitattributes")
"""Files of each directory from the work tree's top down to the root that Git reads."""


def repository_top(root: Path) -> Path | None:
    """The nearest directory at or above `root` holding a `.git` entry (of any kind), or None
    (Git's discovery of a work tree, without `GIT_CEILING_DIRECTORIES`)."""
    for directory in (root, *root.parents):
        if os.path.lexists(directory / ".git"):
            return directory
    return None


def read_small_regular(path: Path, limit: int = 4096) -> bytes | None:
    """The first `limit` bytes of `path` when it is a regular file (symbolic links followed),
    else None (missing, unreadable, a FIFO, socket, device or directory). Never blocks: the
    file is opened with `O_NONBLOCK`, so a FIFO planted in a folder cannot stall the caller."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            return handle.read(limit)
        except OSError:
            return None


def repository_directory(top: Path) -> Path | None:
    """The repository directory of the work tree at `top`: `.git` itself, or the directory a
    `.git` file names (`gitdir: <path>`, relative to `top`); None when neither can be read."""
    marker = top / ".git"
    if marker.is_dir():
        return marker
    content = read_small_regular(marker)
    if content is None or not content.startswith(b"gitdir:"):
        return None
    named = os.fsdecode(content[len(b"gitdir:") :]).strip()
    return (top / named).resolve() if named else None


def common_directory(git_dir: Path) -> Path:
    """The common directory of the repository directory `git_dir`: where its `commondir`
    file points (a linked work tree), else `git_dir` itself."""
    content = read_small_regular(git_dir / "commondir")
    named = os.fsdecode(content).strip() if content is not None else ""
    return (git_dir / named).resolve() if named else git_dir


def blocking_repository_file(root: Path) -> Path | None:
    """A file Git would open when run in `root` that is neither a regular file nor a
    directory (a FIFO, socket or device, symbolic links followed), or None when there is none.

    Git opens these files with a blocking `open`, so a FIFO among them stalls every Git
    command until `GIT_TIMEOUT_S`. Checked with `stat` only, never opened: `.git` (when it is
    neither a directory nor a file), the repository directory's `HEAD`, `index`, `config`,
    `config.worktree`, `commondir`, `packed-refs` and the ref file `HEAD` names, the common
    directory's `config`, `packed-refs`, `info/exclude` and `info/attributes`, and the
    `.gitignore` and `.gitattributes` of each directory from the work tree's top down to
    `root`. Ignore files deeper than `root` are not checked here (that would be a walk of its
    own); a Git command they stall times out once (see `discovery`).
    """
    top = repository_top(root)
    if top is None:
        return None
    candidates = [top / ".git"]
    git_dir = repository_directory(top)
    if git_dir is not None:
        candidates += [git_dir / name for name in _GIT_DIR_FILES]
        common = common_directory(git_dir)
        candidates += [common / name for name in _COMMON_DIR_FILES]
        head = read_small_regular(git_dir / "HEAD")
        if head is not None and head.startswith(b"ref: refs/"):
            ref = os.fsdecode(head[len(b"ref: ") :]).strip()
            if ".." not in ref.split("/"):
                candidates.append(common / ref)
    directory = top
    parts = root.relative_to(top).parts if root != top else ()
    for part in (None, *parts):
        if part is not None:
            directory = directory / part
        candidates += [directory / name for name in _TREE_FILES]
    for path in candidates:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # missing (or a dangling link): Git does not open it either
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            return path
    return None


def repository_signature(root: Path) -> tuple[tuple[int, int, int], ...] | None:
    """`(inode, size, mtime_ns)` of the repository's `index` and `HEAD` (zeros when missing),
    or None when `root` is in no work tree: a change of either means Git may behave
    differently now (another commit, branch or staged state)."""
    top = repository_top(root)
    git_dir = repository_directory(top) if top is not None else None
    if git_dir is None:
        return None
    signature = []
    for name in ("index", "HEAD"):
        try:
            info = os.stat(git_dir / name)
            signature.append((info.st_ino, info.st_size, info.st_mtime_ns))
        except OSError:
            signature.append((0, 0, 0))
    return tuple(signature)


class IndexEntry(NamedTuple):
    """One entry of Git's index, as `git ls-files -s -v --debug -z` prints it.

    Attributes:
        path: POSIX path relative to the folder Git ran in.
        mode: octal mode string (`100644`, `100755`, `120000` link, `160000` submodule).
        oid: object id (hex) of the staged blob.
        stage: 0 when merged; 1-3 for the sides of a conflict.
        assumed: `skip-worktree` or `assume-unchanged` is set: Git never compares it.
        stat: `(ctime_s, ctime_ns, mtime_s, mtime_ns, ino, uid, gid, size)` as Git recorded
            them (seconds and sizes modulo 2**32), or None when the output had none.
    """

    path: str
    mode: str
    oid: str
    stage: int
    assumed: bool
    stat: tuple[int, int, int, int, int, int, int, int] | None


_ENTRY = re.compile(
    rb"([A-Za-z?]) (\d{6}) ([0-9a-f]{40,64}) ([0-3])\t([^\0]*)\0"
    rb"(?:  ctime: (\d+):(\d+)\n  mtime: (\d+):(\d+)\n  dev: \d+\tino: (\d+)\n"
    rb"  uid: (\d+)\tgid: (\d+)\n  size: (\d+)\tflags: [0-9a-f]+\n)?"
)


def read_index(root: Path) -> list[IndexEntry]:
    """The index entries under `root` (`git ls-files -s -v --debug -z`).

    The stat data comes from `--debug`, whose layout Git does not promise: output this module
    cannot parse is read again without `--debug`, and every entry then has `stat=None` (it
    is hashed, never assumed unchanged).

    Raises:
        GitError: the command failed, or its output is not in the expected form.
    """
    entries = _parse_index_listing(run_git(root, "ls-files", "-s", "-v", "--debug", "-z"))
    if entries is None:
        entries = _parse_index_listing(run_git(root, "ls-files", "-s", "-v", "-z"))
    if entries is None:
        raise GitError("`git ls-files`: unexpected output")
    return entries


def _parse_index_listing(output: bytes) -> list[IndexEntry] | None:
    """Entries of `ls-files -s -v -z` output (with or without `--debug`); None when the
    output does not have that form."""
    entries: list[IndexEntry] = []
    position = 0
    for match in _ENTRY.finditer(output):
        if match.start() != position:
            return None
        position = match.end()
        tag, mode, oid, stage, path = match.group(1, 2, 3, 4, 5)
        numbers = match.groups()[5:]
        entries.append(
            IndexEntry(
                path=os.fsdecode(path),
                mode=mode.decode(),
                oid=oid.decode(),
                stage=int(stage),
                assumed=tag == b"S" or tag.islower(),
                stat=None if numbers[0] is None else tuple(map(int, numbers)),  # type: ignore[arg-type]
            )
        )
    return entries if position == len(output) else None


def read_head_tree(root: Path) -> dict[str, tuple[str, str]]:
    """`{path: (mode, oid)}` of HEAD's tree under `root` (`git ls-tree -r -z HEAD`).

    Raises:
        GitError: the command failed (no HEAD, or a tree object is missing: a partial clone
            never fetches it here).
    """
    tree: dict[str, tuple[str, str]] = {}
    for record in run_git(root, "ls-tree", "-r", "-z", "HEAD").split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        parts = meta.split(b" ")
        if len(parts) != 3 or not path:
            raise GitError("`git ls-tree`: unexpected output")
        tree[os.fsdecode(path)] = (parts[0].decode(), parts[2].decode())
    return tree


def index_mtime_ns(root: Path) -> int | None:
    """Modification time (ns) of the index file, or None when there is none; entries changed
    at or after it are "racily clean" and must be hashed (Git's rule, racy-git.txt)."""
    try:
        relative = os.fsdecode(run_git(root, "rev-parse", "--git-path", "index")).rstrip("\n")
        return os.stat(root / relative).st_mtime_ns
    except (GitError, OSError):
        return None


def worktree_changes(
    root: Path,
    entries: list[IndexEntry],
    head: dict[str, tuple[str, str]] | None,
    index_time_ns: int | None,
) -> set[str]:
    """Paths (relative to `root`) whose index entry differs from HEAD's tree (`head`: empty
    before the first commit, None when it could not be read: staged changes are then not
    compared) or whose working-tree file differs from its index entry: staged and unstaged
    changes, deletions and conflicts, as `git status` reports them (see the module docstring
    for what is approximated). Reads files; runs nothing."""
    base = os.fspath(root)
    changed: set[str] = set()
    staged: dict[str, tuple[str, str]] = {}
    for entry in entries:
        if entry.stage != 0:
            changed.add(entry.path)  # a conflict
            continue
        staged[entry.path] = (entry.mode, entry.oid)
        if not entry.assumed and _differs(base, entry, index_time_ns):
            changed.add(entry.path)
    if head is None:
        return changed
    for path in staged.keys() | head.keys():
        if staged.get(path) != head.get(path):
            changed.add(path)  # staged: added, deleted, or another blob or mode
    return changed


def blob_id(data: bytes, *, sha256: bool = False) -> str:
    """Git's object id of a blob holding `data`: the hex digest of `b"blob <len>\\0" + data`
    (SHA-1, or SHA-256 in a SHA-256 repository; Git's object format, gitformat-pack)."""
    digest = hashlib.sha256() if sha256 else hashlib.sha1()
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def _differs(root: str, entry: IndexEntry, index_time_ns: int | None) -> bool:
    """Does the working-tree file differ from its (stage 0) index entry?"""
    path = os.path.join(root, entry.path)
    try:
        info = os.lstat(path)
    except OSError:
        return True  # deleted (or unreadable)
    if entry.mode == "160000":
        return not stat.S_ISDIR(info.st_mode)  # submodule contents are not compared
    if entry.mode == "120000":
        if not stat.S_ISLNK(info.st_mode):
            return True
        try:
            target = os.fsencode(os.readlink(path))
        except OSError:
            return True
        return blob_id(target, sha256=len(entry.oid) == 64) != entry.oid
    if not stat.S_ISREG(info.st_mode):
        return True
    if _stat_matches(entry, info, index_time_ns):
        return False
    if entry.stat is not None and entry.stat[7] not in (0, info.st_size & 0xFFFFFFFF):
        return True  # another size than recorded: Git calls it changed without reading it
    key = (path, entry.oid, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
    known = _MATCH_CACHE.get(key)
    if known is None:
        known = _content_matches(path, info.st_size, entry.oid)
        if info.st_mtime_ns < time.time_ns() - _CACHE_SETTLED_NS:
            if len(_MATCH_CACHE) >= _MATCH_CACHE_MAX:
                _MATCH_CACHE.clear()
            _MATCH_CACHE[key] = known
    return not known


def _stat_matches(entry: IndexEntry, info: os.stat_result, index_time_ns: int | None) -> bool:
    """Git's "stat data unchanged" test (ie_match_stat), with its racy-clean rule."""
    if entry.stat is None or index_time_ns is None:
        return False
    ctime_s, ctime_ns, mtime_s, mtime_ns, ino, uid, gid, size = entry.stat
    if mtime_s * 1_000_000_000 + mtime_ns >= index_time_ns:
        return False  # changed in the same tick the index was written: may be racily clean
    wrap = 0xFFFFFFFF
    return (
        size == info.st_size & wrap
        and (mtime_s, mtime_ns)
        == ((info.st_mtime_ns // 1_000_000_000) & wrap, info.st_mtime_ns % 1_000_000_000)
        and (ctime_s, ctime_ns)
        == ((info.st_ctime_ns // 1_000_000_000) & wrap, info.st_ctime_ns % 1_000_000_000)
        and ino == info.st_ino & wrap
        and uid == info.st_uid & wrap
        and gid == info.st_gid & wrap
    )


def _content_matches(path: str, size: int, oid: str) -> bool:
    """Do the file's bytes (or, failing that, its bytes with CRLF turned into LF) hash to
    `oid`? Unreadable files do not match."""
    sha256 = len(oid) == 64
    digest = hashlib.sha256() if sha256 else hashlib.sha1()
    digest.update(b"blob %d\0" % size)
    saw_cr = False
    read = 0
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(_HASH_CHUNK_BYTES):
                digest.update(chunk)
                read += len(chunk)
                saw_cr = saw_cr or b"\r" in chunk
    except OSError:
        return False
    if read == size and digest.hexdigest() == oid:
        return True
    if not saw_cr or size > _CRLF_CHECK_MAX_BYTES:
        return False
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    return blob_id(data.replace(b"\r\n", b"\n"), sha256=sha256) == oid
