"""The `ds4` argument parser: global options, then one subcommand each bound to its command
function (`set_defaults(func=...)`, see `commands`)."""

from __future__ import annotations

import argparse
from typing import Any, get_args

from .. import __version__
from ..requests import COMPACTION_REASONS, ManifestView, Scope
from . import commands
from .artifact_commands import add_artifact_parser
from .graphviz import FORMATS


def _session_arguments(parser: argparse.ArgumentParser) -> None:
    """`--session FILE` (required) and `--leaf ID`, for the commands on one session's branch."""
    parser.add_argument("--session", required=True, metavar="FILE", help="Pi session .jsonl file")
    parser.add_argument(
        "--leaf", metavar="ID", help="leaf entry id of the active branch (default: last entry)"
    )


def _memory_write_parsers(sub: Any) -> None:
    """`ds4 pin`, `unpin`, `remember`, `forget`: one memory or pin write each (docs/memory.md
    "Writes"), answered as the entry to append."""
    levels = ("normal", "internal", "sensitive", "local-only")
    writes = (
        ("pin", "TEXT", "pin TEXT (- reads stdin) to the session, its branch or its project"),
        ("unpin", "PIN_ID", "delete an active pin"),
        ("remember", "TEXT", "remember a claim TEXT (- reads stdin) for the project or session"),
        ("forget", "MEMORY_ID", "mark an active memory item invalid or expired"),
    )
    for name, value, text in writes:
        w = sub.add_parser(name, help=text + " (prints the entry to append)")
        _session_arguments(w)
        w.add_argument("text", metavar=value)
        if name in ("pin", "remember"):
            scopes = ("session", "branch", "project") if name == "pin" else ("session", "project")
            default = "session" if name == "pin" else "project"
            w.add_argument("--scope", choices=scopes, help=f"default: {default}")
            w.add_argument("--classification", choices=levels, help="the privacy level")
            w.add_argument("--supersedes", metavar="ID", help="the active item this replaces")
        if name == "pin":
            w.add_argument("--source-file", metavar="PATH", help="where the pinned text is from")
        if name == "remember":
            w.add_argument(
                "--key", help='the claim\'s key (default: automatic, docs/memory.md "Conflicts")'
            )
            w.add_argument(
                "--source-entry",
                action="append",
                default=[],
                metavar="ID",
                help="a session entry the claim comes from (repeatable)",
            )
        if name == "forget":
            w.add_argument("--status", choices=("invalid", "expired"), default="invalid")
        if name in ("unpin", "forget"):
            w.add_argument("--reason", help="why (kept with the item)")
        w.add_argument("--json", action="store_true", help=f"print the ds4/{name} result")
        w.set_defaults(func=commands.memory_write, operation=name)


def _workspace_arguments(parser: argparse.ArgumentParser) -> None:
    """`--workspace DIR` and `--trust`, for the commands that may quote project files."""
    parser.add_argument(
        "--workspace",
        metavar="DIR",
        help="project folder whose files may be quoted (only with --trust)",
    )
    parser.add_argument(
        "--trust",
        action="store_true",
        help="trust --workspace: allow ds4 to list, read and index its files",
    )


_EPILOG = """\
database:
  --db PATH, else $DS4_DB, else the setting storage.databasePath (relative to
  $XDG_DATA_HOME/ds4-lsp), else $XDG_DATA_HOME/ds4-lsp/context.db
  (~/.local/share/ds4-lsp/context.db when XDG_DATA_HOME is unset or not absolute)

exit codes:
  0    success
  1    unexpected internal error (rerun with -v for the traceback)
  2    bad usage or input you can fix (the message says what to do), or a database
       that cannot be opened or stays locked past storage.busyTimeoutMs
  3    some session files could not be indexed or rebuilt (the others were)
  130  interrupted (Ctrl-C)

Settings: docs/configuration.md. --json output: docs/protocol.md."""


def build_parser() -> argparse.ArgumentParser:
    """The `ds4` argument parser (synopsis: the `ds4_core.cli` docstring). Each subcommand's
    namespace has `func`, the `commands` function that runs it, and `command`, its name."""
    parser = argparse.ArgumentParser(
        prog="ds4",
        description="DS4 context engine: index Pi sessions, retrieve history, plan model calls, "
        "compact sessions into a summary graph.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ds4 {__version__}")
    parser.add_argument(
        "--db",
        metavar="PATH",
        help="database file (default: $DS4_DB, else the storage.databasePath setting, else "
        "$XDG_DATA_HOME/ds4-lsp/context.db; see below)",
    )
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of docs/configuration.md, e.g. --set context.mode=observer or "
        '--set \'modelAwareness.overrides={"local/*": {"contextWindow": 32768}}\' '
        "(VALUE is read as JSON when it parses, else as a string; repeatable)",
    )
    parser.add_argument(
        "--settings-file",
        metavar="FILE",
        help="a JSON file of settings (nested or dotted keys), applied before --set",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log counts and timings to stderr"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("plan", help="plan the next model call for a session and a new request")
    _session_arguments(p)
    p.add_argument(
        "--model",
        metavar="PROVIDER/ID",
        help="model of the call (default: the session's current model)",
    )
    p.add_argument(
        "--context-window",
        type=int,
        metavar="N",
        help="context window in tokens (default: overrides, then the table of well-known models)",
    )
    p.add_argument(
        "--fixed-tokens",
        type=int,
        default=0,
        metavar="N",
        help="tokens of the system prompt and tool schemas (default 0)",
    )
    _workspace_arguments(p)
    p.add_argument("--json", action="store_true", help="print the ds4/plan result as JSON")
    p.add_argument("request", help="the new user message (`-`: read it from standard input)")
    p.set_defaults(func=commands.plan)

    r = sub.add_parser(
        "retrieve", help="search a session's history (active branch) and a trusted workspace"
    )
    r.add_argument("--session", metavar="FILE", help="Pi session .jsonl file (history scope)")
    r.add_argument("--leaf", metavar="ID")
    r.add_argument("--max-results", type=int, metavar="N")
    r.add_argument(
        "--model",
        metavar="PROVIDER/ID",
        help="the destination of the hits: write them for it (docs/privacy.md); default: "
        "classify only",
    )
    _workspace_arguments(r)
    r.add_argument(
        "--scope",
        action="append",
        choices=get_args(Scope),
        help=(
            "what to search (repeatable; default: history, plus project with --workspace; git:"
            " the commit history of a trusted --workspace)"
        ),
    )
    r.add_argument("--json", action="store_true", help="print the ds4/retrieve result as JSON")
    r.add_argument("query", help="what to search for (`-`: read it from standard input)")
    r.set_defaults(func=commands.retrieve)

    m = sub.add_parser("manifest", help="show a stored plan manifest")
    m.add_argument("id", nargs="?", help="manifest id (printed by `ds4 plan`)")
    m.add_argument("--latest", action="store_true", help="the newest manifest of --session")
    m.add_argument("--session", metavar="FILE")
    m.add_argument("--view", choices=get_args(ManifestView), default="summary")
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=commands.manifest)

    u = sub.add_parser(
        "usage",
        help="record a provider's usage of a planned call (calibrates that model's budgets)",
    )
    u.add_argument("--manifest", required=True, metavar="ID", help="the plan's manifest id")
    u.add_argument(
        "--input",
        type=int,
        required=True,
        metavar="N",
        help="input tokens not read from the prompt cache (Pi's usage.input)",
    )
    u.add_argument("--output", type=int, default=0, metavar="N", help="output tokens")
    u.add_argument(
        "--cache-read", type=int, default=0, metavar="N", help="input tokens read from the cache"
    )
    u.add_argument(
        "--cache-write", type=int, default=0, metavar="N", help="input tokens written to the cache"
    )
    u.add_argument(
        "--model",
        metavar="PROVIDER/ID",
        help="who answered (default: the model the manifest was planned for)",
    )
    u.add_argument(
        "--stop-reason",
        metavar="REASON",
        help="Pi's stopReason (stop, length, toolUse, error, aborted; error and aborted do not "
        "calibrate)",
    )
    u.add_argument("--json", action="store_true", help="print the recorded usage as JSON")
    u.set_defaults(func=commands.usage)

    i = sub.add_parser(
        "index",
        help="index (or incrementally sync) session files, or the .jsonl files of a directory",
    )
    i.add_argument("--force", action="store_true", help="rebuild even if unchanged")
    i.add_argument("--json", action="store_true")
    i.add_argument(
        "files",
        nargs="+",
        metavar="PATH",
        help="a Pi session file, or a directory: its .jsonl files (not subdirectories), by name",
    )
    i.set_defaults(func=commands.index)

    c = sub.add_parser(
        "compact",
        help="prepare a compaction of a session (offline summary); prints the entry to append",
    )
    _session_arguments(c)
    c.add_argument(
        "--reason",
        choices=COMPACTION_REASONS,
        default="manual",
        help="why the session is compacted, as Pi says it (default manual)",
    )
    c.add_argument(
        "--first-kept",
        metavar="ID",
        help="first entry kept verbatim (default: keep the newest compaction.keepRecentTokens "
        "tokens, cut at a turn boundary)",
    )
    compact_output = c.add_mutually_exclusive_group()
    compact_output.add_argument(
        "--json", action="store_true", help="print the ds4/compact result as JSON"
    )
    compact_output.add_argument(
        "--entry",
        action="store_true",
        help="print only the Pi compaction entry to append to the session, as one JSON line "
        "(nothing on a server-owned session: ds4 appended it)",
    )
    c.set_defaults(func=commands.compact)

    s = sub.add_parser("summaries", help="show a session's summary graph (compactions)")
    _session_arguments(s)
    summaries_output = s.add_mutually_exclusive_group()
    summaries_output.add_argument(
        "--json", action="store_true", help="print the ds4.summaries view as JSON"
    )
    summaries_output.add_argument(
        "--dot",
        action="store_true",
        help="print the graph as Graphviz DOT (e.g. | dot -Tsvg > graph.svg)",
    )
    summaries_output.add_argument(
        "--format",
        choices=FORMATS,
        help="draw the graph with Graphviz's `dot` (on PATH) as SVG or PNG (PNG needs --output)",
    )
    s.add_argument(
        "--output",
        metavar="PATH",
        help="write to PATH instead of stdout (never the session file or a .jsonl path)",
    )
    s.set_defaults(func=commands.summaries)

    y = sub.add_parser("memory", help="list the memory items and pins (with provenance)")
    y.add_argument("--session", metavar="FILE", help="sync this session; list what applies to it")
    y.add_argument("--all", action="store_true", help="also superseded, invalid, expired, deleted")
    y.add_argument("--json", action="store_true", help="print the ds4/memory result as JSON")
    y.set_defaults(func=commands.memory)

    _memory_write_parsers(sub)
    o = sub.add_parser("session", help="server-owned sessions: open one, append messages")
    session_sub = o.add_subparsers(dest="session_command", metavar="(open | append)")
    session_sub.required = True
    so = session_sub.add_parser(
        "open", help="create a session ds4 owns (in the data directory), or reopen one by --id"
    )
    so.add_argument(
        "--cwd",
        help="working directory recorded in a new session's header (default: the current "
        "one); reopening --id with another one than the session's is refused",
    )
    so.add_argument("--title", help="the session's name (a Pi session_info entry)")
    so.add_argument("--id", dest="session_id", metavar="ID", help="reopen (or create) this id")
    so.add_argument("--json", action="store_true", help="print the ds4/sessionOpen result")
    so.set_defaults(func=commands.session_open)
    sa = session_sub.add_parser(
        "append", help="append Pi messages (JSON Lines, one message per line) to an owned session"
    )
    sa.add_argument("file", metavar="FILE", help="the owned session file (from `session open`)")
    sa.add_argument(
        "--messages",
        dest="messages_from",
        metavar="PATH",
        default="-",
        help="JSON Lines file of messages (default -: standard input)",
    )
    sa.add_argument("--parent", metavar="ID", help="parent of the first message (default: leaf)")
    sa.add_argument(
        "--skip",
        type=int,
        default=0,
        metavar="N",
        help="skip the first N input lines (resume an interrupted append: its stderr names N)",
    )
    sa.add_argument("--json", action="store_true", help="print the ds4/sessionAppend result")
    sa.set_defaults(func=commands.session_append)

    v = sub.add_parser("privacy", help="what a model's provider may see under the privacy settings")
    v.add_argument(
        "--model",
        metavar="PROVIDER/ID",
        help="the model (or just its provider) to explain; default: an unnamed provider",
    )
    v.add_argument("--json", action="store_true", help="print the ds4.privacy result as JSON")
    v.set_defaults(func=commands.privacy)

    h = sub.add_parser("health", help="database and engine health")
    h.add_argument("--json", action="store_true")
    h.set_defaults(func=commands.health)

    b = sub.add_parser("rebuild", help="rebuild the index of every known session from its JSONL")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=commands.rebuild)

    add_artifact_parser(sub)
    return parser
