"""Reading the commit history (core/ds4_core/project/commits.py): the log parser takes any
bytes, hostile commit text is made safe and bounded, and a repository configuration that
names programs (GPG for signatures, external diff, textconv, pager, ...) never runs one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from git_repos import commit_file, git, isolate_git
from hostile_git import make_trapped_repository
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.project import commits as commits_module
from ds4_core.project.commits import (
    MAX_BODY_BYTES,
    MAX_FILES_PER_COMMIT,
    MAX_SUBJECT_CHARS,
    Commit,
    folder_prefix,
    head_commit,
    is_ancestor,
    log_format,
    parse_log,
    read_commits,
    split_message,
)
from ds4_core.project.git import GitError, run_git_bounded

NONCE = "0123456789abcdef"
HASH = "a" * 40


@pytest.fixture(autouse=True)
def isolated_git(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolate_git(tmp_path_factory.mktemp("home"), monkeypatch)


def record(hash_: str, date: bytes, message: bytes, files: list[bytes]) -> bytes:
    """One record as `git log --format=log_format(NONCE) -z --name-only` writes it."""
    start = b"\0\x1eDS4-" + NONCE.encode() + b"\0"
    end = b"\0\x1fDS4-" + NONCE.encode() + b"\0"
    tail = (b"\0\n" + b"".join(name + b"\0" for name in files)) if files else b""
    return start + hash_.encode() + b"\0" + date + b"\0" + message + end + tail


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    return root


# ----------------------------------------------------------------------------- parser


def test_the_parser_reads_records_with_messages_and_files() -> None:
    output = record(HASH, b"1700000000", b"Fix the parser\n\nIt failed on NUL.\n", [b"a.py"])
    output += record("b" * 40, b"1600000000", b"Merge branch x\n", [])
    commits = parse_log(output, NONCE)
    assert commits == [
        Commit(HASH, 1700000000, "Fix the parser", "It failed on NUL.", ("a.py",), 1),
        Commit("b" * 40, 1600000000, "Merge branch x", "", (), 0),
    ]


def test_a_message_cannot_forge_a_record_without_the_nonce() -> None:
    forged = b"\0\x1eDS4-" + b"f" * 16 + b"\0" + b"c" * 40 + b"\x001\x00evil"
    commits = parse_log(record(HASH, b"1", b"subject\n\n" + forged, [b"x.py"]), NONCE)
    assert [c.hash for c in commits] == [HASH]


def test_a_record_cut_by_a_bound_is_skipped() -> None:
    whole = record(HASH, b"1", b"first", [b"a.py"]) + record("b" * 40, b"2", b"second", [])
    assert [c.hash for c in parse_log(whole[: len(whole) - 30], NONCE)] == [HASH]


def test_hostile_text_is_decoded_cleaned_and_bounded() -> None:
    message = b"Subj\xff\xfe with \x1b[31mescape\x07\n\n" + "é".encode() * MAX_BODY_BYTES
    files = [b"ok.py", b"bad-\xff.py", b"x" * 5000] + [b"f%d" % i for i in range(500)]
    (commit,) = parse_log(record(HASH, b"5", message, files), NONCE)
    assert commit.subject == "Subj\ufffd\ufffd with [31mescape"
    assert len(commit.body.encode()) <= MAX_BODY_BYTES and set(commit.body) == {"é"}
    assert commit.files[:2] == ("ok.py", "bad-\ufffd.py")  # the 5000-char name is left out
    assert len(commit.files) == MAX_FILES_PER_COMMIT and commit.files_total == 503


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.lists(st.binary(max_size=80), max_size=5))
def test_the_parser_never_raises_on_arbitrary_bytes(noise: bytes, parts: list[bytes]) -> None:
    """Any bytes, alone or spliced between valid records: no exception, every commit sane."""
    output = noise + b"".join(record(HASH, b"1", part, [part]) + part for part in parts)
    for commit in parse_log(output, NONCE):
        assert len(commit.hash) == 40 and commit.committed_at >= 0
        assert "\0" not in commit.subject + commit.body + "".join(commit.files)
        assert len(commit.subject) <= MAX_SUBJECT_CHARS
        assert len(commit.body.encode("utf-8", "surrogatepass")) <= MAX_BODY_BYTES
        assert len(commit.files) <= MAX_FILES_PER_COMMIT <= 200


def test_split_message_drops_trailers_and_joins_the_first_paragraph() -> None:
    subject, body = split_message(
        "Fix timeouts\nin the pool\n\nWhy: slow.\n\nSigned-off-by: A <a@x>\nCo-authored-by: B"
        " <b@y>\n"
    )
    assert (subject, body) == ("Fix timeouts in the pool", "Why: slow.")


def test_log_format_has_no_signature_placeholder() -> None:
    assert "%G" not in log_format(NONCE) and "%N" not in log_format(NONCE)


# ----------------------------------------------------------------------------- Git


def test_read_commits_lists_newest_first_with_paths(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "r")
    first = commit_file(root, "src/a.py", "a\n", "Add a")
    second = commit_file(root, "docs/weird name\twith tab.md", "b\n", "Docs: b")
    log = read_commits(root, limit=10)
    assert log.complete
    assert [c.hash for c in log.commits] == [second, first]
    assert log.commits[0].files == ("docs/weird name\twith tab.md",)
    assert head_commit(root) == second
    assert is_ancestor(root, first, second) and not is_ancestor(root, second, first)
    assert not is_ancestor(root, "0" * 40, second)  # unknown commit: a rewrite
    assert [c.hash for c in read_commits(root, limit=10, since=first).commits] == [second]
    assert [c.hash for c in read_commits(root, limit=1).commits] == [second]


def test_a_folder_below_the_top_reads_its_own_commits_with_relative_paths(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "r")
    inside = commit_file(root, "pkg/mod.py", "x\n", "Change pkg")
    commit_file(root, "other/y.py", "y\n", "Change other")
    assert folder_prefix(root / "pkg") == "pkg/"
    log = read_commits(root / "pkg", limit=10, folder_only=True)
    assert [(c.hash, c.files) for c in log.commits] == [(inside, ("mod.py",))]


def test_no_commit_yet_and_bad_arguments(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "r")
    assert head_commit(root) is None
    with pytest.raises(ValueError, match="limit"):
        read_commits(root, limit=0)
    with pytest.raises(ValueError, match="since"):
        read_commits(root, limit=1, since="HEAD~1")
    with pytest.raises(GitError):
        head_commit(tmp_path)  # not a repository


def test_output_is_bounded_in_bytes(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "r")
    for number in range(30):
        commit_file(root, f"f{number}.py", f"{number}\n", f"Commit {number} " + "x" * 200)
    log = read_commits(root, limit=100, max_bytes=2000)
    assert not log.complete and 0 < len(log.commits) < 30
    assert log.commits[0].subject.startswith("Commit 29")  # the newest are kept


def test_a_huge_message_and_file_list_from_real_git(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "r")
    for number in range(MAX_FILES_PER_COMMIT + 20):
        (root / f"file{number:03}.txt").write_text("x")
    message = tmp_path / "message"
    message.write_bytes(b"Huge\n\n" + b"word " * 50_000 + b"\xff\xfe")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-F", str(message))
    (commit,) = read_commits(root, limit=5).commits
    assert commit.subject == "Huge" and len(commit.body.encode()) <= MAX_BODY_BYTES
    assert commit.files_total == MAX_FILES_PER_COMMIT + 20
    assert len(commit.files) == MAX_FILES_PER_COMMIT


def test_a_stalled_git_is_stopped_by_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `git` that writes some output and then hangs: the run ends at the timeout with what
    was read (`complete` False); one that writes nothing raises a timed-out `GitError`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text('#!/bin/sh\nprintf "$DS4_TEST_OUT"\nexec sleep 30\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DS4_TEST_OUT", "partial")
    output, complete = run_git_bounded(tmp_path, "log", max_bytes=1000, timeout_s=0.5)
    assert (output, complete) == (b"partial", False)
    monkeypatch.setenv("DS4_TEST_OUT", "")
    with pytest.raises(GitError) as raised:
        run_git_bounded(tmp_path, "log", max_bytes=1000, timeout_s=0.3)
    assert raised.value.timed_out


# ----------------------------------------------------------------------------- hostile config


def _signed_commit(root: Path) -> str:
    """A commit object with a (fake) PGP signature on top of HEAD: showing its signature
    would run `gpg.program`."""
    head = git(root, "rev-parse", "HEAD").strip()
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    body = (
        f"tree {tree}\nparent {head}\n"
        "author T <t@example.invalid> 1700000000 +0000\n"
        "committer T <t@example.invalid> 1700000000 +0000\n"
        "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n"
        " -----END PGP SIGNATURE-----\n\nSigned change of the invoice totals\n"
    )
    made = subprocess.run(
        ["git", "-C", str(root), "hash-object", "-t", "commit", "-w", "--stdin"],
        input=body.encode(),
        capture_output=True,
        check=True,
    )
    oid = made.stdout.decode().strip()
    git(root, "update-ref", "HEAD", oid)
    return oid


def test_a_hostile_repository_configuration_never_runs_a_program(tmp_path: Path) -> None:
    """GPG (log.showSignature on a signed commit), external diff, textconv, filters, pager,
    mailmap and order files are configured; reading the history runs none of them."""
    root = tmp_path / "project"
    root.mkdir()
    marker = tmp_path / "PWNED"
    git_dir = make_trapped_repository(root, marker)
    signed = _signed_commit(root)
    # The trap is armed: plain `git log` verifies the signature with gpg.program.
    subprocess.run(
        ["git", "-C", str(root), "--no-pager", "log", "-1"], capture_output=True, timeout=10
    )
    assert marker.exists() and "gpg.program" in marker.read_text()
    marker.unlink()
    fifo = tmp_path / "mailmap.fifo"
    os.mkfifo(fifo)
    for key, value in (
        ("mailmap.file", str(fifo)),
        ("log.mailmap", "true"),
        ("diff.orderFile", str(fifo)),
        ("core.pager", f"echo pager >> '{marker}'"),
        ("pager.log", f"echo pager.log >> '{marker}'"),
        ("diff.relative", "true"),
        ("color.ui", "always"),
        ("format.pretty", "%H"),
    ):
        subprocess.run(["git", "config", "--file", str(git_dir / "config"), key, value], check=True)

    log = read_commits(root, limit=10, timeout_s=10)
    log_below = read_commits(root / "src", limit=10, folder_only=True, timeout_s=10)
    assert is_ancestor(root, log.commits[-1].hash, signed)

    assert not marker.exists(), marker.read_text()
    assert log.complete and log.commits[0].hash == signed
    assert log.commits[0].subject == "Signed change of the invoice totals"
    assert set(log.commits[1].files) >= {"src/billing.py", "README.md"}
    assert [c.files for c in log_below.commits] == [("billing.py",)]


def test_the_module_names_its_git_options() -> None:
    assert "--no-show-signature" in commits_module.LOG_OPTIONS
    assert "log.showSignature=false" in commits_module.LOG_CONFIG
    assert {"--no-textconv", "--no-ext-diff", "--name-only", "-z"} <= set(
        commits_module.LOG_OPTIONS
    )
