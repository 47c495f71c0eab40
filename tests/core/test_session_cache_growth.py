"""A session that grows: the session cache extends the newest leaf's context, tokens and
planner structure from the ones it kept (issue 13), and the result is always what a cache
built from the file alone gives, whatever is appended (turns, model changes, a late tool
result, a compaction, a context edit, an entry reusing an id)."""

from __future__ import annotations

from pathlib import Path

from session_files import SessionWriter

from ds4_core.engine.sessions import BuiltContext, SessionCache
from ds4_core.requests import SessionRef


def same(grown: BuiltContext, fresh: BuiltContext) -> None:
    assert grown.context == fresh.context
    assert grown.tokens == fresh.tokens
    a, b = grown.structure(), fresh.structure()
    fields = [f for f in vars(b) if not f.endswith("positions")]
    assert {f: getattr(a, f) for f in fields} == {f: getattr(b, f) for f in fields}
    assert all(a.indices_of(s) == b.indices_of(s) for s in b.source_ids)
    assert grown.branch() == fresh.branch()
    assert grown.native_ids() == {id(m) for m in grown.context.messages}


def check(cache: SessionCache, path: Path) -> BuiltContext:
    """The kept cache's context of the newest leaf, compared with a new cache's."""
    ref = SessionRef(str(path))
    _, grown, _ = cache.built_context(ref)
    grown.structure()
    grown.branch()
    grown.native_ids()
    _, fresh, _ = SessionCache().built_context(ref)
    same(grown, fresh)
    return grown


def test_appends_extend_the_kept_context_and_equal_a_fresh_read(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s.jsonl")
    for n in range(30):
        writer.turn(n)
    cache = SessionCache()
    first = check(cache, writer.path)
    kept_messages = first.context.messages

    writer.turn(30)  # a plain turn: extended, the old message objects kept
    grown = check(cache, writer.path)
    assert grown is not first
    assert all(a is b for a, b in zip(kept_messages, grown.context.messages, strict=False))

    writer.append("model_change", provider="openai", modelId="gpt-5")
    writer.append("thinking_level_change", thinkingLevel="high")
    writer.user("and now?")
    grown = check(cache, writer.path)
    assert grown.context.model == ("openai", "gpt-5")
    assert grown.context.thinking_level == "high"

    # a result answering a call of an earlier turn: the whole structure is built again
    writer.tool_result("r3", "read", "late output")
    check(cache, writer.path)

    # a compaction, then more turns
    writer.compaction(
        {
            "summary": "## Goal\nfix parsers",
            "firstKeptEntryId": writer.turn(31),
            "tokensBefore": 1234,
            "details": {},
        }
    )
    writer.turn(32)
    check(cache, writer.path)

    # a context edit naming an entry: the contexts after it are always built again
    target = writer.user("a message the next entry edits")
    writer.append("context_edit", targetId=target, replacement={"content": "edited"})
    writer.turn(33)
    check(cache, writer.path)
    writer.turn(34)
    check(cache, writer.path)


def test_an_appended_entry_reusing_an_id_is_read_from_scratch(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s.jsonl")
    for n in range(5):
        writer.turn(n)
    cache = SessionCache()
    check(cache, writer.path)
    writer._next -= 3  # the next entry reuses an id already in the file
    writer.leaf = None  # and starts a new root
    writer.user("a new root with an old id")
    check(cache, writer.path)
