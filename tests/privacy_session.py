"""A Pi session and a project that hold every supported secret shape (`privacy_corpus.SECRETS`)
and every marker form, for the end-to-end privacy tests over LSP and the CLI.

`write_privacy_session(path)` writes the session; `write_privacy_project(root)` the project.
`WITHHELD` are words that occur only inside `local-only` or `sensitive` content (or in a
message a broken marker raises), so a remote destination (which may see `normal` and
`internal`) must never receive any of them; `ALLOWED` are words only inside `internal` blocks,
which it does receive, without their markers. `VALUES` are the secret values.
"""

from __future__ import annotations

from pathlib import Path

from privacy_corpus import SECRETS
from session_files import SessionWriter

WITHHELD = (
    "vaultword4242",  # a closed local-only block
    "nestedword7781",  # local-only nested in internal
    "prefixword5150",  # a leading marker classifying the rest
    "splitword9090",  # a block split across two content blocks
    "strayword3131",  # an open that is never closed
    "toolword6262",  # local-only in a tool result
    "projectword8484",  # local-only in a project file
    "sensitiveword2727",  # a sensitive block
)
ALLOWED = ("internalword1212",)
VALUES = tuple(value for _, _, value in SECRETS)
ESCAPED = r"\[ds4:local-only]"
"""An escaped marker: plain text, sent as written."""


def write_privacy_session(path: Path) -> SessionWriter:
    """Several turns of ordinary work, then turns with secrets and every marker form, then more
    ordinary work (so that with a small window the classified turns fall out of the recent
    tail and can only come back as history evidence)."""
    writer = SessionWriter(path, session_id="privacy-corpus-0001")
    for n in (1, 2):
        writer.turn(n)
    for index, (kind, text, _) in enumerate(SECRETS):
        writer.user(f"Deploy credentials note {index} ({kind}), keep it handy:\n{text}")
        writer.assistant(f"Noted the deploy credentials ({index}).")
    writer.user(
        "The launch code for the vault is [ds4:local-only]vaultword4242 in the vault"
        "[/ds4:local-only], and the budget is [ds4:internal]internalword1212[/ds4:internal]."
    )
    writer.assistant(
        "Understood: [ds4:internal]outer [ds4:local-only]nestedword7781[/ds4:local-only] "
        "inner[/ds4:internal] noted."
    )
    writer.user("[ds4:local-only] prefixword5150: the whole of this message stays here.")
    writer.assistant("[ds4:sensitive]sensitiveword2727 for the auditors[/ds4:sensitive] ok.")
    writer.append(
        "message",
        message={
            "role": "user",
            "content": [
                {"type": "text", "text": "public start [ds4:local-only]splitword9090 begins"},
                {"type": "text", "text": "and ends[/ds4:local-only] public end"},
            ],
            "timestamp": 4,
        },
    )
    writer.assistant("Received the split note.")
    writer.user("An unbalanced note: public [ds4:local-only] strayword3131 never closed.")
    writer.assistant(
        f"To mark text yourself write {ESCAPED} before it.",
        [("t1", "read", {"path": "notes/vault.md"})],
    )
    writer.tool_result("t1", "read", "# vault\n[ds4:local-only]toolword6262[/ds4:local-only]\n")
    writer.assistant("Read the vault notes.")
    for n in (3, 4, 5, 6):
        writer.turn(n)
    return writer


def write_privacy_project(root: Path) -> Path:
    """A project with a source file holding a local-only block and one holding internal text."""
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "vault.py").write_text(
        "def launch_code():\n"
        "    # [ds4:local-only]projectword8484 is the launch code of the vault[/ds4:local-only]\n"
        "    return None\n",
        encoding="utf-8",
    )
    (root / "src" / "budget.py").write_text(
        "def budget():\n    # the budget of the launch: see the vault planning notes\n    return 1\n",
        encoding="utf-8",
    )
    return root
