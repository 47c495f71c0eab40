"""The JSON-RPC envelopes of the ds4/* methods: `envelope()` builds them, `MESSAGE_TYPES` lists
them for `Ds4Protocol` (pygls looks a method's types up with `get_message_type` /
`get_result_type`, as lsprotocol's `METHOD_TO_TYPES` does for standard LSP methods).

An envelope is an attrs class that `ds4_lsp.converter` structures whole: `params` strictly
through its params type (`ds4_lsp.params`), so a bad field is named from `params.`; `id` must
be an integer or a string. Results are written as the engine's wire JSON (`to_wire()`), so a
response envelope holds any JSON `result`.
"""

from typing import Any

import attrs

from ds4_lsp.methods import (
    DS4_ARTIFACT_SEARCH,
    DS4_COMPACT,
    DS4_COMPACT_COMMITTED,
    DS4_COMPACT_FAILED,
    DS4_CONTINUATION_FAILED,
    DS4_FORGET,
    DS4_MANIFEST,
    DS4_MEMORY,
    DS4_PIN,
    DS4_PLAN,
    DS4_REMEMBER,
    DS4_RETRIEVE,
    DS4_SESSION_APPEND,
    DS4_SESSION_OPEN,
    DS4_SUMMARIZE,
    DS4_TOOL_EXECUTED,
    DS4_UNPIN,
    DS4_USAGE,
)
from ds4_lsp.params import (
    ArtifactSearchParams,
    CompactCommittedParams,
    CompactFailedParams,
    CompactParams,
    ContinuationFailedParams,
    ForgetParams,
    ManifestParams,
    MemoryParams,
    MsgId,
    PinParams,
    PlanParams,
    RememberParams,
    RetrieveParams,
    SessionAppendParams,
    SessionOpenParams,
    SummarizeParams,
    ToolExecutedParams,
    UnpinParams,
    UsageParams,
)

JSONRPC_VERSION = "2.0"


def envelope(
    method: str,
    params_type: type,
    *,
    notification: bool = False,
    params_optional: bool = False,
    result_type: Any = Any,
) -> tuple[type, type | None]:
    """The message class of `method` and, for a request, its response class (None for a
    notification): the pair `MESSAGE_TYPES` holds.

    The message has `id` (requests only; an integer or a string), `params` of `params_type`
    (required unless `params_optional`: then an absent `params` is `params_type()`, every
    field at its default), `method` and `jsonrpc`; the response has `id`, `result` of
    `result_type` (default None) and `jsonrpc`. The classes are named after the method
    (`ds4/plan` -> `PlanRequestMessage`, `PlanResponseMessage`; `ds4/toolExecuted` ->
    `ToolExecutedMessage`).
    """
    stem = method.rpartition("/")[2]
    stem = stem[:1].upper() + stem[1:]
    params = _field(params_type, factory=params_type) if params_optional else _field(params_type)
    fields: dict[str, Any] = {} if notification else {"id": _field(MsgId)}
    fields |= {
        "params": params,
        "method": _field(str, default=method),
        "jsonrpc": _field(str, default=JSONRPC_VERSION),
    }
    kind = "notification" if notification else "request"
    message = _make_class(
        f"{stem}Message" if notification else f"{stem}RequestMessage",
        fields,
        f"The JSON-RPC {kind} `{method}`.",
    )
    if notification:
        return message, None
    response = _make_class(
        f"{stem}ResponseMessage",
        {
            "id": _field(MsgId),
            "result": _field(result_type, default=None),
            "jsonrpc": _field(str, default=JSONRPC_VERSION),
        },
        f"The JSON-RPC response to `{method}`.",
    )
    return message, response


def _field(kind: Any, **options: Any) -> Any:
    """An attrs field of type `kind`: a class, a union (`MsgId`) or `Any`."""
    return attrs.field(type=kind, **options)


def _make_class(name: str, fields: dict[str, Any], doc: str) -> type:
    cls = attrs.make_class(name, fields, slots=True)
    cls.__module__ = __name__  # the converter serves the attrs classes of the wire modules
    cls.__doc__ = doc
    return cls


MESSAGE_TYPES: dict[str, tuple[type, type | None]] = {
    DS4_PLAN: envelope(DS4_PLAN, PlanParams),
    DS4_RETRIEVE: envelope(DS4_RETRIEVE, RetrieveParams, params_optional=True),
    DS4_MANIFEST: envelope(DS4_MANIFEST, ManifestParams, params_optional=True),
    DS4_TOOL_EXECUTED: envelope(DS4_TOOL_EXECUTED, ToolExecutedParams, notification=True),
    DS4_MEMORY: envelope(DS4_MEMORY, MemoryParams, params_optional=True),
    DS4_PIN: envelope(DS4_PIN, PinParams),
    DS4_UNPIN: envelope(DS4_UNPIN, UnpinParams),
    DS4_REMEMBER: envelope(DS4_REMEMBER, RememberParams),
    DS4_FORGET: envelope(DS4_FORGET, ForgetParams),
    DS4_ARTIFACT_SEARCH: envelope(DS4_ARTIFACT_SEARCH, ArtifactSearchParams),
    DS4_COMPACT: envelope(DS4_COMPACT, CompactParams),
    DS4_SESSION_OPEN: envelope(DS4_SESSION_OPEN, SessionOpenParams, params_optional=True),
    DS4_SESSION_APPEND: envelope(DS4_SESSION_APPEND, SessionAppendParams),
    # The client's answer is kept as raw JSON and checked by `converter.summarize_answer`, so
    # a wrong shape becomes an offline fallback with a reason instead of a message pygls cannot
    # structure (which would look like no answer at all).
    DS4_SUMMARIZE: envelope(DS4_SUMMARIZE, SummarizeParams),
    DS4_COMPACT_COMMITTED: envelope(
        DS4_COMPACT_COMMITTED, CompactCommittedParams, notification=True
    ),
    DS4_COMPACT_FAILED: envelope(DS4_COMPACT_FAILED, CompactFailedParams, notification=True),
    DS4_USAGE: envelope(DS4_USAGE, UsageParams, notification=True),
    DS4_CONTINUATION_FAILED: envelope(
        DS4_CONTINUATION_FAILED, ContinuationFailedParams, notification=True
    ),
}
"""method -> (message type, response message type or None for a notification) for the custom
requests and notifications, in both directions (`ds4/summarize` goes server to client)."""

PlanRequestMessage = MESSAGE_TYPES[DS4_PLAN][0]
"""The request envelope of `ds4/plan` (tests structure whole messages with it)."""
