"""Running `ds4`: parse the arguments, read the text arguments and settings, open the engine
and its database, run the command (`args.func`), and turn every error into its message on
stderr and its exit code (`errors`); `main` is the console-script entry point."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from typing import TextIO

from ..engine import ContextEngine
from ..quoting import terminal_text
from ..requests import DatabaseUnavailableError, RequestError
from ..store.database import is_database_locked
from .arguments import read_text_arguments, settings_from
from .commands import Command
from .errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    locked_message,
    usage_message,
)
from .parser import build_parser
from .terminal import replace_unencodable


@contextlib.contextmanager
def _logging_to(err: TextIO, verbose: bool) -> Iterator[None]:
    """Send `ds4_core` log records to `err` while the command runs (errors only, or counts and
    timings with -v), then restore the logger. Only this package's logger is touched."""
    logger = logging.getLogger("ds4_core")
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("ds4: %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO if verbose else logging.ERROR)
    previous_level = logger.level
    logger.addHandler(handler)
    if verbose and (logger.level == logging.NOTSET or logger.level > logging.INFO):
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


def _parse_args(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, out: TextIO, err: TextIO
) -> argparse.Namespace | int:
    """Parsed arguments, or the exit code when argparse stopped (usage error 2, --help 0)."""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            return parser.parse_args(argv)
        except SystemExit as exc:
            code = exc.code
            return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_USAGE)


def _print_notices(engine: ContextEngine, err: TextIO) -> None:
    """The engine's notices (e.g. a database it had to recreate) on `err`, one line each."""
    for notice in engine.notices:
        err.write(f"ds4: {terminal_text(notice.removeprefix('ds4: '))}\n")


def run(
    argv: Sequence[str] | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    stdin: TextIO | None = None,
) -> int:
    """Run the CLI with arguments `argv` (default: `sys.argv[1:]`), writing results to `out`
    and messages to `err` and reading a REQUEST/QUERY of `-` from `stdin` (default
    `sys.stdin`); returns the exit code (see the `ds4_core.cli` docstring). Never raises or exits:
    argparse's usage errors and `--help` become their exit codes too."""
    parser = build_parser()
    args = _parse_args(parser, argv, out, err)
    if isinstance(args, int):
        return args
    try:
        settings = settings_from(args)
        read_text_arguments(args, sys.stdin if stdin is None else stdin)
    except RequestError as exc:
        err.write(f"ds4: {terminal_text(exc)}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C while typing a REQUEST of `-` on a terminal
        err.write("ds4: interrupted\n")
        return EXIT_INTERRUPTED
    with _logging_to(err, args.verbose):
        engine = ContextEngine(database_path=args.db, settings=settings)
        for warning in engine.config_warnings:
            err.write(f"ds4: warning: {terminal_text(warning)}\n")
        try:
            try:
                engine.store  # noqa: B018 - open (create, migrate) the database up front
            except DatabaseUnavailableError as exc:
                err.write(f"ds4: {terminal_text(exc)}\n")
                return EXIT_USAGE
            _print_notices(engine, err)
            command: Command = args.func  # bound by `build_parser`
            return command(engine, args, out, err)
        except RequestError as exc:
            err.write(f"ds4: {terminal_text(usage_message(exc, args.command))}\n")
            return EXIT_USAGE
        except KeyboardInterrupt:
            err.write("ds4: interrupted\n")
            return EXIT_INTERRUPTED
        except BrokenPipeError:  # e.g. `ds4 plan --json ... | head`: the reader went away
            return EXIT_OK
        except Exception as exc:  # noqa: BLE001 - last-resort report, the traceback only on -v
            if is_database_locked(exc):  # not damage: another writer, so no `rebuild` hint
                err.write(f"ds4: {locked_message(engine)}\n")
                return EXIT_USAGE
            if args.verbose:
                logging.getLogger("ds4_core.cli").exception("unexpected error")
            damage = isinstance(exc, sqlite3.DatabaseError)  # only then may `rebuild` help
            err.write(
                f"ds4: internal error ({type(exc).__name__}: {exc}); rerun with -v for the "
                + (
                    "traceback, or run `ds4 rebuild` if the database may be damaged\n"
                    if damage
                    else "traceback\n"
                )
            )
            return EXIT_INTERNAL
        finally:
            engine.close()


def main() -> None:
    """Console-script entry point."""
    replace_unencodable(sys.stdout, sys.stderr)
    code = run()
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader of a pipe went away: stay quiet at interpreter exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(code)
