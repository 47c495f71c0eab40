"""Typed requests accepted by `ContextEngine` (the core side of the ds4/* protocol).

The LSP adapter converts its attrs params into these; the CLI builds them from arguments.
Results are returned as JSON-ready dicts in the wire shape (camelCase), so the CLI's `--json`
prints exactly what the matching LSP request returns (see docs/protocol.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Scope = Literal["history", "project"]
ManifestView = Literal["summary", "included", "excluded", "full"]


class RequestError(ValueError):
    """A request the engine cannot serve because of its input.

    `field` names the offending parameter in wire spelling (e.g. `session.file`), so the LSP
    layer can answer with JSON-RPC InvalidParams naming it and the CLI can print it.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class SessionRef:
    """A Pi session file and optionally the leaf entry id whose branch is active."""

    file: str
    leaf_id: str | None = None


@dataclass(frozen=True)
class ModelSpec:
    """The model of the call being planned. Missing parts are filled from the session's current
    model, `modelAwareness.overrides` and the table of well-known models (ds4_core.models)."""

    provider: str | None = None
    id: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None


@dataclass(frozen=True)
class PlanRequest:
    """Inputs of `ContextEngine.plan` (`ds4/plan`).

    With `messages` absent the messages are built from the session's active branch and
    `request` is appended as the new user message. `fixed_tokens` is the size of the system
    prompt and tool schemas in tokens.
    """

    session: SessionRef | None = None
    messages: list[dict[str, Any]] | None = None
    request: str | None = None
    model: ModelSpec = field(default_factory=ModelSpec)
    fixed_tokens: int = 0
    mode: Literal["managed", "observer"] | None = None


@dataclass(frozen=True)
class RetrieveRequest:
    """Inputs of `ContextEngine.retrieve` (`ds4/retrieve`). `query` defaults to the text of the
    last user message on the session's active branch. `max_tokens` bounds the excerpts."""

    query: str | None = None
    session: SessionRef | None = None
    scopes: tuple[Scope, ...] = ("history",)
    max_results: int | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class ManifestRequest:
    """Inputs of `ContextEngine.manifest` (`ds4/manifest`): an id, or a session with latest."""

    id: str | None = None
    session: SessionRef | None = None
    latest: bool = False
    view: ManifestView = "summary"


class DatabaseUnavailableError(RuntimeError):
    """The database cannot be opened or created; the message names the path and what to do.

    Not a bug and not the request's fault: callers show the message as is (the CLI exits 2,
    the LSP answers an error with this text, without a stack trace).
    """
