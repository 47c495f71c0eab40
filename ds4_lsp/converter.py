"""The strict converter of the ds4 wire types, and the messages of its errors.

`CONVERTER` is built on lsprotocol's converter and structures the attrs classes of the wire
modules (`ds4_lsp.params`, `ds4_lsp.envelopes`) strictly: an integer field rejects `"12"`,
`12.5`, `true` and integers beyond +-2^53 - 1; a string field rejects numbers and lone
surrogates; an enum field rejects values outside its set; arrays and objects must be arrays and
objects. Unknown keys are ignored; snake_case fields are camelCase on the wire.

`describe_structure_error` turns a failed structuring into one message that names each
offending field, e.g. `ds4/plan: params.model.contextWindow: expected an integer`; the server
answers it as JSON-RPC InvalidParams (-32602). Messages never echo the offending value.
`command_argument`, `summarize_answer` and `parse_initialization_options` read the other
client-supplied values the same way.
"""

import re
from collections.abc import Callable, Mapping, Sequence
from types import GenericAlias
from typing import Any, Literal, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import list_structure_factory
from cattrs.errors import (
    AttributeValidationNote,
    BaseValidationError,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, override
from lsprotocol import converters
from pygls.exceptions import JsonRpcInvalidParams
from pygls.protocol import default_converter

from ds4_core.json_bounds import MAX_SAFE_INTEGER
from ds4_core.requests import SummarizeAnswer, SummarizerUnavailable
from ds4_core.wire import JsonObject, camel_case, to_wire
from ds4_lsp.methods import DS4_SUMMARIZE
from ds4_lsp.params import InitializationOptions, MsgId, SummarizeResult

WIRE_MODULES = frozenset({"ds4_lsp.params", "ds4_lsp.envelopes"})
"""The modules whose attrs classes `CONVERTER` serves (`is_wire_type`)."""

ARGUMENT_ROOT = "params.arguments[0]"
"""The wire path of a command's argument object, as error messages name it (a command's
fields are `params.arguments[0].session.file`, ...; docs/protocol.md "Errors")."""

R = TypeVar("R")


class WireTypeError(TypeError):
    """A JSON value of the wrong type; `expected` says what the field takes ("an integer")."""

    def __init__(self, expected: str) -> None:
        super().__init__(f"expected {expected}")
        self.expected = expected


def is_wire_type(cls: Any) -> bool:
    """True for the attrs classes of the wire modules (`WIRE_MODULES`), which `CONVERTER`
    structures and unstructures."""
    return isinstance(cls, type) and attrs.has(cls) and cls.__module__ in WIRE_MODULES


def _strict_scalar(
    kind: type[Any] | tuple[type[Any], ...], expected: str
) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, bool) and kind is not bool:
            raise WireTypeError(expected)
        if not isinstance(value, kind):
            raise WireTypeError(expected)
        return float(value) if kind == (int, float) else value

    return structure


def _structure_int(value: Any, _: Any) -> int:
    """An integer within +-MAX_SAFE_INTEGER (2^53 - 1): what JavaScript clients represent
    exactly (json_bounds)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireTypeError("an integer")
    if abs(value) > MAX_SAFE_INTEGER:
        raise WireTypeError(f"an integer within +-{MAX_SAFE_INTEGER} (2^53 - 1)")
    return value


def _structure_str(value: Any, _: Any) -> str:
    """A string of Unicode scalar values: a lone surrogate (`"\\ud800"` on the wire) cannot
    be written as UTF-8 (SQLite, file names, logs), so it is refused here, naming the field."""
    if not isinstance(value, str):
        raise WireTypeError("a string")
    if not value.isascii() and _LONE_SURROGATE.search(value):
        raise WireTypeError("a string without lone surrogates (unpaired \\ud800-\\udfff)")
    return value


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _structure_msg_id(value: Any, _: Any) -> MsgId:
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise WireTypeError("an integer or a string")


def _structure_json_object(value: Any, _: Any) -> JsonObject:
    if not isinstance(value, dict):
        raise WireTypeError("an object")
    return value


def _literal_hook(cls: Any) -> Callable[[Any, Any], Any]:
    options = get_args(cls)
    expected = "one of " + ", ".join(repr(o) for o in options)

    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, bool) or value not in options:
            raise WireTypeError(expected)
        return value

    return structure


def _list_hook(cls: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    (item_type,) = get_args(cls) or (Any,)
    list_type = GenericAlias(list, (item_type,))
    # cattrs annotates `type`, but its own converter passes generic aliases such as list[int].
    structure_items = list_structure_factory(list_type, converter)  # type: ignore[arg-type]

    def structure(value: Any, _: Any) -> list[Any]:
        if not isinstance(value, list):
            raise WireTypeError("an array")
        return structure_items(value, cls)

    return structure


def _object_hook(cls: type, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    # Typed `Any` because mypy cannot tell these field names from the keyword parameters
    # (`_cattrs_*`) that `make_dict_structure_fn` declares before `**kwargs`.
    renames: dict[str, Any] = {
        a.name: override(rename=camel_case(a.name)) for a in attrs.fields(cls)
    }
    structure_fields: cattrs.SimpleStructureHook[Mapping[str, Any], Any] = make_dict_structure_fn(
        cls, converter, **renames
    )

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise WireTypeError("an object")
        return structure_fields(value, cls)

    return structure


def _object_unstructure_hook(cls: type, converter: cattrs.Converter) -> Callable[[Any], Any]:
    fields = [(a.name, camel_case(a.name)) for a in attrs.fields(cls)]

    def unstructure(value: Any) -> dict[str, Any]:
        return {key: converter.unstructure(getattr(value, name)) for name, key in fields}

    return unstructure


def _make_converter() -> cattrs.Converter:
    converter = converters.get_converter(cattrs.Converter(forbid_extra_keys=False))
    converter.register_structure_hook(int, _structure_int)
    converter.register_structure_hook(float, _strict_scalar((int, float), "a number"))
    converter.register_structure_hook(str, _structure_str)
    # Integers written (`ds4/summarize` params) are clamped as results are (`to_wire`).
    converter.register_unstructure_hook(int, to_wire)
    converter.register_structure_hook(bool, _strict_scalar(bool, "true or false"))
    # Generic aliases and unions go through predicates: `register_structure_hook(Union[int,
    # str])` would register the hook for `int` and `str` themselves.
    converter.register_structure_hook_func(lambda t: t == MsgId, _structure_msg_id)
    converter.register_structure_hook_func(lambda t: t == JsonObject, _structure_json_object)
    converter.register_structure_hook_func(lambda t: t is Any, lambda value, _: value)
    converter.register_structure_hook_factory(lambda t: get_origin(t) is Literal, _literal_hook)
    converter.register_structure_hook_factory(lambda t: get_origin(t) is list, _list_hook)
    converter.register_structure_hook_factory(is_wire_type, _object_hook)
    converter.register_unstructure_hook_factory(is_wire_type, _object_unstructure_hook)
    return converter


CONVERTER = _make_converter()
"""Structures and unstructures the classes of the wire modules (strict JSON types, camelCase).
Results never pass through it: handlers answer the engine result's `to_wire()`
(`ds4_core.wire`, which also clamps integers to +-MAX_SAFE_INTEGER)."""


def server_converter() -> cattrs.Converter:
    """pygls's default converter, delegating the classes of the wire modules to `CONVERTER`.

    Used as the server's `converter_factory`, so standard LSP messages keep pygls's handling.
    """
    converter = default_converter()
    converter.register_structure_hook_factory(is_wire_type, CONVERTER.get_structure_hook)
    converter.register_unstructure_hook_factory(is_wire_type, CONVERTER.get_unstructure_hook)
    return converter


# --------------------------------------------------------------------------- errors


def field_errors(exc: BaseException, path: str = "") -> list[tuple[str, str]]:
    """Flatten a cattrs structuring error into `(wire path, problem)` pairs.

    Paths use wire (camelCase) names and `[i]` for array items, e.g. `params.messages[2]`.
    Problems say what was expected, never what was received.
    """
    if isinstance(exc, ClassValidationError | IterableValidationError):
        found: list[tuple[str, str]] = []
        with_notes, without_notes = exc.group_exceptions()
        for inner, note in with_notes:
            if isinstance(note, AttributeValidationNote):
                key = camel_case(note.name)
                found += field_errors(inner, f"{path}.{key}" if path else key)
            elif isinstance(note, IterableValidationNote):
                found += field_errors(inner, f"{path}[{note.index}]")
        for inner in without_notes:
            found += field_errors(inner, path)
        return found
    if isinstance(exc, KeyError):
        return [(path, "required field missing")]
    if isinstance(exc, WireTypeError):
        return [(path, f"expected {exc.expected}")]
    return [(path, f"invalid value ({type(exc).__name__})")]


def describe_structure_error(
    label: str, exc: BaseValidationError, root: str = ""
) -> tuple[str, list[str]]:
    """A message naming every bad field, and the list of their wire paths.

    `label` starts the message (the method); `root` prefixes each path (`result` for the
    client's answer to `ds4/summarize`; request envelopes already start their paths with
    `params`). Example:
    `("ds4/plan: params.model.contextWindow: expected an integer",
    ["params.model.contextWindow"])`.
    """
    errors = field_errors(exc, root) or [(root, "could not be read")]
    paths = [path or "params" for path, _ in errors]
    message = "; ".join(
        f"{path}: {problem}" for path, (_, problem) in zip(paths, errors, strict=True)
    )
    return f"{label}: {message}", paths


def command_argument(command: str, arguments: Sequence[Any], cls: type[R]) -> R:
    """Structure the one argument object of a workspace command into `cls`.

    Raises:
        JsonRpcInvalidParams: not exactly one argument, or fields of the wrong type or
            missing; the message names each field from `params.arguments[0]` (e.g.
            `ds4.summaries: params.arguments[0].session.file: required field missing`) and
            `data.fields` lists their paths (docs/reference.md §L4).
    """
    if len(arguments) != 1:
        raise JsonRpcInvalidParams(
            message=f"{command}: params.arguments: expected one argument object "
            f"(got {len(arguments)})",
            data={"fields": ["params.arguments"]},
        )
    try:
        return CONVERTER.structure(arguments[0], cls)
    except BaseValidationError as exc:
        message, fields = describe_structure_error(command, exc, root=ARGUMENT_ROOT)
    except WireTypeError as exc:  # the argument itself is not an object
        message, fields = f"{command}: {ARGUMENT_ROOT}: {exc}", [ARGUMENT_ROOT]
    raise JsonRpcInvalidParams(message=message, data={"fields": fields})


def summarize_answer(result: Any) -> SummarizeAnswer:
    """The core answer from the client's `ds4/summarize` result (raw JSON).

    Raises:
        SummarizerUnavailable: the result is not an object with a string `summary`, or its
            `provider` / `model` are not strings; the message (the compaction's
            `fallbackReason`) says which, without echoing the values.
    """
    if not isinstance(result, dict) or not isinstance(result.get("summary"), str):
        raise SummarizerUnavailable(f"{DS4_SUMMARIZE} answered without a string `summary`")
    # `provider: null` / `model: null` mean "unknown", as if absent.
    present = {key: value for key, value in result.items() if value is not None}
    try:
        return CONVERTER.structure(present, SummarizeResult).to_core()
    except BaseValidationError as exc:
        problem, _ = describe_structure_error(DS4_SUMMARIZE, exc, root="result")
        raise SummarizerUnavailable(f"{problem} in the client's answer") from None


def parse_initialization_options(raw: Any) -> tuple[InitializationOptions, list[str]]:
    """Read `initializationOptions`, ignoring each invalid field with a warning.

    Never raises: a bad field falls back to its default and the warning names it
    (`initializationOptions.trusted: expected true or false; ignored`).
    """
    if raw is None:
        return InitializationOptions(), []
    if not isinstance(raw, dict):
        return InitializationOptions(), ["initializationOptions: expected an object; ignored"]
    data = dict(raw)
    warnings: list[str] = []
    for _ in range(len(data) + 1):
        try:
            return CONVERTER.structure(data, InitializationOptions), warnings
        except BaseValidationError as exc:
            for path, problem in field_errors(exc):
                warnings.append(f"initializationOptions.{path}: {problem}; ignored")
                data.pop(path.split(".")[0].split("[")[0], None)
    return InitializationOptions(), warnings
