"""What a request is about (docs/reference.md §3.1) and the FTS5 query built from it."""

from __future__ import annotations

import sqlite3
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.retrieval import (
    TaskDescriptor,
    build_fts_query,
    describe_task,
    last_user_text,
    text_of_message,
)
from ds4_core.retrieval.descriptor import (
    FILE_PATH_PATTERN,
    QUALIFIED_PATTERN,
    _find_file_paths,
    _find_qualified_names,
)


def lower(values: tuple[str, ...]) -> set[str]:
    return {v.lower() for v in values}


def test_qualified_names_become_symbols_and_exact_identifiers() -> None:
    d = describe_task("Why does a.b fail while A::B works? Check SessionManager.open too")
    assert {"a.b", "A::B", "SessionManager.open"} <= set(d.qualified)
    assert {"a.b", "A::B", "SessionManager.open"} <= set(d.symbols)
    assert {"a.b", "A::B", "SessionManager.open"} <= set(d.exact_identifiers)


def test_file_paths_of_every_shape_are_found() -> None:
    text = (
        "read packages/coding-agent/docs/theme.md, then ./src/index.ts and ../lib/util.py; "
        r"on Windows C:\Users\me\app\main.cs; also /etc/hosts.conf and user-message-selector.ts"
    )
    d = describe_task(text)
    assert set(d.files) >= {
        "packages/coding-agent/docs/theme.md",
        "./src/index.ts",
        "../lib/util.py",
        r"C:\Users\me\app\main.cs",
        "/etc/hosts.conf",
        "user-message-selector.ts",
    }
    assert set(d.files) <= set(d.exact_identifiers)


def test_error_codes_are_recognised() -> None:
    d = describe_task(
        "got SQLITE_BUSY then ENOENT and EACCES, ERR_INVALID_ARG_TYPE, TS2345, HTTP_404, "
        "SIGTERM, but not Error or HTTP"
    )
    assert set(d.errors) == {
        "SQLITE_BUSY",
        "ENOENT",
        "EACCES",
        "ERR_INVALID_ARG_TYPE",
        "TS2345",
        "HTTP_404",
        "SIGTERM",
    }
    assert set(d.errors) <= set(d.exact_identifiers)


def test_backticks_flags_camel_and_pascal_case_are_symbols() -> None:
    d = describe_task("run `npm test` with --dry-run and --force; fix parseConfig in TokenCounter")
    assert "npm test" in d.backticked
    assert "npm test" not in d.symbols  # whitespace inside: exact identifier, not a symbol
    assert "npm test" in d.exact_identifiers
    assert {"--dry-run", "--force"} <= set(d.flags) <= set(d.symbols)
    assert {"parseConfig", "TokenCounter"} <= set(d.symbols)


def test_quoted_phrases_need_four_characters_and_stop_at_eight() -> None:
    d = describe_task("""say "hello world" and 'ciao mondo' but not "abc" """)
    assert d.phrases == ("hello world", "ciao mondo")
    many = " ".join(f'"phrase number {i}"' for i in range(12))
    assert len(describe_task(many).phrases) == 8


def test_stopwords_english_and_italian_are_not_keywords() -> None:
    d = describe_task(
        "Voglio che questo sia fatto perche della cache dobbiamo parlare; please make "
        "this work with the parser 12345"
    )
    # "che" and "sia" are below the 4-character minimum
    assert lower(d.keywords) == {"fatto", "cache", "parlare", "work", "parser"}
    assert not lower(d.keywords) & {"voglio", "questo", "perche", "della", "dobbiamo", "please"}
    assert "12345" not in d.keywords


def test_keywords_keep_non_ascii_letters() -> None:
    d = describe_task("la città è già pronta: перевод данных, 数据库连接")
    assert {"città", "pronta", "перевод", "данных", "数据库连接"} <= set(d.keywords)


def test_technologies_need_non_alphanumeric_boundaries() -> None:
    d = describe_task("Node and SQLite in the pi-mono repo; a pipeline in javascript")
    assert set(d.technologies) == {"node", "sqlite", "pi", "javascript"}
    assert "java" not in d.technologies and "sql" not in d.technologies


def test_unique_is_case_insensitive_and_keeps_the_first_spelling() -> None:
    d = describe_task("`Foo.bar` and `foo.BAR` and `FOO.BAR`")
    assert [v for v in d.exact_identifiers if v.lower() == "foo.bar"] == ["Foo.bar"]


def test_limits_hold_for_long_requests() -> None:
    text = " ".join(
        f"`ident_{i}` file_{i}.ts SYM{i}Name ERR_CODE_{i} keyword{i}x" for i in range(80)
    )
    d = describe_task(text)
    assert len(d.exact_identifiers) == 24
    assert len(d.query_terms) == 24 and len(d.entities) <= 24
    assert len(d.files) == 16 and len(d.symbols) == 20 and len(d.errors) == 12
    assert len(d.keywords) == 20


def test_input_is_trimmed_cut_at_20000_and_objective_is_500_chars() -> None:
    text = "  " + "x " * 10_000 + "`beyond_the_cut` " + "  "
    d = describe_task(text)
    assert "beyond_the_cut" not in d.exact_identifiers
    assert d.objective == text.strip()[:500]


def test_empty_request_has_no_query_terms() -> None:
    assert describe_task("   \n\t ") == TaskDescriptor()
    assert describe_task("ok").query_terms == ()


def test_text_of_message_takes_only_text_blocks() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "first"},
            {"type": "thinking", "thinking": "hidden"},
            {"type": "toolCall", "id": "c", "name": "read", "arguments": {"path": "a.ts"}},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "text", "text": "second"},
        ],
    }
    assert text_of_message(message) == "first\nsecond"
    assert text_of_message({"role": "user", "content": "plain string"}) == "plain string"
    assert text_of_message({"role": "user", "content": None}) == ""
    assert text_of_message("not a message") == ""


def test_last_user_text_is_the_trimmed_text_of_the_last_user_message() -> None:
    messages = [
        {"role": "user", "content": "old question"},
        {"role": "assistant", "content": [{"type": "text", "text": "answer"}]},
        {"role": "user", "content": [{"type": "text", "text": "  new question \n"}]},
        {"role": "toolResult", "content": [{"type": "text", "text": "tool output"}]},
    ]
    assert last_user_text(messages) == "new question"
    assert last_user_text([{"role": "assistant", "content": "x"}]) == ""


def test_fts_query_quotes_every_term_and_doubles_inner_quotes() -> None:
    query = build_fts_query(['say "hi"', "a.b", "NEAR", "x OR y", "*", "A.B"])
    assert query == '"say ""hi""" OR "a.b" OR "NEAR" OR "x OR y"'
    assert build_fts_query(["--", "...", "  "]) is None
    assert build_fts_query([]) is None
    assert build_fts_query([f"term{i}" for i in range(30)]).count(" OR ") == 15
    assert build_fts_query(["a\x00b"]) == '"a b"'


@pytest.fixture(scope="module")
def fts_table() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61 remove_diacritics 2')"
    )
    conn.executemany(
        "INSERT INTO t (body) VALUES (?)",
        [("hello NEAR world",), ("café (AND) OR NOT",), ("数据库连接 emoji 😀",)],
    )
    return conn


@settings(max_examples=300, deadline=None)
@given(terms=st.lists(st.text(), max_size=20))
def test_no_term_list_makes_an_fts5_syntax_error(
    fts_table: sqlite3.Connection, terms: list[str]
) -> None:
    query = build_fts_query(terms)
    if query is not None:
        rows = fts_table.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,)).fetchall()
        assert isinstance(rows, list)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_any_text_gives_a_well_formed_descriptor(text: str) -> None:
    d = describe_task(text)
    assert len(d.exact_identifiers) <= 24 and len(d.query_terms) <= 24
    assert all(term and term == term.strip() for term in d.query_terms)
    assert len({t.lower() for t in d.query_terms}) == len(d.query_terms)


PATH_ALPHABET = "aZ9_.@+-/\\: x\n.é"


@settings(max_examples=2000, deadline=None)
@given(text=st.text(alphabet=PATH_ALPHABET, max_size=40))
def test_linear_file_matcher_equals_the_reference_regex(text: str) -> None:
    assert _find_file_paths(text) == FILE_PATH_PATTERN.findall(text)


@settings(max_examples=2000, deadline=None)
@given(text=st.text(alphabet="aB_$1.: -:", max_size=40))
def test_linear_qualified_matcher_equals_the_reference_regex(text: str) -> None:
    assert _find_qualified_names(text) == QUALIFIED_PATTERN.findall(text)


@pytest.mark.parametrize(
    "text",
    ["x" * 20_000, "a$" * 10_000 + " ", "ab/" * 6_666, "a." * 10_000, "`" + "a" * 19_999],
)
def test_pathological_requests_are_described_quickly(text: str) -> None:
    """The reference regexes backtrack quadratically on these (seconds in CPython)."""
    started = time.perf_counter()
    describe_task(text)
    assert time.perf_counter() - started < 1.0


def test_capitalised_prose_words_are_not_identifiers() -> None:
    """Sentence starts and shouting are prose; camel humps, digits and mixed capitals are not."""
    found = describe_task("Let us port DynamicBorder, XMLParser and Http2. What Should Happen AND")
    assert set(found.exact_identifiers) == {"DynamicBorder", "XMLParser", "Http2"}


def test_cjk_words_become_literal_terms() -> None:
    assert describe_task("主题设置").phrases == ("主题设置",)
    assert describe_task("主题 设置").phrases == ("主题", "设置")
    sentence = describe_task("我想知道数据库连接为什么失败")
    assert "数据" in sentence.phrases and "失败" in sentence.phrases


def test_filler_verbs_are_not_keywords() -> None:
    """'how is X used' must not pull in every entry that says 'used'."""
    found = describe_task("how is the shipping cost used and where is it called?")
    assert "used" not in found.keywords and "called" not in found.keywords
    assert "shipping" in found.keywords
