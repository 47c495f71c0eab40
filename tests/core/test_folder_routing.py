"""`ProjectFolders`: folder names and which folder a path belongs to (property tests; the
end-to-end behaviour is in tests/lsp/test_project_folders.py)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from hypothesis import given
from hypothesis import strategies as st

from ds4_core.config import Config
from ds4_core.project.folders import ProjectFolders, folder_names

BASE = Path("/srv/ws")
SEGMENT = st.sampled_from(["a", "b", "src", "lib", "app"])
RELATIVE = st.lists(SEGMENT, min_size=0, max_size=3).map(lambda parts: "/".join(parts))


def _unused_store() -> object:
    raise AssertionError("routing must not touch the store")


@given(st.lists(st.tuples(st.sampled_from(["", "app", "x", "app (2)"]), RELATIVE), max_size=6))
def test_folder_names_are_unique_and_keep_the_clients_where_free(
    folders: list[tuple[str, str]],
) -> None:
    roots = [BASE / rel for _name, rel in folders]
    names = folder_names(roots, [name or None for name, _rel in folders])
    assert len(set(names)) == len(names)
    assert all(name for name in names)
    if folders and folders[0][0]:
        assert names[0] == folders[0][0]  # the first folder always gets its own name


@given(
    st.lists(RELATIVE, min_size=1, max_size=5, unique=True),
    st.lists(SEGMENT, min_size=1, max_size=4),
)
def test_a_path_belongs_to_the_deepest_folder_that_contains_it(
    folder_rels: list[str], file_parts: list[str]
) -> None:
    folders = ProjectFolders(_unused_store, Config)  # type: ignore[arg-type]
    folders.set_folders([(None, BASE / rel) for rel in folder_rels], trusted=True)
    path = BASE.joinpath(*file_parts)
    inside = PurePosixPath(*file_parts)
    containing = [  # strictly inside: a folder's root itself is no file of it
        rel for rel in folder_rels if inside.is_relative_to(rel) and inside != PurePosixPath(rel)
    ]
    owner = folders.owner(str(path))
    if not containing:
        assert owner is None
    else:
        deepest = max(containing, key=lambda rel: len(PurePosixPath(rel or ".").parts))
        assert owner is not None and owner.root == (BASE / deepest).resolve()
        nested_in_owner = owner.workspace.nested
        rel_in_owner = path.relative_to(owner.root).as_posix()
        assert not any(rel_in_owner.startswith(f"{n}/") for n in nested_in_owner)


def test_a_relative_path_is_routed_to_every_folder_holding_it(tmp_path: Path) -> None:
    """`owners("src/app.py")`: the folders with a file there (not the outer folder when the
    path lies in a folder nested in it); every folder when none has it (deleted)."""
    outer, inner, other = tmp_path / "outer", tmp_path / "outer" / "src", tmp_path / "other"
    for root in (outer, other):
        (root / "src").mkdir(parents=True)
        (root / "src" / "app.py").write_text("x = 1\n")
    (other / "only.py").write_text("y = 2\n")
    folders = ProjectFolders(_unused_store, Config)  # type: ignore[arg-type]
    folders.set_folders([(None, outer), (None, other)], trusted=True)
    assert [f.root for f in folders.owners("src/app.py")] == [outer, other]
    assert [f.root for f in folders.owners("only.py")] == [other]
    assert [f.root for f in folders.owners("gone.py")] == [outer, other]
    assert [f.root for f in folders.owners(str(other / "only.py"))] == [other]
    folders.set_folders([(None, outer), (None, inner), (None, other)], trusted=True)
    assert [f.root for f in folders.owners("src/app.py")] == [other]  # outer leaves src/ out


def test_a_lock_in_any_folder_makes_the_combined_sync_locked() -> None:
    """The first failure names the error, but a later folder held by a lock still marks the
    whole sync `locked`, so the server's lock retry starts (`_combine`)."""
    from types import SimpleNamespace

    from ds4_core.project.folders import _combine
    from ds4_core.results import ProjectSyncResult

    broken = ProjectSyncResult(status="error", project_path="/a", error="disk full")
    held = ProjectSyncResult(status="error", project_path="/b", error="locked", locked=True)
    folders = [SimpleNamespace(name="a"), SimpleNamespace(name="b")]
    combined = _combine(
        [(folders[0], broken, None), (folders[1], held, None)],  # type: ignore[list-item]
        several=True,
    )
    assert combined.status == "error" and combined.error == "a: disk full"
    assert combined.locked is True
    fine = ProjectSyncResult(status="ready", project_path="/c")
    alone = _combine(
        [(folders[0], broken, None), (folders[1], fine, None)],  # type: ignore[list-item]
        several=True,
    )
    assert alone.locked is None
