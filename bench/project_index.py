"""Benchmark: project indexing over a real `ds4-lsp` (docs/ds4-rules.md, "Project indexing").

Corpus: the 5,000 real `.py` files `bench/project_knowledge.py` picks (the standard library,
then site-packages; `collect_corpus`), copied to a temp dir that is not a Git repository. The
server is this interpreter's `python -m ds4_lsp` over stdio (or `--command`), its own fresh
database per run, the corpus as a trusted workspace (`initializationOptions.trusted`), with
`project.maxFiles` / `project.maxTotalBytes` raised to hold the corpus. The client declares
no capabilities, so the server registers no file watcher and reports no `$/progress`.

Full index, as the client sees it: from sending `initialized` (the server starts its first
full sync then, reason `initial`) to the `ds4/indexUpdated` notification of that sync (which
must say `ready` with every file indexed); process start and `initialize` are not counted.
`--index-runs` servers, median reported. Same-run baseline: the same windows (`window_lines`
of each file's text, cut beforehand and not timed) inserted with one `executemany` into a bare
FTS5 table (`content`, `file_path`, the store's tokenizer) in a fresh SQLite file, one
transaction (`project_knowledge.baseline_fts`). Throughput ratio = baseline seconds / ours;
target >= 0.5x.

Buffer edit to index: the corpus file closest to 2,000 lines is opened (`didOpen`) and, per
run, one line in its middle is changed by an incremental `textDocument/didChange` (a new
comment each run, so each run writes new windows). The server re-indexes a changed buffer
after a 150 ms debounce (`EDIT_DEBOUNCE_S`), or at once when a request needs the index:
`ds4.projectStatus` indexes pending edits first. So the client sends `didChange` and, right
after it, `workspace/executeCommand ds4.projectStatus`; the observable is the arrival of the
`ds4/indexUpdated` notification of that edit (reason `edit`, one file indexed), timed from
sending `didChange` (debounce excluded: the editor that needs the index asks for it). The
status response follows (it counts the index and the stale snippets: not part of the
observable). Same-run baselines: (1) the JSON-RPC round trip of a request the server does not
know (answered MethodNotFound at once), over the same process: the transport's floor; (2)
`window_lines` of the edited text + delete and re-insert of that file's windows in the bare
FTS5 table. Target: p95 <= 20 ms. p50 / p95 / p99 over `--edit-runs` edits after `--warmup` untimed ones.

Usage: python bench/project_index.py [--files 5000] [--index-runs 2] [--edit-runs 30]
    [--warmup 3] [--command ds4-lsp ...]
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan import RawClient  # noqa: E402  (bench/plan.py, next to this file)
from project_knowledge import (  # noqa: E402
    EDIT_LINES,
    bare_replace,
    baseline_fts,
    collect_corpus,
    describe_corpus,
    open_bare,
    percentile,
    write_corpus,
)

from ds4_core.project.discovery import DiscoveredFile  # noqa: E402
from ds4_core.project.filters import read_indexable  # noqa: E402
from ds4_core.project.index import DEFAULT_MAX_FILE_BYTES, _prepare  # noqa: E402
from ds4_core.project.windows import content_line_count, window_lines  # noqa: E402

TARGET_RATIO = 0.5
TARGET_EDIT_P95_MS = 20.0


class Client(RawClient):
    """`RawClient` that also hands back notifications (and answers server requests)."""

    def read(self) -> dict[str, Any]:
        """The next message from the server; a server request is answered with null."""
        assert self.proc.stdout is not None
        length = 0
        while (line := self.proc.stdout.readline().strip()) != b"":
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if not length:
            raise SystemExit("the server closed its output")
        message: dict[str, Any] = json.loads(self.proc.stdout.read(length))
        if "method" in message and "id" in message:  # e.g. window/workDoneProgress/create
            body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": None}).encode()
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.proc.stdin.flush()
        return message

    def until(self, method: str, reason: str | None = None) -> tuple[float, dict[str, Any]]:
        """(perf_counter at arrival, params) of the next `method` notification (with that
        `reason` when given); other messages are skipped."""
        while True:
            message = self.read()
            params = message.get("params") or {}
            if message.get("method") == method and (
                reason is None or params.get("reason") == reason
            ):
                return time.perf_counter(), params

    def read_response(self, request_id: int) -> dict[str, Any]:
        """The response (result or error) to `request_id`; notifications before it skipped."""
        while True:
            message = self.read()
            if message.get("id") == request_id and "method" not in message:
                return message

    def result_of(self, request_id: int) -> dict[str, Any]:
        """The response to `request_id` (notifications before it are skipped)."""
        message = self.read_response(request_id)
        if "error" in message:
            raise SystemExit(f"request failed: {message['error']}")
        return message


def start(command: list[str] | None, db: Path, root: Path, files: int) -> Client:
    """A server initialized on `root` (trusted, caps raised); `initialized` not yet sent."""
    client = Client(db, command)
    client.request(
        "initialize",
        {
            "processId": None,
            "rootUri": root.as_uri(),
            "capabilities": {},
            "initializationOptions": {
                "trusted": True,
                "settings": {
                    "project": {"maxFiles": max(10_000, files + 1000), "maxTotalBytes": 10**10}
                },
            },
        },
    )
    return client


def status(client: Client) -> dict[str, Any]:
    client.send("workspace/executeCommand", {"command": "ds4.projectStatus", "arguments": []})
    return client.result_of(client.next_id)["result"]


def row(label: str, values: list[float]) -> None:
    print(
        f"  {label:46} {statistics.median(values):8.2f} {percentile(values, 95):8.2f} "
        f"{percentile(values, 99):8.2f} {statistics.fmean(values):8.2f} {max(values):8.2f}"
        f"   ({len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=5000, help="corpus size (files)")
    parser.add_argument("--index-runs", type=int, default=2, help="full index runs (median)")
    parser.add_argument("--edit-runs", type=int, default=30, help="timed buffer edits")
    parser.add_argument("--warmup", type=int, default=3, help="untimed buffer edits first")
    parser.add_argument("--command", help="server command (default: python -m ds4_lsp)")
    args = parser.parse_args()
    command = shlex.split(args.command) if args.command else None

    corpus = collect_corpus(args.files)
    print(describe_corpus(corpus))
    n_files, size_mb = len(corpus.files), corpus.size_bytes / 1e6
    workdir = Path(tempfile.mkdtemp(prefix="ds4-bench-index-"))
    client: Client | None = None
    try:
        root = workdir / "project"
        write_corpus(root, corpus)

        # ---- full index over LSP
        ours: list[float] = []
        snippets = 0
        for run in range(args.index_runs):
            if client is not None:
                client.close()
            client = start(command, workdir / f"index-{run}.db", root, n_files)
            begun = time.perf_counter()
            client.send("initialized", {}, notify=True)
            arrived, params = client.until("ds4/indexUpdated", "initial")
            ours.append(arrived - begun)
            if params.get("status") != "ready" or params.get("filesIndexed") != n_files:
                raise SystemExit(f"unexpected first sync: {json.dumps(params)[:400]}")
            snippets = int(params.get("snippets") or 0)
        assert client is not None
        flat = [(f.rel_path, w.text) for f in corpus.files for w in window_lines(f.text)]
        rows = [(i, text, path) for i, (path, text) in enumerate(flat, start=1)]
        bare = [baseline_fts(rows, workdir / f"bare-{run}.db") for run in range(args.index_runs)]
        ours_s, bare_s = statistics.median(ours), statistics.median(bare)
        print(
            f"\nfull index of {n_files:,} files ({size_mb:.1f} MB, {snippets:,} snippets; "
            f"baseline {len(rows):,} windows) over stdio, median of {args.index_runs} runs"
        )
        print(f"{'':48} {'seconds':>8} {'files/s':>9} {'MB/s':>7}")
        for label, seconds in (
            ("initialized -> ds4/indexUpdated (ours)", ours_s),
            ("baseline: bare FTS5 insert of the windows", bare_s),
        ):
            print(f"  {label:46} {seconds:8.2f} {n_files / seconds:9,.0f} {size_mb / seconds:7.2f}")
        print(f"  runs (s): ours {[round(s, 2) for s in ours]}, bare {[round(s, 2) for s in bare]}")
        # In process, same files: what the index must compute before any SQLite work (one
        # thread), the floor the write cannot hide (the reader thread overlaps it with SQLite).
        begun = time.perf_counter()
        texts = [
            read_indexable(root / f.rel_path, max_file_bytes=DEFAULT_MAX_FILE_BYTES)[0]
            for f in corpus.files
        ]
        read_s = time.perf_counter() - begun
        begun = time.perf_counter()
        for f, text in zip(corpus.files, texts, strict=True):
            fake = DiscoveredFile(f.rel_path, len(f.text), 0, False, False)
            _prepare(str(root), fake, None, "now", text, None, False, len(f.text), 0)
        prepare_s = time.perf_counter() - begun
        for label, seconds in (
            ("  in process: read + decode + secret checks", read_s),
            ("  in process: windows + symbols + sub-words", prepare_s),
        ):
            print(f"  {label:46} {seconds:8.2f} {n_files / seconds:9,.0f} {size_mb / seconds:7.2f}")
        print(
            f"  compute alone / baseline: {(read_s + prepare_s) / bare_s:.2f}x the bare insert's "
            "time (the floor on one core)"
        )
        ratio = bare_s / ours_s
        verdict = "meets" if ratio >= TARGET_RATIO else "MISSES"
        print(
            f"  throughput ratio ours / baseline: {ratio:.2f}x (target >= {TARGET_RATIO}x: {verdict})"
        )

        # ---- buffer edits over LSP
        target = min(
            corpus.files, key=lambda f: (abs(content_line_count(f.text) - EDIT_LINES), f.rel_path)
        )
        uri = (root / target.rel_path).as_uri()
        lines = target.text.split("\n")
        middle = len(lines) // 2
        client.send(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": uri,
                    "languageId": "python",
                    "version": 1,
                    "text": target.text,
                }
            },
            notify=True,
        )
        status(client)  # indexes the opened buffer (unchanged: nothing written)
        quiet = []
        for _ in range(args.warmup + args.edit_runs):
            begun = time.perf_counter()
            client.send("ds4/noSuchMethod", {})
            client.read_response(client.next_id)
            quiet.append((time.perf_counter() - begun) * 1000)
        edits: list[float] = []
        answered: list[float] = []
        bare_edit: list[float] = []
        bare_conn = open_bare(workdir / "bare-0.db")
        bare_rowids = [i for i, _text, path in rows if path == target.rel_path]
        next_rowid = len(rows) + 1
        current = lines[middle]
        for run in range(args.warmup + args.edit_runs):
            edited = f"{lines[middle]}  # edit {run}"
            change = {
                "range": {
                    "start": {"line": middle, "character": 0},
                    "end": {"line": middle, "character": len(current)},
                },
                "text": edited,
            }
            begun = time.perf_counter()
            client.send(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": run + 2}, "contentChanges": [change]},
                notify=True,
            )
            client.send(
                "workspace/executeCommand", {"command": "ds4.projectStatus", "arguments": []}
            )
            arrived, params = client.until("ds4/indexUpdated", "edit")
            client.result_of(client.next_id)
            done = time.perf_counter()
            current = edited
            if params.get("filesIndexed") != 1 or params.get("status") != "ready":
                raise SystemExit(f"edit not indexed: {json.dumps(params)[:400]}")
            text = "\n".join([*lines[:middle], edited, *lines[middle + 1 :]])
            started = time.perf_counter()
            bare_rowids, next_rowid = bare_replace(
                bare_conn, bare_rowids, next_rowid, target.rel_path, text
            )
            if run >= args.warmup:
                edits.append((arrived - begun) * 1000)
                answered.append((done - begun) * 1000)
                bare_edit.append((time.perf_counter() - started) * 1000)
        bare_conn.close()
        quiet = quiet[args.warmup :]
        print(
            f"\nbuffer edit to index: {target.rel_path} ({content_line_count(target.text):,} "
            f"lines, {len(target.text.encode()) / 1e3:.0f} KB, {len(window_lines(target.text))} "
            "windows), one line changed per edit (incremental didChange), debounce excluded"
        )
        print(f"{'':48} {'p50':>8} {'p95':>8} {'p99':>8} {'mean':>8} {'max':>8}   (ms, n)")
        row("didChange -> ds4/indexUpdated (ours)", edits)
        row("didChange -> ds4.projectStatus answered", answered)
        row("baseline: JSON-RPC round trip (unknown method)", quiet)
        row("baseline: window_lines + bare FTS5 replace", bare_edit)
        p95 = percentile(edits, 95)
        print(
            f"  ratio p50 ours / bare FTS5 replace: "
            f"{statistics.median(edits) / statistics.median(bare_edit):.2f}x; "
            f"target p95 <= {TARGET_EDIT_P95_MS:g} ms: "
            f"{'meets' if p95 <= TARGET_EDIT_P95_MS else 'MISSES'} ({p95:.1f} ms)"
        )
        client.close()
        client = None
    finally:
        if client is not None:
            client.proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
