"""Text to snippets: LSP line rules, windows, heuristic symbols, search text, FTS phrases."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.project.windows import (
    MAX_LINE_CHARS,
    MAX_SNIPPET_CHARS,
    TRUNCATION_MARKER,
    LineWindow,
    cut_line,
    cut_long_lines,
    declared_symbols,
    fts_terms_for,
    identifier_subwords,
    line_range_text,
    line_starts,
    project_fts_query,
    search_text,
    snippet_id,
    window_lines,
)

# Characters that matter for line breaking: the three LSP terminators, and characters
# str.splitlines() would also split at but LSP does not (form feed, vertical tab, U+0085,
# U+2028, U+2029, file/group/record separators).
_LINE_ALPHABET = st.sampled_from(
    ["\n", "\r", "\r\n", "\x0c", "\x0b", "\x85", "\u2028", "\u2029", "\x1c", " ", "a", "字"]
)
texts = st.lists(_LINE_ALPHABET, max_size=60).map("".join)


def lsp_lines(text: str) -> list[tuple[str, str]]:
    """Reference splitter, char by char: (line content, its terminator)."""
    lines: list[tuple[str, str]] = []
    current = ""
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\r" and text[i + 1 : i + 2] == "\n":
            lines.append((current, "\r\n"))
            current = ""
            i += 2
            continue
        if char in "\r\n":
            lines.append((current, char))
            current = ""
        else:
            current += char
        i += 1
    lines.append((current, ""))
    return lines


@given(texts)
def test_line_starts_follow_lsp_rules_and_cover_the_text(text: str) -> None:
    starts = line_starts(text)
    reference = lsp_lines(text)
    assert len(starts) == len(reference)
    pieces = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    assert "".join(pieces) == text
    assert pieces == [content + terminator for content, terminator in reference]
    # Form feed, U+2028 and friends never end a line; only \n, \r\n and \r do.
    crlf = text.count("\r\n")
    assert len(starts) == 1 + crlf + (text.count("\r") - crlf) + (text.count("\n") - crlf)


def test_crlf_is_one_line_break_and_lone_cr_is_one_too() -> None:
    assert line_starts("a\r\nb") == [0, 3]
    assert line_starts("a\rb") == [0, 2]
    assert line_starts("a\n\rb") == [0, 2, 3]  # \n then \r: two breaks
    assert line_starts("a\x0cb\u2028c") == [0]  # one line for LSP, three for splitlines()
    assert line_starts("") == [0]
    assert line_starts("x\n") == [0, 2]


@settings(max_examples=300)
@given(
    texts,
    st.integers(min_value=1, max_value=6),
    st.integers(min_value=0, max_value=5),
)
def test_windows_hold_exact_lines_and_cover_every_non_blank_line(
    text: str, size: int, overlap: int
) -> None:
    overlap = min(overlap, size - 1)
    windows = window_lines(text, size=size, overlap=overlap, max_windows=10_000)
    reference = lsp_lines(text)
    if len(reference) > 1 and reference[-1] == ("", ""):
        reference.pop()  # the empty line after a final break is not windowed
    count = len(reference)
    step = size - overlap
    for window in windows:
        assert isinstance(window, LineWindow) and not window.truncated
        assert 1 <= window.start_line <= window.end_line <= count
        assert window.end_line - window.start_line < size
        assert (window.start_line - 1) % step == 0
        lines = reference[window.start_line - 1 : window.end_line]
        expected = "".join(c + t for c, t in lines[:-1]) + lines[-1][0]
        assert window.text == expected == line_range_text(text, window.start_line, window.end_line)
        assert window.text.strip()
    covered = {n for w in windows for n in range(w.start_line, w.end_line + 1)}
    for number, (content, _terminator) in enumerate(reference, start=1):
        if content.strip():
            assert number in covered
    # no window lies inside its predecessor, and consecutive windows overlap by `overlap`
    for previous, following in zip(windows, windows[1:], strict=False):
        assert following.end_line > previous.end_line
        if following.start_line == previous.start_line + step:
            assert previous.end_line - following.start_line + 1 == overlap


def test_default_windows_are_80_lines_every_68() -> None:
    text = "".join(f"line {n}\n" for n in range(1, 201))
    windows = window_lines(text)
    assert [(w.start_line, w.end_line) for w in windows] == [(1, 80), (69, 148), (137, 200)]
    assert windows[0].text.splitlines()[0] == "line 1"
    assert windows[-1].text.endswith("line 200")  # the final break is not part of a window


def test_blank_windows_are_skipped_and_windows_are_capped() -> None:
    text = "x\n" + "\n" * 200 + "   \t\n" * 10 + "y"
    spans = [(w.start_line, w.end_line) for w in window_lines(text)]
    assert spans[0] == (1, 80) and spans[-1][1] == 212
    assert all(w.text.strip() for w in window_lines(text))
    many = "x\n" * 20_000
    capped = window_lines(many)
    assert len(capped) == 200 and capped[-1].start_line == 1 + 199 * 68


def test_long_lines_end_windows_early_and_every_line_stays_in_a_window() -> None:
    """200 lines of about 900 characters: 80-line windows would be 72,000 characters and the
    lines after the first 20,000 of each were never indexed. Windows now end early."""
    lines = [f"row {n:03d} " + "w" * 890 for n in range(1, 201)]
    text = "\n".join(lines) + "\n"
    windows = window_lines(text)
    assert all(len(w.text) <= MAX_SNIPPET_CHARS and not w.truncated for w in windows)
    covered = {n for w in windows for n in range(w.start_line, w.end_line + 1)}
    assert covered == set(range(1, 201))
    assert windows[0].end_line == 22  # 22 lines of 899 characters and 21 breaks fit
    for previous, following in zip(windows, windows[1:], strict=False):
        assert previous.start_line < following.start_line <= previous.end_line
        assert following.end_line > previous.end_line


def test_only_a_single_line_over_the_bound_is_truncated_with_the_marker() -> None:
    text = "short\n" + "y" * 25_000 + "\nafter\n"
    windows = window_lines(text)
    assert [(w.start_line, w.end_line, w.truncated) for w in windows] == [
        (1, 1, False),
        (2, 2, True),
        (3, 3, False),
    ]
    assert windows[1].text == "y" * 20_000 + "\n" + TRUNCATION_MARKER


@settings(max_examples=300)
@given(
    st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=40),
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=0, max_value=7),
    st.integers(min_value=5, max_value=60),
)
def test_windows_bounded_by_characters_cover_every_line(
    lengths: list[int], size: int, overlap: int, max_chars: int
) -> None:
    overlap = min(overlap, size - 1)
    text = "\n".join("x" * n for n in lengths)
    windows = window_lines(
        text, size=size, overlap=overlap, max_windows=10_000, max_chars=max_chars
    )
    for window in windows:
        assert window.end_line - window.start_line < size
        if window.truncated:
            assert window.start_line == window.end_line
        else:
            assert len(window.text) <= max_chars
            assert window.text == line_range_text(text, window.start_line, window.end_line)
    covered = {n for w in windows for n in range(w.start_line, w.end_line + 1)}
    assert {n for n, length in enumerate(lengths, start=1) if length} <= covered
    for previous, following in zip(windows, windows[1:], strict=False):
        assert following.start_line > previous.start_line
        assert following.end_line > previous.end_line


@settings(max_examples=300)
@given(texts, st.integers(min_value=1, max_value=4))
def test_cut_long_lines_keeps_line_numbers_and_short_lines(text: str, max_chars: int) -> None:
    cut_text, cut = cut_long_lines(text, max_chars)
    before, after = lsp_lines(text), lsp_lines(cut_text)
    assert [t for _c, t in after] == [t for _c, t in before]  # the same breaks, same lines
    assert cut == sum(1 for c, _t in before if len(c) > max_chars)
    for (old, _), (new, _) in zip(before, after, strict=True):
        assert new == (old if len(old) <= max_chars else cut_line(old, max_chars))


def test_a_data_uri_line_is_cut_to_the_bound() -> None:
    text = (
        "export const A = 1;\nexport const ICON = 'data:image/png;base64," + "Q" * 60_000 + "';\n"
    )
    cut_text, cut = cut_long_lines(text)
    assert cut == 1
    second = cut_text.split("\n")[1]
    assert second.startswith("export const ICON = 'data:image/png;base64,QQQ")
    assert second.endswith(" [DS4 line cut: 60,045 characters]")
    assert len(second) < MAX_LINE_CHARS + 50


def test_invalid_window_parameters_are_rejected() -> None:
    with pytest.raises(ValueError):
        window_lines("a", size=10, overlap=10)
    with pytest.raises(ValueError):
        window_lines("a", size=0, overlap=0)


def test_line_range_text_keeps_inner_breaks_as_written() -> None:
    text = "a\r\nb\rc\nd"
    assert line_range_text(text, 1, 3) == "a\r\nb\rc"
    assert line_range_text(text, 4, 9) == "d"
    assert line_range_text(text, 5, 6) == ""


def test_declared_symbols_follow_the_heuristics() -> None:
    text = "\n".join(
        [
            "export abstract class ShippingService {",
            "interface Rate { }",
            "export async function getShippingMethod(order) {",
            "function* walk<T>(x) {}",
            "export const MAX_RATE = 5",
            "let counter: number",
            "def parse_http_response(raw):",
            "async def fetch():",
            "    def helper(self):",
            "pub(crate) fn encode() {}",
            "func (s *Server) Start() error {",
            "type Money = number",
            'CREATE OR REPLACE VIEW IF NOT EXISTS main."active_users" AS',
            "create unique index orders_by_date on orders(date);",
            "the class of problems, a function that returns",
        ]
    )
    assert declared_symbols(text) == [
        "ShippingService",
        "Rate",
        "getShippingMethod",
        "walk",
        "MAX_RATE",
        "counter",
        "parse_http_response",
        "fetch",
        "helper",
        "encode",
        "Start",
        "Money",
        "active_users",
        "orders_by_date",
    ]


def test_declared_symbols_see_line_starts_of_every_line_ending() -> None:
    assert declared_symbols("x = 1\rclass A:\r  def b(self):\r\nconst c = 1\n") == ["A", "b", "c"]


def test_declared_symbols_are_unique_and_capped() -> None:
    text = "".join(f"def f{n}():\n    pass\ndef f{n}():\n" for n in range(300))
    names = declared_symbols(text)
    assert len(names) == 128 and len(set(names)) == 128 and names[0] == "f0"


def test_identifier_subwords() -> None:
    assert identifier_subwords("getShippingMethod") == ["get", "shipping", "method"]
    assert identifier_subwords("parse_http_response") == ["parse", "http", "response"]
    assert identifier_subwords("HTTPServer") == ["http", "server"]
    assert identifier_subwords("utf8Decode") == ["utf8", "decode"]
    assert identifier_subwords("größeBerechnen") == ["größe", "berechnen"]
    assert identifier_subwords("__init__") == ["init"]


def test_search_text_holds_sub_words_and_cjk_bigrams() -> None:
    extra = search_text(
        "x = getShippingMethod(parse_http_response(HTTPServer, read_jsonValue, MAX_SIZE))\n"
        "# データベース接続\nplain words only\n"
    )
    lines = extra.splitlines()
    assert "get shipping method" in lines
    assert "http server" in lines
    assert "read json value" in lines
    # unicode61 already splits snake_case at "_": nothing to add for it
    assert "parse http response" not in lines and "max size" not in lines
    assert "デー ータ タベ ベー ース ス接 接続" in lines
    assert lines[-1] == "続"  # last character of each CJK run, for one-character prefixes
    assert "plain" not in extra
    assert search_text("nothing structured here") == ""


def test_fts_terms_for_user_terms() -> None:
    assert fts_terms_for("shipping method") == ['"shipping method"']
    assert fts_terms_for("getShippingMethod") == ['"getShippingMethod"', '"get shipping method"']
    assert fts_terms_for("ベース接") == ['"ベー ース ス接"']
    assert fts_terms_for("接") == ['"接" *']
    assert fts_terms_for('say "AND" OR *') == ['"say ""AND"" OR *"']
    assert fts_terms_for("  ... ") == []
    assert project_fts_query(["shipping method", "ベース接", "shipping method"]) == (
        '"shipping method" OR "ベー ース ス接"'
    )
    assert project_fts_query(["--"]) is None


# A standalone FTS5 table with the store's tokenizer: phrases of `fts_terms_for` must find
# every substring of a CJK run and the sub-words of identifiers through `search_text`.


def _fts(rows: list[str]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(content, search_text, "
        "tokenize='unicode61 remove_diacritics 2')"
    )
    conn.executemany(
        "INSERT INTO t (rowid, content, search_text) VALUES (?, ?, ?)",
        [(i + 1, text, search_text(text)) for i, text in enumerate(rows)],
    )
    return conn


def _matches(conn: sqlite3.Connection, term: str) -> set[int]:
    query = project_fts_query([term])
    assert query is not None
    return {row[0] for row in conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,))}


_CJK_RUNS = ["データベース接続を確立する", "数据库连接池", "데이터베이스연결"]


def test_every_cjk_substring_is_found() -> None:
    conn = _fts([f"x {run} y" for run in _CJK_RUNS] + ["unrelated text"])
    for row, run in enumerate(_CJK_RUNS, start=1):
        for start in range(len(run)):
            for end in range(start + 1, len(run) + 1):
                assert row in _matches(conn, run[start:end]), run[start:end]
    assert _matches(conn, "ベース接") == {1}
    assert _matches(conn, "接続を使") == set()


@given(st.text(alphabet="アイウエオカキ漢字", min_size=1, max_size=12), st.data())
def test_any_cjk_substring_is_a_match(run: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(min_value=0, max_value=len(run) - 1))
    end = data.draw(st.integers(min_value=start + 1, max_value=len(run)))
    conn = _fts([f"前 {run}。", "nothing"])
    assert 1 in _matches(conn, run[start:end])


def test_identifier_sub_words_are_found() -> None:
    conn = _fts(["rate = getShippingMethod(order)", "parse_http_response(raw)", "HTTPServer()"])
    assert _matches(conn, "shipping method") == {1}
    assert _matches(conn, "ShippingMethod") == {1}
    assert _matches(conn, "http response") == {2}
    assert _matches(conn, "http server") == {3}
    assert _matches(conn, "method shipping") == set()


def test_mixed_script_terms_are_found() -> None:
    conn = _fts(["本番で使用SQLiteデータベース", "SQLite only"])
    assert _matches(conn, "使用SQLite") == {1}
    assert _matches(conn, "SQLiteデータ") == {1}


def test_snippet_id_is_sha256_of_the_nul_joined_fields() -> None:
    expected = hashlib.sha256(b"/p\x00src/a.py\x00abc\x001\x0080").hexdigest()
    assert snippet_id("/p", "src/a.py", "abc", 1, 80) == expected
