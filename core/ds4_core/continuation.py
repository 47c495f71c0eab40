"""Native continuation (DS4 M12): whether the next call of a stateful provider API may send only
the new items after `previous_response_id` (`delta`) or must replay everything (`full`).

The client owns the transport and the response ids; the server only decides. Pure: no store, no
I/O, no LSP; the engine (`engine/continuing.py`) feeds it the final planned messages.

The rules (docs/model-awareness.md "Native continuation"; the DS4 reference's native
continuation section, docs/reference.md):

- **Item hash**: the hex SHA-256 of the stable JSON (`tokens.stable_json`: keys sorted, no
  spaces, non-ASCII as is) of a Pi message without its bookkeeping keys (`BOOKKEEPING_KEYS`:
  `timestamp`, `usage`, `api`, `provider`, `model`, `stopReason`, `responseId`,
  `errorMessage`, `details`), with a string `content` written as one text block
  (`[{"type": "text", "text": ...}]`). `item_hash`.
- **Options hash**: the same hash of the request body without `input` and
  `previous_response_id` (absent options hash as `{}`). `options_hash`.
- **Eligible** (`ineligible_reason`): the settings are on (`enabled` and
  `allowProviderStorage`), the plan is managed, it belongs to a session, the profile matches
  (`provider/model` or `provider/*`) and the client declared `model.api` `openai-responses`.
- **State** (`ContinuationStates`): in memory only, per (session id, provider, model): the item
  hashes of the previous planned request, the output item hashes of its response once the
  client reports them (`ds4/usage`), the options hash and the time. Never a response id.
  Bounded: at most `MAX_STATES` states, `MAX_ITEMS` hashes in a request or an output (a larger
  plan is not kept: `continuation-state-too-large`) and `MAX_HASHES` hashes over all states
  (least recently used states dropped first).
- **Decision** (`ContinuationStates.plan`): `delta` at `deltaStart = len(previous request) +
  len(previous output)` when the current item hashes start with the previous request's hashes
  followed by the previous output's, the remainder is not empty, the state is younger than
  `maxStateAgeMs` and the options hash is the same; else `full` with a reason (`REASONS`).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from .requests import RequestError
from .tokens import sha256_hex, stable_json

STRATEGY = "openai-previous-response-v1"
"""The strategy named in every decision (the reference's name)."""

CONTINUED_API = "openai-responses"
"""The one provider API continued (`model.api`)."""

BOOKKEEPING_KEYS = frozenset(
    {
        "timestamp",
        "usage",
        "api",
        "provider",
        "model",
        "stopReason",
        "responseId",
        "errorMessage",
        "details",
    }
)
"""Keys of a Pi message that never reach the provider's input (docs/reference.md §P5): left out
of the item hash, so the assistant message a client received hashes like the same message read
back from the session file."""

OPTIONS_EXCLUDED = frozenset({"input", "previous_response_id"})
"""Request-body keys left out of the options hash (they change on every call)."""

# reasons of a `full` decision: the reference's ...
COLD_START = "cold-start"
STATE_EXPIRED = "state-expired"
IDENTITY_CHANGED = "continuation-identity-changed"
OPTIONS_CHANGED = "provider-request-options-changed"
PREFIX_CHANGED = "managed-context-prefix-changed"
DELTA_EMPTY = "delta-empty"
RESPONSE_ID_MISSING = "provider-response-id-missing"
# ... and ours
OUTPUT_MISSING = "provider-output-missing"
CALL_FAILED = "provider-call-failed"
TOO_LARGE = "continuation-state-too-large"
BRANCH_CHANGED = "session-branch-changed"
COMPACTED = "session-compacted"
HANDLE_REJECTED = "continuation-handle-rejected"
FAILED = "continuation-failed"
# reasons a plan is not eligible (the decision is `full`)
NOT_MANAGED = "ineligible-mode"
NO_SESSION = "ineligible-no-session"
PROFILE_NOT_MATCHED = "ineligible-profile"
API_NOT_CONTINUED = "ineligible-api"

REASONS = (
    COLD_START,
    STATE_EXPIRED,
    IDENTITY_CHANGED,
    OPTIONS_CHANGED,
    PREFIX_CHANGED,
    DELTA_EMPTY,
    RESPONSE_ID_MISSING,
    OUTPUT_MISSING,
    CALL_FAILED,
    TOO_LARGE,
    BRANCH_CHANGED,
    COMPACTED,
    HANDLE_REJECTED,
    FAILED,
    NOT_MANAGED,
    NO_SESSION,
    PROFILE_NOT_MATCHED,
    API_NOT_CONTINUED,
)
"""Every reason a decision may give (docs/model-awareness.md lists what each means)."""

MAX_STATES = 1024
"""States kept (least recently planned or reported dropped first): one per session and model
in use."""

MAX_ITEMS = 10_000
"""Most item hashes of a planned request (a longer plan is `full`, `continuation-state-too-large`,
and not kept) or of a reported output (a longer report is ignored)."""

MAX_HASHES = 1_000_000
"""Most item hashes kept over all states (requests and outputs; about 120 MB of 64-character
strings): beyond it the least recently used states are dropped."""

HASH_CACHE_CHARS = 32 * 1024 * 1024
"""Most characters of stable JSON (`ItemHashCache`) whose messages the item hash cache holds."""

MAX_API_CHARS = 100
"""Longest `model.api` accepted (Pi's API names are a few words)."""

MAX_OPTIONS_CHARS = 4 * 1024 * 1024
"""Largest `requestOptions` accepted, in characters of its stable JSON (tool schemas and
instructions included)."""

_HEX64 = re.compile(r"[0-9a-f]{64}")
_API = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")


def check_plan_inputs(api: str | None, request_options: Any) -> None:
    """Reject a hostile `model.api` or `requestOptions` of `ds4/plan`, naming the field.

    Raises:
        RequestError: `model.api` longer than `MAX_API_CHARS` or not a name (letters, digits,
            `.`, `_`, `:`, `-`); `requestOptions` not an object or larger than
            `MAX_OPTIONS_CHARS` as stable JSON.
    """
    if api is not None and (len(api) > MAX_API_CHARS or _API.fullmatch(api) is None):
        raise RequestError(
            f"model.api: expected an API name such as {CONTINUED_API!r} "
            f"(letters, digits, '.', '_', ':', '-'; at most {MAX_API_CHARS} characters)",
            "model.api",
        )
    if request_options is None:
        return
    if not isinstance(request_options, Mapping):
        raise RequestError("requestOptions: expected an object", "requestOptions")
    if len(stable_json(request_options)) > MAX_OPTIONS_CHARS:
        raise RequestError(
            f"requestOptions: larger than {MAX_OPTIONS_CHARS:,} characters as JSON",
            "requestOptions",
        )


def item_hash(message: Any) -> str:
    """The continuation hash of one Pi message (see the module docstring): hex SHA-256 of the
    stable JSON of the message without `BOOKKEEPING_KEYS`, a string `content` as one text block.
    A value that is not an object hashes as its stable JSON. Never raises."""
    return _hash_and_size(message)[0]


def _hash_and_size(message: Any) -> tuple[str, int]:
    """`item_hash(message)` and the length of the stable JSON it hashed (characters)."""
    if isinstance(message, Mapping):
        facing = {k: v for k, v in message.items() if k not in BOOKKEEPING_KEYS}
        if isinstance(facing.get("content"), str):
            facing["content"] = [{"type": "text", "text": facing["content"]}]
        text = stable_json(facing)
    else:
        text = stable_json(message)
    return sha256_hex(text), len(text)


def item_hashes(messages: Iterable[Any]) -> tuple[str, ...]:
    """`item_hash` of each message, in order."""
    return tuple(item_hash(message) for message in messages)


class ItemHashCache:
    """`item_hash` of message objects kept between plans: a plan sends the session's recent
    messages again and again as the same objects (the session cache's, or the privacy
    cache's written copies, `engine/privacy_cache.py`), so only new messages are hashed.

    Keyed by object identity; each entry holds its message (a Python dict cannot be weakly
    referenced), so an id is never reused while its entry exists. Messages are treated as
    immutable (as every engine cache does). Bounded twice, least recently used dropped first:
    at most `capacity` entries (as many as the privacy cache keeps, `engine/privacy_cache.py`:
    mostly the same objects, which the session cache holds anyway) and at most `max_chars`
    characters of the messages' stable JSON (what their size is measured by; a message larger
    than that alone is hashed and not kept). Thread-safe."""

    def __init__(self, capacity: int = 4096, max_chars: int = HASH_CACHE_CHARS) -> None:
        self._capacity = capacity
        self._max_chars = max_chars
        self._kept: OrderedDict[int, tuple[Any, str, int]] = OrderedDict()
        """id(message) -> (message, its item hash, its stable JSON's length)"""
        self._chars = 0
        self._lock = threading.Lock()

    def hashes(self, messages: Sequence[Any]) -> tuple[str, ...]:
        """`item_hashes(messages)`, from the kept hashes where the object was hashed before."""
        with self._lock:
            found = [self._kept.get(id(m)) for m in messages]
            for m, held in zip(messages, found, strict=True):
                if held is not None and held[0] is m:
                    self._kept.move_to_end(id(m))
        fresh = [
            None if held is not None and held[0] is m else _hash_and_size(m)
            for m, held in zip(messages, found, strict=True)
        ]
        with self._lock:
            for m, made in zip(messages, fresh, strict=True):
                if made is not None and made[1] <= self._max_chars:
                    self._put(id(m), (m, *made))
        return tuple(
            made[0] if made is not None else held[1]  # type: ignore[index]
            for held, made in zip(found, fresh, strict=True)
        )

    def kept_chars(self) -> int:
        """The characters of stable JSON of the messages kept (at most `max_chars`)."""
        with self._lock:
            return self._chars

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    def _put(self, key: int, entry: tuple[Any, str, int]) -> None:
        old = self._kept.pop(key, None)
        if old is not None:
            self._chars -= old[2]
        self._kept[key] = entry
        self._chars += entry[2]
        while len(self._kept) > self._capacity or self._chars > self._max_chars:
            self._chars -= self._kept.popitem(last=False)[1][2]


def options_hash(options: Mapping[str, Any] | None) -> str:
    """Hex SHA-256 of the stable JSON of the request body `options` without `input` and
    `previous_response_id` (None hashes as `{}`). The body is never kept."""
    kept = {k: v for k, v in (options or {}).items() if k not in OPTIONS_EXCLUDED}
    return sha256_hex(stable_json(kept))


def is_item_hash(value: Any) -> bool:
    """Whether `value` is an item hash as the client reports one: 64 lower-case hex digits."""
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def profile_matches(profiles: Iterable[str], provider: str, model: str) -> bool:
    """Whether `provider`/`model` is listed in `profiles` as `provider/model` or `provider/*`
    (compared exactly; `nativeContinuation.profiles`)."""
    return any(p == f"{provider}/{model}" or p == f"{provider}/*" for p in profiles)


def ineligible_reason(
    *,
    plan_mode: str,
    session_id: str | None,
    provider: str,
    model: str,
    api: str | None,
    profiles: Iterable[str],
) -> str | None:
    """Why a plan of active continuation settings cannot be continued, or None when it can:
    `ineligible-mode` (not a managed plan: observer or fallback), `ineligible-no-session` (an
    ephemeral plan), `ineligible-profile`, `ineligible-api` (`api` is not `openai-responses`)."""
    if plan_mode != "managed":
        return NOT_MANAGED
    if session_id is None:
        return NO_SESSION
    if not profile_matches(profiles, provider, model):
        return PROFILE_NOT_MATCHED
    if api != CONTINUED_API:
        return API_NOT_CONTINUED
    return None


@dataclass(frozen=True, slots=True)
class Decision:
    """One plan's continuation: `mode` `delta` (send `messages[delta_start:]` with the previous
    response id) or `full` (send everything, without it; `reason` says why)."""

    mode: str
    delta_start: int = 0
    reason: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """`{strategy, mode, deltaStart, reason}` (docs/protocol.md, `ds4/plan`)."""
        return {
            "strategy": STRATEGY,
            "mode": self.mode,
            "deltaStart": self.delta_start,
            "reason": self.reason,
        }


def full(reason: str) -> Decision:
    """A `full` decision with `reason`."""
    return Decision("full", 0, reason)


StateKey = tuple[str, str, str]
"""(session id, provider, model)."""


@dataclass(slots=True)
class _State:
    """What one planned request left: hashes and times only (never an id or content)."""

    manifest_id: str
    request: tuple[str, ...]
    options: str
    planned_ms: float
    leaf_id: str | None
    session_file: str | None
    output: tuple[str, ...] | None = None
    response_id_missing: bool = False
    call_failed: bool = False

    @property
    def size(self) -> int:
        """The item hashes kept: request and output."""
        return len(self.request) + len(self.output or ())


def decide(
    state: _State | None,
    current: Sequence[str],
    options: str,
    now_ms: float,
    max_age_ms: int,
    leaf_on_branch: bool = True,
) -> Decision:
    """The decision for `current` item hashes against the previous `state` (None: `cold-start`).

    In order: a failed call (`stopReason` `error` or `aborted`), a response without an id, a
    previous leaf off the current branch, an expired state, changed options, an output never
    reported, a changed prefix, an empty delta; else `delta` at the end of the previous
    request plus output."""
    if state is None:
        return full(COLD_START)
    if state.call_failed:
        return full(CALL_FAILED)
    if state.response_id_missing:
        return full(RESPONSE_ID_MISSING)
    if not leaf_on_branch:
        return full(BRANCH_CHANGED)
    if now_ms - state.planned_ms > max_age_ms:
        return full(STATE_EXPIRED)
    if options != state.options:
        return full(OPTIONS_CHANGED)
    if state.output is None:
        return full(OUTPUT_MISSING)
    prefix = state.request + state.output
    if tuple(current[: len(prefix)]) != prefix:
        return full(PREFIX_CHANGED)
    if len(current) == len(prefix):
        return full(DELTA_EMPTY)
    return Decision("delta", len(prefix), None)


class ContinuationStates:
    """The in-memory continuation states of one engine (see the module docstring). Bounded
    (`capacity` states, `max_hashes` item hashes over all of them; the least recently planned
    or reported dropped first), thread-safe. An invalidation removes a state and remembers
    why, so the next plan of that key says so instead of `cold-start`."""

    def __init__(self, capacity: int = MAX_STATES, max_hashes: int = MAX_HASHES) -> None:
        self._capacity = capacity
        self._max_hashes = max_hashes
        self._hashes = 0
        """the item hashes of every state (`_State.size` summed)"""
        self._states: OrderedDict[StateKey, _State] = OrderedDict()
        self._why: OrderedDict[StateKey, str] = OrderedDict()
        """key -> the reason its state was dropped (until the key's next plan)"""
        self._lock = threading.Lock()

    def plan(
        self,
        key: StateKey,
        *,
        manifest_id: str,
        items: Sequence[str],
        options: str,
        now_ms: float,
        max_age_ms: int,
        leaf_id: str | None,
        branch: AbstractSet[str],
        session_file: str | None,
    ) -> Decision:
        """Decide for the plan `manifest_id` of `key` (item hashes `items`, options hash
        `options`, at `now_ms` on a monotonic clock) and keep it as the key's new state.

        A state of the same session under another provider or model is a model switch: every
        state of the session is dropped and the decision is `continuation-identity-changed`.
        The previous plan's leaf missing from `branch` (the entry ids of the current branch)
        is a tree navigation: `session-branch-changed`. More than `MAX_ITEMS` items: `full`
        (`continuation-state-too-large`), every state of the session dropped and none kept."""
        session = key[0]
        with self._lock:
            state = self._remove(key)
            why = self._why.pop(key, None)
            others = [k for k in self._states if k[0] == session]
            for other in others:
                self._remove(other)
            if len(items) > MAX_ITEMS:
                return full(TOO_LARGE)
            if others:
                decision = full(IDENTITY_CHANGED)
            elif why is not None:
                decision = full(why)
            else:
                on_branch = state is None or state.leaf_id is None or state.leaf_id in branch
                decision = decide(state, items, options, now_ms, max_age_ms, on_branch)
            kept = _State(manifest_id, tuple(items), options, now_ms, leaf_id, session_file)
            self._states[key] = kept
            self._hashes += kept.size
            self._evict()
        return decision

    def report_output(
        self,
        manifest_id: str,
        provider: str,
        model: str,
        output: Sequence[str] | None,
        has_response_id: bool | None,
        call_failed: bool = False,
    ) -> bool:
        """Attach the output item hashes of the response to the plan `manifest_id` (the latest
        plan of its key, answered by `provider`/`model`); `has_response_id` False marks the
        state unusable (`provider-response-id-missing`), and so does `call_failed` (the call
        ended with `stopReason` `error` or `aborted`: `provider-call-failed`). Returns whether
        a state took it (False: unknown or superseded manifest, another model, or an output of
        more than `MAX_ITEMS` hashes)."""
        if output is not None and len(output) > MAX_ITEMS:
            return False
        with self._lock:
            for key, state in self._states.items():
                if state.manifest_id != manifest_id:
                    continue
                if key[1:] != (provider, model):
                    return False
                if has_response_id is False:
                    state.response_id_missing = True
                if call_failed:
                    state.call_failed = True
                if output is not None:
                    self._hashes -= state.size
                    state.output = tuple(output)
                    self._hashes += state.size
                self._states.move_to_end(key)
                self._evict()
                return True
        return False

    def invalidate_session(self, session_id: str, reason: str) -> int:
        """Drop every state of `session_id` (compaction, ...), remembering `reason` for each
        key's next plan. Returns how many were dropped."""
        with self._lock:
            return self._drop([k for k in self._states if k[0] == session_id], reason)

    def invalidate_file(
        self, session_file: str, provider: str | None, model: str | None, reason: str
    ) -> int:
        """Drop the states planned from `session_file` (as the plan resolved it) for
        `provider`/`model` (None: any), remembering `reason` (`ds4/continuationFailed`)."""
        with self._lock:
            keys = [
                k
                for k, s in self._states.items()
                if s.session_file == session_file
                and provider in (None, k[1])
                and model in (None, k[2])
            ]
            return self._drop(keys, reason)

    def forget_session(self, session_id: str) -> None:
        """Drop the states of `session_id` without a reason (a plan that is not eligible: the
        client sends that call in full, so the provider's chain is broken)."""
        with self._lock:
            for key in [k for k in self._states if k[0] == session_id]:
                self._remove(key)
            for key in [k for k in self._why if k[0] == session_id]:
                del self._why[key]

    def clear(self) -> None:
        """Drop everything (shutdown)."""
        with self._lock:
            self._states.clear()
            self._why.clear()
            self._hashes = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._states)

    def kept_hashes(self) -> int:
        """The item hashes kept over all states (at most `max_hashes`)."""
        with self._lock:
            return self._hashes

    def _remove(self, key: StateKey) -> _State | None:
        state = self._states.pop(key, None)
        if state is not None:
            self._hashes -= state.size
        return state

    def _evict(self) -> None:
        """Drop the least recently used states beyond `capacity` or `max_hashes` (never the
        last one: a single state holds at most 2 * `MAX_ITEMS` hashes)."""
        while len(self._states) > self._capacity or (
            self._hashes > self._max_hashes and len(self._states) > 1
        ):
            self._hashes -= self._states.popitem(last=False)[1].size

    def _drop(self, keys: Sequence[StateKey], reason: str) -> int:
        for key in keys:
            self._remove(key)
            self._why[key] = reason
            self._why.move_to_end(key)
        while len(self._why) > self._capacity:
            self._why.popitem(last=False)
        return len(keys)
