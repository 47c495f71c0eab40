"""`ds4-lsp` / `python -m ds4_lsp`: run the ds4 language server over stdio."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ds4_core import __version__ as core_version

from . import __version__
from .logs import LEVELS, configure_logging


def build_parser() -> argparse.ArgumentParser:
    """The command line: `--log-level`, `--version`."""
    parser = argparse.ArgumentParser(
        prog="ds4-lsp",
        description="DS4 context engine for AI coding agents, served over LSP on stdio. "
        "Logs go to stderr and carry counts, ids and timings only.",
    )
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default="info",
        help="stderr log verbosity (default: info); pygls's own logs stay at warning",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"ds4-lsp {__version__} (ds4-context-core {core_version})",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments, configure stderr logging and serve LSP on stdin/stdout until `exit`."""
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level)
    from .server import create_server  # not at the top: keeps --help and --version fast

    server = create_server()
    transport = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print() must not corrupt the JSON-RPC stream
    server.start_io(sys.stdin.buffer, transport)


if __name__ == "__main__":
    main()
