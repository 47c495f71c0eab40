"""Open editor buffers with LSP line semantics (`LspTextDocument`, `LspWorkspace`).

pygls's `TextDocument` splits lines with `str.splitlines`, which also breaks at `\\f`, `\\v`,
`\\x1c`-`\\x1e`, `\\x85`, U+2028 and U+2029. LSP 3.17 ("Text Documents") ends lines at `\\n`,
`\\r\\n` and `\\r` only, so an incremental edit to a buffer holding a form feed landed on the
wrong line (docs/reference.md §L1). pygls's position codec also clamps a character past the
end of a line to one unit *before* the end on an unterminated last line, and mutates the
`Position` it is given (docs/reference.md §L2).

`LspTextDocument` keeps pygls's API but splits lines by the LSP rule, converts client
positions itself (negotiated encoding: UTF-8, UTF-16 or UTF-32 code units, counted by pygls's
codec) and applies incremental edits as one splice at code-point offsets. `Ds4Protocol` swaps
pygls's workspace for an `LspWorkspace` during `initialize`, before any document is opened.

Open documents are keyed by `document_key(uri)`: a Windows client may name one file
`file:///c%3A/Users/dev/My%20Project/app.py` in one message and `file:///C:/Users/dev/My%20Project/app.py`
in the next (VS Code encodes the colon and lower-cases the drive; other clients do neither;
some write `file://localhost/`, `C|`, backslashes or dot segments), so every spelling is
reduced to one key wherever a document is looked up (the workspace, the published
diagnostics, project sync).
"""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.workspace import TextDocument, Workspace
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""A line terminator in LSP 3.17: `\\r\\n`, `\\r` or `\\n`, nothing else."""

_DRIVE = re.compile(r"/*([A-Za-z])[:|](?=[/\\]|$)")
"""A Windows drive at the start of a `file:` URI's path: `/C:`, `/c|` (RFC 8089 appendix
E.2.2), or `C:` without its slash (RFC 8089 appendix E.2)."""

_REPEATED_SLASHES = re.compile(r"/{2,}")
"""Two or more slashes in a row."""


def document_key(uri: str) -> str:
    """The key under which the document `uri` is kept: one key for every spelling of one
    `file:` URI, and different keys for different paths.

    Percent-encoding is decoded (as pygls's workspace does). In a `file:` URI, the scheme is
    lower-cased, the authority `localhost` is the empty one (RFC 8089 section 2), and dot
    segments are removed (`/./`, `a/../`; RFC 3986 section 5.2.4). In the path of a Windows
    drive, `|` after the letter is `:` (RFC 8089 appendix E.2.2), a backslash is `/`, and the
    drive letter is lower-cased (as `pygls.uris.to_fs_path` and VS Code do); the rest of the
    path keeps its case. So `file:///c%3A/My%20Project/a.py`, `file:///C:/My%20Project/a.py`,
    `file://localhost/C|/My Project/./a.py` and `file:///C:\\My Project\\a.py` give one key,
    `file:///c:/My Project/a.py`. A `file:` URI's `?query` and `#fragment` (RFC 3986 sections
    3.4, 3.5: not part of the path, and `pygls.uris.to_fs_path` drops them too) are dropped,
    and repeated slashes inside its path are one (`file:///tmp//a.py` is `/tmp/a.py`; a leading
    `//`, a UNC share, stays). Names that differ only in Unicode normalization (NFC, NFD) or
    case, apart from a drive letter, stay different documents: they are different files on
    Linux. In the key, `%`, `#` and `?` of the decoded path stay percent-encoded, so that the
    key is its own key. Other URIs are keyed decoded only.
    """
    if uri[:5].lower() != "file:":
        return unquote(uri)
    key = unquote(uri.partition("#")[0].partition("?")[0])
    rest = key[5:]
    authority = ""
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        if _DRIVE.match(authority):  # file://C:/x: no authority, a drive
            authority, path = "", authority + slash + path
        else:
            path = slash + path
        if authority.lower() == "localhost":
            authority = ""
    else:
        path = rest
    drive = _DRIVE.match(path)
    if drive is not None:
        tail = path[drive.end() :].replace("\\", "/")
        return f"file://{_quoted(authority)}/{drive.group(1).lower()}:{_path_key(tail)}"
    leading = len(path) - len(path.lstrip("/"))  # `//server/share` (UNC) stays
    return f"file://{_quoted(authority)}{path[:leading]}{_path_key(path[leading:])}"


def _path_key(path: str) -> str:
    """A decoded `file:` path in key form: single slashes, dot segments resolved (after the
    slashes: `a//..` is `a/..`, as in POSIX), `%`, `#`, `?` percent-encoded."""
    return _quoted(_without_dot_segments(_REPEATED_SLASHES.sub("/", path)))


def _quoted(text: str) -> str:
    """`text` with `%`, `#` and `?` percent-encoded (the characters that would read as an
    escape, a fragment or a query in a URI)."""
    return text.replace("%", "%25").replace("#", "%23").replace("?", "%3F")


def _without_dot_segments(path: str) -> str:
    """`path` with its `.` and `..` segments resolved (RFC 3986 section 5.2.4); `..` never
    climbs above the start."""
    if "." not in path:
        return path
    segments = path.split("/")
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                out.append("")
        elif segment == "..":
            if len(out) > 1 or (out and out[0] != ""):
                out.pop()
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/".join(out)


def split_lines(text: str) -> tuple[str, ...]:
    """`text` split into lines by LSP rules, each keeping its terminator.

    Like `str.splitlines(True)` except that only `\\n`, `\\r\\n` and `\\r` end a line. The empty
    line after a final terminator is not listed (as with `splitlines`): position
    `(len(lines), 0)` is the end of such a text.
    """
    if "\r" not in text:  # the common case, at C speed
        parts = text.split("\n")
        lines = [f"{part}\n" for part in parts[:-1]]
        if parts[-1]:
            lines.append(parts[-1])
        return tuple(lines)
    lines = []
    start = 0
    for match in LINE_BREAK.finditer(text):
        lines.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        lines.append(text[start:])
    return tuple(lines)


def line_content(line: str) -> str:
    """`line` without its terminator."""
    if line.endswith("\r\n"):
        return line[:-2]
    if line.endswith(("\n", "\r")):
        return line[:-1]
    return line


class LspTextDocument(TextDocument):
    """A `TextDocument` whose lines, positions and incremental edits follow LSP 3.17.

    Positions from the client are in the session's position encoding. A character past the
    end of a line means the end of that line (before its terminator); a line past the last one
    means the end of the document. Incoming `Position` objects are never modified.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._split_of: str | None = None
        self._lines: tuple[str, ...] = ()
        self._starts: tuple[int, ...] = ()

    @property
    def lines(self) -> tuple[str, ...]:
        """The lines of `source` (LSP terminators only, each kept), cached per text."""
        self._split()
        return self._lines

    def _split(self) -> None:
        source = self.source
        if source is not self._split_of:
            self._lines = split_lines(source)
            self._starts = tuple(accumulate(map(len, self._lines), initial=0))
            self._split_of = source

    def position_from_client_units(self, position: types.Position) -> ServerTextPosition:
        """`position` (client units) as a line and code-point column, clamped into the text."""
        lines = self.lines
        if position.line >= len(lines):
            if lines and line_content(lines[-1]) == lines[-1]:  # unterminated last line
                return ServerTextPosition(len(lines) - 1, len(lines[-1]))
            return ServerTextPosition(len(lines), 0)
        content = line_content(lines[position.line])
        units = 0
        for column, char in enumerate(content):
            if units >= position.character:
                return ServerTextPosition(position.line, column)
            units += self.position_codec.impl.code_units_for_char(char)
        return ServerTextPosition(position.line, len(content))

    def range_from_client_units(self, range: types.Range) -> ServerTextRange:
        """`range` (client units) in code points, each end clamped into the text."""
        return ServerTextRange(
            self.position_from_client_units(range.start), self.position_from_client_units(range.end)
        )

    def offset_at_server_position(self, server_position: ServerTextPosition) -> int:
        """Index into `source` of a line and code-point column."""
        self._split()
        if server_position.line >= len(self._lines):
            return self._starts[-1]
        return self._starts[server_position.line] + server_position.character

    def offset_at_position(self, client_position: types.Position) -> int:
        """Index into `source` of a position in client units (clamped into the text)."""
        return self.offset_at_server_position(self.position_from_client_units(client_position))

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        """Replace the text between the change's range ends with `change.text` (one splice)."""
        source = self.source
        start = self.offset_at_position(change.range.start)
        end = self.offset_at_position(change.range.end)
        if end < start:  # a reversed range: replace what lies between its ends
            start, end = end, start
        self._source = source[:start] + change.text + source[end:]

    def line_range(self, start_line: int, end_line: int) -> types.Range:
        """The range (client units) covering 1-based lines `start_line..end_line` inclusive,
        from the start of the first to the end of the last line's text; both clamped into
        the document."""
        lines = self.lines
        last = max(len(lines) - 1, 0)
        first_index = min(max(start_line - 1, 0), last)
        last_index = min(max(end_line - 1, first_index), last)
        end_column = len(line_content(lines[last_index])) if lines else 0
        return types.Range(
            start=types.Position(line=first_index, character=0),
            end=self.position_to_client_units(ServerTextPosition(last_index, end_column)),
        )


class LspWorkspace(Workspace):
    """A pygls `Workspace` whose text documents are `LspTextDocument`s, kept by
    `document_key` (one document however a client encodes its URI)."""

    def open_document(self, uri: str) -> TextDocument | None:
        """The open document `uri` names (in any encoding of it), or None."""
        return self._text_documents.get(document_key(uri))

    def get_text_document(self, doc_uri: str) -> TextDocument:
        """The open document `doc_uri` names, else one that reads the file from disk (pygls)."""
        return self.open_document(doc_uri) or self._create_text_document(doc_uri)

    def put_text_document(
        self, text_document: types.TextDocumentItem, notebook_uri: str | None = None
    ) -> None:
        """Open (or reopen) `text_document`; a notebook cell also remembers its notebook."""
        key = document_key(text_document.uri)
        self._text_documents[key] = self._create_text_document(
            text_document.uri,
            source=text_document.text,
            version=text_document.version,
            language_id=text_document.language_id,
        )
        if notebook_uri:
            self._cell_in_notebook[key] = unquote(notebook_uri)

    def remove_text_document(self, doc_uri: str) -> None:
        """Forget the document `doc_uri` names (nothing happens when it is not open)."""
        key = document_key(doc_uri)
        self._text_documents.pop(key, None)
        self._cell_in_notebook.pop(key, None)

    def update_text_document(
        self,
        text_doc: types.VersionedTextDocumentIdentifier,
        change: types.TextDocumentContentChangeEvent,
    ) -> None:
        """Apply one `didChange` content change. A document that is not open is left alone
        (pygls raised KeyError); the `didChange` handler warns about it."""
        document = self.open_document(text_doc.uri)
        if document is None:
            return
        document.apply_change(change)
        document.version = text_doc.version

    @classmethod
    def replacing(cls, workspace: Workspace) -> LspWorkspace:
        """A workspace with the root, folders, sync kind and encoding of `workspace`, which
        must not hold documents yet (it is replaced during `initialize`)."""
        return cls(
            workspace.root_uri,
            workspace._sync_kind,  # no public accessor in pygls 2.1
            list(workspace.folders.values()),
            workspace.position_encoding,
        )

    def _create_text_document(
        self,
        doc_uri: str,
        source: str | None = None,
        version: int | None = None,
        language_id: str | None = None,
    ) -> TextDocument:
        return LspTextDocument(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self.position_codec,
        )


def as_lsp_document(document: TextDocument) -> LspTextDocument:
    """`document` itself when it is an `LspTextDocument`, else a copy of its text that is."""
    if isinstance(document, LspTextDocument):
        return document
    return LspTextDocument(
        document.uri,
        source=document.source,
        version=document.version,
        position_codec=document.position_codec,
    )
