"""Bounds on JSON values that cross a trust boundary (the LSP wire, session files).

* Depth: Python's `json` module and every recursive walk over a decoded value (cattrs, the
  planner, `json.dumps`) use the interpreter's stack, which holds about 1000 frames. A value
  nested a few hundred levels deep therefore fails far from where it came in, often while the
  answer is being written. `MAX_JSON_DEPTH` is checked where JSON-RPC messages are read, and
  session records are clipped to `MAX_RECORD_DEPTH`, so a value that passes can be walked and
  written anywhere.
* Integers: JSON numbers are IEEE doubles in JavaScript (ECMA-262 `Number.MAX_SAFE_INTEGER`,
  also the interoperable range of RFC 8259 section 6), so integers on the wire stay within
  +-`MAX_SAFE_INTEGER`.
* Echoes: an error message that quotes a value the client sent quotes it through `echo`, which
  bounds its length and escapes lone surrogates, so a 10 MB id gives a short message and a
  malformed string never breaks UTF-8 encoding of the answer.
"""

from __future__ import annotations

from typing import Any

MAX_JSON_DEPTH = 128
"""Most nesting levels of arrays and objects in one JSON-RPC message (the outermost counts as
1). Walks over a value this deep stay far from Python's stack limit."""

MAX_RECORD_DEPTH = 100
"""Most nesting levels kept in one session-file record (`clip_depth`). Real Pi messages nest
about ten levels (message, content, tool call, arguments; tool arguments add their own).
Lower than MAX_JSON_DEPTH, so that a record's message still fits in a request or response
that carries it (`params.messages[i]` adds 4 levels, a plan result a few more)."""

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer every JSON reader represents exactly (ECMA-262 Number.MAX_SAFE_INTEGER)."""

ECHO_CHARS = 80
"""Characters of a client's value that an error message may quote."""


def too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> list[str | int] | None:
    """The path (keys and indexes) of the first array or object nested deeper than `limit`
    levels in the decoded JSON `value`, or None when it is within the bound.

    The outermost array or object is level 1; the path of a too-deep container at level
    `limit + 1` has `limit` parts. Iterative, so it never recurses itself.
    """
    if not _deeper_than(value, limit):
        return None
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 1, ())]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, dict):
            children: Any = item.items()
        elif isinstance(item, list):
            children = enumerate(item)
        else:
            continue
        if depth > limit:
            return list(path)
        for key, child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1, (*path, key)))
    return None


DEPTH_MARKER = f"[ds4: nested deeper than {MAX_RECORD_DEPTH} levels; omitted]"
"""What `clip_depth` puts in place of a value nested too deep."""


def clip_depth(value: Any, limit: int = MAX_RECORD_DEPTH) -> int:
    """Replace, in place, every array or object nested deeper than `limit` levels in the
    decoded JSON `value` with `DEPTH_MARKER`; returns how many were replaced (0: unchanged).

    Used where a too-deep value must not cost the whole record (a session line whose tool
    call arguments nest 330 levels keeps its entry, with the deep part omitted). Iterative.
    """
    if not _deeper_than(value, limit):
        return 0
    clipped = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        keys: Any = item.keys() if isinstance(item, dict) else range(len(item))
        for key in list(keys):
            child = item[key]
            if isinstance(child, dict | list):
                if depth >= limit:
                    item[key] = DEPTH_MARKER
                    clipped += 1
                else:
                    stack.append((child, depth + 1))
    return clipped


def may_be_too_deep(data: bytes | str, limit: int = MAX_JSON_DEPTH) -> bool:
    """False when the JSON text `data` has at most `limit` opening brackets, so no value in it
    can nest deeper than `limit`: a cheap test that spares the walk for nearly every line."""
    if isinstance(data, str):
        return data.count("[") + data.count("{") > limit
    return data.count(b"[") + data.count(b"{") > limit


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests arrays or objects deeper than `limit` levels (the fast scan of
    `too_deep`: containers only, no paths)."""
    if type(value) is not dict and type(value) is not list:
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth = pop()
        if depth > limit:
            return True
        for child in item.values() if type(item) is dict else item:
            kind = type(child)
            if kind is dict or kind is list:
                push((child, depth + 1))
    return False


def json_path(root: str, parts: list[str | int], max_parts: int = 6) -> str:
    """`root.a.b[3]`: a wire path for error messages; after `max_parts` parts it ends in
    `...` so that a path 128 levels deep stays readable. Keys are bounded with `echo`-like
    escaping."""
    text = root
    for part in parts[:max_parts]:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += "." + bounded_text(part, 40)
    if len(parts) > max_parts:
        text += "..."
    return text


def bounded_text(value: str, limit: int = ECHO_CHARS) -> str:
    """`value` cut to `limit` characters (ending in `...` when cut), with lone surrogates and
    control characters escaped (`\\ud800`, `\\n`): always safe to encode as UTF-8."""
    cut = value[:limit]
    text = cut.encode("utf-8", "backslashreplace").decode("utf-8")
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
    return text + ("..." if len(value) > limit else "")


def echo(value: Any, limit: int = ECHO_CHARS) -> str:
    """A client's value quoted for an error message: `'abc'`, or `'abcd...' (10485760
    characters)` when longer than `limit`; non-strings are described by type (`an object`),
    never dumped. Safe for lone surrogates."""
    if isinstance(value, str):
        shown = f"'{bounded_text(value, limit)}'"
        return shown + (f" ({len(value)} characters)" if len(value) > limit else "")
    return describe_type(value)


def describe_type(value: Any) -> str:
    """`an object`, `an array`, `a string`, `an integer`, `a number`, `true`, `false`, `null`:
    what a JSON value is, without its content."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
