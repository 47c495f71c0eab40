"""Re-indexing an edited file keeps the rows of its unchanged windows (core/ds4_core/project/
index.py `_keep_unchanged`), and the full sync's reader thread (`_read_ahead`).

The index after a one-file re-index must hold exactly what a from-scratch index of the same
content holds: the same current snippets (ids, file hash, lines, text, symbols, search text,
token estimate), the same whole-file text, consistent FTS tables, and the same search results.
Real SQLite files throughout.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ds4_core.project import index as index_module
from ds4_core.project.discovery import DiscoveredFile, discover_project
from ds4_core.project.index import load_snippets, sync_project
from ds4_core.project.search import search_project
from ds4_core.project.windows import snippet_id
from ds4_core.retrieval import describe_task
from ds4_core.store import Store, open_store

WORDS = (
    "parse", "render", "shipping", "method", "Rate", "quote", "carrier", "total", "weight",
    "invoice", "customer", "retry", "backoff", "token", "cache", "window", "index", "sync",
)  # fmt: skip
QUERIES = (
    "where is ShippingRate defined?",
    "how does the carrier quote retry with backoff",
    "render_invoice total weight",
    "look at src/big.py",
)


def make_line(rng: random.Random, number: int) -> str:
    kind = rng.randrange(6)
    a, b = rng.choice(WORDS), rng.choice(WORDS)
    if kind == 0:
        return f"def {a.lower()}_{b.lower()}_{number}(value):"
    if kind == 1:
        return f"class {a.capitalize()}{b.capitalize()}{number}:"
    if kind == 2:
        return ""
    return f"    {a.lower()}{b.capitalize()} = {rng.choice(WORDS).lower()}({number})  # {a} {b}"


def big_text(rng: random.Random, lines: int) -> list[str]:
    return [make_line(rng, n) for n in range(lines)]


def current_rows(store: Store, project_path: str) -> list[tuple[object, ...]]:
    """Every current snippet (without rowid and indexed_at), sorted."""
    return sorted(
        store.connection()
        .execute(
            "SELECT snippet_id, file_path, file_hash, start_line, end_line, content, symbols, "
            "search_text, token_estimate FROM project_snippets "
            "WHERE project_path = ? AND stale = 0",
            (project_path,),
        )
        .fetchall()
    )


def file_rows(store: Store, project_path: str) -> list[tuple[object, ...]]:
    conn = store.connection()
    files = conn.execute(
        "SELECT file_path, content_hash, status FROM project_files WHERE project_path = ? "
        "ORDER BY file_path",
        (project_path,),
    ).fetchall()
    texts = conn.execute(
        "SELECT file_path, content_hash, text FROM project_file_texts WHERE project_path = ? "
        "ORDER BY file_path",
        (project_path,),
    ).fetchall()
    return [*files, *texts]


def fts_consistent(store: Store) -> None:
    conn = store.connection()
    for table in ("project_snippets_fts", "project_file_texts_fts"):
        conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")


def hits(store: Store, project_path: str) -> list[list[tuple[object, ...]]]:
    found = []
    for query in QUERIES:
        result = search_project(
            store, project_path, describe_task(query), max_results=8, max_tokens=20_000
        )
        found.append([(h.path, h.start_line, h.end_line, h.snippet_id) for h in result.hits])
    return found


def fresh_index(tmp_path: Path, name: str, files: dict[str, str]) -> tuple[Store, str]:
    """A new store indexing `files` (relative path -> text) written to a new directory."""
    root = tmp_path / name
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    store = open_store(tmp_path / f"{name}.db")
    sync_project(store, discover_project(root, use_git=False))
    return store, str(root)


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Store, Path, dict[str, str]]]:
    rng = random.Random(13)
    files = {
        "src/big.py": "\n".join(big_text(rng, 700)) + "\n",
        "src/small.py": "\n".join(big_text(rng, 30)) + "\n",
        "src/rates.py": "class ShippingRate:\n    carrier_quote = 1\n",
    }
    root = tmp_path / "proj"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    with open_store(tmp_path / "proj.db") as store:
        sync_project(store, discover_project(root, use_git=False))
        yield store, root, files


def edit(store: Store, root: Path, rel: str, text: str) -> index_module.IndexSync:
    """Re-index `rel` as an open buffer holding `text` (the editor path)."""
    discovery = discover_project(root, use_git=False)
    return sync_project(
        store, discovery, live_text=lambda p: text if p == rel else None, only=[rel]
    )


def test_a_one_line_edit_rewrites_only_the_windows_holding_it(
    project: tuple[Store, Path, dict[str, str]],
) -> None:
    store, root, files = project
    conn = store.connection()
    before = dict(
        conn.execute(
            "SELECT start_line, rowid FROM project_snippets WHERE file_path = 'src/big.py'"
        ).fetchall()
    )
    lines = files["src/big.py"].split("\n")
    lines[349] = "    edited = carrier(1)  # one line changed"  # line 350: windows 273-352, 341-420
    text = "\n".join(lines)
    result = edit(store, root, "src/big.py", text)
    assert result.files_indexed == 1
    after = load_snippets(store, str(root), "src/big.py")
    kept = [s for s in after if before.get(s.start_line) is not None]
    rowids = dict(
        conn.execute(
            "SELECT start_line, rowid FROM project_snippets "
            "WHERE file_path = 'src/big.py' AND stale = 0"
        ).fetchall()
    )
    changed = {s.start_line for s in after if rowids[s.start_line] != before[s.start_line]}
    assert changed == {273, 341}  # every other window kept its row (no FTS work)
    assert len(kept) == len(after) == len(before)
    digest = index_module.live_hash(text)
    for s in after:  # re-pointed: the new file hash and the id that goes with it
        assert s.file_hash == digest
        assert s.snippet_id == snippet_id(str(root), "src/big.py", digest, s.start_line, s.end_line)
    stale = load_snippets(store, str(root), "src/big.py", include_stale=True)
    assert sorted(s.start_line for s in stale if s.stale) == [273, 341]


def test_edits_leave_the_index_a_from_scratch_index_would_hold(
    project: tuple[Store, Path, dict[str, str]], tmp_path: Path
) -> None:
    """Random edits (change, insert, delete lines, undo to an earlier text, whitespace only);
    after each, the current rows, whole-file texts, FTS tables and search results equal those
    of a fresh index of the same files."""
    store, root, files = project
    rng = random.Random(2026)
    history = [files["src/big.py"]]
    for step in range(12):
        lines = history[-1].split("\n")
        if len(lines) < 200:  # after the white-space-only text: back to a real one
            lines = history[0].split("\n")
        kind = step % 6
        if kind == 0:
            lines[rng.randrange(len(lines))] = make_line(rng, 9000 + step)
        elif kind == 1:
            at = rng.randrange(len(lines))
            lines[at:at] = [make_line(rng, 9100 + step) for _ in range(rng.randrange(1, 4))]
        elif kind == 2:
            at = rng.randrange(len(lines) - 5)
            del lines[at : at + rng.randrange(1, 5)]
        elif kind == 3:
            lines = history[rng.randrange(len(history))].split("\n")  # undo
        elif kind == 4:
            lines[:80] = lines[68:148]  # a window's text moves to other lines
        else:
            lines = ["", "   "] if step == 5 else lines  # white space only: no window at all
        text = "\n".join(lines)
        history.append(text)
        edit(store, root, "src/big.py", text)
        fresh, fresh_root = fresh_index(tmp_path, f"fresh{step}", {**files, "src/big.py": text})
        with fresh:
            ours = current_rows(store, str(root))
            theirs = current_rows(fresh, fresh_root)
            # the project paths differ, so do the ids: everything but the id is equal, and
            # the ids are those of the fresh project's root
            assert sorted(r[1:] for r in ours) == sorted(r[1:] for r in theirs)
            assert sorted(r[0] for r in theirs) == sorted(
                snippet_id(fresh_root, str(r[1]), str(r[2]), int(r[3]), int(r[4])) for r in ours
            )
            assert [r[1:] for r in file_rows(store, str(root))] == [
                r[1:] for r in file_rows(fresh, fresh_root)
            ]
            fts_consistent(store)
            ours_hits = [[h[:3] for h in q] for q in hits(store, str(root))]
            assert ours_hits == [[h[:3] for h in q] for q in hits(fresh, fresh_root)]


def test_a_full_sync_reads_on_a_reader_thread_and_indexes_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(7)
    files = {f"pkg/m{i}.py": "\n".join(big_text(rng, 120)) for i in range(30)}
    threaded, threaded_root = fresh_index(tmp_path, "threaded", files)
    monkeypatch.setattr(index_module, "READER_THREAD_MIN_FILES", 10**9)
    inline, inline_root = fresh_index(tmp_path, "inline", files)
    with threaded, inline:
        assert sorted(r[1:] for r in current_rows(threaded, threaded_root)) == sorted(
            r[1:] for r in current_rows(inline, inline_root)
        )
        fts_consistent(threaded)


def test_a_reader_failure_is_raised_and_the_reader_stops(tmp_path: Path) -> None:
    rng = random.Random(8)
    root = tmp_path / "proj"
    for i in range(40):
        (root / f"m{i}.py").parent.mkdir(parents=True, exist_ok=True)
        (root / f"m{i}.py").write_text("\n".join(big_text(rng, 20)))
    calls = 0

    def live(path: str) -> str | None:
        nonlocal calls
        calls += 1
        if calls == 20:
            raise RuntimeError("buffer store broke")
        return None

    with open_store(tmp_path / "x.db") as store:
        with pytest.raises(RuntimeError, match="buffer store broke"):
            sync_project(store, discover_project(root, use_git=False), live_text=live)
        assert not [t for t in threading.enumerate() if t.name == "ds4-project-reader"]
        # the batches written before the failure are whole; a second sync completes the index
        result = sync_project(store, discover_project(root, use_git=False))
        assert result.files_indexed + result.files_unchanged == 40
        fts_consistent(store)


def test_a_file_vanishing_during_a_threaded_sync_is_skipped(tmp_path: Path) -> None:
    rng = random.Random(9)
    root = tmp_path / "proj"
    root.mkdir()
    for i in range(40):
        (root / f"m{i:02}.py").write_text("\n".join(big_text(rng, 20)))
    (root / "bad.py").write_bytes(bytes(range(1, 256)) * 8 + b"\x00")  # undecodable
    discovery = discover_project(root, use_git=False)
    (root / "m30.py").unlink()  # gone between discovery and reading
    with open_store(tmp_path / "v.db") as store:
        result = sync_project(store, discovery)
        assert (result.files_indexed, result.files_skipped) == (39, 2)
        indexed = {r[0] for r in file_rows(store, str(root))}
        assert "m30.py" not in indexed and "bad.py" not in indexed
        fts_consistent(store)


def test_the_reader_stays_within_its_character_budget() -> None:
    """`_read_ahead` holds at most `max_chars` characters of prepared files (one file always
    fits), in order, and stops when the consumer closes it early."""
    files = [DiscoveredFile(f"f{i}.py", 10, 0, False, False) for i in range(30)]
    planned: list[int] = []

    def plan(f: DiscoveredFile) -> index_module._Work:
        planned.append(int(f.rel_path[1:-3]))
        return index_module._Work("index", f.rel_path, had_row=False, chars=10)

    taken: list[int] = []
    reader = index_module._read_ahead(files, plan, depth=100, max_chars=25)
    for f, _work in reader:
        time.sleep(0.01)  # let the reader run ahead as far as it may
        taken.append(int(f.rel_path[1:-3]))
        assert len(planned) - len(taken) <= 3  # 2 held (20 chars) + 1 waiting for room
        if len(taken) == 12:
            break
    reader.close()
    assert taken == list(range(12))
    assert not [t for t in threading.enumerate() if t.name == "ds4-project-reader"]
