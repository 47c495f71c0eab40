"""What `ds4` reads besides the engine: text arguments (UTF-8 only, `-` from standard input),
settings (`--settings-file`, `--set`), `--model`, and the session files of `ds4 index PATH...`."""

from __future__ import annotations

import argparse
import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from ..config import flatten_settings
from ..requests import RequestError

STDIN_ARGUMENT = "-"
"""A REQUEST (`plan`) or QUERY (`retrieve`) given as this is read from standard input."""


def read_argument_from(stream: TextIO, name: str, hint: str | None = None) -> str:
    """The text of `stream` (standard input) for the positional argument `name`, decoded as
    UTF-8 whatever the locale, without one trailing line break (as `$(cat file)` drops it).
    `hint` replaces the text-argument example in the empty-input message.

    Raises:
        RequestError: the input is not UTF-8, or holds nothing but whitespace.
    """
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        text = _utf8_text(buffer.read(), f"{name} (-): standard input")
    else:
        text = stream.read()
    text = text.removesuffix("\n").removesuffix("\r")
    if not text.strip():
        raise RequestError(
            f"{name} (-): standard input was empty; "
            + (hint or "pipe the text in, e.g. `echo 'fix the login bug' | ds4 ... -`")
        )
    return text


MESSAGES_HINT = (
    "give Pi messages as JSON Lines, one JSON object per line, e.g. "
    """`echo '{"role":"user","content":"fix the login bug"}' | ds4 session append FILE`"""
)
"""How `ds4 session append` says what its input holds when there is no message in it."""


def _utf8_text(raw: bytes, what: str) -> str:
    """`raw` decoded as UTF-8.

    Raises:
        RequestError: `raw` is not UTF-8: "`what` is not UTF-8 text (byte N of M)", N the
            0-based offset of the first bad byte, M the length in bytes.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"{what} is not UTF-8 text (byte {exc.start} of {len(raw)})") from exc


_TEXT_ARGUMENTS = (
    ("request", "REQUEST"),
    ("query", "QUERY"),
    ("leaf", "--leaf"),
    ("model", "--model"),
    ("first_kept", "--first-kept"),
    ("id", "ID"),
    ("text", "TEXT"),
    ("title", "--title"),
    ("session_id", "--id"),
    ("parent", "--parent"),
    ("artifact", "--artifact"),
)
"""Arguments that are text, not paths (attribute, name in messages): they must be UTF-8."""


def read_messages_text(source: str, stdin: TextIO) -> str:
    """The JSON Lines text of `ds4 session append --messages SOURCE`: standard input for `-`,
    else the file SOURCE, as UTF-8.

    Raises:
        RequestError: the input cannot be read, is not UTF-8, or is empty.
    """
    if source == STDIN_ARGUMENT:
        return read_argument_from(stdin, "--messages", MESSAGES_HINT)
    try:
        with open(source, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise RequestError(f"--messages: cannot read '{source}': {exc.strerror}") from None
    return _utf8_text(raw, f"--messages: '{source}'")


def messages_of(text: str, skip: int) -> list[tuple[int, Any]]:
    """The messages of a `ds4 session append` input `text`, as (1-based input line, parsed
    JSON) pairs, after the first `skip` lines (`--skip`) and without blank lines. Lines keep
    their numbers in the whole input, so errors and progress name the same lines either way.

    Raises:
        RequestError: `skip` is negative, a line is not JSON, or no message is left.
    """
    if skip < 0:
        raise RequestError(f"--skip: expected a number of lines >= 0, got {skip}")
    messages = []
    for number, line in enumerate(text.split("\n"), start=1):
        if number > skip and line.strip():
            try:
                messages.append((number, json.loads(line)))
            except ValueError:
                raise RequestError(f"--messages: line {number} is not JSON") from None
    if not messages:
        after = f" after --skip {skip}" if skip else ""
        raise RequestError(f"--messages: no message to append{after}; {MESSAGES_HINT}")
    return messages


def read_text_arguments(args: argparse.Namespace, stdin: TextIO) -> None:
    """Replace a REQUEST, QUERY or TEXT (a pin or claim) of `-` by the text of `stdin` (`read_argument_from`), and
    refuse a text argument (`_TEXT_ARGUMENTS`) whose bytes are not UTF-8, which Python hands
    over as lone surrogates (PEP 383 `surrogateescape`), as standard input would be refused.
    Paths (`--session`, `--db`, FILE...) may be any bytes the file system takes.

    Raises:
        RequestError: standard input or an argument is not UTF-8 (see `_utf8_text`), or
            standard input is empty.
    """
    if getattr(args, "messages_from", None) is not None:  # `ds4 session append`
        args.messages_text = read_messages_text(args.messages_from, stdin)
    for attribute, name in _TEXT_ARGUMENTS:
        value = getattr(args, attribute, None)
        if value == STDIN_ARGUMENT and attribute in ("request", "query", "text"):
            setattr(args, attribute, read_argument_from(stdin, name))
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
                continue
            except UnicodeEncodeError:
                pass
            try:
                raw = os.fsencode(value)  # the bytes given, on POSIX
            except UnicodeEncodeError as exc:  # a surrogate that stands for no byte
                raise RequestError(
                    f"{name}: the argument is not UTF-8 text (a lone surrogate at character "
                    f"{exc.start})"
                ) from exc
            setattr(args, attribute, _utf8_text(raw, f"{name}: the argument"))


def settings_from(args: argparse.Namespace) -> dict[str, Any] | None:
    """Settings from `--settings-file` then `--set KEY=VALUE` (later wins), or None.

    Raises:
        RequestError: an unreadable or non-object settings file, or a `--set` without `=`.
    """
    settings: dict[str, Any] = {}
    if args.settings_file:
        try:
            with open(args.settings_file, encoding="utf-8") as handle:
                loaded = json.load(handle)
        except OSError as exc:
            raise RequestError(
                f"--settings-file: cannot read '{args.settings_file}': {exc.strerror or exc}"
            ) from exc
        except ValueError as exc:
            raise RequestError(
                f"--settings-file: '{args.settings_file}' is not valid JSON ({exc})"
            ) from exc
        if not isinstance(loaded, dict):
            raise RequestError(
                f"--settings-file: '{args.settings_file}' must hold a JSON object of settings"
            )
        settings.update(flatten_settings(loaded))
    for item in args.settings:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise RequestError(
                f"--set: expected KEY=VALUE (e.g. context.mode=observer), got {item!r}"
            )
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        settings[key.strip()] = value
    return settings or None


def parse_model(value: str | None) -> tuple[str | None, str | None]:
    """`--model PROVIDER/ID` as (provider, model id); (None, None) without one.

    Raises:
        RequestError: no `/`, or nothing before or after it.
    """
    if not value:
        return None, None
    if "/" not in value or value.startswith("/") or value.endswith("/"):
        raise RequestError(
            f"--model: expected PROVIDER/ID (e.g. anthropic/claude-sonnet-4-5), got {value!r}"
        )
    provider, model_id = value.split("/", 1)
    return provider, model_id


def session_files_of(paths: Sequence[str]) -> list[tuple[str, str | None]]:
    """The session files `ds4 index PATH...` indexes, in order, each with None or the reason
    it cannot be tried.

    A FILE stands for itself (whatever its name: the engine says whether it is a Pi
    session; a FIFO, socket or broken link fails here). A DIR stands for the `*.jsonl`
    entries directly in it, sorted by name; subdirectories are not searched (pass them too,
    e.g. `~/.pi/agent/sessions/*/`), and a `.jsonl` there that is not a Pi session fails
    like a FILE would (Pi's own listing skips it; `ds4 index` reports it). So does a `.jsonl` entry that is not a regular file (a FIFO,
    a directory, a broken link: `not_a_regular_file`), which is never opened. A DIR with no
    `.jsonl` entry, or one that cannot be listed, is one failed item `(DIR, reason)`.
    """
    found: list[tuple[str, str | None]] = []
    for path in paths:
        folder = Path(path).expanduser()
        if not folder.is_dir():  # a FILE; a missing one is for the engine to report
            found.append((path, not_a_regular_file(folder) if os.path.lexists(folder) else None))
            continue
        try:
            entries = sorted(
                (child for child in folder.iterdir() if child.suffix == ".jsonl"),
                key=lambda child: child.name,
            )
        except OSError as exc:
            found.append((path, f"cannot list directory '{path}': {exc.strerror or exc}"))
            continue
        if not entries:
            found.append(
                (
                    path,
                    f"directory '{path}' holds no .jsonl file (subdirectories are not searched: "
                    "pass them too, e.g. DIR/*/)",
                )
            )
        found.extend((str(child), not_a_regular_file(child)) for child in entries)
    return found


def not_a_regular_file(path: Path) -> str | None:
    """None when `path` is a regular file (or a link to one), else why it is no session file:
    a directory, a FIFO, a socket, a device, a broken link, or a path that cannot be examined.
    Uses stat/lstat only: a FIFO is never opened (opening one blocks until a writer comes)."""
    try:
        mode = path.stat().st_mode
    except ValueError:  # a NUL byte: for the engine to report
        return None
    except OSError as exc:
        if path.is_symlink():
            try:
                target = f" '{os.readlink(path)}'"
            except OSError:
                target = ""
            return (
                f"'{path}' is a broken link (its target{target} cannot be reached: "
                f"{exc.strerror or exc}), not a session file"
            )
        return f"cannot examine '{path}': {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        what = "a directory (subdirectories are not searched: pass it too)"
    elif stat.S_ISFIFO(mode):
        what = "a FIFO (named pipe; ds4 does not read from one)"
    elif stat.S_ISSOCK(mode):
        what = "a socket"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        what = "a device"
    else:
        what = "not a regular file"
    return f"'{path}' is {what}, not a session file"


def absolute(file: str) -> str:
    """`file` as the engine names session files (user-expanded, resolved), for index errors."""
    try:
        return str(Path(file).expanduser().resolve())
    except (OSError, RuntimeError, ValueError):  # e.g. a symlink loop, a NUL in the path
        return file


def ends_with_newline(path: str) -> bool:
    """Whether the file at `path` is empty or ends with `\\n` (False when unreadable)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return True
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"
    except OSError:
        return False
