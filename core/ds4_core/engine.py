"""`ContextEngine`: the one facade the `ds4` CLI and the `ds4_lsp` server call.

Each public method takes a typed request (`ds4_core.requests`) and returns a JSON-ready dict in
the wire shape of the matching LSP request (camelCase; docs/protocol.md), so the CLI's `--json`
and the server print the same objects. Methods block (SQLite, files): the LSP layer runs them
off its event loop. They are safe to call from several threads at once.

Failure rules (docs/architecture.md "Fail open, except privacy"): input the caller can fix
raises `RequestError` naming the field; any failure while indexing, retrieving or planning
returns the caller's messages unchanged (mode `fallback` with a reason). Logs carry counts, ids
and timings only.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import peewee

from . import __version__
from .compaction.nodes import SummaryNode
from .compaction.records import nodes_from_compaction_entry, unverified_nodes
from .compaction.render import graph_view, render_dot
from .compaction.service import prepare_compaction
from .compaction.span import SpanError, latest_compaction, prepare_span
from .config import DEFAULT_CONFIG, Config
from .json_bounds import echo
from .logs import describe_failure
from .manifest import (
    VIEWS,
    ManifestWindow,
    build_manifest,
    encode_manifest,
    new_manifest_id,
    prompt_hash,
    view_manifest,
)
from .models import DEFAULT_CONTEXT_WINDOW, lookup_model
from .planner import (
    ContextBudget,
    ContextPlan,
    ModelProfile,
    Supplement,
    calculate_budget,
    fallback_plan,
    plan_context,
    resolve_overrides,
)
from .requests import (
    COMPACTION_REASONS,
    CompactRequest,
    DatabaseUnavailableError,
    ManifestRequest,
    ModelSpec,
    PlanRequest,
    RequestError,
    RequestFailedError,
    RetrieveRequest,
    SessionRef,
    Summarizer,
)
from .retrieval import (
    HistoryRetrieval,
    describe_task,
    last_user_text,
    render_evidence,
    retrieve_history,
)
from .sessions import (
    LAST_ENTRY,
    SessionContext,
    SessionFormatError,
    context_for_path,
    read_all,
)
from .sessions.paths import PathIndex
from .sessions.prefix import FileShrankError, PrefixHashes, extend, first_change, hash_prefix
from .sessions.reader import SessionEntry, SessionFile, read_header, read_more
from .sessions.sync import SyncResult, sessions_with_copies, sync_session
from .store import Store, open_store, resolve_database_path
from .store import manifests as manifest_repo
from .store import sessions as session_repo
from .store import summaries as summary_repo
from .store.database import (
    ForeignDatabaseError,
    database_locked_message,
    is_database_locked,
    utc_now_iso,
)
from .tokens import ESTIMATOR_VERSION, estimate_message_tokens

if TYPE_CHECKING:
    from .project.folders import ProjectFolders
    from .project.search import ProjectHit
    from .project.workspace import ValidatedSearch

log = logging.getLogger("ds4_core.engine")

ProgressCallback = Callable[[int, int, str], None]
"""progress(done, total, message): units are whatever `total` counts (bytes or sessions)."""

_SESSION_CACHE_SIZE = 8


@dataclass
class _CachedSession:
    """A parsed session file, valid while its size stays the same and its bytes hash to
    `prefix` (size and mtime alone are not trusted: sessions.prefix), with the contexts built
    from it per leaf and their messages' token estimates (the costly part of a plan).
    `read_more` extends the parse when the file only grew."""

    size: int
    mtime_ns: int
    file: SessionFile
    prefix: PrefixHashes
    contexts: dict[str | None, tuple[SessionContext, list[int]]] = field(default_factory=dict)
    paths: PathIndex | None = None

    def index(self) -> PathIndex:
        """Entries by id and the active paths walked (built on first use)."""
        if self.paths is None:
            self.paths = PathIndex(self.file.entries)
        return self.paths

    def entry(self, entry_id: str) -> SessionEntry | None:
        """The entry with `entry_id` (the last one on duplicate ids), or None."""
        return self.index().entry(entry_id)


@dataclass
class _Prepared:
    """A session (or caller messages) made ready for planning or retrieval."""

    messages: list[dict[str, Any]]
    message_tokens: list[int]
    source_ids: list[str | None]
    session_id: str | None
    session_file: str | None
    leaf_id: str | None
    branch_entry_ids: set[str]
    session_model: tuple[str, str] | None
    profile: ModelProfile
    budget: ContextBudget
    warnings: list[str]
    summary_ids: dict[str, str] = field(default_factory=dict)

    def plan(
        self, fixed_tokens: int, config: Config, supplements: Sequence[Supplement] = ()
    ) -> ContextPlan:
        """`plan_context` over these messages (their source ids and token counts reused)."""
        return plan_context(
            self.messages,
            fixed_tokens=fixed_tokens,
            budget=self.budget,
            config=config,
            supplements=supplements,
            message_source_ids=self.source_ids,
            message_tokens=self.message_tokens,
        )


class ContextEngine:
    """The DS4 context engine over one SQLite database.

    Args:
        database_path: database file; None resolves `DS4_DB`, the `storage.databasePath`
            setting, then the per-user default (`ds4_core.store.default_database_path`).
        settings: settings in the key names of docs/reference.md §2 (nested or dotted). Invalid
            values are ignored and listed in `config_warnings`.

    The database is opened lazily on first use, so constructing an engine never touches disk.
    """

    def __init__(
        self,
        *,
        database_path: str | os.PathLike[str] | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.config: Config
        self.config, self.config_warnings = DEFAULT_CONFIG.with_settings(settings)
        self._explicit_db = str(database_path) if database_path is not None else None
        self.database_path: Path = resolve_database_path(
            self._explicit_db, None, os.environ, self.config["storage.databasePath"]
        )
        self._store: Store | None = None
        self._store_lock = threading.Lock()
        self._sessions: OrderedDict[str, _CachedSession] = OrderedDict()
        self._sessions_lock = threading.Lock()
        self._ephemeral = ManifestWindow(capacity=64)
        self._workspace: ProjectFolders | None = None

    # ----------------------------------------------------------------- lifecycle

    @property
    def store(self) -> Store:
        """The open store (opened, migrated, or moved aside and rebuilt, on first use)."""
        with self._store_lock:
            if self._store is None:
                self._store = self._open_store()
            return self._store

    def _open_store(self) -> Store:
        """Open the store, logging its notices.

        Raises:
            DatabaseUnavailableError: it cannot be opened or created; the message names the
                path, the reason and the settings that choose another location.
        """
        try:
            store = open_store(
                self.database_path, busy_timeout_ms=self.config["storage.busyTimeoutMs"]
            )
        except ForeignDatabaseError as exc:
            raise DatabaseUnavailableError(str(exc)) from exc
        except (OSError, sqlite3.Error, peewee.PeeweeException) as exc:
            if is_database_locked(exc):
                raise DatabaseUnavailableError(
                    database_locked_message(
                        self.database_path, self.config["storage.busyTimeoutMs"]
                    )
                ) from exc
            reason = getattr(exc, "strerror", None) or exc
            raise DatabaseUnavailableError(
                f"cannot open the database '{self.database_path}': {reason}; choose a writable "
                "location with --db, initializationOptions.databasePath or DS4_DB"
            ) from exc
        if store.notices:
            log.warning("database notices: %d (shown to the user)", len(store.notices))
        return store

    def fail_leftover_compactions(self) -> int:
        """Mark compaction batches still `prepared` as `failed` (a server calls this once at
        startup: nobody is left to report their commit). Returns how many nodes changed. A
        batch whose entry later appears in its session file still becomes `committed` at the
        next sync. The CLI does not call it: its batches wait for the entry to be appended.
        """
        failed = summary_repo.fail_leftover_prepared(self.store)
        if failed:
            log.info("compaction: %d prepared summary node(s) left over marked failed", failed)
        return failed

    @property
    def notices(self) -> list[str]:
        """Messages about the database a user should see (e.g. a corrupt file moved aside)."""
        return list(self._store.notices) if self._store is not None else []

    def update_settings(self, raw: Mapping[str, Any] | None) -> list[str]:
        """Apply settings on top of the current ones; returns warnings for ignored values."""
        with self._store_lock:
            config, warnings = self.config.with_settings(raw)
            self.config, self.config_warnings = config, warnings
        return warnings

    def close(self) -> None:
        """Close the database. The engine reopens it if used again."""
        with self._store_lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    # ----------------------------------------------------------------- indexing

    def index_session(
        self,
        path: str | os.PathLike[str],
        *,
        force: bool = False,
        progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Sync one Pi session file into the index (docs/reference.md §3.12).

        Returns the wire form of `SyncResult`: {sessionId, sessionFile, outcome, reason,
        entriesAdded, entriesTotal, malformedLines, bytesRead, durationMs}.

        Raises:
            RequestError: the file is missing, unreadable or not a Pi session (field `file`).
            OSError, sqlite3.Error: the database cannot be opened or written.
        """
        resolved = self._session_path(str(path), "file")
        result = self._sync(resolved, force=force, progress=progress, field="file")
        return _sync_to_wire(result)

    def rebuild(self, progress: ProgressCallback | None = None) -> dict[str, Any]:
        """Force a rebuild of every session the database knows.

        Returns {sessions, entries, failed: [{sessionFile, error}], durationMs, results: [...]}.
        A session whose file disappeared or became unreadable is listed in `failed` and the
        others still rebuild. In a trusted workspace the whole project is rescanned too
        (`project`). `progress(done, 100, message)` is one rising percentage: the sessions,
        then (with a project) the sessions as 0-50 % and the project as 50-100 %.
        """
        started = time.perf_counter()
        known = session_repo.list_sessions(self.store)
        results: list[dict[str, Any]] = []
        failed: list[dict[str, str]] = []
        total = len(known)
        with_project = self._workspace is not None and self._workspace.active()
        session_share = 50 if with_project else 100

        def session_progress(done: int, message: str) -> None:
            if progress:
                progress((session_share * done) // max(1, total), 100, message)

        def project_progress(done: int, whole: int, message: str) -> None:
            if progress:
                progress(
                    session_share + ((100 - session_share) * done) // max(1, whole), 100, message
                )

        session_progress(0, f"rebuilding {total} session(s)")
        for done, row in enumerate(known, start=1):
            session_file = row["session_file"]
            if not Path(session_file).is_file():
                failed.append(
                    {
                        "sessionFile": session_file,
                        "error": "the session file no longer exists; restore it to index it "
                        "again (the old index of this session is kept until then)",
                    }
                )
            else:
                try:
                    synced = self._sync(Path(session_file), force=True, progress=None)
                    results.append(_sync_to_wire(synced))
                except RequestError as exc:  # unreadable, or no longer a Pi session
                    failed.append({"sessionFile": session_file, "error": str(exc)})
            session_progress(done, f"{done}/{total} sessions")
        project = None
        if with_project:
            try:
                project = self.sync_project(force=True, progress=project_progress)
            except Exception as exc:  # the session rebuild stands; report the project part
                log.warning("project rescan failed: error=%s", describe_failure(exc))
                project = {"status": "error", "error": type(exc).__name__}
        duration_ms = (time.perf_counter() - started) * 1000
        log.info(
            "rebuild: sessions=%d failed=%d duration_ms=%.1f",
            len(results),
            len(failed),
            duration_ms,
        )
        return {
            "sessions": len(results),
            "entries": sum(r["entriesTotal"] for r in results),
            "failed": failed,
            "durationMs": round(duration_ms, 3),
            "results": results,
            "project": project,
        }

    def _sync(
        self,
        path: Path,
        *,
        force: bool,
        progress: ProgressCallback | None,
        field: str = "session.file",
    ) -> SyncResult:
        """Sync `path` into the index.

        Raises:
            RequestError: the file cannot be read or is not a Pi session (naming `field`).
            OSError, sqlite3.Error: the database cannot be opened or written.
        """

        def bytes_progress(done: int, total: int) -> None:
            if progress:
                progress(done, total, "indexing session")

        store = self.store  # opened first, so an OSError below is about the session file
        try:
            result = sync_session(
                store,
                path,
                force=force,
                progress=bytes_progress if progress else None,
                on_compactions=self._import_compactions,
            )
        except SessionFormatError as exc:
            raise RequestError(str(exc), field) from exc
        except OSError as exc:
            raise RequestError(
                f"cannot read session file '{path}': {exc.strerror or exc}", field
            ) from exc
        log.info(
            "sync: session=%s outcome=%s added=%d total=%d malformed=%d duration_ms=%.1f",
            result.session_id,
            result.outcome,
            result.entries_added,
            result.entries_total,
            result.malformed_lines,
            result.duration_ms,
        )
        if result.warnings:  # (paths stay out of the log; the result and health name them)
            log.warning(
                "sync: session=%s warnings=%d (another file has this session id)",
                result.session_id,
                len(result.warnings),
            )
        return result

    def _import_compactions(self, session_id: str, entries: list[SessionEntry]) -> None:
        """Sync hook: record the summary nodes the session's compaction entries carry (ours
        become `committed`; Pi-native ones become `branch` nodes). One bad entry is logged and
        skipped; it never fails the sync."""
        for entry in entries:
            try:
                self._import_entry(session_id, entry)
            except Exception as exc:  # one odd entry must never block the session's index
                log.warning(
                    "compaction entry not imported: session=%s entry=%s error=%s",
                    session_id,
                    entry.entry_id,
                    describe_failure(exc),
                )

    def _import_entry(self, session_id: str, entry: SessionEntry) -> SummaryNode | None:
        """Store the nodes compaction `entry` carries; returns its root node (None for an
        entry with no summary).

        A ds4 record is trusted only when it fits the graph: when its summary id already holds
        another text in this session, or its children exist nowhere, the entry is imported as
        a Pi-native `branch` node instead (`metadata.untrustedDs4Record` says why), so the
        graph always holds the text the model saw.

        Raises:
            sqlite3.Error, ValueError: not even the Pi-native node could be stored (callers
                that must not fail, like the sync hook, log it and go on).
        """
        store = self.store
        nodes = nodes_from_compaction_entry(session_id, entry)
        if not nodes:
            return None
        try:
            summary_repo.import_committed(store, nodes)
        except (ValueError, sqlite3.IntegrityError) as exc:
            log.warning(
                "compaction entry imported unverified: session=%s entry=%s error=%s",
                session_id,
                entry.entry_id,
                describe_failure(exc),
            )
            nodes = unverified_nodes(session_id, entry, f"not a valid graph record: {exc}")
            summary_repo.import_committed(store, nodes)
        return summary_repo.get_node(store, session_id, nodes[-1].summary_id)

    # ----------------------------------------------------------------- sessions

    def _session_path(self, file: str, field: str) -> Path:
        """The resolved session file `file`; RequestError naming `field` when it is not a
        usable file, also for a path the system refuses (too long: ENAMETOOLONG, a NUL byte,
        a lone surrogate) and for one that is not valid UTF-8 (a file name with byte 0xFF
        arrives from `os.listdir` or `sys.argv` as the lone surrogate U+DCFF): the index
        stores session paths as SQLite text, which is UTF-8, so such a file must be renamed.
        Every command and request that names a session file passes through here. The path is
        quoted through `json_bounds.echo`."""
        if not file:
            raise RequestError(f"{field}: a session file path is required", field)
        resolved: Path | None = None
        try:
            path = Path(file).expanduser()
            if path.is_file():
                resolved = path.resolve()
            problem = "does not exist or is not a file"
        except (OSError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
            problem = f"cannot be used ({getattr(exc, 'strerror', None) or type(exc).__name__})"
        if resolved is not None:
            not_utf8 = _utf8_path_problem(resolved)
            if not_utf8 is None:
                return resolved
            raise RequestError(f"{field}: session file {echo(file)} {not_utf8}", field)
        raise RequestError(
            f"{field}: session file {echo(file)} {problem}; "
            "pass the path of a Pi session .jsonl file",
            field,
        )

    def _load_session(self, path: Path) -> SessionFile:
        """Parsed entries of `path`, cached while its size and mtime stay the same."""
        return self._cached_session(path).file

    def _cached_session(self, path: Path) -> _CachedSession:
        stat = path.stat()
        key = str(path)
        with self._sessions_lock:
            cached = self._sessions.get(key)
        try:
            if (
                cached is not None
                and cached.size == stat.st_size
                and first_change(path, cached.prefix) is None
            ):
                with self._sessions_lock:
                    if key in self._sessions:
                        self._sessions.move_to_end(key)
                return cached
            parsed = None
            paths = None
            if cached is not None and stat.st_size > cached.size:
                # Pi appends: parse only the new bytes when the old ones are unchanged, and
                # extend the walked paths instead of walking them again.
                parsed = read_more(path, cached.file, cached.prefix)
                if parsed is not None and cached.paths is not None and not cached.file.torn_tail:
                    old = len(cached.file.entries)
                    paths = cached.paths.extended(parsed.entries, parsed.entries[old:])
            if parsed is None or cached is None:
                parsed = read_all(path)
                prefix = hash_prefix(path, parsed.end_offset)
            else:
                prefix = extend(path, cached.prefix, parsed.end_offset)
        except FileShrankError as exc:  # the file shrank between the read and the hashing
            raise RequestError(
                f"session.file: '{path}' changed while it was read; try again", "session.file"
            ) from exc
        except SessionFormatError as exc:
            raise RequestError(str(exc), "session.file") from exc
        except OSError as exc:
            raise RequestError(
                f"session.file: cannot read '{path}': {exc.strerror or exc}", "session.file"
            ) from exc
        cached = _CachedSession(stat.st_size, stat.st_mtime_ns, parsed, prefix, paths=paths)
        with self._sessions_lock:
            self._sessions[key] = cached
            self._sessions.move_to_end(key)
            while len(self._sessions) > _SESSION_CACHE_SIZE:
                self._sessions.popitem(last=False)
        return cached

    def _session_context(
        self, ref: SessionRef
    ) -> tuple[SessionFile, SessionContext, list[int], Path]:
        """The session's parsed file, the context of `ref.leaf_id` (default: the last entry)
        and the `chars-v2` tokens of each context message. Callers must not mutate them."""
        path = self._session_path(ref.file, "session.file")
        cached = self._cached_session(path)
        with self._sessions_lock:
            found = cached.contexts.get(ref.leaf_id)
        if found is None:
            try:
                context = context_for_path(
                    *cached.index().path_and_level(ref.leaf_id if ref.leaf_id else LAST_ENTRY)
                )
            except SessionFormatError as exc:
                raise RequestError(str(exc), "session.leafId") from exc
            found = (context, [estimate_message_tokens(m) for m in context.messages])
            with self._sessions_lock:
                if len(cached.contexts) >= _SESSION_CACHE_SIZE:
                    cached.contexts.clear()
                cached.contexts[ref.leaf_id] = found
        return cached.file, found[0], found[1], path

    # ----------------------------------------------------------------- model and budget

    def resolve_profile(
        self,
        spec: ModelSpec,
        session_model: tuple[str, str] | None,
        config: Config | None = None,
    ) -> ModelProfile:
        """Fill the model of a call: request, then the session's current model; the window from
        the request, `modelAwareness.overrides`, the well-known table, then the default.

        `ModelProfile.source` says where the window came from (`request`, `override`, `table`,
        `default`) so reports can show it.
        """
        provider = spec.provider or (session_model[0] if session_model else None) or "unknown"
        model_id = spec.id or (session_model[1] if session_model else None) or "unknown"
        overrides = resolve_overrides(config or self.config, provider, model_id)
        known = lookup_model(model_id)
        if spec.context_window is not None:
            window, source = spec.context_window, "request"
        elif "contextWindow" in overrides:
            window, source = int(overrides["contextWindow"]), "override"
        elif known is not None:
            window, source = known.context_window, f"table:{known.key}"
        else:
            window, source = DEFAULT_CONTEXT_WINDOW, "default"
        max_output = spec.max_output_tokens
        if max_output is None:
            max_output = overrides.get("maxOutputTokens") or (
                known.max_output_tokens if known else None
            )
        if max_output is not None:
            max_output = min(int(max_output), window)
        return ModelProfile(
            provider=provider,
            model_id=model_id,
            context_window=window,
            max_output_tokens=max_output,
            source=source,
        )

    def _prepare(
        self,
        session: SessionRef | None,
        messages: list[dict[str, Any]] | None,
        request: str | None,
        model: ModelSpec,
        config: Config,
        *,
        sync: bool = True,
    ) -> _Prepared:
        """Read the session (and sync its index unless `sync` is false), build or match the
        messages, append `request`, and resolve the model and budget.

        A failure to update the index is not an error: it becomes a warning; so do the sync's
        own warnings (`SyncResult.warnings`: another file carries this session id).

        Raises:
            RequestError: a missing or unreadable session file, or an unknown leaf.
        """
        warnings: list[str] = []
        session_id = session_file = leaf_id = None
        branch: set[str] = set()
        summary_ids: dict[str, str] = {}
        session_model = None
        tokens: list[int] | None = None
        if session is not None:
            parsed, context, context_tokens, path = self._session_context(session)
            session_file = str(path)
            session_id = parsed.header.session_id if parsed.header else None
            if parsed.header is None:
                warnings.append(
                    f"session file '{path}' holds no Pi session yet (empty, or its header is "
                    "still being written); there is no history to use"
                )
            leaf_id = context.leaf_id
            branch = set(context.path_entry_ids)
            session_model = context.model
            if session_id is not None and sync:
                try:
                    # e.g. that a copy of this file shares its session id (and so its index)
                    warnings.extend(self._sync(path, force=False, progress=None).warnings)
                except Exception as exc:  # fail open: planning works without the index
                    log.warning(
                        "sync failed: session=%s error=%s", session_id, describe_failure(exc)
                    )
                    warnings.append(
                        f"session index could not be updated ({type(exc).__name__}); "
                        "history retrieval may be incomplete"
                    )
            if session_id is not None:
                summary_ids = self._context_summary_ids(session_id, context)
            if messages is None:
                built = list(context.messages)
                source_ids: list[str | None] = list(context.message_entry_ids)
                tokens = list(context_tokens)
            else:
                built, source_ids = _match_messages(messages, context)
        else:
            built = list(messages or [])
            source_ids = [None] * len(built)
        _append_request(built, source_ids, request)
        if tokens is None:
            tokens = [estimate_message_tokens(m) for m in built]
        else:
            tokens.extend(estimate_message_tokens(m) for m in built[len(tokens) :])
        profile, budget = self._budget_for(model, session_model, config, warnings)
        return _Prepared(
            built,
            tokens,
            source_ids,
            session_id,
            session_file,
            leaf_id,
            branch,
            session_model,
            profile,
            budget,
            warnings,
            summary_ids,
        )

    def _context_summary_ids(self, session_id: str, context: SessionContext) -> dict[str, str]:
        """Summary node id of each compaction entry whose summary is in `context`, as the sync
        stored it (ours: the record's `summaryId`; Pi-native or untrusted: a `branch` node).
        Empty when the index is unavailable: the manifest then names the entry ids."""
        found: dict[str, str] = {}
        for message, entry_id in zip(context.messages, context.message_entry_ids, strict=True):
            if message.get("role") != "compactionSummary" or entry_id is None:
                continue
            try:
                node = summary_repo.node_for_entry(self.store, session_id, entry_id)
            except Exception as exc:  # provenance is best effort; the plan stands
                log.warning("summary ids not resolved: error=%s", describe_failure(exc))
                return found
            if node is not None:
                found[entry_id] = node.summary_id
        return found

    def _budget_for(
        self,
        model: ModelSpec,
        session_model: tuple[str, str] | None,
        config: Config,
        warnings: list[str],
    ) -> tuple[ModelProfile, ContextBudget]:
        """The model profile and budget of a call; appends a warning when the window is a guess."""
        profile = self.resolve_profile(model, session_model, config)
        if profile.source == "default":
            warnings.append(
                f"context window of model '{profile.provider}/{profile.model_id}' is unknown; "
                f"assumed {profile.context_window} tokens (set model.contextWindow, or "
                "--context-window on the command line, or modelAwareness.overrides)"
            )
        return profile, calculate_budget(profile, config)

    # ----------------------------------------------------------------- plan

    def plan(self, request: PlanRequest) -> dict[str, Any]:
        """Plan the messages of the next model call (`ds4/plan`; docs/reference.md §3.7).

        Returns {mode, messages, manifestId, manifestStored, estimatedTokens,
        estimatorVersion, overHardLimit, currentTurnTokens, fixedTokens, hardInputLimit,
        budget, model, warnings, stats, fallbackReason?, session?} (docs/protocol.md), tokens
        as `estimatorVersion` estimates. `overHardLimit` is True when `fixedTokens` +
        `currentTurnTokens` exceed `hardInputLimit` (a fallback no trimming could avoid).
        Managed plans keep the
        current turn, a recent tail of whole turns, and historical evidence (JSON-quoted user
        messages) for older turns that the tail leaves out; everything else is recorded as
        excluded in the manifest. Any failure while indexing, retrieving or planning gives mode
        `fallback` with the input messages (plus `request`, when given) and a
        `fallbackReason`; the manifest is still recorded. Without a session, or with
        `diagnostics.storeContextManifest` off, nothing of the plan is written to disk: the
        manifest is kept in a bounded in-memory window.

        Raises:
            RequestError: no session and no messages, a missing or unreadable session file,
                an unknown leaf, or a negative `fixedTokens`.
        """
        started = time.perf_counter()
        if request.session is None and request.messages is None:
            raise RequestError("ds4/plan needs `session` or `messages`", "session")
        if request.fixed_tokens < 0:
            raise RequestError("fixedTokens: expected a non-negative integer", "fixedTokens")
        _check_model(request.model)
        config = self.config  # one snapshot: settings may change on another thread
        if request.mode is not None and request.mode != config["context.mode"]:
            config, _ = config.with_settings({"context.mode": request.mode})
        enabled = bool(config["enabled"])
        failure: str | None = None
        try:
            prepared = self._prepare(
                request.session,
                request.messages,
                request.request,
                request.model,
                config,
                sync=enabled,
            )
        except RequestError:
            raise
        except Exception as exc:
            if request.messages is None:  # no messages of the caller's to fall back to
                raise
            log.warning("plan failed open reading the session: error=%s", describe_failure(exc))
            prepared = self._prepare(None, request.messages, request.request, request.model, config)
            failure = f"internal error while reading the session ({type(exc).__name__})"
        retrieval: HistoryRetrieval | None = None
        project: ValidatedSearch | None = None
        if failure is None and not enabled:
            failure = "ds4 is disabled by the `enabled` setting"
        if failure is None:
            try:
                plan, retrieval, project = self._managed_plan(
                    prepared, request.fixed_tokens, config
                )
            except Exception as exc:
                # fail open (docs/architecture.md "Fail open, except privacy"): the original
                # messages, with a reason
                log.warning(
                    "plan failed open: session=%s error=%s",
                    prepared.session_id,
                    describe_failure(exc),
                )
                failure = (
                    str(exc)
                    if isinstance(exc, DatabaseUnavailableError)
                    else f"internal error while planning ({type(exc).__name__})"
                )
                retrieval = project = None
        warnings = list(prepared.warnings)  # after planning: project search adds its failure
        if failure is not None:
            plan = fallback_plan(
                prepared.messages,
                failure,
                fixed_tokens=request.fixed_tokens,
                message_source_ids=prepared.source_ids,
                hard_input_limit=prepared.budget.hard_input_limit,
            )
        if retrieval is not None:
            warnings.extend(retrieval.warnings)
        manifest_id = new_manifest_id()
        retrieved = [
            {"entryKey": h.entry_key, "score": h.score, "reason": h.reason}
            for h in (retrieval.hits if retrieval else [])
        ]
        manifest = build_manifest(
            manifest_id=manifest_id,
            session_id=prepared.session_id,
            branch_leaf_id=prepared.leaf_id,
            profile=prepared.profile,
            budget=prepared.budget,
            plan=plan,
            retrieved=retrieved,
            prompt_hash=prompt_hash(None, None, plan.messages),
            created_at=utc_now_iso(),
            estimator_version=ESTIMATOR_VERSION,
            fixed_tokens=request.fixed_tokens,
            warnings=warnings,
            retrieval_stats=_stats_to_wire(retrieval) if retrieval else None,
        )
        manifest["summaryIds"] = [
            prepared.summary_ids.get(source_id, source_id) for source_id in manifest["summaryIds"]
        ]
        sent = self._add_project_provenance(manifest, plan, project)
        stored = self._keep_manifest(manifest, prepared.session_id, config, warnings)
        if sent and self._workspace is not None:
            try:
                self._workspace.record_sent(manifest_id, manifest["createdAt"], sent, stored=stored)
            except Exception as exc:  # provenance is best effort; the plan stands
                log.warning("sent snippets not recorded: error=%s", describe_failure(exc))
        warnings = [*warnings, *plan.warnings]
        duration_ms = (time.perf_counter() - started) * 1000
        log.info(
            "plan: session=%s manifest=%s mode=%s messages=%d->%d tokens=%d history_hits=%d "
            "duration_ms=%.1f",
            prepared.session_id,
            manifest_id,
            plan.mode,
            len(prepared.messages),
            len(plan.messages),
            plan.estimated_tokens,
            len(retrieved),
            duration_ms,
        )
        result: dict[str, Any] = {
            "mode": plan.mode,
            "messages": plan.messages,
            "manifestId": manifest_id,
            "manifestStored": stored,
            "estimatedTokens": plan.estimated_tokens,
            "estimatorVersion": ESTIMATOR_VERSION,
            "overHardLimit": plan.over_hard_limit,
            "currentTurnTokens": plan.current_turn_tokens,
            "fixedTokens": request.fixed_tokens,
            "hardInputLimit": prepared.budget.hard_input_limit,
            "budget": _budget_to_wire(prepared.budget),
            "model": _profile_to_wire(prepared.profile),
            "warnings": warnings,
            "stats": {
                **_plan_stats_to_wire(plan),
                "included": len(plan.included),
                "excluded": len(plan.excluded),
                "durationMs": round(duration_ms, 3),
            },
        }
        if plan.fallback_reason:
            result["fallbackReason"] = plan.fallback_reason
        if prepared.session_id:
            result["session"] = {
                "id": prepared.session_id,
                "file": prepared.session_file,
                "leafId": prepared.leaf_id,
            }
        return result

    def _managed_plan(
        self, prepared: _Prepared, fixed_tokens: int, config: Config
    ) -> tuple[ContextPlan, HistoryRetrieval | None, ValidatedSearch | None]:
        """A dry plan without supplements, then the plan with the history evidence the dry
        plan leaves out (for a session) and live-validated project snippets (for a trusted
        workspace). May raise; `plan` turns that into a fallback."""
        dry = prepared.plan(fixed_tokens, config)
        if dry.mode == "fallback":
            return dry, None, None
        supplements: list[Supplement] = []
        retrieval = None
        if prepared.session_id is not None:
            retrieval = self._retrieve_for(prepared, dry, config)
            supplements += [
                _supplement("history", h.entry_key, render_evidence(h), h.score)
                for h in retrieval.hits
            ]
        project = self._project_search(prepared, config, prepared.warnings)
        if project is not None and self._workspace is not None:
            render = self._workspace.render
            supplements += [
                _supplement("project", h.snippet_id, render(h, project.head_of(h)), h.score)
                for h in project.retrieval.hits
            ]
        if not supplements:
            return dry, retrieval, project
        return prepared.plan(fixed_tokens, config, supplements), retrieval, project

    def _project_search(
        self, prepared: _Prepared, config: Config, warnings: list[str]
    ) -> ValidatedSearch | None:
        """Live-validated project hits for the last user message, or None when project
        knowledge is not in use (no workspace, untrusted, disabled). A failure becomes a
        warning: history evidence and the tail still go out (fail open)."""
        workspace = self._workspace
        if workspace is None or not workspace.active():
            return None
        try:
            found = workspace.search(
                describe_task(last_user_text(prepared.messages) or ""),
                max_results=config["project.maxResults"],
                max_tokens=prepared.budget.max_project_tokens,
            )
            warnings.extend(found.retrieval.warnings)  # e.g. the index is behind the files
            return found
        except Exception as exc:
            log.warning("project search failed: error=%s", describe_failure(exc))
            warnings.append(f"project knowledge failed ({type(exc).__name__}); none was included")
            return None

    def _retrieve_for(
        self,
        prepared: _Prepared,
        dry: ContextPlan,
        config: Config,
        query: str | None = None,
        max_results: int | None = None,
        max_tokens: int | None = None,
    ) -> HistoryRetrieval:
        """History evidence for entries on the active branch that the planned context `dry`
        leaves out (everything, when it fell back), for `query` (default: the text of the
        last user message). Limits default to the settings and the budget."""
        text = query if query is not None else last_user_text(prepared.messages)
        in_context = (
            {item.source_id for item in dry.included if item.source_id}
            if dry.mode != "fallback"
            else set()
        )
        return retrieve_history(
            self.store,
            prepared.session_id or "",
            describe_task(text or ""),
            branch_entry_ids=prepared.branch_entry_ids,
            exclude_entry_ids=in_context,
            max_results=max_results or config["retrieval.maxResults"],
            max_tokens=max_tokens or prepared.budget.max_retrieved_history_tokens,
            exact=config["retrieval.exact"],
            fts=config["retrieval.fts"],
        )

    def _keep_manifest(
        self,
        manifest: dict[str, Any],
        session_id: str | None,
        config: Config,
        warnings: list[str],
    ) -> bool:
        """Store the manifest, or keep it only in memory (no session, storage off, over 1 MiB,
        or the database failing). Returns whether it was stored. Never raises for storage:
        the plan is still answered (fail open)."""
        encoded, _rolled_up = encode_manifest(manifest)

        def bounded() -> dict[str, Any]:
            # Memory holds what the database would: the rolled-up form, or the summary alone.
            return json.loads(encoded) if encoded is not None else view_manifest(manifest)

        if session_id is None or not config["diagnostics.storeContextManifest"]:
            self._ephemeral.put(bounded())
            return False
        if encoded is None:
            log.warning("manifest too large to store: manifest=%s", manifest["id"])
            warnings.append("manifest over 1 MiB even rolled up: its summary is kept in memory")
            self._ephemeral.put(bounded())
            return False
        try:
            manifest_repo.save_manifest(self.store, manifest, encoded)
        except Exception as exc:
            log.warning(
                "manifest not stored: manifest=%s error=%s", manifest["id"], describe_failure(exc)
            )
            warnings.append(
                f"manifest could not be stored ({type(exc).__name__}); kept in memory only"
            )
            self._ephemeral.put(bounded())
            return False
        return True

    def _add_project_provenance(
        self, manifest: dict[str, Any], plan: ContextPlan, project: ValidatedSearch | None
    ) -> list[ProjectHit]:
        """Add `project`, `projectSnippets` and `projectRevision` to `manifest` (metadata only:
        ids, paths, hashes, lines, scores; never source text). Returns the hits sent."""
        workspace = self._workspace
        status = workspace.status_word() if workspace is not None else "no-workspace"
        manifest["project"] = {"status": status}
        manifest["projectSnippets"] = []
        manifest["projectRevision"] = None
        if project is None or workspace is None:
            return []
        included = {item.source_id for item in plan.included if item.kind == "project"}
        sent = [h for h in project.retrieval.hits if h.snippet_id in included]
        where = {h.snippet_id: h for h in project.retrieval.hits}
        for item in (*manifest.get("included", []), *manifest.get("excluded", [])):
            hit = where.get(item.get("sourceId")) if item.get("kind") == "project" else None
            if hit is not None:  # a readable label for editors; metadata, never source text
                item["path"], item["lines"] = hit.path, [hit.start_line, hit.end_line]
                if hit.folder is not None:
                    item["folder"] = hit.folder
        manifest["project"].update(
            {
                "dropped": [{"path": p, "reason": r} for p, r in project.dropped],
                "reindexed": list(project.reindexed),
            }
        )
        manifest["projectSnippets"] = [
            {
                "snippetId": h.snippet_id,
                **({"folder": h.folder} if h.folder is not None else {}),
                "path": h.path,
                "fileHash": h.file_hash,
                "lines": [h.start_line, h.end_line],
                "score": h.score,
                "reason": h.reason,
                "modified": h.modified,
                "gitCommit": h.git_commit,
            }
            for h in sent
        ]
        manifest["projectRevision"] = workspace.revision()
        return sent

    # ----------------------------------------------------------------- project knowledge

    def set_workspace(self, root: str | os.PathLike[str] | None, trusted: bool) -> dict[str, Any]:
        """Set the workspace root and whether it is trusted (docs/project-knowledge.md): a
        workspace of one folder, `set_workspace_folders([(None, root)], trusted)`, or of none.

        Raises:
            RequestError: `root` is the filesystem root, the home directory itself, or not a
                directory (field `workspace`).
        """
        return self.set_workspace_folders([] if root is None else [(None, root)], trusted)

    def set_workspace_folders(
        self, folders: Sequence[tuple[str | None, str | os.PathLike[str]]], trusted: bool
    ) -> dict[str, Any]:
        """Set the workspace folders, `(name or None, root)` in the client's order (LSP
        `workspaceFolders`), and whether they are trusted (docs/project-knowledge.md). Each
        folder is its own project (root, discovery, Git state, index); a file belongs to the
        deepest folder containing it.

        Untrusted workspaces are never enumerated, read or queried. Returns
        `project_status()`, plus `refused: [{path, error}]` for folders left out. A newly
        trusted or changed folder makes its full sync due: call `sync_project()` (the LSP
        server does it in the background with progress).

        Raises:
            RequestError: every folder given is the filesystem root, the home directory
                itself, or not a directory (field `workspace`; the first folder's problem).
        """
        accepted: list[tuple[str | None, Path]] = []
        refused: list[RequestError] = []
        for name, root in folders:
            resolved = Path(root).expanduser().resolve()
            if not resolved.is_dir():
                refused.append(
                    RequestError(f"workspace: {echo(str(root))} is not a directory", "workspace")
                )
            elif resolved == Path(resolved.anchor) or resolved == Path.home().resolve():
                refused.append(
                    RequestError(
                        f"workspace: refusing to index {echo(str(resolved))} (the filesystem root or "
                        "your home directory); open a project folder instead",
                        "workspace",
                    )
                )
            else:
                accepted.append((name, resolved))
        if refused and not accepted:
            raise refused[0]
        with self._store_lock:
            if self._workspace is None:
                from .project.folders import ProjectFolders

                self._workspace = ProjectFolders(lambda: self.store, lambda: self.config)
        self._workspace.set_folders(accepted, trusted)
        status = self.project_status()
        if refused:
            status["refused"] = [{"error": str(error)} for error in refused]
        return status

    def sync_project(
        self,
        *,
        only: Sequence[str] | None = None,
        force: bool = False,
        progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Sync the project index (all files, or `only` those paths); see
        docs/project-knowledge.md. Status `untrusted` / `no-workspace` / `disabled` does nothing."""
        if self._workspace is None:
            return {"status": "no-workspace", "projectPath": None}
        return self._workspace.sync(only=only, force=force, progress=progress)

    def set_live_text(self, path: str, text: str | None) -> str | None:
        """Record an open editor buffer's text (None when it closes); returns its path relative
        to the workspace, or None when it is outside it (then it is ignored)."""
        if self._workspace is None:
            return None
        return self._workspace.set_live_text(path, text)

    def note_tool_executed(self, tool: str, paths: Sequence[str] = ()) -> bool:
        """An agent tool ran: True (a project sync is due before the next plan) unless the tool
        is read-only (`read`, `grep`, `find`, `ls`). `paths` are accepted for the future
        and only counted in the log."""
        if self._workspace is None:
            return False
        due = self._workspace.note_tool_executed(tool)
        log.info("tool executed: read_only=%s paths=%d", not due, len(paths))
        return due

    def mark_project_changed(self) -> None:
        """Files changed outside the editor (a watched-file event): sync before the next use."""
        if self._workspace is not None:
            self._workspace.mark_sync_due()

    def project_status(self) -> dict[str, Any]:
        """{status, projectPath, trusted, files, snippets, staleSnippets, git, indexedAt,
        folders}, plus `error` (what went wrong, e.g. a locked database) while the status is
        `error`. Counts are summed over the workspace folders; `projectPath`, `git` and
        `indexedAt` are the first folder's; `folders` has each folder's
        (`ProjectFolders.status_counts`)."""
        workspace = self._workspace
        if workspace is None:
            return {"status": "no-workspace", "projectPath": None, "trusted": False}
        status = workspace.status_word()
        result: dict[str, Any] = {
            "status": status,
            "projectPath": str(workspace.root) if workspace.root else None,
            "trusted": workspace.trusted,
        }
        if status in ("untrusted", "no-workspace", "disabled"):
            return result
        if status == "error":
            result["error"] = workspace.problem
        result.update(workspace.status_counts())
        return result

    def stale_snippets(self, path: str, live_text: str | None = None) -> list[dict[str, Any]]:
        """Windows of `path` a plan sent (stored, or remembered in memory) whose lines no
        longer match its live text: [{snippetId, startLine, endLine, manifestId, sentAt, change,
        changeStartLine, changeEndLine}] (1-based lines; `changeStartLine`..`changeEndLine`
        the changed lines of the window `startLine`..`endLine`)."""
        if self._workspace is None:
            return []
        return self._workspace.stale_snippets(path, live_text)

    # ----------------------------------------------------------------- retrieve

    def retrieve(self, request: RetrieveRequest) -> dict[str, Any]:
        """Rank transcript and project evidence for a query (`ds4/retrieve`;
        docs/reference.md §3.2 and §3.10).

        Returns {status, query, history: [{entryKey, entryId, role, createdAt, score, reason,
        excerpt, tokens}], project: [{path, startLine, endLine, fileHash, score, reason, text,
        snippetId, tokens, modified}], projectStatus, stats, warnings}. History entries the
        planned context already holds verbatim (the recent tail and current turn) are not
        returned (`stats.alreadyInContext`); entries on other branches are counted in
        `stats.alternateBranchCandidates`. Project hits are re-validated against the live
        text; `projectStatus` is `untrusted` (nothing read), `no-workspace`, `disabled` or the
        search status.

        Raises:
            RequestError: bad `maxResults`/`maxTokens`, or a bad session reference.
        """
        if request.max_results is not None and not 1 <= request.max_results <= 100:
            raise RequestError("maxResults: expected an integer in 1..100", "maxResults")
        if request.max_tokens is not None and request.max_tokens < 1:
            raise RequestError("maxTokens: expected a positive integer", "maxTokens")
        config = self.config  # one snapshot: settings may change on another thread
        warnings: list[str] = []
        result: dict[str, Any] = {
            "status": "ok" if config["enabled"] else "disabled",
            "query": request.query,
            "history": [],
            "project": [],
            "projectStatus": None,
            "stats": {
                "candidates": 0,
                "duplicates": 0,
                "alternateBranchCandidates": 0,
                "alreadyInContext": 0,
                "latencyMs": 0.0,
            },
            "warnings": warnings,
        }
        if not config["enabled"]:
            warnings.append("ds4 is disabled by the `enabled` setting")
            return result
        prepared = None
        if request.session is not None:
            prepared = self._prepare(request.session, None, None, ModelSpec(), config)
            warnings.extend(prepared.warnings)
            if request.query is None:
                result["query"] = last_user_text(prepared.messages)
        query = result["query"] or ""
        if "history" in request.scopes:
            if prepared is None or prepared.session_id is None:
                result["status"] = "no-session"
            else:
                self._retrieve_history_into(result, prepared, query, request, config)
        if "project" in request.scopes:
            self._retrieve_project_into(result, query, request, config)
        return result

    def _retrieve_history_into(
        self,
        result: dict[str, Any],
        prepared: _Prepared,
        query: str,
        request: RetrieveRequest,
        config: Config,
    ) -> None:
        retrieval = self._retrieve_for(
            prepared,
            prepared.plan(0, config),
            config,
            query=query,
            max_results=request.max_results,
            max_tokens=request.max_tokens,
        )
        result["warnings"].extend(retrieval.warnings)
        log.info(
            "retrieve: session=%s status=%s hits=%d latency_ms=%.2f",
            prepared.session_id,
            retrieval.status,
            len(retrieval.hits),
            retrieval.stats.latency_ms,
        )
        result["status"] = retrieval.status
        result["history"] = [
            {
                "entryKey": h.entry_key,
                "entryId": h.entry_id,
                "role": h.role,
                "createdAt": h.created_at,
                "score": round(h.score, 3),
                "reason": h.reason,
                "excerpt": h.excerpt,
                "tokens": h.tokens,
            }
            for h in retrieval.hits
        ]
        result["stats"] = _stats_to_wire(retrieval)

    def _retrieve_project_into(
        self, result: dict[str, Any], query: str, request: RetrieveRequest, config: Config
    ) -> None:
        workspace = self._workspace
        status = workspace.status_word() if workspace is not None else "no-workspace"
        result["projectStatus"] = status
        if workspace is None or not workspace.active():
            return
        try:
            found = workspace.search(
                describe_task(query),
                max_results=request.max_results or config["project.maxResults"],
                max_tokens=request.max_tokens or config["context.maxProjectTokens"],
            )
        except Exception as exc:  # fail open: the history part stands, the failure is named
            log.warning("retrieve project failed: error=%s", describe_failure(exc))
            result["projectStatus"] = "error"
            result["warnings"].append(
                f"project knowledge failed ({type(exc).__name__}); no project source was searched"
            )
            return
        result["projectStatus"] = found.retrieval.status
        result["warnings"].extend(found.retrieval.warnings)
        result["warnings"].extend(
            f"project file '{path}' was left out: {reason}" for path, reason in found.dropped
        )
        result["project"] = [
            {
                **self._folder_fields(h),
                "path": h.path,
                "startLine": h.start_line,
                "endLine": h.end_line,
                "fileHash": h.file_hash,
                "score": round(h.score, 3),
                "reason": h.reason,
                "text": h.text,
                "snippetId": h.snippet_id,
                "tokens": h.tokens,
                "modified": h.modified,
            }
            for h in found.retrieval.hits
        ]
        log.info(
            "retrieve project: status=%s hits=%d reindexed=%d dropped=%d",
            found.retrieval.status,
            len(found.retrieval.hits),
            len(found.reindexed),
            len(found.dropped),
        )

    def _folder_fields(self, hit: ProjectHit) -> dict[str, Any]:
        """`{folder, folderPath}` of a project hit: the name and canonical root of the
        workspace folder its `path` is relative to."""
        folder = self._workspace.folder_of(hit) if self._workspace is not None else None
        if folder is None:
            return {}
        return {"folder": folder.name, "folderPath": str(folder.root)}

    # ----------------------------------------------------------------- manifest

    def manifest(self, request: ManifestRequest) -> dict[str, Any]:
        """A plan's manifest, by id or the latest of a session, in the requested view.

        Looks in the in-memory window of ephemeral manifests (plans without a session, or
        with storage off) and in the database; for `latest`, the newer of the two wins.

        Raises:
            RequestError: neither `id` nor `session` + `latest`, no such manifest, or an
                unknown `view`.
        """
        if request.view not in VIEWS:
            raise RequestError(f"view: expected one of {', '.join(repr(v) for v in VIEWS)}", "view")
        if request.id:
            found = self._ephemeral.get(request.id)
            if found is not None:
                found = copy.deepcopy(found)  # callers must not change the kept manifest
            else:
                found = manifest_repo.get_manifest(self.store, request.id)
            if found is None:
                raise RequestError(
                    f"id: no manifest with id {echo(request.id)}; it was never recorded by this "
                    "database or was evicted (the latest 128 stored and 64 in-memory manifests "
                    "are kept); plan again for a new id, or ask for the latest manifest of the "
                    "session",
                    "id",
                )
            return view_manifest(found, request.view)
        if request.session is None or not request.latest:
            raise RequestError("ds4/manifest needs `id`, or `session` with `latest: true`", "id")
        path = self._session_path(request.session.file, "session.file")
        parsed = self._load_session(path)
        if parsed.header is None:
            raise RequestError(
                f"session.file: '{path}' is an empty session; it has no manifests",
                "session.file",
            )
        session_id = parsed.header.session_id
        candidates = [
            m
            for m in (
                copy.deepcopy(self._ephemeral.latest(session_id)),
                manifest_repo.latest_manifest(self.store, session_id),
            )
            if m is not None
        ]
        if not candidates:
            raise RequestError(
                f"session.file: no manifest recorded for session '{session_id}'; plan a call "
                "for this session first (`ds4 plan --session FILE REQUEST`)",
                "session.file",
            )
        newest = max(candidates, key=lambda m: (str(m.get("createdAt")), str(m.get("id"))))
        return view_manifest(newest, request.view)

    # ----------------------------------------------------------------- compaction

    def compact(
        self,
        request: CompactRequest,
        summarizer: Summarizer | None = None,
        *,
        after_insert: Callable[[SummaryNode], None] | None = None,
    ) -> dict[str, Any]:
        """Prepare one compaction of the session's active branch (`ds4/compact`;
        docs/compaction.md).

        Syncs the session (importing the summary nodes its compaction entries carry), prepares
        the span, resolves the branch's current root from the branch's own latest compaction
        entry, obtains the summary (`summarizer`, else offline), and stores the new segment
        (and aggregate) as `prepared`. `summarizer` is called at most once, on this thread.

        Returns:
            {compaction: {summary, firstKeptEntryId, tokensBefore, details}, summaryId,
            segmentSummaryId, operationId, summaryKind, graphLevel, summarizer,
            fallbackReason, validation, span, tokens, warnings} (docs/protocol.md).

        Raises:
            RequestError: an unknown reason, a missing or unreadable session file, an unknown
                leaf, a bad `firstKeptEntryId`, or a `previousSummaryId` that is not the
                branch's root (the field is named).
            RequestFailedError: compaction is turned off, or there is nothing to compact.
        """
        config = self.config
        if not config["compaction.enabled"]:
            raise RequestFailedError(
                "compaction is turned off by the compaction.enabled setting; turn it on, or let "
                "Pi compact natively"
            )
        if request.reason not in COMPACTION_REASONS:
            raise RequestError(
                "reason: expected one of " + ", ".join(repr(r) for r in COMPACTION_REASONS),
                "reason",
            )
        started = time.perf_counter()
        session_id, context, tokens, path = self._synced_session(
            request.session, "there is nothing to compact"
        )
        try:
            span = prepare_span(
                context,
                tokens,
                first_kept_entry_id=request.first_kept_entry_id,
                keep_recent_tokens=int(config["compaction.keepRecentTokens"]),
            )
        except SpanError as exc:
            if exc.field is None:
                raise RequestFailedError(str(exc)) from exc
            raise RequestError(str(exc), exc.field) from exc
        previous_root = self._branch_root(session_id, path, span.previous_compaction_entry_id)
        previous_id = previous_root.summary_id if previous_root else None
        if request.previous_summary_id is not None and request.previous_summary_id != previous_id:
            raise RequestError(
                f"previousSummaryId: {echo(request.previous_summary_id)} is not the current root of "
                "this branch ("
                + (f"which is '{previous_id}'" if previous_id else "the branch has no summary yet")
                + "); the previous summary comes from the branch's own latest compaction",
                "previousSummaryId",
            )
        prepared = prepare_compaction(
            self.store,
            session_id=session_id,
            span=span,
            reason=request.reason,
            previous_root=previous_root,
            config=config,
            summarizer=summarizer,
            custom_instructions=request.custom_instructions,
            after_insert=after_insert,
        )
        result = prepared.result
        result["session"] = {"id": session_id, "file": str(path), "leafId": context.leaf_id}
        duration_ms = (time.perf_counter() - started) * 1000
        result["durationMs"] = round(duration_ms, 3)
        log.info(
            "compact: session=%s summary=%s kind=%s level=%d messages=%d summarizer=%s "
            "duration_ms=%.1f",
            session_id,
            prepared.root.summary_id,
            prepared.root.kind,
            prepared.root.graph_level,
            span.message_count,
            result["summarizer"],
            duration_ms,
        )
        return result

    def _synced_session(
        self, ref: SessionRef, empty: str
    ) -> tuple[str, SessionContext, list[int], Path]:
        """(session id, leaf context, its message tokens, path) of `ref`, with the index (and
        so the summary graph) synced first.

        Raises:
            RequestError: a missing or unreadable file, an unknown leaf, or a file with no
                session header yet (the message ends with `empty`).
        """
        parsed, context, tokens, path = self._session_context(ref)
        if parsed.header is None:
            raise RequestError(
                f"session.file: '{path}' holds no Pi session yet; {empty}", "session.file"
            )
        self._sync(path, force=False, progress=None)
        return parsed.header.session_id, context, tokens, path

    def _branch_root(
        self, session_id: str, path: Path, compaction_entry_id: str | None
    ) -> SummaryNode | None:
        """The summary node carried by the branch's latest compaction entry (never the
        session-wide newest), importing it from the entry when the store lacks it."""
        if compaction_entry_id is None:
            return None
        store = self.store
        node = summary_repo.node_for_entry(store, session_id, compaction_entry_id)
        if node is not None:
            return node
        entry = self._cached_session(path).entry(compaction_entry_id)
        # None for an empty summary: Pi sends nothing, so there is nothing to extend.
        return self._import_entry(session_id, entry) if entry else None

    def _lifecycle_sessions(
        self, summary_id: str, session: SessionRef | None, *, include_failed: bool
    ) -> list[str]:
        """The sessions a `ds4/compactCommitted` / `ds4/compactFailed` applies to: the one
        `session` names (its header's id; the file is not synced), else every session where
        node `summary_id` is `prepared` (or `failed`, with `include_failed`).

        Raises:
            RequestError: `session` names a missing or unreadable file, or one without a Pi
                session header.
        """
        if session is None:
            return summary_repo.sessions_with_pending(
                self.store, summary_id, include_failed=include_failed
            )
        path = self._session_path(session.file, "session.file")
        try:
            header = read_header(path)
        except SessionFormatError as exc:
            raise RequestError(str(exc), "session.file") from exc
        except OSError as exc:
            raise RequestError(
                f"session.file: cannot read '{path}': {exc.strerror or exc}", "session.file"
            ) from exc
        if header is None:
            raise RequestError(
                f"session.file: '{path}' holds no Pi session yet; it has no summaries",
                "session.file",
            )
        return [header.session_id]

    def compact_committed(
        self, summary_id: str, entry_id: str | None = None, session: SessionRef | None = None
    ) -> dict[str, Any]:
        """Mark the operation holding `summary_id` committed (`ds4/compactCommitted`).

        Summary ids are unique per session only (a forked session holds copies), and the
        notification may name no session: without `session` it applies to every session where
        the node is `prepared` or `failed`; with it, to that session only.

        Returns {summaryId, sessions: [session ids changed], changed: [ids]}; `changed` is
        empty for an unknown id or an operation already committed.

        Raises:
            RequestError: `session` names a missing or unreadable session file.
        """
        return self._mark(
            "committed",
            summary_id,
            session,
            lambda session_id: summary_repo.mark_committed(
                self.store, session_id, summary_id, entry_id
            ),
        )

    def compact_failed(
        self, summary_id: str, reason: str | None = None, session: SessionRef | None = None
    ) -> dict[str, Any]:
        """Mark the prepared operation holding `summary_id` failed (`ds4/compactFailed`):
        in `session` when given, else in every session where the node is `prepared`.

        Returns {summaryId, sessions: [session ids changed], changed: [ids]}; committed nodes
        are never changed.

        Raises:
            RequestError: `session` names a missing or unreadable session file.
        """
        return self._mark(
            "failed",
            summary_id,
            session,
            lambda session_id: summary_repo.mark_failed(self.store, session_id, summary_id, reason),
        )

    def _mark(
        self,
        lifecycle: str,
        summary_id: str,
        session: SessionRef | None,
        mark: Callable[[str], list[str]],
    ) -> dict[str, Any]:
        """Apply `mark(session_id)` in each session where `summary_id` can move to
        `lifecycle` (committed: from prepared or failed; failed: from prepared)."""
        changed: list[str] = []
        sessions: list[str] = []
        pending = self._lifecycle_sessions(
            summary_id, session, include_failed=lifecycle == "committed"
        )
        for session_id in pending:
            ids = mark(session_id)
            if ids:
                sessions.append(session_id)
                changed.extend(ids)
        log.info(
            "compact %s: summary=%s sessions=%d changed=%d",
            lifecycle,
            summary_id,
            len(sessions),
            len(changed),
        )
        return {"summaryId": summary_id, "sessions": sessions, "changed": changed}

    def summaries(self, session: SessionRef) -> dict[str, Any]:
        """The session's summary graph as seen from the leaf (`ds4.summaries`,
        `ds4 summaries`): the view of `compaction.render.graph_view` with the active root and
        its transitive children marked, and the text tree.

        Raises:
            RequestError: a missing or unreadable session file, or an unknown leaf.
        """
        session_id, context, _tokens, path = self._synced_session(session, "it has no summaries")
        _start, compaction_entry, _summary = latest_compaction(context)
        root = self._branch_root(session_id, path, compaction_entry)
        nodes = summary_repo.session_nodes(self.store, session_id)
        return graph_view(
            nodes,
            active_root_id=root.summary_id if root else None,
            active_path_entry_ids=set(context.path_entry_ids),
            session_id=session_id,
            session_file=str(path),
            leaf_id=context.leaf_id,
        )

    def summaries_dot(self, session: SessionRef) -> str:
        """The summary graph of `summaries(session)` as Graphviz DOT."""
        return render_dot(self.summaries(session))

    # ----------------------------------------------------------------- health

    def health(self) -> dict[str, Any]:
        """Engine and index health: {status, version, schemaVersion, databasePath, sqliteVersion,
        fts5, sessions, entries, manifests, ephemeralManifests, notices, configWarnings}.

        `status` is `ok`, or `warning` when notices or configuration warnings exist.
        """

        store = self.store
        counts = session_repo.counts(store)
        notices = self.notices
        project = self.project_status()
        stale = project.get("staleSnippets") or 0
        copies = [
            f"session id '{sid}' is used by several files: '{indexed}' (indexed), "
            + ", ".join(f"'{o}'" for o in others)
            + "; they share one index and summary graph"
            for sid, indexed, others in sessions_with_copies(store)
        ]
        return {
            "status": "warning" if notices or self.config_warnings or stale or copies else "ok",
            "version": __version__,
            "schemaVersion": store.schema_version,
            "databasePath": str(self.database_path),
            "sqliteVersion": sqlite3.sqlite_version,
            "fts5": True,
            "sessions": counts["sessions"],
            "entries": counts["entries"],
            "manifests": manifest_repo.count_manifests(store),
            "summaries": summary_repo.counts(store),
            "ephemeralManifests": len(self._ephemeral),
            "estimator": ESTIMATOR_VERSION,
            "notices": notices,
            "configWarnings": list(self.config_warnings),
            "project": project,
            "warnings": (
                [f"{stale} project snippet(s) sent to the model have changed since"]
                if stale
                else []
            )
            + copies,
        }


# --------------------------------------------------------------------- helpers


MAX_MODEL_TOKENS = 10_000_000
"""Largest context window or output limit accepted, as for `modelAwareness.overrides`
(docs/reference.md §2)."""


def _utf8_path_problem(path: Path) -> str | None:
    """None when `path` is valid UTF-8, else what to rename: the file, or the folder above
    it whose name is not UTF-8 (a byte the file system decoding kept as a lone surrogate)."""
    if not _is_utf8(str(path)):
        if not _is_utf8(path.name):
            return "cannot be indexed: the file name is not valid UTF-8; rename it"
        return (
            "cannot be indexed: the file name is not valid UTF-8 (a folder in its path); "
            "rename it or move the file"
        )
    return None


def _is_utf8(text: str) -> bool:
    """Whether `text` encodes as UTF-8 (holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _supplement(kind: str, source_id: str, message: dict[str, Any], score: float) -> Supplement:
    """A planner supplement for a rendered evidence or project message (tokens: chars-v2)."""
    return Supplement(
        kind=kind,  # type: ignore[arg-type]
        source_id=source_id,
        message=message,
        tokens=estimate_message_tokens(message),
        score=score,
    )


def _check_model(model: ModelSpec) -> None:
    """Reject impossible model limits up front, naming the field.

    Raises:
        RequestError: `contextWindow` or `maxOutputTokens` outside 1..10,000,000.
    """
    for value, field_name in (
        (model.context_window, "model.contextWindow"),
        (model.max_output_tokens, "model.maxOutputTokens"),
    ):
        if value is not None and not 1 <= value <= MAX_MODEL_TOKENS:
            raise RequestError(
                f"{field_name}: expected a number of tokens in 1..{MAX_MODEL_TOKENS:,}", field_name
            )


def _append_request(
    messages: list[dict[str, Any]], source_ids: list[str | None], request: str | None
) -> None:
    """Append `request` (when non-empty) as the new user message, with no source entry."""
    if request:
        messages.append(
            {
                "role": "user",
                "content": [{"type": "text", "text": request}],
                "timestamp": int(time.time() * 1000),
            }
        )
        source_ids.append(None)


def _match_messages(
    messages: list[dict[str, Any]], context: SessionContext
) -> tuple[list[dict[str, Any]], list[str | None]]:
    """Map caller-supplied messages to session entry ids by fingerprint (stable JSON).

    ds4 maps the `context` hook's messages back to entries the same way (docs/reference.md §5).
    Unmatched messages get None.
    """
    from .tokens import stable_json

    by_fingerprint: dict[str, list[str]] = {}
    for message, entry_id in zip(context.messages, context.message_entry_ids, strict=False):
        if entry_id is not None:
            by_fingerprint.setdefault(stable_json(message), []).append(entry_id)
    ids: list[str | None] = []
    for message in messages:
        candidates = by_fingerprint.get(stable_json(message))
        ids.append(candidates.pop(0) if candidates else None)
    return list(messages), ids


def _sync_to_wire(result: SyncResult) -> dict[str, Any]:
    return {
        "sessionId": result.session_id,
        "sessionFile": result.session_file,
        "outcome": result.outcome,
        "reason": result.reason,
        "entriesAdded": result.entries_added,
        "entriesTotal": result.entries_total,
        "malformedLines": result.malformed_lines,
        "bytesRead": result.bytes_read,
        "durationMs": round(result.duration_ms, 3),
        "rewrittenAt": result.rewritten_at,
        "warnings": list(result.warnings),
    }


def _budget_to_wire(budget: ContextBudget) -> dict[str, Any]:
    return {
        "contextWindow": budget.context_window,
        "outputReserve": budget.output_reserve,
        "safetyMargin": budget.safety_margin,
        "hardInputLimit": budget.hard_input_limit,
        "softLimit": budget.soft_limit,
        "targetInputTokens": budget.target_input_tokens,
        "recentTailTokens": budget.recent_tail_tokens,
        "maxRetrievedHistoryTokens": budget.max_retrieved_history_tokens,
        "maxProjectTokens": budget.max_project_tokens,
        "maxSummaryTokens": budget.max_summary_tokens,
    }


def _profile_to_wire(profile: ModelProfile) -> dict[str, Any]:
    return {
        "provider": profile.provider,
        "id": profile.model_id,
        "contextWindow": profile.context_window,
        "maxOutputTokens": profile.max_output_tokens,
        "source": profile.source,
    }


def _plan_stats_to_wire(plan: ContextPlan) -> dict[str, Any]:
    stats = dict(plan.stats) if isinstance(plan.stats, Mapping) else {}
    return {_camel(k): v for k, v in stats.items()}


def _stats_to_wire(retrieval: HistoryRetrieval) -> dict[str, Any]:
    s = retrieval.stats
    return {
        "candidates": s.candidates,
        "duplicates": s.duplicates,
        "alternateBranchCandidates": s.alternate_branch_candidates,
        "alreadyInContext": s.already_in_context,
        "latencyMs": round(s.latency_ms, 3),
    }


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
