"""History relevance (issue 11): weighted evidence, coverage, the floor, answers over questions,
tool call + result groups, word forms, camelCase and CJK sub-words. Real SQLite files, real
sessions written as Pi JSONL and indexed with `sync_session`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ds4_core.retrieval import describe_task, retrieve_history
from ds4_core.retrieval.evidence import render_evidence
from ds4_core.retrieval.floor import MAX_BELOW_FLOOR
from ds4_core.retrieval.history import HistoryRetrieval
from ds4_core.retrieval.history_relevance import (
    COMMON_UNIT_MIN_ENTRIES,
    REQUEST_FLOOR,
    unit_weight,
)
from ds4_core.retrieval.history_words import request_units, stem
from ds4_core.sessions.subwords import subword_text
from ds4_core.sessions.sync import sync_session
from ds4_core.store import branch_entry_ids, open_store
from ds4_core.store.database import Store

LARGE = "pi-mono-v1-large-session.jsonl"


def _message(n: int, message: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"m{n}",
        "parentId": f"m{n - 1}" if n > 1 else None,
        "timestamp": f"2026-01-01T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
        "message": {**message, "timestamp": n},
    }


def text(role: str, body: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": body}]}


def call(body: str, name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": body}] if body else []
    content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": arguments})
    return {"role": "assistant", "content": content}


def result(name: str, body: str, call_id: str) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": body}],
        "isError": False,
    }


class Session:
    """A Pi v3 session file of `messages`, indexed into a fresh store."""

    def __init__(self, tmp_path: Path, messages: list[dict[str, Any]]) -> None:
        path = tmp_path / "session.jsonl"
        header = {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00Z"}
        lines = [header] + [_message(n, m) for n, m in enumerate(messages, 1)]
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
        self.store: Store = open_store(tmp_path / "context.db")
        synced = sync_session(self.store, path)
        assert synced.session_id is not None
        self.session_id = synced.session_id
        self.branch = set(branch_entry_ids(self.store, self.session_id))

    def retrieve(self, query: str, **kwargs: Any) -> HistoryRetrieval:
        return retrieve_history(
            self.store,
            self.session_id,
            describe_task(query),
            branch_entry_ids=self.branch,
            exclude_entry_ids=set(),
            max_results=kwargs.pop("max_results", 12),
            max_tokens=kwargs.pop("max_tokens", 16_000),
            **kwargs,
        )


def ids(found: HistoryRetrieval) -> list[str]:
    return [hit.entry_id for hit in found.hits]


def first_hit(tmp_path: Path, bodies: list[tuple[str, str]], request_text: str) -> str:
    """The entry id of the best hit for `request_text` in a session of text messages."""
    session = Session(tmp_path, [text(role, body) for role, body in bodies])
    return ids(session.retrieve(request_text))[0]


@pytest.fixture(scope="module")
def large(pi_sessions_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Session:
    session = Session.__new__(Session)
    session.store = open_store(tmp_path_factory.mktemp("large") / "context.db")
    synced = sync_session(session.store, pi_sessions_dir / LARGE)
    assert synced.session_id is not None
    session.session_id = synced.session_id
    session.branch = set(branch_entry_ids(session.store, session.session_id))
    return session


def test_unit_weight_is_the_inverse_document_frequency() -> None:
    big = COMMON_UNIT_MIN_ENTRIES * 5
    assert unit_weight(big, big // 2) == 0.0  # in half the entries: no evidence at all
    assert 0.7 < unit_weight(big, big * 3 // 10) < 0.9  # in 30%: under 1
    assert unit_weight(big, 5) > 5  # in 5 entries: specific
    assert unit_weight(10, 9) > 0  # a tiny index keeps every word positive


def test_a_common_identifier_does_not_bury_the_answer(tmp_path: Path) -> None:
    """`AgentSession` is in a third of the entries; the answer shares the rarer words."""
    messages = []
    for n in range(30):
        messages.append(text("user", f"look at AgentSession step {n} of the refactor"))
        messages.append(text("assistant", f"AgentSession step {n} done, tests green"))
        messages.append(text("assistant", f"compiled module {n} without warnings"))
    messages.append(text("user", "should unsubscribe clear them?"))
    messages.append(
        text(
            "assistant",
            "We decided unsubscribe must not clear the event listeners: other subscribers "
            "would lose their events.",
        )
    )
    messages.append(text("user", "ok, next"))
    session = Session(tmp_path, messages)
    found = session.retrieve(
        "why did we decide that unsubscribe in AgentSession should not clear the event listeners?"
    )
    assert ids(found)[0] == "m92"
    assert "unsubscribe" in found.hits[0].reason and found.hits[0].reason.startswith("relevance")


def test_coverage_ranks_the_entry_holding_more_of_the_request_first(tmp_path: Path) -> None:
    bodies = [
        ("user", "the parser drops trailing whitespace"),
        ("assistant", "the tokenizer keeps whitespace"),
        ("assistant", "the parser trims trailing whitespace before the tokenizer runs"),
        ("user", "thanks"),
    ]
    request_text = "does the parser trim trailing whitespace before tokenizing?"
    assert first_hit(tmp_path, bodies, request_text) == "m3"


@pytest.mark.parametrize(
    "request_text",
    [
        "Write a haiku about the sea, please.",
        "Can you explain how Rust's borrow checker handles mutable references?",
    ],
)
def test_unrelated_requests_get_nothing_and_say_why(large: Session, request_text: str) -> None:
    found = large.retrieve(request_text)
    assert found.status == "ok"
    assert found.hits == []
    assert found.stats.below_floor > 0 and found.below_floor
    assert len(found.below_floor) <= MAX_BELOW_FLOOR
    scores = [b.score for b in found.below_floor]
    assert scores == sorted(scores, reverse=True)
    for below in found.below_floor:
        assert below.kind == "history" and below.source_id.startswith(f"{large.session_id}:")
        assert below.score < below.floor and below.floor == REQUEST_FLOOR
        assert below.reason.startswith("below the relevance floor")


def test_a_related_request_passes_the_floor(large: Session) -> None:
    found = large.retrieve("What does setTheme return now?")
    assert found.hits and found.hits[0].entry_id == "v1-874"


def test_the_answer_ranks_over_the_question_that_restates_it(tmp_path: Path) -> None:
    bodies = [
        ("user", "the footer flickers whenever the spinner redraws, why does it flicker?"),
        (
            "assistant",
            "The footer flickers because the spinner redraws the whole screen each tick; "
            "now it redraws only its own line.",
        ),
        ("user", "great"),
    ]
    request_text = "why did the footer flicker when the spinner redraws?"
    assert first_hit(tmp_path, bodies, request_text) == "m2"


def test_a_short_tool_output_is_found_through_its_call_and_quoted_with_it(
    tmp_path: Path,
) -> None:
    session = Session(
        tmp_path,
        [
            text("user", "how big is the parser module?"),
            call("Let me see.", "bash", {"command": "wc -l src/parser.ts"}, "call_1"),
            result("bash", "93", "call_1"),
            text("assistant", "Done."),
            text("user", "now the docs"),
            call("", "read", {"path": "docs/intro.md"}, "call_2"),
            result("read", "# Intro\nWelcome.", "call_2"),
        ],
    )
    found = session.retrieve("how many lines does src/parser.ts have according to wc?")
    assert found.hits
    grouped = [h for h in found.hits if "93" in h.excerpt and "wc -l src/parser.ts" in h.excerpt]
    assert grouped, [h.excerpt for h in found.hits]
    hit = grouped[0]
    if hit.role == "toolResult":
        assert hit.excerpt.startswith('[tool call] bash {"command":"wc -l src/parser.ts"}')
    else:
        assert hit.excerpt.endswith("[tool result] bash\n93")
    rendered = render_evidence(hit)["content"][0]["text"]
    assert "[tool call]" in rendered or "[tool result]" in rendered
    assert rendered.count("\n") == 8  # still one quoted JSON string between the markers


def test_word_forms_meet(tmp_path: Path) -> None:
    assert stem("parsed") == stem("parsing") == "pars"
    assert stem("boundaries").startswith("boundar") and stem("urls") == "url"
    bodies = [
        ("user", "look at the mail code"),
        ("assistant", "email/feedparser.py is parsing the multipart boundaries of each message"),
        ("assistant", "the smtp client opens the connection"),
        ("user", "ok"),
    ]
    assert first_hit(tmp_path, bodies, "where is the multipart boundary parsed?") == "m2"


def test_camel_case_sub_words_meet_prose(tmp_path: Path) -> None:
    assert subword_text("set mdLinkUrl to dimGray") == "md Link Url dim Gray"
    bodies = [
        ("user", "tune the markdown colors"),
        ("assistant", "Set mdLinkUrl to #666666 in dark.json."),
        ("assistant", "Headings stay yellow."),
        ("user", "ok"),
    ]
    assert first_hit(tmp_path, bodies, "what color did the link urls get?") == "m2"


def test_cjk_substrings_meet(tmp_path: Path) -> None:
    assert "itgc" in subword_text("修复了gen-itgc的悬空引用").split()
    assert [u.sub for u in request_units(describe_task("悬空引用"))] == ['"悬空 空引 引用"']
    session = Session(
        tmp_path,
        [
            text("user", "请看一下"),
            text("assistant", "修复了gen-itgc的悬空引用"),
            text("assistant", "unrelated english text"),
            text("user", "好"),
        ],
    )
    assert ids(session.retrieve("itgc"))[0] == "m2"
    assert ids(session.retrieve("悬空引用"))[0] == "m2"


def test_sub_words_follow_the_entries(tmp_path: Path) -> None:
    session = Session(tmp_path, [text("user", "a"), text("assistant", "see mdLinkUrl")])
    conn = session.store.connection()
    rows = conn.execute(
        "SELECT s.words FROM entries_subwords AS s JOIN entries AS e ON e.rowid = s.rowid "
        "WHERE e.session_id = ?",
        (session.session_id,),
    ).fetchall()
    assert rows == [("md Link Url",)]
    with session.store.write() as write:
        write.execute("DELETE FROM entries WHERE session_id = ?", (session.session_id,))
    assert conn.execute("SELECT count(*) FROM entries_subwords").fetchone() == (0,)


def test_ranking_without_the_join_gives_the_rows_of_the_joined_statement(
    large: Session, pi_sessions_dir: Path, tmp_path: Path
) -> None:
    """With one session in the index the ranking skips the session join; with two it is rerun
    with it. Both give the rows of the plain joined `ORDER BY bm25 LIMIT` statement."""
    from ds4_core.retrieval import history_relevance as relevance

    shared = Session(tmp_path, [text("user", "theme colors " * 3), text("user", "dim gray")])
    assert sync_session(shared.store, pi_sessions_dir / LARGE).session_id  # a second session
    requests = ["theme colors for markdown links", "chalk usages in tui-renderer.ts", "dim gray"]
    for session in (large, shared):
        conn = session.store.connection()
        for request in requests:
            units = request_units(describe_task(request))
            query = " OR ".join(u.fts for u in units if u.fts)
            fast = relevance._ranked_in_session(conn, "entries_fts", query, session.session_id)
            plain = conn.execute(
                relevance._BM25_SQL["entries_fts"],
                (query, session.session_id, relevance.SCORED_LIMIT),
            ).fetchall()
            assert [r[0] for r in fast] == [r[0] for r in plain], request


def test_other_sessions_in_the_same_database_do_not_change_the_answer(tmp_path: Path) -> None:
    """Word weights are the session's own: indexing another session full of the request's
    words (found as a trial user did: the same question got 0 hits, then 5) changes nothing."""
    messages = [text("user", f"tune the renderer pass {n}") for n in range(20)]
    messages.append(
        text("assistant", "We dropped Python 3.8 support because its asyncio lacks TaskGroup.")
    )
    messages += [text("assistant", f"renderer pass {n} is faster now") for n in range(20)]
    session = Session(tmp_path, messages)
    query = "why was Python 3.8 support dropped?"
    before = session.retrieve(query)
    other = tmp_path / "other.jsonl"
    header = {"type": "session", "version": 3, "id": "o", "timestamp": "2026-01-01T00:00:00Z"}
    noisy = [
        _message(n, text("user", f"python support {n}: dropped the 3.8 wheels again"))
        for n in range(1, 300)
    ]
    other.write_text("".join(json.dumps(x) + "\n" for x in [header, *noisy]))
    assert sync_session(session.store, other).session_id == "o"
    after = session.retrieve(query)
    assert ids(before) == ids(after) == ["m21"]
    # the relevance (weights, coverage, the floor) is the session's own; only the rank score
    # keeps FTS5's bm25, whose statistics span the database
    assert [h.reason for h in before.hits] == [h.reason for h in after.hits]


def test_a_decoy_repeating_one_rare_word_does_not_shut_out_the_answer(tmp_path: Path) -> None:
    """A reviewer's case: a short entry repeating one rare request word scores highest by
    bm25 with little of the request in it; the floor's gate and its relative cut look past it
    to the entries that reach the entry floor, so the answer is still sent."""
    filler = " ".join(f"lorem{i}" for i in range(600))
    messages = [
        text("assistant", f"unrelated note number {i} about gardening and tomatoes")
        for i in range(60)
    ]
    messages += [text("user", "ok"), text("assistant", "zeppelin " * 12), text("user", "next")]
    messages.append(
        text("assistant", f"The zeppelin retries are handled by the scheduler backoff. {filler}")
    )
    session = Session(tmp_path, messages)
    found = session.retrieve("zeppelin retries scheduler")
    assert "m64" in ids(found)
