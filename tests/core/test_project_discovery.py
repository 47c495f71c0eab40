"""Which project files exist (docs/reference.md §3.9, "Discovery"), with and without Git.

The oracle for ignore rules is Git itself: `git ls-files -co --exclude-standard` run on the same
tree. Every test runs Git with a private HOME and no system or global configuration, so the
user's own ignore files cannot change the answer.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from git_repos import git, isolate_git
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ds4_core.project.discovery import (
    Discovery,
    ProjectRootError,
    discover_project,
)


@pytest.fixture(autouse=True)
def isolated_git(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME; Git reads no system or global configuration; commits need no setup."""
    return isolate_git(tmp_path_factory.mktemp("home"), monkeypatch)


def git_lists(root: Path) -> set[str]:
    """What Git itself calls the project: tracked plus untracked-but-not-ignored files."""
    output = git(root, "-c", "core.quotepath=off", "ls-files", "-co", "--exclude-standard", "-z")
    return {path for path in output.split("\0") if path}


def write_tree(root: Path, files: Mapping[str, str | bytes]) -> None:
    for rel_path, content in files.items():
        path = root / rel_path
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def listed(discovery: Discovery) -> set[str]:
    return {file.rel_path for file in discovery.files}


# A tree that exercises every ignore feature at once. Expected outcomes are noted per line.
IGNORE_TREE: dict[str, str] = {
    ".gitignore": "\n".join(
        [
            "# comment line",
            "*.log",  # any level
            "!keep.log",  # negation re-includes
            "/top-only.txt",  # anchored: only at the root
            "logs/",  # directory exclusion...
            "!logs/important.txt",  # ...a re-include inside it does not count
            "docs/**/draft.md",  # ** in the middle (zero or more directories)
            "gen/**",  # ** at the end: everything inside gen
            "!gen/README.md",  # gen itself is not excluded, so this re-include works
            "tmp*/",  # directory-only glob
            "\\#literal.txt",  # escaped #
            "trailing.txt   ",  # trailing spaces are ignored
        ]
    )
    + "\n",
    "a.log": "x",
    "keep.log": "x",
    "sub/b.log": "x",
    "sub/keep.log": "x",
    "top-only.txt": "x",
    "sub/top-only.txt": "x",
    "logs/important.txt": "x",
    "logs/other.txt": "x",
    "docs/draft.md": "x",
    "docs/a/b/draft.md": "x",
    "docs/a/final.md": "x",
    "gen/README.md": "x",
    "gen/out.py": "x",
    "gen/deep/out.py": "x",
    "tmp1/file.txt": "x",
    "tmpfile.txt": "x",  # a file, not a directory: kept
    "#literal.txt": "x",
    "trailing.txt": "x",
    "nested/.gitignore": "*.txt\n!wanted.txt\n/local.md\n",
    "nested/a.txt": "x",
    "nested/wanted.txt": "x",
    "nested/local.md": "x",
    "nested/deeper/local.md": "x",  # /local.md is anchored to nested/
    "nested/deeper/b.txt": "x",  # the parent's *.txt applies at any depth below
    "nested/deeper/.gitignore": "!b.txt\n",  # ...and a deeper file overrides it
    "excluded-by-info.txt": "x",
    "src/main.py": "x",
    "src/日本語.py": "x",
}
INFO_EXCLUDE = "excluded-by-info.txt\n"


def test_walk_lists_exactly_what_git_lists(tmp_path: Path) -> None:
    write_tree(tmp_path, IGNORE_TREE)
    git(tmp_path, "init", "-q")
    (tmp_path / ".git" / "info" / "exclude").write_text(INFO_EXCLUDE)

    walked = discover_project(tmp_path, use_git=False)
    with_git = discover_project(tmp_path)

    assert listed(walked) == git_lists(tmp_path) == listed(with_git)
    assert walked.git is None and with_git.git is not None
    # The tree is not vacuous: each rule above took effect.
    assert listed(walked) == {
        ".gitignore",
        "keep.log",
        "sub/keep.log",
        "sub/top-only.txt",
        "docs/a/final.md",
        "gen/README.md",
        "tmpfile.txt",
        "nested/.gitignore",
        "nested/wanted.txt",
        "nested/deeper/local.md",
        "nested/deeper/b.txt",
        "nested/deeper/.gitignore",
        "src/main.py",
        "src/日本語.py",
    }
    assert [file.rel_path for file in walked.files] == sorted(listed(walked))


def test_walk_applies_the_gitignore_files_above_a_subdirectory_root(tmp_path: Path) -> None:
    write_tree(tmp_path, IGNORE_TREE)
    git(tmp_path, "init", "-q")
    root = tmp_path / "nested"
    assert listed(discover_project(root, use_git=False)) == git_lists(root)
    assert listed(discover_project(root)) == git_lists(root)


def test_malformed_ignore_line_is_skipped_and_the_rest_still_applies(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {
            ".gitignore": "first.txt\n\\\n!\nlast.txt\n",  # line 2 "\" and line 3 "!" are bad
            "first.txt": "x",
            "last.txt": "x",
            "kept.txt": "x",
        },
    )
    git(tmp_path, "init", "-q")

    walked = discover_project(tmp_path, use_git=False)

    assert listed(walked) == {".gitignore", "kept.txt"} == git_lists(tmp_path)
    assert any(warning.startswith(".gitignore:2:") for warning in walked.warnings)
    assert any(warning.startswith(".gitignore:3:") for warning in walked.warnings)


def test_crlf_and_bom_in_ignore_files_are_read_like_git(tmp_path: Path) -> None:
    write_tree(
        tmp_path,
        {".gitignore": b"\xef\xbb\xbfbom.txt\r\ncrlf.txt\r\n", "bom.txt": "x", "crlf.txt": "x"},
    )
    git(tmp_path, "init", "-q")
    assert listed(discover_project(tmp_path, use_git=False)) == {".gitignore"}
    assert git_lists(tmp_path) == {".gitignore"}


TRAILING = ["", " ", "  ", "\t", " \t", "\t ", "\\ ", "\\\t", "\t\\ ", "\f", "\v", "\xa0"]
"""Endings of ignore lines and file names: Git trims unescaped trailing spaces only."""


def test_a_trailing_tab_in_an_ignore_line_is_part_of_the_pattern(tmp_path: Path) -> None:
    write_tree(tmp_path, {".gitignore": "build\t\nlogs \n", "build": "x", "logs": "x"})
    git(tmp_path, "init", "-q")
    assert listed(discover_project(tmp_path, use_git=False)) == {".gitignore", "build"}
    assert git_lists(tmp_path) == {".gitignore", "build"}


@settings(max_examples=40, deadline=None)
@given(
    lines=st.lists(st.tuples(st.sampled_from(["x", "!x", "x*", "/x"]), st.sampled_from(TRAILING)),
                   min_size=1, max_size=3),
    names=st.sets(st.sampled_from(TRAILING), min_size=1),
)  # fmt: skip
def test_trailing_whitespace_in_ignore_lines_is_read_like_git(
    lines: list[tuple[str, str]], names: set[str]
) -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp).resolve()
        ignore = "".join(pattern + tail + "\n" for pattern, tail in lines)
        write_tree(root, {".gitignore": ignore, **{"x" + name: "x" for name in names}})
        git(root, "init", "-q")
        assert listed(discover_project(root, use_git=False)) == git_lists(root)


# --- property: the walk agrees with Git on random trees --------------------------------------

DIRECTORIES = ["", "a", "b", "a/b", "b/a", "a/b/a"]
FILE_NAMES = ["x", "y.txt", "z.md"]
SEGMENTS = ["a", "b", "x", "y.txt", "*", "**", "*.txt", "?", "[xy]*", "z.*", "b*"]


@st.composite
def ignore_pattern(draw: st.DrawFn) -> str:
    segments = draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3))
    negate = draw(st.sampled_from(["", "", "!"]))
    anchor = draw(st.sampled_from(["", "", "/"]))
    trailing = draw(st.sampled_from(["", "", "/"]))
    return negate + anchor + "/".join(segments) + trailing


@st.composite
def project_tree(draw: st.DrawFn) -> tuple[dict[str, str], str]:
    files = draw(
        st.sets(
            st.builds(lambda d, n: f"{d}/{n}" if d else n, st.sampled_from(DIRECTORIES),
                      st.sampled_from(FILE_NAMES)),
            min_size=1,
            max_size=10,
        )
    )  # fmt: skip
    tree = dict.fromkeys(files, "x")
    ignore_dirs = draw(st.sets(st.sampled_from(DIRECTORIES), max_size=3))
    for directory in ignore_dirs:
        patterns = draw(st.lists(ignore_pattern(), min_size=1, max_size=4))
        tree[f"{directory}/.gitignore" if directory else ".gitignore"] = "\n".join(patterns) + "\n"
    exclude = "\n".join(draw(st.lists(ignore_pattern(), max_size=2))) + "\n"
    return tree, exclude


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=project_tree())
def test_walk_agrees_with_git_on_random_trees(case: tuple[dict[str, str], str]) -> None:
    tree, exclude = case
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp).resolve()
        write_tree(root, tree)
        git(root, "init", "-q")
        (root / ".git" / "info" / "exclude").write_text(exclude)
        assert listed(discover_project(root, use_git=False)) == git_lists(root)


# --- symbolic links and the root -------------------------------------------------------------


@pytest.fixture
def linked_tree(tmp_path: Path) -> Iterator[Path]:
    """A project with links out of the root, a link loop and a link to a file inside."""
    outside = tmp_path / "outside"
    write_tree(outside, {"secret-notes.md": "outside the root", "dir/inner.py": "x = 1\n"})
    root = tmp_path / "project"
    write_tree(root, {"main.py": "print(1)\n", "pkg/mod.py": "x = 2\n"})
    (root / "to-outside-file.md").symlink_to(outside / "secret-notes.md")
    (root / "to-outside-dir").symlink_to(outside / "dir", target_is_directory=True)
    (root / "pkg" / "loop").symlink_to(root, target_is_directory=True)
    (root / "self").symlink_to(".", target_is_directory=True)
    (root / "alias.py").symlink_to("main.py")
    yield root


@pytest.mark.parametrize("use_git", [False, True])
def test_symlinks_are_reported_never_followed(linked_tree: Path, use_git: bool) -> None:
    if use_git:
        git(linked_tree, "init", "-q")

    discovery = discover_project(linked_tree, use_git=use_git)

    assert listed(discovery) == {"main.py", "pkg/mod.py"}
    symlinks = {path for path, reason in discovery.skipped if reason == "symlink"}
    assert symlinks == {"to-outside-file.md", "to-outside-dir", "pkg/loop", "self", "alias.py"}
    for file in discovery.files:
        assert (linked_tree / file.rel_path).resolve().is_relative_to(linked_tree)


def test_tracked_file_under_a_directory_replaced_by_a_link_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_tree(outside, {"a/x.txt": "outside"})
    root = tmp_path / "project"
    write_tree(root, {"a/x.txt": "inside", "b.txt": "x"})
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "init")
    (root / "a" / "x.txt").unlink()
    (root / "a").rmdir()
    (root / "a").symlink_to(outside / "a", target_is_directory=True)

    discovery = discover_project(root)

    assert "a/x.txt" in git(root, "ls-files")  # Git still lists it from the index
    assert listed(discovery) == {"b.txt"}
    assert ("a/x.txt", "symlink") in discovery.skipped


def test_filesystem_root_is_refused() -> None:
    with pytest.raises(ProjectRootError, match="filesystem root"):
        discover_project(Path("/"))


def test_home_directory_itself_is_refused_but_a_project_inside_it_is_not(
    isolated_git: Path,
) -> None:
    with pytest.raises(ProjectRootError, match="home directory"):
        discover_project(isolated_git)
    project = isolated_git / "code" / "app"
    write_tree(project, {"main.py": "x"})
    assert listed(discover_project(project)) == {"main.py"}


def test_missing_or_non_directory_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ProjectRootError, match="not a directory"):
        discover_project(tmp_path / "file.txt")
    with pytest.raises(ValueError, match="cannot index project root"):
        discover_project(tmp_path / "missing")


# --- bounds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("use_git", [False, True])
def test_max_files_keeps_the_first_files_in_path_order(tmp_path: Path, use_git: bool) -> None:
    write_tree(tmp_path, {f"f{index}.txt": "x" for index in range(5)})
    if use_git:
        git(tmp_path, "init", "-q")

    discovery = discover_project(tmp_path, max_files=3, use_git=use_git)

    assert [file.rel_path for file in discovery.files] == ["f0.txt", "f1.txt", "f2.txt"]
    assert discovery.truncated
    assert any("f3.txt" in warning for warning in discovery.warnings)


def test_max_total_bytes_stops_before_the_file_that_would_exceed_it(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.txt": "x" * 400, "b.txt": "x" * 400, "c.txt": "x" * 400})

    discovery = discover_project(tmp_path, max_total_bytes=1000, use_git=False)

    assert [file.rel_path for file in discovery.files] == ["a.txt", "b.txt"]
    assert sum(file.size_bytes for file in discovery.files) == 800
    assert discovery.truncated


def test_oversized_file_is_skipped_and_the_listing_goes_on(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.txt": "x" * 2000, "b.txt": "small"})

    discovery = discover_project(tmp_path, max_file_bytes=1000, use_git=False)

    assert listed(discovery) == {"b.txt"}
    assert discovery.skipped == [("a.txt", "oversized")]
    assert not discovery.truncated


def test_within_bounds_is_not_truncated(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.txt": "x" * 10, "b.txt": "x" * 10})
    discovery = discover_project(tmp_path, max_files=2, max_total_bytes=20, use_git=False)
    assert listed(discovery) == {"a.txt", "b.txt"} and not discovery.truncated


# --- exclusions by name, nested repositories ---------------------------------------------------

EXCLUSION_TREE = {
    "src/app.js": "x",
    "node_modules/left-pad/index.js": "x",
    "node_modules/left-pad/package.json": "x",
    "web/dist/bundle.js": "x",
    "package-lock.json": "{}",
    ".env": "KEY=1",
    "static/app.min.js": "x",
    "static/app.js.map": "{}",
    "img/logo.png": "x",
}
EXPECTED_SKIPPED = [
    (".env", "secret file name"),
    ("img/logo.png", "binary extension .png"),
    ("node_modules/", "ignored directory node_modules"),
    ("package-lock.json", "lockfile"),
    ("static/app.js.map", "source map"),
    ("static/app.min.js", "minified"),
    ("web/dist/", "ignored directory dist"),
]


@pytest.mark.parametrize("use_git", [False, True])
def test_excluded_names_are_skipped_with_reasons_in_both_modes(
    tmp_path: Path, use_git: bool
) -> None:
    write_tree(tmp_path, EXCLUSION_TREE)
    if use_git:
        git(tmp_path, "init", "-q")
        git(tmp_path, "add", "-f", "node_modules/left-pad/index.js")

    discovery = discover_project(tmp_path, use_git=use_git)

    assert listed(discovery) == {"src/app.js"}
    assert discovery.skipped == EXPECTED_SKIPPED


def test_nested_repository_is_not_entered(tmp_path: Path) -> None:
    write_tree(tmp_path, {"main.py": "x", "third_party/lib/code.py": "x"})
    git(tmp_path, "init", "-q")
    git(tmp_path / "third_party" / "lib", "init", "-q")

    walked = discover_project(tmp_path, use_git=False)
    with_git = discover_project(tmp_path)

    assert listed(walked) == listed(with_git) == {"main.py"}
    assert ("third_party/lib/", "nested repository") in walked.skipped
    assert ("third_party/lib/", "nested repository") in with_git.skipped


# --- Git state -------------------------------------------------------------------------------


def test_git_state_and_per_file_flags(tmp_path: Path) -> None:
    write_tree(tmp_path, {"clean.py": "a", "edited.py": "b", "app/sub.py": "c"})
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "init")
    head = git(tmp_path, "rev-parse", "HEAD").strip()
    (tmp_path / "edited.py").write_text("changed")
    (tmp_path / "new.py").write_text("new")

    discovery = discover_project(tmp_path)

    assert discovery.git is not None
    assert discovery.git.branch == "main"
    assert discovery.git.head == head
    assert discovery.git.dirty
    assert discovery.git.changed_paths == ("edited.py", "new.py")
    flags = {file.rel_path: (file.tracked, file.modified) for file in discovery.files}
    assert flags == {
        "app/sub.py": (True, False),
        "clean.py": (True, False),
        "edited.py": (True, True),
        "new.py": (False, True),
    }


def test_git_state_of_a_subdirectory_root_uses_root_relative_paths(tmp_path: Path) -> None:
    write_tree(tmp_path, {"top.py": "a", "app/sub.py": "b"})
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "init")
    (tmp_path / "top.py").write_text("changed")
    (tmp_path / "app" / "sub.py").write_text("changed")

    discovery = discover_project(tmp_path / "app")

    assert listed(discovery) == {"sub.py"}
    assert discovery.git is not None and discovery.git.changed_paths == ("sub.py",)


def test_fresh_repository_has_no_head_and_a_detached_head_no_branch(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.py": "x"})
    git(tmp_path, "init", "-q")
    fresh = discover_project(tmp_path)
    assert fresh.git is not None
    assert fresh.git.head is None and fresh.git.branch == "main"

    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "init")
    git(tmp_path, "checkout", "-q", "--detach")
    detached = discover_project(tmp_path)
    assert detached.git is not None
    assert detached.git.branch is None and detached.git.head is not None
    assert not detached.git.dirty and detached.git.changed_paths == ()


def test_without_git_on_path_the_walk_gives_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tree(tmp_path, IGNORE_TREE)
    git(tmp_path, "init", "-q")
    expected = git_lists(tmp_path)
    empty_bin = tmp_path / "empty-bin"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))

    discovery = discover_project(tmp_path)

    assert discovery.git is None
    assert listed(discovery) == expected
    assert discovery.warnings == []  # no Git is normal, not a problem


def test_outside_a_repository_git_is_not_used_and_nothing_is_reported(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.py": "x", ".gitignore": "b.py\n", "b.py": "x"})
    discovery = discover_project(tmp_path)
    assert discovery.git is None
    assert listed(discovery) == {".gitignore", "a.py"}
    assert discovery.warnings == []


def test_global_ignore_file_applies_to_the_walk_as_to_git(
    tmp_path: Path, isolated_git: Path
) -> None:
    write_tree(isolated_git / ".config" / "git", {"ignore": "*.swp\n"})
    project = tmp_path / "p"
    write_tree(project, {"a.py": "x", "a.py.swp": "x"})
    git(project, "init", "-q")
    assert listed(discover_project(project, use_git=False)) == {"a.py"} == git_lists(project)


def test_files_carry_lstat_size_and_mtime(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.py": "hello"})
    os.utime(tmp_path / "a.py", ns=(1_700_000_000_000_000_000, 1_700_000_000_123_456_789))
    (file,) = discover_project(tmp_path, use_git=False).files
    assert (file.size_bytes, file.mtime_ns) == (5, 1_700_000_000_123_456_789)
    assert (file.tracked, file.modified) == (False, False)


def test_a_linked_root_is_listed_under_its_canonical_path(tmp_path: Path) -> None:
    write_tree(tmp_path / "real", {"a.py": "x"})
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    discovery = discover_project(tmp_path / "alias", use_git=False)
    assert discovery.root == (tmp_path / "real").resolve()
    assert listed(discovery) == {"a.py"}


# --- A root that an enclosing repository ignores ---------------------------------------------


@pytest.mark.parametrize("use_git", [True, False])
def test_root_ignored_by_an_enclosing_repository_is_listed_with_its_own_rules(
    tmp_path: Path, use_git: bool
) -> None:
    # Like pyenv: the repository at the top ignores `/versions`, the workspace is below it.
    write_tree(
        tmp_path,
        {
            ".gitignore": "/versions\n*.py\n",  # the enclosing `*.py` must not apply either
            "tool.py": "x",
            "versions/3.11/lib/.gitignore": "*.log\n",
            "versions/3.11/lib/os.py": "x",
            "versions/3.11/lib/debug.log": "x",
            "versions/3.11/lib/sub/re.py": "x",
        },
    )
    git(tmp_path, "init", "-q")
    root = tmp_path / "versions" / "3.11" / "lib"
    assert git_lists(root) == set()  # what Git alone would give
    discovery = discover_project(root, use_git=use_git)
    assert listed(discovery) == {".gitignore", "os.py", "sub/re.py"}
    assert discovery.git is None
    assert discovery.warnings == [
        f"the enclosing Git repository at '{tmp_path.resolve()}' ignores this folder, so its"
        " ignore rules were not applied; files are listed using only the ignore files in this"
        " folder and below"
    ]


def test_root_under_a_dotfiles_repository_that_ignores_everything(tmp_path: Path) -> None:
    # A dotfiles repository at ~ with `*` in its .gitignore; the project has no repository.
    write_tree(
        tmp_path,
        {".gitignore": "*\n!.gitignore\n!.bashrc\n", ".bashrc": "x", "src/proj/app.py": "x"},
    )
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".gitignore", ".bashrc")
    git(tmp_path, "commit", "-q", "-m", "dotfiles")
    discovery = discover_project(tmp_path / "src" / "proj")
    assert listed(discovery) == {"app.py"}
    assert len(discovery.warnings) == 1
    assert "ignores this folder" in discovery.warnings[0]
    assert str(tmp_path.resolve()) in discovery.warnings[0]


def test_ignored_root_with_tracked_files_keeps_gits_answer(tmp_path: Path) -> None:
    write_tree(tmp_path, {".gitignore": "/gen\n", "gen/a.py": "x", "gen/b.py": "x"})
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-f", "gen/a.py")
    discovery = discover_project(tmp_path / "gen")
    assert listed(discovery) == {"a.py"} == git_lists(tmp_path / "gen")
    assert discovery.git is not None
    assert discovery.warnings == []


def test_a_subdirectory_that_is_not_ignored_gives_no_warning(tmp_path: Path) -> None:
    write_tree(tmp_path, {".gitignore": "*.log\n", "sub/a.py": "x", "sub/b.log": "x"})
    git(tmp_path, "init", "-q")
    discovery = discover_project(tmp_path / "sub")
    assert listed(discovery) == {"a.py"}
    assert discovery.git is not None
    assert discovery.warnings == []


@pytest.mark.parametrize("use_git", [True, False])
def test_everything_ignored_gives_a_warning_saying_why(tmp_path: Path, use_git: bool) -> None:
    write_tree(tmp_path, {".gitignore": "*\n", "a.py": "x", "b/c.py": "x"})
    git(tmp_path, "init", "-q")
    discovery = discover_project(tmp_path, use_git=use_git)
    assert discovery.files == []
    assert len(discovery.warnings) == 1
    assert "ignore rules" in discovery.warnings[0]
    assert "exclude all of them" in discovery.warnings[0]


def test_everything_skipped_gives_a_warning_with_the_reasons(tmp_path: Path) -> None:
    write_tree(tmp_path, {"package-lock.json": "{}", "logo.png": b"\x89PNG"})
    discovery = discover_project(tmp_path)
    assert discovery.files == []
    (warning,) = discovery.warnings
    assert "all 2 candidates were skipped" in warning
    assert "lockfile" in warning and "binary extension .png" in warning


def test_an_empty_folder_gives_no_warning(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "sub").mkdir()
    assert discover_project(tmp_path / "empty").warnings == []


@pytest.mark.parametrize("with_git", ["git", "walk"])
def test_a_name_that_is_not_utf8_is_skipped_with_a_reason(tmp_path: Path, with_git: str) -> None:
    """A file, and a directory, whose names hold a byte that is not UTF-8 are skipped (reason
    `name not UTF-8`, the byte shown as `\\xff`) and named in one warning; the rest is listed,
    with Git (tracked and untracked) and with the walk."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    (root / os.fsdecode(b"b\xff.py")).write_bytes(b"y = 2\n")
    (root / os.fsdecode(b"d\xfe")).mkdir()
    (root / os.fsdecode(b"d\xfe") / "c.py").write_bytes(b"z = 3\n")
    if with_git == "git":
        git(root, "init", "-q")
        git(root, "add", "a.py", os.fsdecode(b"b\xff.py"))
        git(root, "commit", "-q", "-m", "init")
    found = discover_project(root, use_git=with_git == "git")
    assert [f.rel_path for f in found.files] == ["a.py"]
    assert found.skipped == [("b\\xff.py", "name not UTF-8"), ("d\\xfe/c.py", "name not UTF-8")]
    (warning,) = found.warnings
    assert "2 path(s)" in warning and "b\\xff.py" in warning and "d\\xfe/c.py" in warning
    if with_git == "git":
        assert found.git is not None and found.git.head is not None


def test_a_name_with_a_high_surrogate_is_shown_escaped_not_raised() -> None:
    """Windows decodes file names with `surrogatepass`, so a name may hold U+D800..U+DBFF,
    which no byte stands for: messages show it escaped instead of failing the folder."""
    from ds4_core.project.discovery import printable_name

    assert printable_name("a\ud800b.py") == "a\\ud800b.py"
    assert printable_name("b\udcff.py") == "b\\xff.py"
