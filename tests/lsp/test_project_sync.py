"""Keeping the project index fresh: editor buffers, files changed outside the editor, agent
tool runs, and the rebuild and status commands. Each test runs with VS Code's capabilities
(UTF-16, watched files through dynamic registration) and Neovim's (UTF-8, no dynamic
registration). Waits are on `ds4/indexUpdated` notifications, never on sleeps."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsp_helpers import Servers, execute, request
from lsprotocol import types
from project_helpers import (
    ENCODINGS,
    ProjectClient,
    change_document,
    hits_in,
    open_document,
    retrieve_project,
    start_project_client,
    units,
)

from ds4_lsp.services.project_sync import EDIT_DEBOUNCE_S

NOTES = "src/notes.txt"
NOTES_TEXT = "héllo 😀 world\r\nalpha\fbeta\u2028delta\r\ngamma line\r\nlast line\r\n"
"""CRLF line ends, an emoji, a form feed and U+2028 inside lines (which str.splitlines would
split, moving every later line)."""


async def test_edits_to_an_open_buffer_reach_the_project_index(
    project_servers: Servers, project_dir: Path, client_name: str
) -> None:
    """Incremental edits after an emoji and below a form feed (CRLF file) are applied where
    the client meant them, and the buffer's text is searchable after the debounce, although
    the file on disk never changed."""
    encoding = ENCODINGS[client_name]
    notes = project_dir / NOTES
    notes.parent.mkdir()
    notes.write_bytes(NOTES_TEXT.encode())
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    await project.wait_index(lambda u: u["reason"] == "initial" and u["status"] == "ready")

    uri = open_document(client, notes, NOTES_TEXT)
    after_emoji = units("héllo 😀", encoding)
    change_document(client, uri, 2, (0, after_emoji), (0, after_emoji), "xylophone_token")
    change_document(client, uri, 3, (2, 0), (2, len("gamma")), "zanzibar_quux")
    change_document(client, uri, 4, (3, 0), (4, 0), "")  # delete "last line\r\n"
    expected = "héllo 😀xylophone_token world\r\nalpha\fbeta\u2028delta\r\nzanzibar_quux line\r\n"

    update = await project.wait_index(
        lambda u: u["reason"] == "edit" and NOTES in (u["only"] or [])
    )
    assert update["status"] == "ready"
    assert EDIT_DEBOUNCE_S + update["durationMs"] / 1000 < 0.25  # the bound
    found = hits_in(await retrieve_project(client, "zanzibar_quux"), NOTES)
    assert found, "the edited buffer's text is not in the index"
    (hit,) = found
    assert hit["text"].replace("\r\n", "\n") == expected.replace("\r\n", "\n").rstrip("\n")
    assert (hit["startLine"], hit["endLine"]) == (1, 3)
    assert notes.read_bytes() == NOTES_TEXT.encode()  # the disk still has the old text


async def test_edits_made_outside_the_editor_are_found(
    project_servers: Servers, project_dir: Path, client_name: str
) -> None:
    """VS Code gets a file watcher (dynamic registration) and its didChangeWatchedFiles
    leads to a sync; Neovim cannot watch files, so each ds4/retrieve sweeps the project
    first. Either way a file written by another program is found."""
    (project_dir / "README.md").write_text("nothing to see\n")
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    await project.wait_index(lambda u: u["reason"] == "initial")
    watched = [
        r for r in project.registrations if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    ]

    external = project_dir / "lib" / "external.py"
    external.parent.mkdir()
    external.write_text("def quux_frobnicate():\n    return 42\n")
    if client_name == "visual-studio-code":
        assert len(watched) == 1
        client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[types.FileEvent(uri=external.as_uri(), type=types.FileChangeType.Created)]
            )
        )
        update = await project.wait_index(lambda u: u["reason"] == "watched")
        assert update["filesIndexed"] == 1
    else:
        assert watched == []
    assert hits_in(await retrieve_project(client, "quux_frobnicate"), "lib/external.py")
    status = await execute(client, "ds4.projectStatus")
    assert status["editor"]["watchingFiles"] is (client_name == "visual-studio-code")


async def test_write_tools_trigger_a_sync_and_read_only_tools_do_not(
    project_servers: Servers, project_dir: Path
) -> None:
    """The file is rewritten with the same size and mtime, so no sweep or watcher can see
    it: only the sync a `ds4/toolExecuted` causes finds the new text. `read` causes none,
    `edit` (with the path) does."""
    target = project_dir / "src" / "tool_target.txt"
    target.parent.mkdir()
    target.write_text("fruit kumquat_tarts here\n")
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    await project.wait_index(lambda u: u["reason"] == "initial")

    before = target.stat()
    target.write_text("fruit persimmon_pie here\n")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size

    client.protocol.notify("ds4/toolExecuted", {"tool": "read", "paths": [str(target)]})
    assert hits_in(await retrieve_project(client, "persimmon_pie"), "src/tool_target.txt") == []
    assert [u for u in project.index_updates if u["reason"] == "tool"] == []

    client.protocol.notify("ds4/toolExecuted", {"tool": "edit", "paths": ["src/tool_target.txt"]})
    assert hits_in(await retrieve_project(client, "persimmon_pie"), "src/tool_target.txt")
    update = await project.wait_index(lambda u: u["reason"] == "tool" and u["only"])
    assert update["only"] == ["src/tool_target.txt"] and update["filesIndexed"] == 1


async def test_rebuild_rescans_the_project_and_status_counts_it(
    project_servers: Servers, project_dir: Path, pi_session_copy: Callable[[str], Path]
) -> None:
    """ds4.rebuildIndex re-reads every project file (reported with ds4/indexUpdated, reason
    `rebuild`) with one rising progress percentage over sessions and project; ds4.projectStatus
    and ds4.health report the counts and the trust state."""
    for number in range(3):
        (project_dir / f"module_{number}.py").write_text(f"def function_{number}():\n    pass\n")
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    await project.wait_index(lambda u: u["reason"] == "initial")
    session = pi_session_copy("openclaw-v3-single-turn-6a5d2a19.jsonl")
    await request(client, "ds4/plan", {"session": {"file": str(session)}, "request": "hi"})

    client.progress_reports["rebuild-1"] = []
    rebuilt = await execute(client, "ds4.rebuildIndex", token="rebuild-1")
    assert rebuilt["sessions"] == 1 and rebuilt["project"]["status"] == "ready"
    reports: list[Any] = list(client.progress_reports["rebuild-1"])
    percentages = [
        r.percentage
        for r in reports
        if isinstance(r, types.WorkDoneProgressReport) and r.percentage is not None
    ]
    assert percentages == sorted(percentages) and percentages[-1] == 100
    update = await project.wait_index(lambda u: u["reason"] == "rebuild")
    assert update["filesIndexed"] == 3

    status = await execute(client, "ds4.projectStatus")
    assert status["status"] == "ready" and status["trusted"] is True
    assert status["files"] == 3 and status["snippets"] >= 3
    assert Path(status["projectPath"]) == project_dir.resolve()
    health = await execute(client, "ds4.health")
    assert health["project"]["files"] == 3 and health["server"]["trusted"] is True
    assert isinstance(health["schemaVersion"], int)


EXCLUDED_BUFFERS = {
    ".env": "API_HOST=wibble_wobble_host\n",
    "node_modules/pkg/index.js": "const wibble_wobble_host = 1;\n",
    "ignored_dir/notes.txt": "wibble_wobble_host here\n",
}


async def test_buffers_and_tool_paths_of_excluded_files_are_never_indexed(
    project_servers: Servers, project_dir: Path
) -> None:
    """Editing a `.env`, a file under `node_modules/` or a gitignored file, or reporting a
    tool write to one, indexes none of them: only `ok.txt` is indexed by the edit's sync."""
    (project_dir / ".gitignore").write_text("ignored_dir/\n")
    (project_dir / "ok.txt").write_text("nothing here\n")
    for rel, text in EXCLUDED_BUFFERS.items():
        (project_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (project_dir / rel).write_text(text)
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    await project.wait_index(lambda u: u["reason"] == "initial")

    for rel, text in {**EXCLUDED_BUFFERS, "ok.txt": "nothing here\n"}.items():
        uri = open_document(client, project_dir / rel, text)
        change_document(client, uri, 2, (0, 0), (0, 0), "x")
    edit = await project.wait_index(lambda u: u["reason"] == "edit")
    client.protocol.notify("ds4/toolExecuted", {"tool": "write", "paths": list(EXCLUDED_BUFFERS)})
    tool = await project.wait_index(lambda u: u["reason"] == "tool" and u["only"])
    found = await retrieve_project(client, "wibble_wobble_host")

    assert edit["filesIndexed"] == 1
    assert tool["filesIndexed"] == 0
    assert found["project"] == []


async def test_an_edit_synced_while_another_connection_holds_the_database_lands_later(
    project_servers: Servers, project_dir: Path, database_path: Path, client_name: str
) -> None:
    """Another program holds `BEGIN IMMEDIATE` on the database longer than the busy timeout
    (50 ms here) while an edit is synced: the server reports `error` naming the lock, keeps
    the edit due and retries; once the lock is released the edit lands (`ready`) and is
    found, without the file changing again."""
    encoding = ENCODINGS[client_name]
    notes = project_dir / "notes.txt"
    notes.write_text("plain words here\n")
    recorder = ProjectClient()
    recorder.client = await project_servers.start(
        initialization_options={
            "trusted": True,
            "settings": {"storage": {"busyTimeoutMs": 50}},
        },
        client_features=recorder.features(),
    )
    client = recorder.lsp
    await recorder.wait_index(lambda u: u["reason"] == "initial" and u["status"] == "ready")

    holder = sqlite3.connect(database_path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        uri = open_document(client, notes, "plain words here\n")
        change_document(client, uri, 2, (0, units("plain", encoding)), (0, 5), " quokka_lantern")
        failed = await recorder.wait_index(lambda u: u["reason"] == "edit")
        assert failed["status"] == "error" and "locked" in failed["error"]
        assert failed["only"] == ["notes.txt"] and failed["retryInMs"] > 0
        status = await execute(client, "ds4.projectStatus")
        assert status["status"] == "error" and "locked" in status["error"]
    finally:
        holder.rollback()
        holder.close()

    landed = await recorder.wait_index(lambda u: u["reason"] == "edit" and u["status"] == "ready")
    assert landed["only"] == ["notes.txt"] and landed["filesIndexed"] == 1
    assert hits_in(await retrieve_project(client, "quokka_lantern"), "notes.txt")
    status = await execute(client, "ds4.projectStatus")
    assert status["status"] == "ready" and "error" not in status


async def test_shutdown_ends_the_retries_of_a_locked_database(
    project_servers: Servers, project_dir: Path, database_path: Path, capfd: Any
) -> None:
    """While another connection keeps the database locked, the server keeps retrying an edit
    (logging the outage once, not once per attempt); `shutdown` cancels the retries and the
    server exits 0 with the lock still held."""
    notes = project_dir / "notes.txt"
    notes.write_text("plain words here\n")
    recorder = ProjectClient()
    recorder.client = await project_servers.start(
        initialization_options={"trusted": True, "settings": {"storage": {"busyTimeoutMs": 20}}},
        client_features=recorder.features(),
    )
    client = recorder.lsp
    await recorder.wait_index(lambda u: u["reason"] == "initial" and u["status"] == "ready")
    holder = sqlite3.connect(database_path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        uri = open_document(client, notes, "plain words here\n")
        change_document(client, uri, 2, (0, 0), (0, 0), "x")
        await recorder.wait_index(lambda u: u["reason"] == "edit")
        await execute(client, "ds4.projectStatus")  # one more locked attempt, at least
        assert await project_servers.stop(client) == 0
    finally:
        holder.rollback()
        holder.close()
    stderr = capfd.readouterr().err
    assert stderr.count("the database is locked by another connection; retrying") == 1
    assert [u["status"] for u in recorder.index_updates if u["reason"] == "edit"] == ["error"]


async def test_a_file_name_that_is_not_utf8_is_skipped_and_the_rest_indexed(
    project_servers: Servers, project_dir: Path, client_name: str
) -> None:
    """One file whose name is not valid UTF-8 (byte 0xFF) sits next to a normal file: the
    first sync skips that one path (a warning names it, `\\xff` escaped), indexes the rest
    and reports `ready`; retrieve and plan find the normal file."""
    (project_dir / "a.py").write_text('def good():\n    return "ocelot_good"\n')
    (project_dir / os.fsdecode(b"b\xff.py")).write_bytes(b"x = 1\n")
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    initial = await project.wait_index(lambda u: u["reason"] == "initial")
    assert initial["status"] == "ready", initial
    assert initial["filesIndexed"] == 1 and initial["filesSkipped"] == 1
    assert any("not valid UTF-8" in w and "b\\xff.py" in w for w in initial["warnings"])
    status = await execute(client, "ds4.projectStatus")
    assert status["status"] == "ready" and status["files"] == 1
    found = await retrieve_project(client, "ocelot_good")
    assert found["projectStatus"] == "ok" and hits_in(found, "a.py")
    plan = await request(
        client,
        "ds4/plan",
        {"messages": [{"role": "user", "content": "where is ocelot_good returned?"}]},
    )
    assert plan["mode"] == "managed" and not any("project" in w for w in plan["warnings"])
    assert any("ocelot_good" in str(m) and "a.py" in str(m) for m in plan["messages"]), plan


async def test_syncs_during_a_locked_database_outage_are_folded_into_its_retry(
    project_servers: Servers, project_dir: Path, database_path: Path, client_name: str
) -> None:
    """While another connection holds the database lock, an edit's sync fails (`error`,
    locked); a tool run that writes a new file then sends no `ready` of its own in the middle
    of the outage, a `ds4/retrieve` meanwhile warns that the index is behind (pending
    edits), and once the lock is released the landing `ready` carries the edit's reason,
    with the tool's in `reasons`; both texts are then found."""
    encoding = ENCODINGS[client_name]
    notes = project_dir / "notes.txt"
    notes.write_text("plain words here\n")
    recorder = ProjectClient()
    recorder.client = await project_servers.start(
        initialization_options={"trusted": True, "settings": {"storage": {"busyTimeoutMs": 300}}},
        client_features=recorder.features(),
    )
    client = recorder.lsp
    await recorder.wait_index(lambda u: u["reason"] == "initial" and u["status"] == "ready")
    holder = sqlite3.connect(database_path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        seen = len(recorder.index_updates)
        uri = open_document(client, notes, "plain words here\n")
        change_document(client, uri, 2, (0, units("plain", encoding)), (0, 5), " quokka_lantern")
        failed = await recorder.wait_index(lambda u: u["reason"] == "edit")
        assert failed["status"] == "error" and failed["locked"] is True
        (project_dir / "fresh.py").write_text("def zebra_teapot():\n    return 1\n")
        client.protocol.notify("ds4/toolExecuted", {"tool": "write", "paths": ["fresh.py"]})
        during = await retrieve_project(client, "quokka_lantern")
        assert any("behind" in w and "pending edit" in w for w in during["warnings"]), during[
            "warnings"
        ]
        during_outage = recorder.index_updates[seen:]
        assert [u["status"] for u in during_outage] == ["error"], during_outage
    finally:
        holder.rollback()
        holder.close()
    landed = await recorder.wait_index(
        lambda u: u["status"] == "ready" and u["reason"] != "initial"
    )
    assert landed["reason"] == "edit" and landed["reasons"] == ["edit", "tool"], landed
    assert hits_in(await retrieve_project(client, "quokka_lantern"), "notes.txt")
    assert hits_in(await retrieve_project(client, "zebra_teapot"), "fresh.py")


async def test_a_sync_that_fails_is_reported_as_error_and_requests_still_answer(
    project_servers: Servers, project_dir: Path, database_path: Path
) -> None:
    """A sync fails with an error that is not a lock (here another program added a trigger
    that refuses every write to the project tables): `ds4/indexUpdated` and
    `ds4.projectStatus` say `error` and name it, and `ds4/retrieve` and `ds4/plan` still
    answer from the index as it was, each warning that it may be behind."""
    (project_dir / "a.py").write_text('def good():\n    return "ocelot_good"\n')
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    await project.wait_index(lambda u: u["reason"] == "initial" and u["status"] == "ready")
    with sqlite3.connect(database_path) as conn:
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON project_files "
            "BEGIN SELECT RAISE(ABORT, 'refused by a test trigger'); END"
        )
    conn.close()
    (project_dir / "b.py").write_text('def other():\n    return "ocelot_other"\n')
    client.protocol.notify("ds4/toolExecuted", {"tool": "write", "paths": ["b.py"]})
    failed = await project.wait_index(lambda u: u["reason"] == "tool" and u["only"] is None)
    assert failed["status"] == "error" and "refused by a test trigger" in failed["error"]
    status = await execute(client, "ds4.projectStatus")
    assert status["status"] == "error" and "refused by a test trigger" in status["error"]
    found = await retrieve_project(client, "ocelot_good")
    assert hits_in(found, "a.py")
    assert any("may be behind" in w for w in found["warnings"]), found["warnings"]
    plan = await request(
        client,
        "ds4/plan",
        {"messages": [{"role": "user", "content": "where is ocelot_good returned?"}]},
    )
    assert plan["mode"] == "managed"
    assert any("may be behind" in w for w in plan["warnings"]), plan["warnings"]


def test_a_lock_held_for_days_is_still_retried_every_few_seconds() -> None:
    """The backoff doubles from 50 ms to its 4 s cap and stays there: after 1,100 attempts
    (about 73 minutes of a held lock) it neither overflows nor stops."""
    from ds4_lsp.services.project_sync import LOCKED_RETRY_MAX_S, locked_retry_delay_s

    delays = [locked_retry_delay_s(n) for n in (0, 1, 2, 10, 1_100, 10**9)]
    assert delays[:3] == [0.05, 0.1, 0.2]
    assert delays[3:] == [LOCKED_RETRY_MAX_S] * 3
