"""Keeping the project index in sync: hashes, incremental rule, live buffers, FTS search.

Every test uses a real SQLite file and a real project directory under `tmp_path`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from ds4_core.engine import ContextEngine
from ds4_core.project import index as index_module
from ds4_core.project.discovery import Discovery, GitState, discover_project
from ds4_core.project.index import (
    LIVE_MTIME_NS,
    STALE_GENERATIONS_KEPT,
    file_state,
    index_counts,
    language_for,
    live_hash,
    load_snippets,
    project_state,
    snippets_by_id,
    sync_project,
)
from ds4_core.project.windows import project_fts_query, snippet_id
from ds4_core.requests import ManifestRequest, PlanRequest, RetrieveRequest, SessionRef
from ds4_core.store import Store, open_store

SHIPPING = """import { Rate } from "./rate";

export async function getShippingMethod(order) {
  return order.rates[0];
}
"""

HTTP = """def parse_http_response(raw: bytes) -> dict:
    head, _, body = raw.partition(b"\\r\\n\\r\\n")
    return {"head": head, "body": body}
"""

NOTES = "# 設計メモ\n\nデータベース接続はプールから取得する。\n"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(tmp_path / "db" / "context.db") as opened:
        yield opened


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "shipping.ts").write_text(SHIPPING)
    (root / "src" / "http_util.py").write_text(HTTP)
    (root / "docs").mkdir()
    (root / "docs" / "notes.md").write_text(NOTES)
    return root


def write(path: Path, text: str, *, bump_ns: int = 1_000_000_000) -> None:
    """Write `text` and move the mtime forward, so a change is always visible by mtime."""
    before = path.stat().st_mtime_ns if path.exists() else time.time_ns()
    path.write_text(text)
    os.utime(path, ns=(before + bump_ns, before + bump_ns))


def discover(root: Path) -> Discovery:
    return discover_project(root, use_git=False)


def search(store: Store, project_path: str, term: str) -> list[tuple[str, int]]:
    """(file_path, start_line) of current snippets matching the FTS phrases for `term`."""
    query = project_fts_query([term])
    assert query is not None
    return (
        store.connection()
        .execute(
            "SELECT s.file_path, s.start_line FROM project_snippets_fts AS f "
            "JOIN project_snippets AS s ON s.rowid = f.rowid "
            "WHERE project_snippets_fts MATCH ? AND s.project_path = ? AND s.stale = 0 "
            "ORDER BY bm25(project_snippets_fts), s.file_path",
            (query, project_path),
        )
        .fetchall()
    )


def test_first_sync_indexes_every_file_with_its_sha256(store: Store, project: Path) -> None:
    result = sync_project(store, discover(project))
    root = str(project.resolve())
    assert result.project_path == root
    assert (result.files_indexed, result.files_unchanged, result.files_deleted) == (3, 0, 0)
    assert result.snippets == 3 and not result.truncated
    state = file_state(store, root, "src/shipping.ts")
    assert state is not None and state.status == "current" and state.language == "typescript"
    assert state.content_hash == hashlib.sha256(SHIPPING.encode()).hexdigest()
    assert state.size_bytes == len(SHIPPING.encode())
    (snippet,) = load_snippets(store, root, "src/shipping.ts")
    assert (snippet.start_line, snippet.end_line) == (1, 5)
    assert snippet.content == SHIPPING.rstrip("\n")
    assert snippet.symbols == ("getShippingMethod",)
    assert snippet.snippet_id == snippet_id(root, "src/shipping.ts", state.content_hash, 1, 5)
    assert snippet.token_estimate == -(-len(snippet.content) // 4) + 48
    assert not snippet.stale
    assert project_state(store, root) is not None
    assert index_counts(store, root) == (3, 0, 3, 0)


def test_search_finds_identifier_sub_words_and_cjk_substrings(store: Store, project: Path) -> None:
    sync_project(store, discover(project))
    root = str(project.resolve())
    assert search(store, root, "shipping method") == [("src/shipping.ts", 1)]
    assert search(store, root, "http response") == [("src/http_util.py", 1)]
    assert search(store, root, "ベース接") == [("docs/notes.md", 1)]
    assert search(store, root, "プールから") == [("docs/notes.md", 1)]
    assert search(store, root, "接") == [("docs/notes.md", 1)]
    assert search(store, root, "method shipping") == []
    # Without the search_text column FTS5 could not find the first and third.
    conn = store.connection()
    only_content = conn.execute(
        "SELECT count(*) FROM project_snippets_fts WHERE project_snippets_fts MATCH ?",
        ('{content file_path symbols} : ("shipping method" OR "ベース接")',),
    ).fetchone()[0]
    assert only_content == 0


def test_an_unchanged_project_is_not_read_again(store: Store, project: Path) -> None:
    root = str(project.resolve())
    paths = ("docs/notes.md", "src/http_util.py", "src/shipping.ts")
    sync_project(store, discover(project))
    before = [load_snippets(store, root, path, include_stale=True) for path in paths]
    real_read = index_module.read_indexable
    index_module.read_indexable = None  # type: ignore[assignment]  # any read would fail
    try:
        again = sync_project(store, discover(project))
    finally:
        index_module.read_indexable = real_read
    assert (again.files_indexed, again.files_unchanged, again.snippets) == (0, 3, 0)
    assert before == [load_snippets(store, root, path, include_stale=True) for path in paths]


def test_a_changed_file_makes_its_old_snippets_stale(store: Store, project: Path) -> None:
    root = str(project.resolve())
    sync_project(store, discover(project))
    (old,) = load_snippets(store, root, "src/shipping.ts")
    write(project / "src" / "shipping.ts", SHIPPING.replace("rates[0]", "rates[1]"))
    result = sync_project(store, discover(project))
    assert (result.files_indexed, result.files_unchanged) == (1, 2)
    (new,) = load_snippets(store, root, "src/shipping.ts")
    assert new.snippet_id != old.snippet_id and "rates[1]" in new.content
    everything = load_snippets(store, root, "src/shipping.ts", include_stale=True)
    assert {(s.snippet_id, s.stale) for s in everything} == {
        (old.snippet_id, True),
        (new.snippet_id, False),
    }
    assert search(store, root, "rates") == [("src/shipping.ts", 1)]  # stale rows not returned
    assert index_counts(store, root).stale_snippets == 1


def test_a_deleted_file_is_marked_deleted(store: Store, project: Path) -> None:
    root = str(project.resolve())
    sync_project(store, discover(project))
    (project / "src" / "http_util.py").unlink()
    result = sync_project(store, discover(project))
    assert (result.files_deleted, result.files_unchanged) == (1, 2)
    state = file_state(store, root, "src/http_util.py")
    assert state is not None and state.status == "deleted"
    assert load_snippets(store, root, "src/http_util.py") == []
    assert search(store, root, "http response") == []
    assert sync_project(store, discover(project)).files_deleted == 0  # counted once
    write(project / "src" / "http_util.py", HTTP)  # back again: current, snippets revived
    back = sync_project(store, discover(project))
    assert back.files_indexed == 1
    assert search(store, root, "http response") == [("src/http_util.py", 1)]


def test_git_head_or_modified_flag_change_rereads_but_keeps_equal_content(
    store: Store, project: Path
) -> None:
    root = str(project.resolve())
    base = discover(project)
    git = GitState(branch="main", head="a" * 40, dirty=False, changed_paths=())
    sync_project(store, replace(base, git=git))
    ids = {s.snippet_id for s in load_snippets(store, root, "src/shipping.ts")}
    moved = sync_project(store, replace(base, git=replace(git, head="b" * 40)))
    assert (moved.files_indexed, moved.files_unchanged, moved.snippets) == (0, 3, 0)
    state = file_state(store, root, "src/shipping.ts")
    assert state is not None and state.git_commit == "b" * 40
    assert {s.snippet_id for s in load_snippets(store, root, "src/shipping.ts")} == ids
    stored = project_state(store, root)
    assert stored is not None and (stored.git_branch, stored.git_head) == ("main", "b" * 40)

    flagged = replace(
        base,
        git=replace(git, head="b" * 40, dirty=True, changed_paths=("src/shipping.ts",)),
        files=[replace(f, modified=f.rel_path == "src/shipping.ts") for f in base.files],
    )
    result = sync_project(store, flagged)
    assert (result.files_indexed, result.files_unchanged) == (0, 3)
    state = file_state(store, root, "src/shipping.ts")
    assert state is not None and state.modified
    stored = project_state(store, root)
    assert stored is not None and stored.dirty and stored.changed_paths == ("src/shipping.ts",)


def test_same_size_and_mtime_with_new_content_is_trusted_until_forced(
    store: Store, project: Path
) -> None:
    root = str(project.resolve())
    sync_project(store, discover(project))
    path = project / "src" / "shipping.ts"
    stat = path.stat()
    path.write_text(SHIPPING.replace("rates[0]", "rates[9]"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert sync_project(store, discover(project)).files_indexed == 0
    forced = sync_project(store, discover(project), force=True)
    assert forced.files_indexed == 3
    (snippet,) = load_snippets(store, root, "src/shipping.ts")
    assert "rates[9]" in snippet.content


def test_live_text_overrides_the_disk_until_the_buffer_closes(store: Store, project: Path) -> None:
    root = str(project.resolve())
    discovery = discover(project)
    sync_project(store, discovery)
    buffer = SHIPPING.replace("getShippingMethod", "getDeliveryWindow")
    live = {"src/shipping.ts": buffer}
    result = sync_project(store, discovery, live_text=live.get)
    assert result.files_indexed == 1
    state = file_state(store, root, "src/shipping.ts")
    assert state is not None and state.content_hash == live_hash(buffer)
    assert state.mtime_ns == LIVE_MTIME_NS
    assert search(store, root, "delivery window") == [("src/shipping.ts", 1)]
    assert sync_project(store, discovery, live_text=live.get).files_indexed == 0
    closed = sync_project(store, discovery)  # buffer closed unsaved: the disk is the truth
    assert closed.files_indexed == 1
    assert search(store, root, "shipping method") == [("src/shipping.ts", 1)]
    state = file_state(store, root, "src/shipping.ts")
    assert state is not None and state.mtime_ns > 0
    assert search(store, root, "delivery window") == []  # the buffer's snippets are stale


def test_live_text_with_a_secret_is_not_indexed(store: Store, project: Path) -> None:
    root = str(project.resolve())
    discovery = discover(project)
    sync_project(store, discovery)
    secret = 'password = "hunter2hunter2hunter2"\n'
    result = sync_project(store, discovery, live_text={"src/http_util.py": secret}.get)
    assert (result.files_deleted, result.files_skipped) == (1, 1)
    assert load_snippets(store, root, "src/http_util.py") == []
    text = "\n".join(
        s.content for s in load_snippets(store, root, "src/http_util.py", include_stale=True)
    )
    assert "hunter2" not in text


def test_a_file_that_now_holds_a_secret_is_dropped(store: Store, project: Path) -> None:
    root = str(project.resolve())
    sync_project(store, discover(project))
    write(project / "src" / "http_util.py", HTTP + 'token = "ghp_' + "x1" * 15 + '"\n')
    result = sync_project(store, discover(project))
    assert (result.files_deleted, result.files_skipped) == (1, 1)
    state = file_state(store, root, "src/http_util.py")
    assert state is not None and state.status == "deleted"


def test_only_limits_the_work_to_the_given_paths(store: Store, project: Path) -> None:
    root = str(project.resolve())
    sync_project(store, discover(project))
    write(project / "src" / "shipping.ts", SHIPPING + "// one\n")
    write(project / "src" / "http_util.py", HTTP + "# two\n")
    result = sync_project(store, discover(project), only=["src/shipping.ts"])
    assert (result.files_indexed, result.files_unchanged) == (1, 0)
    assert "// one" in load_snippets(store, root, "src/shipping.ts")[0].content
    assert "# two" not in load_snippets(store, root, "src/http_util.py")[0].content
    # absolute paths under the root are accepted too
    again = sync_project(store, discover(project), only=[str(project / "src" / "http_util.py")])
    assert again.files_indexed == 1


def test_only_marks_a_vanished_path_deleted_and_leaves_the_rest(
    store: Store, project: Path
) -> None:
    root = str(project.resolve())
    full = discover(project)
    sync_project(store, full)
    (project / "docs" / "notes.md").unlink()
    partial = replace(full, files=[], skipped=[])  # what an editor-driven partial sync sees
    result = sync_project(store, partial, only=["docs/notes.md"])
    assert result.files_deleted == 1
    state = file_state(store, root, "docs/notes.md")
    assert state is not None and state.status == "deleted"
    kept = file_state(store, root, "src/shipping.ts")
    assert kept is not None and kept.status == "current"


def test_a_truncated_discovery_does_not_delete_unlisted_files(store: Store, project: Path) -> None:
    root = str(project.resolve())
    full = discover(project)
    sync_project(store, full)
    (project / "docs" / "notes.md").unlink()
    capped = replace(full, files=full.files[-1:], truncated=True)  # src/shipping.ts only
    result = sync_project(store, capped)
    assert result.truncated and result.files_deleted == 1  # only the one really gone
    gone = file_state(store, root, "docs/notes.md")
    assert gone is not None and gone.status == "deleted"
    unlisted = file_state(store, root, "src/http_util.py")
    assert unlisted is not None and unlisted.status == "current"


def test_a_failed_write_leaves_the_previous_index_intact(store: Store, project: Path) -> None:
    root = str(project.resolve())
    sync_project(store, discover(project))
    before = {
        path: load_snippets(store, root, path) for path in ("src/shipping.ts", "src/http_util.py")
    }
    write(project / "src" / "shipping.ts", SHIPPING + "// changed\n")
    write(project / "src" / "http_util.py", HTTP + "# changed\n")
    conn = store.connection()
    conn.execute(
        "CREATE TEMP TRIGGER boom BEFORE INSERT ON project_snippets "
        "WHEN new.file_path = 'src/shipping.ts' BEGIN SELECT RAISE(ABORT, 'disk full'); END"
    )
    with pytest.raises(sqlite3.IntegrityError, match="disk full"):
        sync_project(store, discover(project))
    for path, snippets in before.items():
        assert load_snippets(store, root, path, include_stale=True) == snippets
        state = file_state(store, root, path)
        assert state is not None and state.content_hash == snippets[0].file_hash
    conn.execute("DROP TRIGGER boom")
    assert sync_project(store, discover(project)).files_indexed == 2


def test_stale_snippets_are_kept_for_recent_contents_only(store: Store, project: Path) -> None:
    root = str(project.resolve())
    path = project / "src" / "shipping.ts"
    sync_project(store, discover(project))
    (first,) = load_snippets(store, root, "src/shipping.ts")
    for n in range(6):
        write(path, SHIPPING + f"// edit {n}\n")
        sync_project(store, discover(project), only=["src/shipping.ts"])
    rows = load_snippets(store, root, "src/shipping.ts", include_stale=True)
    assert sum(1 for r in rows if not r.stale) == 1
    assert len({r.file_hash for r in rows if r.stale}) == STALE_GENERATIONS_KEPT
    assert first.snippet_id not in snippets_by_id(store, [first.snippet_id])
    # undo to a kept content: its snippet comes back without a new row
    write(path, SHIPPING + "// edit 4\n")
    sync_project(store, discover(project))
    (current,) = load_snippets(store, root, "src/shipping.ts")
    assert current.content.endswith("// edit 4")
    assert len(load_snippets(store, root, "src/shipping.ts", include_stale=True)) == len(rows)


def test_the_fts_index_stays_in_step_with_the_snippets(store: Store, project: Path) -> None:
    """After edits, reverts, deletions and a forced sync the external-content FTS index holds
    exactly what a rebuild from `project_snippets` would (fts5vocab row counts compared)."""
    path = project / "src" / "shipping.ts"
    sync_project(store, discover(project))
    for n in range(4):
        write(path, SHIPPING + f"// getRate{n} データ{n}\n")
        sync_project(store, discover(project))
    write(path, SHIPPING + "// getRate1 データ1\n")  # revert to a kept content
    sync_project(store, discover(project))
    (project / "docs" / "notes.md").unlink()
    sync_project(store, discover(project))
    sync_project(store, discover(project), force=True)
    conn = store.connection()
    vocab = "SELECT term, doc, cnt FROM project_snippets_fts_vocab ORDER BY term"
    before = conn.execute(vocab).fetchall()
    with store.write() as conn:
        conn.execute("INSERT INTO project_snippets_fts (project_snippets_fts) VALUES ('rebuild')")
    assert conn.execute(vocab).fetchall() == before


def test_lsp_line_numbers_for_crlf_and_cr_files(store: Store, project: Path) -> None:
    root = str(project.resolve())
    lines = [f"line {n}\x0c\u2028tail" for n in range(1, 101)]
    (project / "crlf.txt").write_bytes("\r\n".join(lines).encode())
    (project / "cr.txt").write_bytes("\r".join(lines).encode())
    sync_project(store, discover(project))
    for name, separator in (("crlf.txt", "\r\n"), ("cr.txt", "\r")):
        snippets = load_snippets(store, root, name)
        assert [(s.start_line, s.end_line) for s in snippets] == [(1, 80), (69, 100)]
        assert snippets[1].content == separator.join(lines[68:100])
        state = file_state(store, root, name)
        assert state is not None and state.content_hash == live_hash(separator.join(lines))


def test_utf8_bom_and_utf16_files_hash_their_text(store: Store, project: Path) -> None:
    root = str(project.resolve())
    (project / "bom.py").write_bytes(b"\xef\xbb\xbfx = 1\n")
    (project / "wide.py").write_bytes("y = 2\n".encode("utf-16"))
    sync_project(store, discover(project))
    for name, text in (("bom.py", "x = 1\n"), ("wide.py", "y = 2\n")):
        state = file_state(store, root, name)
        assert state is not None and state.content_hash == live_hash(text)


def test_a_lone_surrogate_in_a_buffer_is_stored_as_replacement(store: Store, project: Path) -> None:
    root = str(project.resolve())
    discovery = discover(project)
    text = "name = 'a\ud800b'\n"
    result = sync_project(store, discovery, live_text={"src/http_util.py": text}.get)
    assert result.files_indexed == 3
    (snippet,) = load_snippets(store, root, "src/http_util.py")
    assert snippet.content == "name = 'a\ufffdb'"
    assert live_hash(text) == live_hash("name = 'a\ufffdb'\n")
    state = file_state(store, root, "src/http_util.py")
    assert state is not None and state.content_hash == live_hash(text)


def test_projects_are_kept_apart(store: Store, project: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "shipping.ts").write_text(SHIPPING)
    sync_project(store, discover(project))
    sync_project(store, discover(other))
    assert search(store, str(other.resolve()), "shipping method") == [("shipping.ts", 1)]
    (other / "shipping.ts").unlink()
    assert sync_project(store, discover(other)).files_deleted == 1
    assert index_counts(store, str(project.resolve())).files == 3


def test_language_for() -> None:
    assert language_for("a/b.PY") == "python"
    assert language_for("Dockerfile") == "dockerfile"
    assert language_for("x.unknown") is None


def test_reindexing_one_500_line_file_is_fast(store: Store, project: Path) -> None:
    body = "".join(
        f"def handler_{n}(request):\n    return shipping_rate({n})\n" for n in range(250)
    )
    path = project / "src" / "big.py"
    path.write_text(body)
    sync_project(store, discover(project))
    timings = []
    for n in range(5):
        write(path, body + f"# edit {n}\n")
        partial = discover(project)
        started = time.perf_counter()
        result = sync_project(store, partial, only=["src/big.py"])
        timings.append(time.perf_counter() - started)
        assert result.files_indexed == 1
    assert min(timings) < 0.1  # measured ~5-10 ms; generous against slow CI machines


def file_texts(store: Store, project_path: str, word: str) -> list[str]:
    """Files whose whole-file full text (`project_file_texts_fts`) holds `word`."""
    rows = (
        store.connection()
        .execute(
            "SELECT t.file_path FROM project_file_texts_fts AS f "
            "JOIN project_file_texts AS t ON t.rowid = f.rowid "
            "WHERE project_file_texts_fts MATCH ? AND t.project_path = ? ORDER BY t.file_path",
            (f'"{word}"', project_path),
        )
        .fetchall()
    )
    return [row[0] for row in rows]


def test_whole_file_texts_follow_edits_and_deletions(store: Store, project: Path) -> None:
    """One `project_file_texts` row per current file (content, path words and identifier
    sub-words), rewritten on edits, dropped on deletion; its FTS index stays in step."""
    root = str(sync_project(store, discover(project)).project_path)
    assert file_texts(store, root, "shipping") == ["src/shipping.ts"]  # getShippingMethod
    assert file_texts(store, root, "http") == ["src/http_util.py"]
    write(project / "src" / "http_util.py", "def fetch_rates():\n    return []\n")
    sync_project(store, discover(project))
    assert file_texts(store, root, "partition") == []
    assert file_texts(store, root, "rates") == ["src/http_util.py", "src/shipping.ts"]
    (project / "docs" / "notes.md").unlink()
    sync_project(store, discover(project))
    conn = store.connection()
    rows = conn.execute(
        "SELECT file_path, content_hash FROM project_file_texts WHERE project_path = ? "
        "ORDER BY file_path",
        (root,),
    ).fetchall()
    current = conn.execute(
        "SELECT file_path, content_hash FROM project_files WHERE project_path = ? "
        "AND status = 'current' ORDER BY file_path",
        (root,),
    ).fetchall()
    assert rows == current and len(rows) == 2
    vocab_sql = "SELECT count(*) FROM project_file_texts_fts WHERE project_file_texts_fts MATCH ?"
    before = conn.execute(vocab_sql, ('"rates"',)).fetchone()
    with store.write() as conn:
        conn.execute(
            "INSERT INTO project_file_texts_fts (project_file_texts_fts) VALUES ('integrity-check')"
        )
    assert conn.execute(vocab_sql, ('"rates"',)).fetchone() == before


def test_files_without_a_whole_file_text_get_one_on_the_next_sync(
    store: Store, project: Path
) -> None:
    """An index built before migration 6 has no `project_file_texts` rows: the next sync
    re-reads those files (even unchanged ones) and writes just the missing rows."""
    root = str(sync_project(store, discover(project)).project_path)
    with store.write() as conn:
        conn.execute("DELETE FROM project_file_texts")
    result = sync_project(store, discover(project))
    assert (result.files_indexed, result.files_unchanged, result.snippets) == (0, 3, 0)
    assert file_texts(store, root, "shipping") == ["src/shipping.ts"]
    again = sync_project(store, discover(project))
    assert (again.files_indexed, again.files_unchanged) == (0, 3)


def test_a_file_past_the_window_cap_is_reported_as_partial(
    store: Store, project: Path, tmp_path: Path
) -> None:
    """A 15,000-line file keeps only its first 200 windows (~13,600 lines): the sync lists it
    in `partial_files` and `ProjectWorkspace.sync` warns about it; the end is not searchable."""
    from ds4_core.config import Config
    from ds4_core.project.workspace import ProjectWorkspace

    text = "".join(f"value_{i} = {i}\n" for i in range(1, 15_001))
    (project / "src" / "huge.py").write_text(text)
    result = sync_project(store, discover(project))
    assert result.partial_files == ("src/huge.py",)
    root = str(project.resolve())
    snippets = load_snippets(store, root, "src/huge.py")
    assert len(snippets) == 200 and snippets[-1].end_line < 15_000
    assert search(store, root, "value_14999") == []
    assert sync_project(store, discover(project)).partial_files == ()  # unchanged: not re-read

    with open_store(tmp_path / "db2" / "context.db") as other:
        workspace = ProjectWorkspace(lambda: other, Config)
        workspace.set_workspace(project, trusted=True)
        wire = workspace.sync().to_wire()
    assert wire["partialFiles"] == ["src/huge.py"]
    assert (
        "1 file(s) are longer than 200 windows of 80 lines; only their first ~13,600 lines "
        "are searched: src/huge.py"
    ) in wire["warnings"]


def test_a_short_file_is_not_partial(store: Store, project: Path) -> None:
    assert sync_project(store, discover(project)).partial_files == ()


def test_each_workspace_folder_is_planned_recorded_and_checked_on_its_own(
    tmp_path: Path, pi_session_copy: Callable[[str], Path]
) -> None:
    """Two folders both named `app` (the second becomes `app (2)`), each with `lib/fees.py`:
    a plan quotes both, each naming its folder; the manifest records the folder of each
    snippet; after the second folder's file changes, its stale snippet is found through its
    absolute path (routed to that folder) and the first folder's is not stale."""
    first, second = tmp_path / "one" / "app", tmp_path / "two" / "app"
    for root, word in ((first, "guava"), (second, "jackfruit")):
        (root / "lib").mkdir(parents=True)
        (root / "lib" / "fees.py").write_text(f"def compute_fees_{word}(order):\n    return 1\n")
    engine = ContextEngine(database_path=tmp_path / "state" / "context.db")
    try:
        status = engine.project.set_folders(
            [("app", first), ("app", second)], trusted=True
        ).to_wire()
        assert [f["name"] for f in status["folders"]] == ["app", "app (2)"]
        synced = engine.project.sync().to_wire()
        assert synced["filesIndexed"] == 2 and len(synced["folders"]) == 2
        session = pi_session_copy("openclaw-v3-single-turn-6a5d2a19.jsonl")
        plan = engine.plan(
            PlanRequest(
                session=SessionRef(str(session)),
                request="compare compute_fees_guava with compute_fees_jackfruit",
            )
        ).to_wire()
        manifest = engine.manifest(ManifestRequest(id=plan["manifestId"], view="full")).to_wire()
        quoted = json.dumps(plan["messages"])
        (second / "lib" / "fees.py").write_text("def compute_fees_kiwi(order):\n    return 2\n")
        stale_second = [
            r.to_wire() for r in engine.project.stale_snippets(str(second / "lib" / "fees.py"))
        ]
        stale_first = [
            r.to_wire() for r in engine.project.stale_snippets(str(first / "lib" / "fees.py"))
        ]
    finally:
        engine.close()

    sent = {(s["folder"], s["path"]) for s in manifest["projectSnippets"]}
    assert sent == {("app", "lib/fees.py"), ("app (2)", "lib/fees.py")}
    assert 'Folder: \\"app (2)\\"' in quoted and 'Folder: \\"app\\"' in quoted
    assert [s["manifestId"] for s in stale_second] == [plan["manifestId"]]
    assert stale_first == []


def test_a_data_uri_line_is_cut_and_the_rest_of_the_file_stays_searchable(
    store: Store, project: Path, tmp_path: Path
) -> None:
    """icons.ts: 20 ordinary lines and one 60,000-character data URI. The file is indexed
    with that line cut (line numbers unchanged) and the sync says so."""
    from ds4_core.config import Config
    from ds4_core.project.workspace import ProjectWorkspace

    lines = [f"export const icon{n}Name = 'glyph_{n}';" for n in range(1, 21)]
    lines.insert(10, "export const LOGO = 'data:image/png;base64," + "Q" * 60_000 + "';")
    text = "\n".join(lines) + "\n"
    (project / "src" / "icons.ts").write_text(text)
    result = sync_project(store, discover(project))
    assert result.long_line_files == (("src/icons.ts", 1),)
    root = str(project.resolve())
    (snippet,) = load_snippets(store, root, "src/icons.ts")
    assert (snippet.start_line, snippet.end_line) == (1, 21)
    assert len(snippet.content) < 6_000
    assert snippet.file_hash == hashlib.sha256(text.encode()).hexdigest()  # the file as it is
    window_lines_ = snippet.content.split("\n")
    assert window_lines_[10].endswith("[DS4 line cut: 60,045 characters]")
    assert window_lines_[20] == "export const icon20Name = 'glyph_20';"  # line 21 still 21
    assert search(store, root, "glyph_20") == [("src/icons.ts", 1)]

    with open_store(tmp_path / "db2" / "context.db") as other:
        workspace = ProjectWorkspace(lambda: other, Config)
        workspace.set_workspace(project, trusted=True)
        wire = workspace.sync().to_wire()
    assert wire["longLineFiles"] == [{"path": "src/icons.ts", "linesCut": 1}]
    assert any("src/icons.ts (1 line cut)" in warning for warning in wire["warnings"])


def test_every_line_of_a_file_of_long_lines_is_searchable(store: Store, project: Path) -> None:
    """200 lines of about 900 characters: windows end by characters, so no line is lost
    after a window's 20,000th character."""
    lines = [f"marker_{n:03d} = '" + "w" * 880 + "'" for n in range(1, 201)]
    (project / "src" / "wide.py").write_text("\n".join(lines) + "\n")
    sync_project(store, discover(project))
    root = str(project.resolve())
    snippets = load_snippets(store, root, "src/wide.py")
    assert all(len(s.content) <= 20_000 for s in snippets)
    for n in (50, 75, 150, 200):
        assert search(store, root, f"marker_{n:03d}"), f"line {n} is not searchable"


@dataclass(frozen=True)
class _Sent:
    """A sent project hit (`sent.SentSnippet`)."""

    snippet_id: str
    path: str
    file_hash: str
    start_line: int
    end_line: int
    text: str


def test_the_stale_count_comes_from_the_index_and_buffers_without_reading_files(
    store: Store, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two overlapping windows of one file and one window of another were sent; one line of
    the first file changes. The count (health, projectStatus) is 1, then 2 with an open
    buffer edited elsewhere, and no file is read to get it."""
    from ds4_core.config import Config
    from ds4_core.project import workspace as workspace_module
    from ds4_core.project.workspace import ProjectWorkspace

    lines = [f"setting_{n} = {n}" for n in range(1, 421)]
    (project / "src" / "long.py").write_text("\n".join(lines) + "\n")
    workspace = ProjectWorkspace(lambda: store, Config)
    workspace.set_workspace(project, trusted=True)
    workspace.sync()
    root = str(project.resolve())
    sent = [
        _Sent(s.snippet_id, s.file_path, s.file_hash, s.start_line, s.end_line, s.content)
        for s in load_snippets(store, root, "src/long.py")
        + load_snippets(store, root, "src/http_util.py")
        if s.file_path == "src/http_util.py" or s.start_line in (273, 341)
    ]
    assert len(sent) == 3
    workspace.record_sent("m-1", "2026-01-01T00:00:00.000Z", sent, stored=False)
    assert workspace.stale_count() == 0

    lines[303] = "setting_304 = 'changed'"
    write(project / "src" / "long.py", "\n".join(lines) + "\n")
    workspace.sync()

    def no_reading(*args: object, **kwargs: object) -> tuple[None, str]:
        raise AssertionError("the stale count read a file")

    monkeypatch.setattr(workspace_module, "read_indexable", no_reading)
    assert workspace.stale_count() == 1  # window 273-352 (line 304); 341-420 is unchanged
    lines[399] = "setting_400 = 'edited in the editor'"
    workspace.set_live_text(str(project / "src" / "long.py"), "\n".join(lines) + "\n")
    assert workspace.stale_count() == 2


def test_a_project_sync_that_fails_is_reported_and_search_and_plan_go_on(tmp_path: Path) -> None:
    """A project sync that fails with an unexpected error (here SQLite refuses every write:
    `PRAGMA query_only`) is answered as status `error` naming the failure, not raised:
    `engine.project.status()` says `error`, and retrieve and plan still answer from the index as it
    was, each with a warning that it may be behind the files."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "a.py").write_text('def good():\n    return "ocelot_good"\n')
    engine = ContextEngine(database_path=tmp_path / "state" / "context.db")
    try:
        engine.project.set_root(str(project), trusted=True)
        assert engine.project.sync().to_wire()["status"] == "ready"
        (project / "b.py").write_text('def other():\n    return "ocelot_other"\n')
        engine.project.mark_changed()
        engine.store.connection().execute("PRAGMA query_only = ON")
        failed = engine.project.sync().to_wire()
        assert failed["status"] == "error" and "OperationalError" in failed["error"]
        status = engine.project.status().to_wire()
        assert status["status"] == "error" and "OperationalError" in status["error"]
        found = engine.retrieve(RetrieveRequest(query="ocelot_good", scopes=("project",))).to_wire()
        assert [hit["path"] for hit in found["project"]] == ["a.py"]
        assert any("may be behind" in w for w in found["warnings"]), found["warnings"]
        planned = engine.plan(
            PlanRequest(messages=[{"role": "user", "content": "where is ocelot_good?"}])
        ).to_wire()
        assert planned["mode"] == "managed"
        assert any("may be behind" in w for w in planned["warnings"]), planned["warnings"]
    finally:
        engine.close()
