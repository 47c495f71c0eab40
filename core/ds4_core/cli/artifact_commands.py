"""`ds4 artifacts search` and `ds4 artifacts gc` (docs/artifacts.md): their parser
(`add_artifact_parser`) and their command functions, `(engine, args, out, err) -> exit code`
as in `commands`. `--json` prints the `ds4/artifactSearch` result or the `ds4.gcArtifacts`
result."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from ..engine import ContextEngine
from ..requests import ArtifactSearchRequest, RequestError, SessionRef
from .errors import EXIT_OK
from .printers.artifacts import print_artifact_gc, print_artifact_search
from .terminal import emit_json


def add_artifact_parser(sub: Any) -> None:
    """Add `artifacts` with its `search` and `gc` subcommands to the `ds4` subparsers."""
    a = sub.add_parser("artifacts", help="search or collect the stored large tool outputs")
    verbs = a.add_subparsers(dest="artifacts_command", required=True, metavar="ACTION")
    s = verbs.add_parser(
        "search", help="literal, case-insensitive search in one artifact or a session's"
    )
    target = s.add_mutually_exclusive_group(required=True)
    target.add_argument("--artifact", metavar="ID", help="the artifact id (64 hex digits)")
    target.add_argument(
        "--session", metavar="FILE", help="search the artifacts of this session's active branch"
    )
    s.add_argument("--leaf", metavar="ID", help="leaf of the active branch (default: last entry)")
    s.add_argument("--max-matches", type=int, metavar="N", help="1..100 (default: setting)")
    s.add_argument("--json", action="store_true", help="print the ds4/artifactSearch result")
    s.add_argument("query", help="the text to find (`-`: read it from standard input)")
    s.set_defaults(func=search)
    g = verbs.add_parser(
        "gc", help="remove artifacts no indexed session references (written over an hour ago)"
    )
    g.add_argument("--dry-run", action="store_true", help="count what would go, remove nothing")
    g.add_argument(
        "--force",
        action="store_true",
        help="collect even when the index holds no session (after the database was deleted)",
    )
    g.add_argument("--json", action="store_true", help="print the ds4.gcArtifacts result")
    g.set_defaults(func=gc)


def search(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 artifacts search QUERY (--artifact ID | --session FILE)`: the matches with their
    redacted excerpts (`ds4/artifactSearch`).

    Raises:
        RequestError: a bad argument (named by its option, `errors.usage_message`), or
            `--leaf` without `--session`.
    """
    if args.leaf is not None and not args.session:
        raise RequestError(
            "session.leafId: names a branch of --session; give --session FILE too",
            "session.leafId",
        )
    result = engine.artifact_search(
        ArtifactSearchRequest(
            query=args.query,
            artifact_id=args.artifact,
            session=SessionRef(args.session, args.leaf) if args.session else None,
            max_matches=args.max_matches,
        )
    )
    if args.json:
        emit_json(result.to_wire(), out)
    else:
        print_artifact_search(result, out)
    return EXIT_OK


def gc(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 artifacts gc [--dry-run]`: remove the objects no indexed session references (the
    `ds4.gcArtifacts` result)."""
    result = engine.gc_artifacts(dry_run=args.dry_run, force=args.force)
    if args.json:
        emit_json(result.to_wire(), out)
    else:
        print_artifact_gc(result, out)
    return EXIT_OK
