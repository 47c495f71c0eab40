"""Evaluation: history recall on a real Pi transcript (issue 11, "How it is measured", History).

Cases: `bench/eval/history_cases.json`, written by hand from the real 914-message session
(`examples/pi-mono-v1-large-session.jsonl`): questions a person would ask about an earlier part
of the session, mostly in their own words (`style: "paraphrase"`; a few `"identifier"` ones
name a symbol as a person would), each with the entry ids whose text answers it (an assistant
conclusion or a tool result, never the user's question); and requests the session cannot
answer (`gold: []`: new tasks, chit-chat, other topics, and near-topic questions about things
the session never did).

The session is indexed into a fresh database in a temp dir by the real engine, then each case
runs three ways, in the same process:

- `ds4/retrieve`: `ContextEngine.retrieve(RetrieveRequest(session=SessionRef(file),
  query=..., scopes=("history",)))` with the default settings. Entries the planned context
  already holds (the recent tail) are left out as "already in context", as `ds4/retrieve` does;
  a case whose answer sits in that tail cannot be found by this column.
- `retrieve_history`, no exclusions (history relevance and its floor, docs/retrieval.md
  "History scope"): the lower-level call over the whole active branch with
  `exclude_entry_ids` empty, `retrieval.maxResults` hits and `context.maxRetrievedHistoryTokens`
  tokens (the settings' defaults): recall over the whole transcript.
- plain bm25: an FTS5 table (default tokenizer) over the searchable text the index keeps for
  each message entry (`entries.searchable_text`, the same entry types the history search
  reads), queried with every word of the question OR-ed together, `ORDER BY bm25()`, the same
  number of results. Its evidence tokens are the `chars-v2` estimate (`ds4_core.tokens`) of its
  top results' whole text, counted up to the same token budget as the second column.

Metrics. Answerable cases: Acc@1, Acc@3 and MRR of the first hit whose entry id is in the
case's gold (MRR 0 when none is returned). Unanswerable cases: mean evidence tokens returned and
the share that return nothing. Also printed: the same metrics split by style, and the runtime.

A second, guard set written before any tuning: `--cases bench/eval/history_cases_b.json`.

Usage: python bench/history_eval.py [--cases FILE] [--json OUT] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "core"))

from ds4_core.engine import ContextEngine  # noqa: E402
from ds4_core.requests import RetrieveRequest, SessionRef  # noqa: E402
from ds4_core.retrieval import describe_task, retrieve_history  # noqa: E402
from ds4_core.sessions.reader import read_all  # noqa: E402
from ds4_core.store import branch_entry_ids  # noqa: E402
from ds4_core.tokens import estimate_text_tokens  # noqa: E402

DEFAULT_CASES = ROOT / "bench" / "eval" / "history_cases.json"
WORD = re.compile(r"\w+", re.UNICODE)
COLUMNS = ("retrieve", "no_exclusions", "bm25")


def rank_of(hit_ids: list[str], gold: set[str]) -> int | None:
    """1-based rank of the first hit in `gold`, or None."""
    for index, entry_id in enumerate(hit_ids, 1):
        if entry_id in gold:
            return index
    return None


def outcome(status: str, hits: Sequence[Any], gold: set[str]) -> dict:
    """One column's result for a case: status, hit entry ids, rank of the first gold hit, and
    the evidence tokens returned (`hits` have `entry_id` and `tokens`)."""
    ids = [h.entry_id for h in hits]
    return {
        "status": status,
        "hits": ids,
        "rank": rank_of(ids, gold),
        "tokens": sum(h.tokens for h in hits),
    }


def summarize(rows: list[dict], column: str) -> dict:
    """Acc@1, Acc@3, MRR over answerable rows; evidence tokens over unanswerable rows."""
    answerable = [r for r in rows if r["gold"]]
    unanswerable = [r for r in rows if not r["gold"]]
    out: dict = {"answerable": len(answerable), "unanswerable": len(unanswerable)}
    if answerable:
        ranks = [r[column]["rank"] for r in answerable]
        out["acc1"] = sum(1 for k in ranks if k == 1) / len(ranks)
        out["acc3"] = sum(1 for k in ranks if k is not None and k <= 3) / len(ranks)
        out["mrr"] = sum(1 / k for k in ranks if k) / len(ranks)
    if unanswerable:
        tokens = [r[column]["tokens"] for r in unanswerable]
        out["mean_tokens"] = statistics.fmean(tokens)
        out["none_share"] = sum(1 for r in unanswerable if not r[column]["hits"]) / len(
            unanswerable
        )
    return out


def fts_query(question: str) -> str | None:
    """Every word of `question`, quoted, OR-ed (plain bm25: no stop words, no weighting)."""
    words = list(dict.fromkeys(w.lower() for w in WORD.findall(question)))
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words) or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--json", type=Path, default=None, help="write per-case results here")
    parser.add_argument("--verbose", action="store_true", help="print each case's ranks")
    args = parser.parse_args()

    spec = json.loads(args.cases.read_text(encoding="utf-8"))
    cases = spec["cases"]
    sessions = sorted({c["session"] for c in cases})
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="ds4-history-eval-"))
    rows: list[dict] = []
    timings: dict[str, list[float]] = {c: [] for c in COLUMNS}
    try:
        engine = ContextEngine(database_path=workdir / "index.db")
        config = engine.config
        max_results = config.retrieval.max_results
        max_tokens = config.context.max_retrieved_history_tokens
        for session in sessions:
            path = ROOT / session
            # The first retrieve indexes the session (sync), like the first request of a client.
            index_started = time.perf_counter()
            engine.retrieve(
                RetrieveRequest(session=SessionRef(file=str(path)), query="x", scopes=("history",))
            )
            index_ms = (time.perf_counter() - index_started) * 1000
            store = engine.store
            conn = store.connection()
            header = read_all(path).header
            if header is None or not header.session_id:
                raise SystemExit(f"{session}: no session id")
            session_id = header.session_id
            branch = frozenset(branch_entry_ids(store, session_id))
            texts = conn.execute(
                "SELECT entry_id, searchable_text FROM entries WHERE session_id = ? "
                "AND entry_type IN ('message', 'custom_message') ORDER BY seq",
                (session_id,),
            ).fetchall()
            bm25 = sqlite3.connect(":memory:")
            bm25.execute("CREATE VIRTUAL TABLE f USING fts5(entry_id UNINDEXED, body)")
            bm25.executemany("INSERT INTO f VALUES (?, ?)", [(i, t or "") for i, t in texts])
            body = {i: t or "" for i, t in texts}
            print(
                f"session {session}: {len(texts)} message entries indexed in {index_ms:.0f} ms; "
                f"maxResults {max_results}, history token budget {max_tokens}"
            )
            for case in (c for c in cases if c["session"] == session):
                row = {k: case[k] for k in ("id", "question", "gold", "style")}
                gold = set(case["gold"])

                t0 = time.perf_counter()
                result = engine.retrieve(
                    RetrieveRequest(
                        session=SessionRef(file=str(path)),
                        query=case["question"],
                        scopes=("history",),
                    )
                )
                timings["retrieve"].append((time.perf_counter() - t0) * 1000)
                row["retrieve"] = outcome(result.status, result.history, gold)

                t0 = time.perf_counter()
                plain = retrieve_history(
                    store,
                    session_id,
                    describe_task(case["question"]),
                    branch_entry_ids=branch,
                    exclude_entry_ids=frozenset(),
                    max_results=max_results,
                    max_tokens=max_tokens,
                    exact=config.retrieval.exact,
                    fts=config.retrieval.fts,
                )
                timings["no_exclusions"].append((time.perf_counter() - t0) * 1000)
                row["no_exclusions"] = outcome(plain.status, plain.hits, gold)

                t0 = time.perf_counter()
                query = fts_query(case["question"])
                ids = (
                    [
                        r[0]
                        for r in bm25.execute(
                            "SELECT entry_id FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT ?",
                            (query, max_results),
                        )
                    ]
                    if query
                    else []
                )
                timings["bm25"].append((time.perf_counter() - t0) * 1000)
                tokens = 0
                for entry_id in ids:
                    tokens = min(max_tokens, tokens + estimate_text_tokens(body[entry_id]))
                row["bm25"] = {"hits": ids, "rank": rank_of(ids, gold), "tokens": tokens}
                rows.append(row)
                if args.verbose:
                    print(
                        f"  {row['id']} {row['style']:<10} "
                        + " ".join(
                            f"{c}={row[c]['rank'] or '-'}/{len(row[c]['hits'])}" for c in COLUMNS
                        )
                    )
            bm25.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - started

    summary = {c: summarize(rows, c) for c in COLUMNS}
    by_style = {
        style: {c: summarize([r for r in rows if r["style"] == style], c) for c in COLUMNS}
        for style in sorted({r["style"] for r in rows})
    }
    answerable = summary["bm25"]["answerable"]
    unanswerable = summary["bm25"]["unanswerable"]
    paraphrase = sum(1 for r in rows if r["gold"] and r["style"] == "paraphrase")
    print(
        f"{len(rows)} cases: {answerable} answerable ({paraphrase} paraphrase), "
        f"{unanswerable} unanswerable; {elapsed:.1f} s in all"
    )
    header = (
        f"{'column':<16}{'Acc@1':>7}{'Acc@3':>7}{'MRR':>7}"
        f"{'unans. tokens':>15}{'none':>7}{'p50 ms':>8}{'max ms':>8}"
    )
    print(header)
    for c in COLUMNS:
        s = summary[c]
        print(
            f"{c:<16}{s['acc1']:>7.3f}{s['acc3']:>7.3f}{s['mrr']:>7.3f}"
            f"{s['mean_tokens']:>15.0f}{s['none_share']:>7.2f}"
            f"{statistics.median(timings[c]):>8.2f}{max(timings[c]):>8.2f}"
        )
    for style, per in by_style.items():
        parts = []
        for c in COLUMNS:
            s = per[c]
            if "acc1" in s:
                parts.append(f"{c} {s['acc1']:.3f}/{s['acc3']:.3f}/{s['mrr']:.3f}")
            else:
                parts.append(f"{c} {s['mean_tokens']:.0f} tok, none {s['none_share']:.2f}")
        print(
            f"  {style} ({per['bm25']['answerable'] or per['bm25']['unanswerable']}): "
            + "; ".join(parts)
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"summary": summary, "by_style": by_style, "seconds": elapsed, "cases": rows},
                indent=1,
                ensure_ascii=False,
            ),
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
