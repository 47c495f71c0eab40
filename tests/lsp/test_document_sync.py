"""Document sync over the wire: one document however a Windows client encodes its URI, and
a `didChange` for a document that was never opened is a warning, not an internal error."""

from __future__ import annotations

import asyncio

from lsp_helpers import TIMEOUT_S, execute
from lsprotocol import types
from pytest_lsp import LanguageClient

WINDOWS_URIS = (
    "file:///c%3A/Users/dev/My%20Project/app.py",  # what VS Code sends
    "file:///C:/Users/dev/My%20Project/app.py",  # what other Windows clients send
)


def open_uri(client: LanguageClient, uri: str, text: str) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=text
            )
        )
    )


def append(client: LanguageClient, uri: str, version: int, line: int, text: str) -> None:
    """Insert `text` at the start of 0-based `line`."""
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(line, 0), types.Position(line, 0)),
                    text=text,
                )
            ],
        )
    )


async def warnings_about(client: LanguageClient, needle: str) -> list[str]:
    """The `window/logMessage` warnings naming `needle`, once there is one."""

    async def first() -> list[str]:
        while True:
            found = [
                m.message
                for m in client.log_messages
                if m.type == types.MessageType.Warning and needle in m.message
            ]
            if found:
                return found
            await client.protocol.wait_for_notification_async(types.WINDOW_LOG_MESSAGE)

    return await asyncio.wait_for(first(), TIMEOUT_S)


async def test_a_change_to_a_document_never_opened_is_a_warning(client: LanguageClient) -> None:
    uri = "file:///tmp/never-opened.py"
    append(client, uri, 2, 0, "x = 1\n")
    (warning,) = await warnings_about(client, uri)
    assert "not open" in warning
    assert not [m for m in client.messages if m.type == types.MessageType.Error]
    health = await execute(client, "ds4.health")  # still serving
    assert health["server"]["openDocuments"] == 0


async def test_both_encodings_of_a_windows_uri_are_one_document(client: LanguageClient) -> None:
    vscode, other = WINDOWS_URIS
    open_uri(client, vscode, "a = 1\n")
    append(client, other, 2, 1, "b = 2\n")  # the same document: no warning
    open_uri(client, other, "a = 1\nb = 2\n")  # reopened under the other spelling
    assert (await execute(client, "ds4.health"))["server"]["openDocuments"] == 1
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=vscode))
    )
    assert (await execute(client, "ds4.health"))["server"]["openDocuments"] == 0
    assert not [m for m in client.log_messages if "not open" in m.message]


async def test_rfc_8089_spellings_of_a_windows_uri_are_one_document(
    client: LanguageClient,
) -> None:
    """After didOpen of VS Code's spelling, changes under `localhost`, `C|`, dot segments and
    backslashes reach the same document (no "not open" warning)."""
    opened = WINDOWS_URIS[0]
    open_uri(client, opened, "a = 1\n")
    for version, uri in enumerate(
        [
            "file://localhost/C:/Users/dev/My%20Project/app.py",
            "file:///C|/Users/dev/My%20Project/app.py",
            "file:///C:/Users/dev/./My%20Project/./app.py",
            "file:///C:/Users/dev/other/../My%20Project/app.py",
            "file:///C:%5CUsers%5Cdev%5CMy%20Project%5Capp.py",
            "file:///C:\\Users\\dev\\My Project\\app.py",
        ],
        start=2,
    ):
        append(client, uri, version, 0, f"v{version} = {version}\n")
    health = await execute(client, "ds4.health")
    assert health["server"]["openDocuments"] == 1
    assert not [m for m in client.log_messages if "not open" in m.message]
    # A genuinely different path (another folder's case) is another document.
    append(client, "file:///C:/Users/Dev/My%20Project/app.py", 9, 0, "x = 1\n")
    assert await warnings_about(client, "Users/Dev/My")
