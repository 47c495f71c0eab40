"""`ds4-lsp` / `python -m ds4_lsp`: run the ds4 language server over stdio."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ds4_core import __version__ as core_version

from . import __version__
from .logs import LEVELS, configure_logging
from .transport import DEFAULT_MAX_MESSAGE_BYTES, MIN_MAX_MESSAGE_BYTES

MAX_MESSAGE_BYTES_ENV = "DS4_MAX_MESSAGE_BYTES"
"""Environment variable: the frame limit in bytes, when `--max-message-bytes` is not given."""


def message_bytes(text: str) -> int:
    """A frame limit in bytes (argparse type): an integer of at least MIN_MAX_MESSAGE_BYTES."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected an integer number of bytes") from None
    if value < MIN_MAX_MESSAGE_BYTES:
        raise argparse.ArgumentTypeError(f"expected at least {MIN_MAX_MESSAGE_BYTES} bytes")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line: `--log-level`, `--max-message-bytes`, `--version`."""
    parser = argparse.ArgumentParser(
        prog="ds4-lsp",
        description="DS4 context engine for AI coding agents, served over LSP on stdio. "
        "Logs carry counts, ids and timings only: INFO and DEBUG lines go to the client as "
        "window/logMessage once it has initialized (before that, to stderr); warnings and "
        "errors go to stderr.",
    )
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default="info",
        help="log verbosity (default: info): INFO/DEBUG to the client after initialize, "
        "WARNING and above to stderr; pygls's own logs stay at warning",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=message_bytes,
        default=None,
        metavar="N",
        help="largest LSP message body read, in bytes (default: $DS4_MAX_MESSAGE_BYTES, else "
        f"{DEFAULT_MAX_MESSAGE_BYTES}); larger messages are skipped and answered with an error; "
        "the setting server.maxMessageBytes overrides it after initialize",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"ds4-lsp {__version__} (ds4-context-core {core_version})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments, configure stderr logging and serve LSP on stdin/stdout until `exit`.

    The frame limit comes from `--max-message-bytes`, else `DS4_MAX_MESSAGE_BYTES`, else
    32 MiB; it must be known before `initialize`, which is why it is not only a setting.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    limit = args.max_message_bytes
    if limit is None:
        from_env = os.environ.get(MAX_MESSAGE_BYTES_ENV)
        try:
            limit = message_bytes(from_env) if from_env else DEFAULT_MAX_MESSAGE_BYTES
        except argparse.ArgumentTypeError as exc:
            parser.error(f"{MAX_MESSAGE_BYTES_ENV}: {exc}")
    configure_logging(args.log_level)
    from .app import create_server  # not at the top: keeps --help and --version fast
    from .transport import serve_stdio

    server = create_server()
    transport = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print() must not corrupt the JSON-RPC stream
    serve_stdio(server, sys.stdin.buffer, transport, limit)


if __name__ == "__main__":
    main()
