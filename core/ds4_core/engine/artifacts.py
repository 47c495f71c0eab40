"""Artifacts in plans: the large tool results of a managed session plan stored and condensed
before the planner sizes them (docs/artifacts.md).

Only the provider-facing copy changes: `Prepared.messages` gets new message objects in the
offloaded positions, the session's cached messages and the file stay as they are. Observer
mode, ephemeral plans (no session) and `artifacts.enabled` false never offload; the caller
(`planning.Planner.plan`) checks the first two.

The condensed copies of a session's messages are carried from one revision of the session to
the next (`KEPT_SESSIONS` sessions, by message object, all of a session's large results
whatever their number; sessions beyond `KEPT_CHARS` characters of original output together
dropped, least recently planned first, the latest always kept), so a plan after an append
condenses only the new results: it neither hashes an output again nor re-reads its object.
Other messages (a plan without a session context) use a small per-message cache (`KEPT`).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..artifacts.condense import tool_result_chars
from ..artifacts.offload import Offloaded, offload_tool_result
from ..artifacts.references import ArtifactReference
from ..artifacts.store import ArtifactStore, artifact_root
from ..config import ArtifactSettings, Config
from ..logs import describe_failure
from ..planner import ContextPlan
from ..planner.structure import MessageStructure, StructureError, build_structure
from ..store import artifacts as artifact_repo
from ..tokens import estimate_message_tokens
from .context import EngineContext
from .preparing import Prepared

log = logging.getLogger("ds4_core.engine")

KEPT = 64
"""Condensed copies kept per process (least recently used dropped first)."""
KEPT_CHARS = 64_000_000
"""Most characters of original tool results the kept copies may hold on to (each keeps its
message alive, to know it again by identity), least recently used dropped first; the same
bound for the copies carried per session."""
KEPT_SESSIONS = 16
"""Sessions whose condensed copies are carried to their next revision."""

_Carried = dict[int, tuple[Mapping[str, Any], Offloaded, int]]
"""id(original message) -> (the message, its offload, the condensed copy's tokens)."""


@dataclass(frozen=True, slots=True)
class _Base:
    """A session context's own messages with their large tool results condensed."""

    messages: list[dict[str, Any]]
    tokens: list[int]
    structure: MessageStructure | None
    done: tuple[Offloaded, ...]
    verbatim: dict[Any, tuple[bool, frozenset[str]]]
    """Dry-plan results over these messages (as `BuiltContext.verbatim` for the originals)."""


_NOTHING = object()
"""Memo value: no message of the context is large."""
_NOT_KEPT = object()
"""`_condensed_base` result: a write failed; nothing is kept, so the next plan tries again."""


class ArtifactOffloads:
    """The offloading of one engine's plans (see the module docstring). Thread-safe."""

    def __init__(self, context: EngineContext) -> None:
        self._context = context
        self._lock = threading.Lock()
        self._swept = False
        self._kept_chars = 0
        self._kept: OrderedDict[int, tuple[Mapping[str, Any], ArtifactSettings, Offloaded]] = (
            OrderedDict()
        )
        self._carried: OrderedDict[str, tuple[ArtifactSettings, _Carried, int]] = OrderedDict()

    def apply(self, prepared: Prepared, config: Config) -> tuple[Prepared, list[Offloaded]]:
        """`prepared` with its large tool results replaced by their condensed copies (their
        tokens estimated again, the planner structure of the copy used), and what was
        offloaded in message order. `prepared` itself is not changed.

        For a session's own messages the condensed copy, its tokens, structure and dry-plan
        results are kept with the session context (`Prepared.revision_memo`), so a plan of an
        unchanged session only appends the request to them."""
        settings = config.artifacts
        if not settings.enabled:
            return prepared, []
        base, memo = prepared.base_structure, prepared.revision_memo
        if base is None or memo is None or base.n > len(prepared.messages):
            return self._apply_all(prepared, settings)
        with self._lock:
            kept = memo.get(settings)
        if kept is None:
            kept = self._condensed_base(prepared, base.n, settings)
            if kept is not _NOT_KEPT:
                with self._lock:
                    kept = memo.setdefault(settings, kept)
        if kept is _NOTHING:
            return prepared, []
        if not isinstance(kept, _Base):  # a write failed: offloaded again, not kept
            return self._apply_all(prepared, settings)
        n = base.n
        messages = [*kept.messages, *prepared.messages[n:]]
        tokens = [*kept.tokens, *prepared.message_tokens[n:]]
        structure = kept.structure
        if structure is not None:
            try:  # the request: one more group, as `Preparer.prepare` appends it
                for i in range(structure.n, len(messages)):
                    structure = structure.appended(messages[i], tokens[i], prepared.source_ids[i])
            except StructureError:
                structure = None
        return (
            replace(
                prepared,
                messages=messages,
                message_tokens=tokens,
                structure=structure,
                verbatim=kept.verbatim if structure is not None else None,
            ),
            list(kept.done),
        )

    def _apply_all(
        self, prepared: Prepared, settings: ArtifactSettings
    ) -> tuple[Prepared, list[Offloaded]]:
        """Every message looked at, nothing kept with the context (caller messages)."""
        messages, tokens, done = self._offload_all(
            prepared.messages, prepared.message_tokens, settings
        )
        if not done:
            return prepared, []
        return (
            replace(
                prepared, messages=messages, message_tokens=tokens, structure=None, verbatim=None
            ),
            done,
        )

    def _condensed_base(self, prepared: Prepared, n: int, settings: ArtifactSettings) -> object:
        """The condensed copy of the first `n` messages (the session's own) as a `_Base`;
        `_NOTHING` when none is large; `_NOT_KEPT` when a write failed (try again next plan)."""
        session = prepared.session_id
        with self._lock:
            previous = self._carried.get(session) if session is not None else None
        carried = previous[1] if previous is not None and previous[0] == settings else {}
        messages, tokens, done = self._offload_all(
            prepared.messages[:n], prepared.message_tokens[:n], settings, carried
        )
        if not done:
            return _NOTHING
        if any(item.not_stored in ("no-store", "write-failed") for item in done):
            return _NOT_KEPT
        if session is not None:
            self._carry(session, settings, prepared.messages, done, tokens)
        # a carried result's reference was recorded at the revision that condensed it
        self._reference(
            prepared, [item for item in done if id(prepared.messages[item.position]) not in carried]
        )
        try:
            structure: MessageStructure | None = build_structure(
                messages, tokens, prepared.source_ids[:n]
            )
        except StructureError:
            structure = None
        return _Base(messages, tokens, structure, tuple(done), {})

    def _reference(self, prepared: Prepared, done: Sequence[Offloaded]) -> None:
        """Record the stored artifacts of a session's messages the sync did not (the
        threshold changed since the entry was indexed; docs/artifacts.md "References"), so
        garbage collection keeps them and `ds4/artifactSearch` finds them. Logged, never
        raised: the plan stands without the rows."""
        entry_of = prepared.entry_of
        if prepared.session_id is None or entry_of is None:
            return
        references = []
        for item in done:
            source_id = prepared.source_ids[item.position]
            entry = entry_of(source_id) if item.artifact_id and source_id else None
            if entry is not None and item.artifact_id is not None and source_id is not None:
                references.append(
                    ArtifactReference(
                        source_id,
                        entry.seq,
                        item.artifact_id,
                        item.original_chars,
                        item.size_bytes,
                    )
                )
        try:
            artifact_repo.add_references(self._context.store(), prepared.session_id, references)
        except Exception as exc:  # fail open: the sync records them on the next rebuild
            log.warning("artifact references not recorded: error=%s", describe_failure(exc))

    def _carry(
        self,
        session: str,
        settings: ArtifactSettings,
        originals: Sequence[Mapping[str, Any]],
        done: Sequence[Offloaded],
        tokens: Sequence[int],
    ) -> None:
        """Keep `done` (offloads of `originals`, positions into both) for the session's next
        revision, replacing what its previous revision kept."""
        carried: _Carried = {
            id(originals[item.position]): (originals[item.position], item, tokens[item.position])
            for item in done
        }
        chars = sum(item.original_chars for item in done)
        with self._lock:
            self._carried.pop(session, None)
            self._carried[session] = (settings, carried, chars)
            total = sum(entry[2] for entry in self._carried.values())
            while len(self._carried) > 1 and (
                len(self._carried) > KEPT_SESSIONS or total > KEPT_CHARS
            ):
                _, (_, _, dropped) = self._carried.popitem(last=False)
                total -= dropped

    def _offload_all(
        self,
        messages: Sequence[dict[str, Any]],
        tokens: Sequence[int],
        settings: ArtifactSettings,
        carried: _Carried | None = None,
    ) -> tuple[list[dict[str, Any]], list[int], list[Offloaded]]:
        large = [
            i
            for i, message in enumerate(messages)
            if message.get("role") == "toolResult"
            and tool_result_chars(message) > settings.max_inline_tool_result_chars
        ]
        if not large:
            return list(messages), list(tokens), []
        store = self._store()
        out, counts = list(messages), list(tokens)
        done: list[Offloaded] = []
        for position in large:
            known = carried.get(id(out[position])) if carried else None
            if known is not None and known[0] is out[position]:  # condensed at an earlier revision
                offloaded = replace(known[1], position=position)
                out[position], counts[position] = offloaded.message, known[2]
                done.append(offloaded)
                continue
            fresh = self._offload(out[position], position, store, settings)
            if fresh is None:
                continue
            out[position] = fresh.message
            counts[position] = estimate_message_tokens(fresh.message)
            done.append(fresh)
        return out, counts, done

    def _store(self) -> ArtifactStore | None:
        """The store beside the database; None when the database cannot be opened (the
        blocks then say the output was not stored)."""
        try:
            store = ArtifactStore(artifact_root(self._context.store().path))
        except Exception as exc:  # fail open: condensed without an artifact
            log.warning("artifact store unavailable: error=%s", describe_failure(exc))
            return None
        with self._lock:
            swept, self._swept = self._swept, True
        if not swept:  # once per engine: temporaries of writers that crashed (over an hour old)
            try:
                store.sweep_temporaries()
            except OSError as exc:
                log.warning("artifact sweep failed: error=%s", describe_failure(exc))
        return store

    def _offload(
        self,
        message: Mapping[str, Any],
        position: int,
        store: ArtifactStore | None,
        settings: ArtifactSettings,
    ) -> Offloaded | None:
        with self._lock:
            kept = self._kept.get(id(message))
            if kept is not None and kept[0] is message and kept[1] == settings:
                self._kept.move_to_end(id(message))
                return replace(kept[2], position=position)
        offloaded = offload_tool_result(message, store, settings, position)
        if offloaded is not None and offloaded.not_stored in (None, "too-large"):
            with self._lock:
                replaced = self._kept.pop(id(message), None)
                if replaced is not None:
                    self._kept_chars -= replaced[2].original_chars
                self._kept[id(message)] = (message, settings, offloaded)
                self._kept_chars += offloaded.original_chars
                while len(self._kept) > KEPT or (
                    self._kept_chars > KEPT_CHARS and len(self._kept) > 1
                ):
                    _, (_, _, dropped) = self._kept.popitem(last=False)
                    self._kept_chars -= dropped.original_chars
        return offloaded


CONDENSED_IN_FALLBACK = "fallback: sent condensed (a large tool result kept as an artifact)"
"""The reason of a fallback plan's included item whose tool result went condensed."""


def condensed_in_fallback(
    plan: ContextPlan, offloaded: Sequence[Offloaded], source_ids: Sequence[str | None]
) -> ContextPlan:
    """`plan` with the included items of its condensed tool results saying so, when it is a
    fallback plan (whose other items say the original message was sent unchanged)."""
    if plan.mode != "fallback" or not offloaded:
        return plan
    condensed = {source_ids[item.position] or f"message:{item.position}" for item in offloaded}
    return replace(
        plan,
        included=[
            replace(item, reason=CONDENSED_IN_FALLBACK) if item.source_id in condensed else item
            for item in plan.included
        ],
    )


def manifest_artifacts(
    offloaded: Sequence[Offloaded], source_ids: Sequence[str | None], plan: ContextPlan
) -> list[dict[str, Any]]:
    """The manifest's `artifacts`: one entry per offloaded tool result the plan sends (ids and
    sizes, never text): `artifactId` (None: not stored), `sourceId` (the session entry),
    `originalChars`, `sizeBytes`, `notStored` (None, `too-large`, `no-store`,
    `write-failed`). A fallback plan sends the condensed copy too, so it lists them; an
    observer plan never offloads."""
    if plan.mode == "observer":  # sends the caller's messages as they are
        return []
    sent = {item.source_id for item in plan.included}
    out = []
    for item in offloaded:
        source_id = source_ids[item.position] or f"message:{item.position}"
        if source_id not in sent:
            continue
        out.append(
            {
                "artifactId": item.artifact_id,
                "sourceId": source_id,
                "originalChars": item.original_chars,
                "sizeBytes": item.size_bytes,
                "notStored": item.not_stored,
            }
        )
    return out
