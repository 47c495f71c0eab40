"""One function per `ds4` command: `plan`, `retrieve`, `manifest`, `index`, `compact`,
`summaries`, `session open`, `session append`, `health`, `rebuild`.

Each takes `(engine, args, out, err)`: an open `ContextEngine`, the parsed arguments, the
stream for results and the stream for messages; it returns the exit code (`errors.EXIT_*`).
With `--json` a command prints its result's `to_wire()`, the object the matching LSP request
returns; without it, the report of `printers`. A `RequestError` raised here is a usage error
(exit 2), reported by `runner.run`.
"""

from __future__ import annotations

import argparse
import io
import os
import re
from collections.abc import Callable
from dataclasses import replace
from typing import TextIO

from ..engine import ContextEngine
from ..engine.profiles import UNKNOWN
from ..quoting import terminal_text
from ..requests import (
    CompactRequest,
    ManifestRequest,
    MemoryWriteRequest,
    ModelSpec,
    PlanRequest,
    RequestError,
    RetrieveRequest,
    SessionAppendRequest,
    SessionOpenRequest,
    SessionRef,
    UsageCounts,
    UsageReport,
)
from ..results import RebuildFailure, SyncReport
from ..store.database import is_database_locked
from .arguments import (
    absolute,
    ends_with_newline,
    messages_of,
    parse_model,
    session_files_of,
)
from .errors import EXIT_OK, EXIT_PARTIAL, locked_message, usage_message
from .graphviz import draw, require_output
from .printers import (
    compaction_entry,
    print_compact,
    print_health,
    print_index,
    print_manifest,
    print_memory,
    print_plan,
    print_privacy,
    print_rebuild,
    print_retrieve,
    print_summaries,
    print_usage,
)
from .terminal import Progress, check_output_path, emit_json, json_text, write_output

Command = Callable[[ContextEngine, argparse.Namespace, TextIO, TextIO], int]
"""A command function: `(engine, args, out, err) -> exit code` (see the module docstring)."""


def plan(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 plan --session FILE REQUEST`: sync the session (and a --workspace), plan the next
    model call, print the `ds4/plan` result (`--json`) or the plan report with its manifest.

    Raises:
        RequestError: a bad --model or --context-window, or the engine refused the request.
    """
    provider, model_id = parse_model(args.model)
    if args.context_window is not None and args.context_window < 1:
        raise RequestError("expected a positive number of tokens", "model.contextWindow")
    _sync_with_progress(engine, args.session, err)
    _open_workspace(engine, args, err)
    result = engine.plan(
        PlanRequest(
            session=SessionRef(args.session, args.leaf),
            request=args.request,
            model=ModelSpec(provider=provider, id=model_id, context_window=args.context_window),
            fixed_tokens=args.fixed_tokens,
        )
    )
    if args.json:
        emit_json(result.to_wire(), out)
    else:
        manifest = engine.manifest(ManifestRequest(id=result.manifest_id, view="full"))
        print_plan(result, manifest.document, out, db=args.db)
    return EXIT_OK


def retrieve(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 retrieve QUERY`: search the session's active branch (history scope), a trusted
    --workspace (project scope) and its Git history (git scope, only when asked for with
    --scope git); print the `ds4/retrieve` result or the hits.

    Raises:
        RequestError: the history scope without --session, the git scope without --workspace,
            or the engine refused the request.
    """
    scopes = tuple(
        dict.fromkeys(args.scope or ["history", *(["project"] if args.workspace else [])])
    )
    if "history" in scopes and not args.session:
        raise RequestError(
            "the history scope needs --session FILE (or use --scope project)", "session"
        )
    if "git" in scopes and not args.workspace:
        raise RequestError(
            "the git scope needs --workspace DIR --trust (a Git work tree)", "workspace"
        )
    provider, model_id = parse_model(args.model)
    _open_workspace(engine, args, err)
    result = engine.retrieve(
        RetrieveRequest(
            query=args.query,
            session=SessionRef(args.session, args.leaf) if args.session else None,
            scopes=scopes,  # type: ignore[arg-type]
            max_results=args.max_results,
            model=ModelSpec(provider=provider, id=model_id) if provider else None,
        )
    )
    if args.json:
        emit_json(result.to_wire(), out)
    else:
        print_retrieve(result, out)
    return EXIT_OK


def manifest(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 manifest (ID | --latest --session FILE)`: print a stored manifest in --view.

    Raises:
        RequestError: neither ID nor --latest, --latest without --session, or an unknown ID
            (the message names the database in use).
    """
    if not args.id and not args.latest:
        raise RequestError("give a manifest ID (printed by `ds4 plan`), or --latest --session FILE")
    if args.latest and not args.id and not args.session:
        raise RequestError("--latest needs --session FILE")
    try:
        result = engine.manifest(
            ManifestRequest(
                id=args.id,
                session=SessionRef(args.session) if args.session else None,
                latest=args.latest,
                view=args.view,
            )
        )
    except RequestError as exc:
        if exc.field != "id" or not args.id:
            raise
        raise RequestError(
            f"{exc} (`ds4 manifest --latest --session FILE`; database in use: "
            f"'{engine.database_path}', set with --db or DS4_DB)",
            "id",
        ) from exc
    if args.json:
        emit_json(result.to_wire(), out)
    else:
        print_manifest(result.document, out)
    return EXIT_OK


def usage(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 usage --manifest ID --input N [...]`: record a provider's usage of a planned call
    (`ds4/usage`), for the `--model` given or the one the manifest was planned for, and print
    the profile's calibration after it.

    Raises:
        RequestError: a count below 0, a bad --model, a manifest planned for an unknown model
            without --model, or an unknown ID (the message names the database in use); the
            field is the wire name, which `errors.usage_message` turns into the option.
    """
    if not args.manifest:
        raise RequestError("manifestId: expected the manifest id `ds4 plan` printed", "manifestId")
    provider, model = parse_model(args.model)
    if provider is None or model is None:
        try:
            planned = engine.manifest(ManifestRequest(id=args.manifest)).document
        except RequestError as exc:
            raise RequestError(
                f"{str(exc).removeprefix('id:').strip()} (database in use: "
                f"'{engine.database_path}', set with --db or DS4_DB)",
                "manifestId",
            ) from exc
        provider, model = str(planned.get("provider")), str(planned.get("model"))
        if UNKNOWN in (provider, model):
            raise RequestError(
                "--model: the manifest was planned for an unknown model; say who answered "
                "with --model PROVIDER/ID",
                "model",
            )
    result = engine.record_usage(
        UsageReport(
            manifest_id=args.manifest,
            provider=provider,
            model=model,
            usage=UsageCounts(args.input, args.output, args.cache_read, args.cache_write),
            stop_reason=args.stop_reason,
        )
    )
    if args.json:
        emit_json(result.to_wire(), out)
    else:
        print_usage(result, out)
    return EXIT_OK


def index(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 index PATH...`: sync each session file (`session_files_of`: a FILE, or the `.jsonl`
    files of a DIR); a file that cannot be indexed is reported on stderr (and, with --json, as
    a `RebuildFailure` `{sessionFile, error}` in its place in the list) and the others are
    still indexed. Exit 3 when any file failed."""
    outcomes: list[SyncReport | RebuildFailure] = []
    failures = 0
    targets = session_files_of(args.files)
    for file, problem in targets:
        if problem is not None:
            failures += 1
            err.write(f"ds4: {terminal_text(problem)}\n")
            # (named as listed, not resolved: a broken link is named, not its missing target)
            outcomes.append(RebuildFailure(os.path.abspath(os.path.expanduser(file)), problem))
            continue
        progress = Progress(err)
        try:
            synced = engine.index_session(file, force=args.force, progress=progress)
            outcomes.append(synced)
            for warning in synced.warnings:  # e.g. a copy with the same session id
                err.write(f"ds4: warning: {terminal_text(warning)}\n")
        except Exception as exc:
            message = _index_failure(engine, exc)
            if message is None:
                raise
            failures += 1
            err.write(f"ds4: {terminal_text(message)}\n")
            outcomes.append(RebuildFailure(absolute(file), message))
        finally:
            progress.close()
    results = [r for r in outcomes if isinstance(r, SyncReport)]
    if args.json:
        emit_json([r.to_wire() for r in outcomes], out)
    else:
        print_index(results, out)
    if failures == len(targets):
        err.write(f"ds4: none of the {failures} file(s) could be indexed (see above)\n")
    elif failures:
        err.write(
            f"ds4: {failures} of {len(targets)} file(s) could not be indexed (see above); "
            + ("the other one was\n" if len(results) == 1 else f"the other {len(results)} were\n")
        )
    return EXIT_PARTIAL if failures else EXIT_OK


def _index_failure(engine: ContextEngine, exc: Exception) -> str | None:
    """The message for a session file `ds4 index` could not index because of `exc` (the file
    is missing, unreadable or not a Pi session; or the database stayed locked past the busy
    timeout), or None when `exc` is none of those (an unexpected error)."""
    if isinstance(exc, RequestError):
        return usage_message(exc, "index")
    if is_database_locked(exc):
        return locked_message(engine)
    return None


def compact(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 compact --session FILE`: prepare one compaction with the offline summarizer; print
    the `ds4/compact` result (`--json`), the Pi entry to append (`--entry`, one JSON line) or
    the report. A Pi session file is never written; a server-owned one (docs/sessions.md)
    gets the entry appended by the engine, which is said on `err` with its id (and `--entry`
    then prints nothing, so `--entry >> FILE` cannot add a second compaction).

    Raises:
        RequestError: the engine refused the request (its "pass firstKeptEntryId" hint is
            given in the CLI's words).
    """
    _sync_with_progress(engine, args.session, err)
    try:
        result = engine.compact(
            CompactRequest(
                session=SessionRef(args.session, args.leaf),
                reason=args.reason,
                first_kept_entry_id=args.first_kept,
            )
        )
    except RequestError as exc:
        if exc.field is not None or "pass firstKeptEntryId" not in str(exc):
            raise
        raise RequestError(  # the engine's hint in the CLI's words
            str(exc).replace(
                "pass firstKeptEntryId",
                "pass --first-kept ID (or lower --set compaction.keepRecentTokens=N)",
            )
        ) from exc
    if result.appended:
        # Nothing is left to append: `--entry >> FILE` must add nothing (stdout stays empty).
        nothing = "; --entry prints nothing, there is no entry left to append" if args.entry else ""
        err.write(
            f"ds4 compact: this session is server-owned; the compaction was appended as entry "
            f"{terminal_text(result.entry_id)} and committed{nothing}\n"
        )
    if args.entry:
        if result.appended:
            return EXIT_OK
        # `--entry >> FILE` must not glue the entry to an unterminated last line.
        lead = "" if ends_with_newline(args.session) else "\n"
        out.write(lead + json_text(compaction_entry(result), one_line=True))
    elif args.json:
        emit_json(result.to_wire(), out)
    else:
        print_compact(result, out, args.session)
    return EXIT_OK


def summaries(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 summaries --session FILE`: the session's summary graph as the `ds4.summaries` view
    (`--json`), Graphviz DOT (`--dot`), an image drawn by Graphviz (`--format svg|png`) or the
    report, to stdout or `--output PATH`.

    Raises:
        RequestError: the engine refused the request, Graphviz is missing or failed
            (`graphviz.render_with_graphviz`), or --output is refused (PNG without one, the
            session or database itself: `terminal.check_output_path`) or cannot be written.
    """
    require_output(args.format, args.output)  # usage errors before a long sync
    check_output_path(args.output, args.session, str(engine.database_path))
    _sync_with_progress(engine, args.session, err)
    ref = SessionRef(args.session, args.leaf)
    if args.dot or args.format:
        dot = engine.summaries(ref, dot=True).dot
        assert dot is not None
        if args.format:
            draw(dot, args.format, args.output, out, err)
        else:
            write_output(dot, args.output, out, err, "the DOT graph")
        return EXIT_OK
    view = engine.summaries(ref)
    text = io.StringIO()
    if args.json:
        emit_json(view.to_wire(), text)
    else:
        print_summaries(view, text)
    write_output(
        text.getvalue(), args.output, out, err, "the JSON view" if args.json else "the report"
    )
    return EXIT_OK


def memory(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 memory [--session FILE] [--all]`: the memory items and pins (the `ds4/memory`
    result), those that apply to the session (synced first) or all of them.

    Raises:
        RequestError: a missing or unreadable session file (`--session`).
    """
    session = SessionRef(args.session) if args.session else None
    result = engine.memory(session, include_inactive=args.all)
    if args.json:
        emit_json(result.to_wire(), out)
    else:
        print_memory(result, out)
    return EXIT_OK


MEMORY_WRITE_NOTE = (
    "ds4 does not write this session file: append the line above to it as it is (e.g. "
    "`>> FILE`), or have the agent's Pi extension call pi.appendEntry(customType, data) "
    "with the line's customType and data; the next sync imports it."
)
"""What `ds4 pin`, `unpin`, `remember`, `forget` say about the entry they print."""


def memory_write(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 pin|unpin|remember|forget --session FILE ...`: one write checked against the
    session's current items (docs/memory.md "Writes"): the `ds4/pin` ... result (`--json`), or
    the complete entry line (`entry`: `{type, id, parentId, timestamp, customType, data}`,
    after a line break when the session file lacks its final one, so `>> FILE` appends it
    whole) with a note on stderr saying who appends it (a session the server owns gets it
    appended: the note then names its id).

    Raises:
        RequestError: a bad argument or session file; RequestFailedError when the current
            items refuse the write (a repeat, a conflict, an unknown or inactive id).
    """
    operation = args.operation
    text = args.text if operation in ("pin", "remember") else None
    target = args.text if operation in ("unpin", "forget") else None
    result = engine.write_memory(
        MemoryWriteRequest(
            session=SessionRef(args.session, args.leaf),
            operation=operation,
            text=text,
            scope=getattr(args, "scope", None),
            classification=getattr(args, "classification", None),
            key=getattr(args, "key", None),
            source_entry_ids=tuple(getattr(args, "source_entry", ())),
            source_file=getattr(args, "source_file", None),
            supersedes=getattr(args, "supersedes", None),
            target_id=target,
            status=getattr(args, "status", None),
            reason=getattr(args, "reason", None),
        )
    )
    if args.json:
        emit_json(result.to_wire(), out)
        return EXIT_OK
    lead = "" if result.appended or ends_with_newline(args.session) else "\n"
    out.write(lead + json_text(result.entry, one_line=True))
    if result.appended:
        err.write(f"ds4: appended as entry {result.entry_id} of the session\n")
    else:
        err.write(f"ds4: {MEMORY_WRITE_NOTE}\n")
    return EXIT_OK


def privacy(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 privacy [--model PROVIDER/ID]`: what that provider may see under the settings (the
    `ds4.privacy` result). A bare provider id (no `/`) is accepted."""
    provider = args.model.split("/", 1)[0] if args.model else None
    result = engine.privacy(provider or None)
    if args.json:
        emit_json(result.to_wire(), out)
    else:
        print_privacy(result, out)
    return EXIT_OK


def session_open(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 session open [--cwd DIR] [--title T] [--id ID]`: create a server-owned session (or
    reopen `--id`); print the `ds4/sessionOpen` result (`--json`) or its file and id."""
    cwd = absolute(args.cwd) if args.cwd is not None else None
    result = engine.session_open(
        SessionOpenRequest(cwd=cwd, title=args.title, session_id=args.session_id)
    )
    if args.json:
        emit_json(result.to_wire(), out)
    else:
        state = "created" if result.created else "reopened"
        out.write(
            f"ds4 session open: {state} {terminal_text(result.session_id)}"
            f" (leaf {terminal_text(result.leaf_id)})\n{terminal_text(result.file)}\n"
        )
    return EXIT_OK


APPEND_BATCH = 1000
"""Messages `ds4 session append` sends per engine call (the `ds4/sessionAppend` limit)."""


def session_append(
    engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO
) -> int:
    """`ds4 session append FILE [--messages PATH] [--parent ID] [--skip N]`: append the Pi
    messages of a JSON Lines input (one message per line; blank lines and the first N lines
    skipped) to the owned session FILE, in batches of 1000 chained one after the other; print
    the `ds4/sessionAppend` result of all of them (`--json`) or the new entry ids. With more
    than one batch, each finished one is said on `err` (its input lines, its last entry and the
    `--skip` that resumes after it): a finished batch stays when a later one fails.

    Raises:
        RequestError: a line that is not JSON, or what `session_append` refuses (not an
            owned session; a bad message, named by its input line and field path).
    """
    messages = messages_of(args.messages_text, args.skip)
    entry_ids: list[str] = []
    parent = args.parent
    result = None
    batches = -(-len(messages) // APPEND_BATCH)
    first_line = args.skip + 1
    for start in range(0, len(messages), APPEND_BATCH):
        batch = messages[start : start + APPEND_BATCH]
        try:
            result = engine.session_append(
                SessionAppendRequest(SessionRef(args.file), [m for _, m in batch], parent)
            )
        except RequestError as exc:
            index = re.match(r"messages\[(\d+)\]", exc.field or "")
            if index is not None:  # name the input line, keep the field path
                line = batch[int(index.group(1))][0]
                raise RequestError(f"--messages: line {line}: {exc}") from None
            raise
        entry_ids += result.entry_ids
        parent = None  # the next batch follows this one (the new leaf)
        if batches > 1:  # a finished batch stays if a later one fails or the run is killed
            number, last_line = start // APPEND_BATCH + 1, batch[-1][0]
            resume = f" (resume after it with --skip {last_line})" if number < batches else ""
            err.write(
                f"ds4 session append: appended batch {number}/{batches}: lines"
                f" {first_line}-{last_line}, last entry {terminal_text(result.entry_ids[-1])}"
                f"{resume}\n"
            )
            err.flush()
            first_line = last_line + 1
    assert result is not None
    result = replace(result, entry_ids=tuple(entry_ids))
    if args.json:
        emit_json(result.to_wire(), out)
    else:
        out.write(
            f"ds4 session append: {len(entry_ids)} message(s) appended to"
            f" {terminal_text(result.session_id)}; leaf {terminal_text(result.leaf_id)}\n"
        )
    return EXIT_OK


def health(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 health`: the database's and engine's health (the `ds4.health` result without
    `server`)."""
    result = engine.health()
    if args.json:
        emit_json(result.to_wire(), out)
    else:
        print_health(result, out)
    return EXIT_OK


def rebuild(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 rebuild`: rebuild the index of every known session from its JSONL; exit 3 when some
    could not be rebuilt (they are listed, and counted on stderr)."""
    progress = Progress(err)
    try:
        result = engine.rebuild(progress=progress)
    finally:
        progress.close()
    if args.json:
        emit_json(result.to_wire(), out)
    else:
        print_rebuild(result, out)
    if result.failed:
        err.write(f"ds4: {len(result.failed)} session(s) could not be rebuilt\n")
    return EXIT_PARTIAL if result.failed else EXIT_OK


def _sync_with_progress(engine: ContextEngine, file: str, err: TextIO) -> None:
    """Index (or incrementally sync) `file` first, with a progress bar for a long first read."""
    progress = Progress(err)
    try:
        engine.index_session(file, progress=progress)
    finally:
        progress.close()


def _open_workspace(engine: ContextEngine, args: argparse.Namespace, err: TextIO) -> None:
    """Set the workspace of --workspace/--trust and sync its index (with a progress bar).

    Raises:
        RequestError: --trust without --workspace (field `trust`), or a --workspace the engine
            refuses: not a directory, the filesystem root or the home directory (field
            `workspace`, named `--workspace` by `errors.usage_message`).
    """
    if not args.workspace:
        if args.trust:
            raise RequestError("--trust needs --workspace DIR", "trust")
        return
    status = engine.project.set_root(args.workspace, args.trust)
    if status.status == "untrusted":
        err.write(
            f"ds4: workspace '{args.workspace}' is untrusted: its files are not read; "
            "add --trust to use them\n"
        )
        return
    progress = Progress(err)
    try:
        synced = engine.project.sync(progress=progress)
    finally:
        progress.close()
    for warning in synced.warnings or ():
        err.write(f"ds4: warning: {terminal_text(warning)}\n")
    if synced.truncated:
        err.write(
            "ds4: warning: the project index stopped at project.maxFiles / project.maxTotalBytes;"
            " files after that (in path order) are not searched (raise them with --set)\n"
        )
    if synced.status == "error":
        err.write(f"ds4: warning: project knowledge is off: {terminal_text(synced.error)}\n")
