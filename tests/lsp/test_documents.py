"""`LspTextDocument`: incremental edits land where an LSP client means them.

The reference model below is independent of the code under test: it works on code-point
offsets, finds lines with a regex over `\\n`, `\\r\\n`, `\\r` (LSP 3.17) and counts client
units by encoding the text (`len(s.encode("utf-16-le")) // 2`). A client computes each edit's
range from the text it holds, exactly like the model.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.workspace import PositionCodec

from ds4_lsp.services.documents import LspTextDocument, LspWorkspace, document_key, split_lines

ENCODINGS = ["utf-8", "utf-16", "utf-32"]

PIECES = ["a", "b", "é", "中", "😀", "\n", "\r", "\r\n", "\f", "\v", "\x1c", "\x85",
          "\u2028", "\u2029", " "]  # fmt: skip
"""Text is drawn from these: astral and BMP characters, every LSP terminator and every
character `str.splitlines` wrongly treats as one."""

texts = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


def model_units(text: str, encoding: str) -> int:
    """Length of `text` in the client's code units."""
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    return len(text)


def model_position(text: str, offset: int, encoding: str) -> types.Position:
    """The client's position of code-point `offset` in `text`."""
    breaks = [m.end() for m in re.finditer(r"\r\n|\r|\n", text) if m.end() <= offset]
    line_start = breaks[-1] if breaks else 0
    return types.Position(
        line=len(breaks), character=model_units(text[line_start:offset], encoding)
    )


def inside_crlf(text: str, offset: int) -> bool:
    """True between the `\\r` and `\\n` of a CRLF: no LSP position names that offset."""
    return 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n"


def document(text: str, encoding: str) -> LspTextDocument:
    return LspTextDocument(
        "file:///tmp/x.txt", source=text, version=0, position_codec=PositionCodec(encoding)
    )


@settings(max_examples=400, deadline=None)
@given(data=st.data(), start=texts, encoding=st.sampled_from(ENCODINGS))
def test_any_sequence_of_incremental_edits_gives_the_reference_text(
    data: st.DataObject, start: str, encoding: str
) -> None:
    """Random splices (any encoding, any terminators, form feeds, U+2028, emoji) applied as
    LSP incremental changes give exactly the text the reference model computes."""
    doc = document(start, encoding)
    expected = start
    for _ in range(data.draw(st.integers(1, 6), label="edits")):
        offsets = [o for o in range(len(expected) + 1) if not inside_crlf(expected, o)]
        a = data.draw(st.sampled_from(offsets), label="start")
        b = data.draw(st.sampled_from([o for o in offsets if o >= a]), label="end")
        new = data.draw(texts, label="new text")
        change = types.TextDocumentContentChangePartial(
            range=types.Range(
                start=model_position(expected, a, encoding),
                end=model_position(expected, b, encoding),
            ),
            text=new,
        )
        doc.apply_change(change)
        expected = expected[:a] + new + expected[b:]
        assert doc.source == expected


@settings(max_examples=200, deadline=None)
@given(text=texts)
def test_lines_end_only_at_lsp_terminators(text: str) -> None:
    """`lines` keeps every character, and no line holds a terminator before its end."""
    lines = split_lines(text)
    assert "".join(lines) == text
    for line in lines[:-1]:
        assert re.search(r"(\r\n|\r|\n)\Z", line)
    for line in lines:
        assert not re.search(r"\r\n|\r|\n", line.rstrip("\r\n"))


def test_an_edit_after_a_form_feed_lands_on_the_clients_line() -> None:
    """The pygls 2.1.1 failure of docs/reference.md §L1: `"a\\fb\\nc\\n"` edited at line 1
    (the line holding `c`) must change `c`, not `b`."""
    doc = document("a\fb\nc\n", "utf-16")
    doc.apply_change(
        types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(1, 0), types.Position(1, 1)), text="Z"
        )
    )
    assert doc.source == "a\fb\nZ\n"
    assert doc.lines == ("a\fb\n", "Z\n")


def test_out_of_range_positions_clamp_to_the_line_or_document_end_without_mutation() -> None:
    """A character past a line's end means the end of its text (not past the terminator,
    and not one before the end of an unterminated last line); a line past the end means the
    end of the document. The client's Position objects are left as they were."""
    doc = document("ab\r\ncd", "utf-16")
    past_line = types.Position(0, 99)
    past_last_line = types.Position(1, 99)
    past_document = types.Position(7, 3)
    assert doc.offset_at_position(past_line) == 2
    assert doc.offset_at_position(past_last_line) == 6
    assert doc.offset_at_position(past_document) == 6
    assert (past_line.character, past_last_line.character, past_document.line) == (99, 99, 7)

    doc.apply_change(
        types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(1, 99), types.Position(9, 0)), text="!"
        )
    )
    assert doc.source == "ab\r\ncd!"


def test_line_range_covers_whole_lines_in_client_units() -> None:
    """1-based inclusive lines become a range ending after the last line's text, measured
    in the negotiated encoding (an emoji is 4 UTF-8 units, 2 UTF-16 units, 1 UTF-32 unit)."""
    text = "x = 1\ny = '😀'\fz\r\nw\n"
    ends = {"utf-8": 12, "utf-16": 10, "utf-32": 9}
    for encoding, end in ends.items():
        assert document(text, encoding).line_range(1, 2) == types.Range(
            types.Position(0, 0), types.Position(1, end)
        )
    assert document(text, "utf-16").line_range(3, 40) == types.Range(
        types.Position(2, 0), types.Position(2, 1)
    )


def test_the_workspace_creates_lsp_documents() -> None:
    """Documents opened in an `LspWorkspace` use LSP lines and the workspace's encoding."""
    workspace = LspWorkspace.replacing(
        LspWorkspace("file:///tmp/ws", position_encoding=types.PositionEncodingKind.Utf8)
    )
    workspace.put_text_document(
        types.TextDocumentItem(
            uri="file:///tmp/ws/a.txt", language_id="text", version=1, text="\u2028é\n"
        )  # fmt: skip
    )
    doc = workspace.get_text_document("file:///tmp/ws/a.txt")
    assert isinstance(doc, LspTextDocument)
    assert doc.lines == ("\u2028é\n",)
    assert doc.position_codec.encoding == types.PositionEncodingKind.Utf8


DRIVE_PATHS = st.tuples(
    st.sampled_from("cdCDzZ"),
    st.lists(
        st.text(alphabet="abcXYZ019 _-.é中#?%", min_size=1, max_size=8).filter(
            lambda part: part not in (".", "..")
        ),
        min_size=1,
        max_size=4,
    ),
)


@given(path=DRIVE_PATHS, colon=st.sampled_from([":", "%3A", "%3a"]), upper=st.booleans())
def test_document_key_is_one_key_for_every_encoding_of_a_windows_uri(
    path: tuple[str, list[str]], colon: str, upper: bool
) -> None:
    """A Windows path quoted in full (as VS Code does), with the colon kept, or with a
    differently cased drive letter names one document."""
    drive, parts = path
    plain = "/".join(parts)
    canonical = f"file:///{drive.lower()}:/{_key_path(parts)}"
    written = f"file:///{drive.upper() if upper else drive.lower()}{colon}/{quote(plain)}"
    assert document_key(written) == document_key(canonical) == canonical
    assert document_key(f"{canonical}/x") != document_key(canonical)


def _key_path(parts: list[str]) -> str:
    """`parts` as a path in key form: the least a URI must percent-encode (`%`, `#`, `?`)."""
    return "/".join(_least_quoted(part) for part in parts)


def _least_quoted(part: str) -> str:
    return part.replace("%", "%25").replace("#", "%23").replace("?", "%3F")


def _spell_windows_uri(drive: str, parts: list[str], spelling: dict[str, bool]) -> str:
    """One client's spelling of `drive:/parts...` as a `file:` URI."""
    letter = drive.upper() if spelling["upper"] else drive.lower()
    separator = "\\" if spelling["backslashes"] else "/"
    if spelling["slashes"]:
        separator *= 2
    segments = list(parts)
    if spelling["dots"]:
        segments = [s for part in segments for s in (".", "gone", "..", part)]
    if spelling["quoted"]:
        path = separator.join(quote(segment, safe="") for segment in segments)
    else:
        path = separator.join(_least_quoted(segment) for segment in segments)
    colon = "|" if spelling["pipe"] else ("%3A" if spelling["quoted"] else ":")
    authority = "localhost" if spelling["localhost"] else ""
    suffix = "?line=3#L3" if spelling["suffix"] else ""
    return f"file://{authority}/{letter}{colon}{separator}{path}{suffix}"


SPELLING_CHOICES = ("upper", "backslashes", "slashes", "dots", "quoted", "pipe", "localhost")
SPELLINGS = st.fixed_dictionaries({key: st.booleans() for key in (*SPELLING_CHOICES, "suffix")})


@given(path=DRIVE_PATHS, first=SPELLINGS, second=SPELLINGS)
def test_document_key_is_one_key_for_every_rfc_8089_spelling(
    path: tuple[str, list[str]], first: dict[str, bool], second: dict[str, bool]
) -> None:
    """Two spellings of one Windows path (drive case, `C|`, `localhost`, backslashes, doubled
    separators, dot segments, percent-encoding, a query or fragment) give one key, and the key
    is its own key."""
    drive, parts = path
    canonical = f"file:///{drive.lower()}:/" + _key_path(parts)
    key = document_key(_spell_windows_uri(drive, parts, first))
    assert key == document_key(_spell_windows_uri(drive, parts, second)) == canonical
    assert document_key(key) == key


@given(path=DRIVE_PATHS, spelling=SPELLINGS, index=st.integers(min_value=0, max_value=3))
def test_document_key_keeps_different_paths_apart(
    path: tuple[str, list[str]], spelling: dict[str, bool], index: int
) -> None:
    """Only the drive letter is case-insensitive: a path differing in the case of any other
    letter, or in one more segment, is another document."""
    drive, parts = path
    index %= len(parts)
    changed = list(parts)
    changed[index] = changed[index].swapcase()
    key = document_key(_spell_windows_uri(drive, parts, spelling))
    if changed != parts:
        assert document_key(_spell_windows_uri(drive, changed, spelling)) != key
    assert document_key(_spell_windows_uri(drive, [*parts, "x"], spelling)) != key


def test_document_key_leaves_posix_backslashes_and_other_schemes_alone() -> None:
    """A backslash is a separator only in a Windows drive path; elsewhere it is a character
    of the file name (`a\\b` is a file in /tmp, not `a/b`)."""
    assert document_key("file:///tmp/a%5Cb") != document_key("file:///tmp/a/b")
    assert document_key("file:///tmp/./a/../b") == "file:///tmp/b"
    assert document_key("file://server/share/a.py") == "file://server/share/a.py"
    assert document_key("untitled:Untitled-1") == "untitled:Untitled-1"


POSIX_PARTS = st.lists(
    st.text(alphabet="abcXYZ019 _-.é中#?%", min_size=1, max_size=8).filter(
        lambda part: part not in (".", "..")
    ),
    min_size=1,
    max_size=4,
)


@given(
    parts=POSIX_PARTS,
    runs=st.lists(st.integers(min_value=1, max_value=3), min_size=3, max_size=3),
    query=st.sampled_from(["", "?", "?line=3", "?a=b&c=%23"]),
    fragment=st.sampled_from(["", "#", "#L10", "#a?b/c"]),
    quoted=st.booleans(),
)
def test_document_key_drops_query_fragment_and_repeated_slashes_of_a_file_uri(
    parts: list[str], runs: list[int], query: str, fragment: str, quoted: bool
) -> None:
    """`file:///tmp//s.py`, `file:///tmp/s.py?x` and `file:///tmp/s.py#L3` are the file
    `/tmp/s.py` (RFC 3986 sections 3.4, 3.5; POSIX path resolution): one key, which is its own
    key. A `#`, `?` or `%` that is part of a name (percent-encoded) stays in it."""
    canonical = "file:///" + _key_path(parts)
    path = ""
    for index, part in enumerate(parts):
        separator = "/" * (runs[index - 1] if 0 < index <= len(runs) else 1)
        path += separator + (quote(part, safe="") if quoted else _least_quoted(part))
    spelled = f"file://{path}{query}{fragment}"
    assert document_key(spelled) == canonical, spelled
    assert document_key(canonical) == canonical


@given(parts=POSIX_PARTS, index=st.integers(min_value=0, max_value=3))
def test_document_key_keeps_case_and_unicode_normalization_variants_apart(
    parts: list[str], index: int
) -> None:
    """Linux file names are bytes: `é` (NFC) and `e` + U+0301 (NFD), or `A.py` and `a.py`,
    are different files, hence different documents."""
    index %= len(parts)
    key = document_key("file:///" + "/".join(quote(part, safe="") for part in parts))
    for variant in (parts[index].swapcase(), unicodedata.normalize("NFD", parts[index])):
        if variant != parts[index]:
            changed = [*parts[:index], variant, *parts[index + 1 :]]
            assert document_key("file:///" + "/".join(quote(p, safe="") for p in changed)) != key


def test_document_key_keeps_a_leading_double_slash_and_names_with_reserved_characters() -> None:
    """Repeated slashes are one only inside a path: `file:////server/share` (a UNC share)
    stays apart from `/server/share`. A percent-encoded `#` or `?` is part of the name."""
    assert document_key("file:////server//share/a.py") == "file:////server/share/a.py"
    assert document_key("file:////server/share/a.py") != document_key("file:///server/share/a.py")
    assert document_key("file:///tmp/a%23b.py") != document_key("file:///tmp/a")
    assert document_key("file:///tmp/a%3Fb.py#x") == "file:///tmp/a%3Fb.py"
    assert document_key("untitled:Untitled-1?x#y") == "untitled:Untitled-1?x#y"
