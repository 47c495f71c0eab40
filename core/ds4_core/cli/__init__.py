"""`ds4`: the context engine on the command line.

    ds4 [GLOBAL] plan --session FILE [--leaf ID] [--model PROVIDER/ID] [--context-window N]
                      [--fixed-tokens N] [--workspace DIR [--trust]] [--json] REQUEST
    ds4 [GLOBAL] retrieve [--session FILE] [--leaf ID] [--max-results N]
                          [--scope history|project]... [--workspace DIR [--trust]] [--json] QUERY

A REQUEST or QUERY of `-` is read from standard input (UTF-8; one trailing line break
dropped); standard input or a text argument (REQUEST, QUERY, ID, --leaf, --model,
--first-kept) that is not UTF-8 is refused with exit 2. Text reports fit the terminal's width
(`COLUMNS`, else 100 columns off a terminal): long lines wrap, and table columns that do not
fit move under their row as `header: value`.
    ds4 [GLOBAL] manifest (ID | --latest --session FILE)
                          [--view summary|included|excluded|full] [--json]
    ds4 [GLOBAL] usage --manifest ID --input N [--output N] [--cache-read N]
                       [--cache-write N] [--model PROVIDER/ID] [--stop-reason REASON] [--json]
    ds4 [GLOBAL] index [--force] [--json] (FILE | DIR)...
    ds4 [GLOBAL] compact --session FILE [--leaf ID] [--reason manual|threshold|overflow]
                         [--first-kept ID] [--json | --entry]
    ds4 [GLOBAL] summaries --session FILE [--leaf ID] [--json | --dot | --format svg|png]
                           [--output PATH]
    ds4 [GLOBAL] memory [--session FILE] [--all] [--json]
    ds4 [GLOBAL] (pin | remember) --session FILE [--leaf ID] [--scope S] [--supersedes ID] ... TEXT
    ds4 [GLOBAL] unpin --session FILE [--reason R] PIN_ID
    ds4 [GLOBAL] forget --session FILE [--status invalid|expired] [--reason R] MEMORY_ID
    ds4 [GLOBAL] session open [--cwd DIR] [--title TITLE] [--id ID] [--json]
    ds4 [GLOBAL] session append FILE [--messages PATH|-] [--parent ID] [--json]
    ds4 [GLOBAL] health [--json]
    ds4 [GLOBAL] rebuild [--json]
    ds4 [GLOBAL] artifacts search (--artifact ID | --session FILE [--leaf ID])
                                  [--max-matches N] [--json] QUERY
    ds4 [GLOBAL] artifacts gc [--dry-run] [--json]

GLOBAL options, before the command: `--db PATH`, `--settings-file FILE`, `--set KEY=VALUE`
(repeatable; settings of docs/configuration.md), `-v` (counts and timings on stderr),
`--version`.

`--json` prints exactly the object the matching LSP request returns (docs/protocol.md), the
engine result's `to_wire()` (`ds4_core.wire`), so the two are equal by construction:
`plan` the `ds4/plan` result, `retrieve` the `ds4/retrieve` result, `manifest` the
`ds4/manifest` result, `usage` what the `ds4/usage` notification recorded (`UsageResult`:
the notification has no answer), `memory` the `ds4/memory` result (`--all`: `includeInactive`),
`health` the `ds4.health` result without `server`, `rebuild` the
`ds4.rebuildIndex` result (failures in its `failed`), `artifacts search` the `ds4/artifactSearch`
result, `artifacts gc` the `ds4.gcArtifacts` result. `index` has no LSP request: it prints a
list with one object per FILE (a DIR: per `.jsonl` file directly in it, by name), in order: the file's sync result (`sessionId`,
`sessionFile`, `outcome`, `reason`, `entriesAdded`, `entriesTotal`, `malformedLines`,
`bytesRead`, `durationMs`, as in `ds4.rebuildIndex` `results`), or `{sessionFile, error}` for a
file that could not be indexed (so a failure never disappears from stdout; tell the two apart
by `error`). JSON output is ASCII (`json_text`: non-ASCII characters and lone surrogates as
`\\uXXXX` escapes), printed whole; text reports escape what the output encoding cannot show.

`compact` prepares one compaction with the offline summarizer (the CLI has no model): `--json`
prints the `ds4/compact` result, `--entry` the Pi compaction entry to append (one JSON line).
ds4 never writes a Pi session file: the batch stays `prepared` until the session contains
that entry; the next sync then marks it `committed`. `summaries` shows the session's summary graph:
`--json` prints the `ds4.summaries` view, `--dot` Graphviz DOT, `--format svg|png`
the picture Graphviz's `dot` draws of it (docs/compaction.md "Graph pictures"). `memory` lists the memory
items and pins (`--json`: the `ds4/memory` result). `pin`, `unpin`, `remember` and `forget`
check one write against the current items (a refusal exits 2 saying what to do) and print the
custom entry to append as one JSON line (`--json`: the `ds4/pin` ... result); ds4 appends it
itself only to a session it owns (`session open`), and says which on stderr. On a server-owned session
(docs/sessions.md) `compact` appends the entry itself and commits it. `session open` creates
a server-owned session in the data directory (or reopens `--id`) and `session append` appends
the Pi messages of a JSON Lines input to one (`--json`: the `ds4/sessionOpen` and
`ds4/sessionAppend` results; more than 1000 messages go in chained batches).

Exit codes: 0 success; 1 unexpected internal error; 2 bad usage or input you can fix (the
message says what to do), including a database that cannot be opened or stays locked by
another writer past `storage.busyTimeoutMs`; 3 some session files could not be indexed or
rebuilt (the others were; for `index` a file that is missing, unreadable or not a Pi session,
a `.jsonl` that is not a regular file (a FIFO, a directory, a broken link), a file whose name
is not valid UTF-8, or one that met a locked database); 130 interrupted (Ctrl-C).

The package: `runner` (`run`, `main`: parse, open the engine, errors to exit codes), `parser`
(argparse; each subcommand's `func` is its function in `commands`), `commands` (one function
per command; `artifact_commands` those of `ds4 artifacts` with their parser), `printers/` (the text reports, one module per command group, reading the typed
results of `ds4_core.results`), `arguments` (text arguments, standard input, settings, index
paths), `terminal` (width, progress bar, JSON text, `--output`), `layout` (wrapped lines and
tables), `errors` (exit codes, engine messages in CLI terms).
"""

from __future__ import annotations

from .arguments import STDIN_ARGUMENT, not_a_regular_file, read_argument_from, session_files_of
from .errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL, EXIT_USAGE
from .parser import build_parser
from .printers import COMMIT_NOTE, compaction_entry
from .runner import main, run
from .terminal import MIN_REPORT_WIDTH, REPORT_WIDTH, json_text, report_width

__all__ = [
    "COMMIT_NOTE",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PARTIAL",
    "EXIT_USAGE",
    "MIN_REPORT_WIDTH",
    "REPORT_WIDTH",
    "STDIN_ARGUMENT",
    "build_parser",
    "compaction_entry",
    "json_text",
    "main",
    "not_a_regular_file",
    "read_argument_from",
    "report_width",
    "run",
    "session_files_of",
]
