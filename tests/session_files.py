"""Write Pi session files for tests (v3 format, docs/reference.md §P4-§P5).

`SessionWriter` appends entries the way Pi does: one JSON object per line, each entry linked
to the current leaf by `parentId`, so tests can grow a session, branch it, and append the
compaction entries `ds4/compact` returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class SessionWriter:
    """Appends Pi v3 entries to `path` (created with a header on construction).

    Ids are 8 hex characters from a counter, so they are deterministic per writer.
    `leaf` is the id new entries attach to; set it to branch.
    """

    def __init__(
        self, path: Path, session_id: str = "0a1b2c3d-sess", cwd: str = "/home/me/demo"
    ) -> None:
        self.path = path
        self.session_id = session_id
        self._next = 0
        self.leaf: str | None = None
        self._minute = 0
        header = {
            "type": "session",
            "version": 3,
            "id": session_id,
            "timestamp": "2026-11-01T09:00:00.000Z",
            "cwd": cwd,
        }
        path.write_text(json.dumps(header) + "\n", encoding="utf-8")

    @classmethod
    def with_turns(cls, path: Path, turns: int) -> SessionWriter:
        """A new session at `path` holding `turns` realistic turns (`turn`)."""
        session = cls(path)
        for number in range(turns):
            session.turn(number)
        return session

    def _timestamp(self) -> str:
        self._minute += 1
        hours, minutes = divmod(self._minute, 60)
        return f"2026-11-01T{9 + hours % 14:02d}:{minutes:02d}:00.000Z"

    def append(self, entry_type: str, **data: Any) -> str:
        """Append one entry under the current leaf; returns its id (and makes it the leaf)."""
        self._next += 1
        entry_id = f"{self._next:08x}"
        record = {
            "type": entry_type,
            "id": entry_id,
            "parentId": self.leaf,
            "timestamp": self._timestamp(),
            **data,
        }
        line = json.dumps(record, ensure_ascii=False)
        if any("\ud800" <= ch <= "\udfff" for ch in line):
            line = json.dumps(record)  # a lone surrogate: only its \u escape is valid UTF-8
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        self.leaf = entry_id
        return entry_id

    def user(self, text: str) -> str:
        return self.append("message", message={"role": "user", "content": text, "timestamp": 1})

    def assistant(
        self, text: str = "", calls: list[tuple[str, str, dict[str, Any]]] | None = None
    ) -> str:
        """An assistant message with text and `(call_id, tool_name, arguments)` tool calls."""
        return self.append("message", message=assistant_message(text, calls))

    def tool_result(self, call_id: str, name: str, text: str, is_error: bool = False) -> str:
        return self.append("message", message=tool_result_message(call_id, name, text, is_error))

    def turn(self, n: int, topic: str = "parser") -> str:
        """A realistic turn: a user request, a read, an edit, a bash test run, a reply.
        Returns the user message's id."""
        first = self.user(
            f"Step {n}: fix the {topic} bug in `src/{topic}_{n}.py`; keep the API stable."
        )
        self.assistant("Reading the file.", [(f"r{n}", "read", {"path": f"src/{topic}_{n}.py"})])
        self.tool_result(f"r{n}", "read", f"def {topic}_{n}(value):\n    return value  # TODO")
        self.assistant(
            "Editing.",
            [
                (
                    f"e{n}",
                    "edit",
                    {
                        "path": f"src/{topic}_{n}.py",
                        "oldText": "return value",
                        "newText": "return value.strip()",
                    },
                )
            ],
        )
        self.tool_result(f"e{n}", "edit", "Edited 1 location.")
        self.assistant(
            "Running tests.",
            [(f"b{n}", "bash", {"command": f"pytest tests/test_{topic}_{n}.py -q"})],
        )
        self.tool_result(f"b{n}", "bash", f"1 passed in 0.0{n % 10}s")
        self.assistant(f"Fixed `{topic}_{n}`: it strips whitespace now. All tests pass.")
        return first

    def compaction(self, compaction: dict[str, Any]) -> str:
        """Append the compaction entry a `ds4/compact` result asks for (as Pi would)."""
        return self.append(
            "compaction",
            summary=compaction["summary"],
            firstKeptEntryId=compaction["firstKeptEntryId"],
            tokensBefore=compaction["tokensBefore"],
            details=compaction["details"],
            fromHook=True,
        )

    def mutation(self, kind: str, mutation_id: str, created_at_ms: int, **fields: Any) -> str:
        """Append a memory (`kind` "memory") or pin ("pin") mutation entry as DS4's Pi
        extension writes it (docs/memory.md); `fields` are `operation`, `item`, ..."""
        data = {"schemaVersion": 1, "mutationId": mutation_id, "createdAt": created_at_ms}
        return self.append("custom", customType=f"ds4-context-{kind}-v1", data={**data, **fields})


def assistant_message(
    text: str = "", calls: list[tuple[str, str, dict[str, Any]]] | None = None, **fields: Any
) -> dict[str, Any]:
    """A Pi assistant message: `text`, then `(call_id, tool_name, arguments)` tool calls;
    `fields` add to or replace the defaults (anthropic, claude-sonnet-4-5, timestamp 2)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call_id, name, arguments in calls or []:
        content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": arguments})
    return {
        "role": "assistant",
        "content": content,
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "stopReason": "toolUse" if calls else "stop",
        "timestamp": 2,
        **fields,
    }


def tool_result_message(
    call_id: str, name: str, text: str, is_error: bool = False, timestamp: int = 3
) -> dict[str, Any]:
    """A Pi toolResult message with one text block."""
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
        "timestamp": timestamp,
    }


def turn_messages(directory: Path, turns: int) -> list[dict[str, Any]]:
    """The Pi messages of `turns` realistic turns (`SessionWriter.turn`), as a client that
    writes no session holds them (a scratch session file is written in `directory`)."""
    writer = SessionWriter.with_turns(directory / "turn-messages.jsonl", turns)
    lines = writer.path.read_text(encoding="utf-8").splitlines()[1:]
    return [json.loads(line)["message"] for line in lines]


def memory_item(item_id: str, claim: str, created_at_ms: int, sources: list[str]) -> dict[str, Any]:
    """A project memory item of the writer's default working directory (docs/memory.md)."""
    return {
        "id": item_id,
        "scope": "project",
        "projectPath": "/home/me/demo",
        "claim": claim,
        "createdAt": created_at_ms,
        "sourceEntryIds": sources,
    }


def responses_reply(text: str, response_id: str) -> dict[str, Any]:
    """The assistant message a client gets back from an OpenAI Responses call (Pi's shape,
    docs/reference.md §P5): bookkeeping keys and the provider's `responseId` included."""
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "openai-responses",
        "provider": "openai",
        "model": "gpt-x",
        "responseId": response_id,
        "usage": {"input": 900, "output": 12, "cacheRead": 512, "cacheWrite": 0},
        "stopReason": "stop",
        "timestamp": 1787565602000,
    }


# --- sessions with lone surrogates in their metadata -----------------------------------

TS = "2026-01-01T00:00:0{}.000Z"
"""Entry timestamps of the hand-written sessions below (format with one digit)."""


def write_session(path: Path, records: list[dict[str, Any]]) -> Path:
    """One JSON line per record; `json.dumps` writes lone surrogates as `\\udXXX` escapes."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="ascii")
    return path


def message(entry_id: str, parent: str | None, role: str, text: str, ts: str) -> dict[str, Any]:
    content: Any = text if role == "user" else [{"type": "text", "text": text}]
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": ts,
        "message": {"role": role, "content": content, "timestamp": 1},
    }


def hostile_metadata_session(path: Path) -> Path:
    """Six entries whose ids, references, timestamps and header fields hold lone surrogates.
    A compaction keeps `u3` onward, so the first turn (about "zanzibar") is only reachable
    through history retrieval."""
    return write_session(
        path,
        [
            {
                "type": "session",
                "version": 3,
                "id": "s\ud800",
                "timestamp": "2026\udc00-01-01",
                "cwd": "/w\udc00",
                "parentSession": "/p\ud800.jsonl",
            },
            message("r\ud800", None, "user", "Where is the zanzibar parser defined?", TS.format(1)),
            message(
                "a\udc01", "r\ud800", "assistant", "The zanzibar parser is in src/z.py.", "2\ud800"
            ),
            message("u3", "a\udc01", "user", "Now rename the tokenizer.", TS.format(3)),
            message("k\udfff", "u3", "assistant", "Renamed the tokenizer.", TS.format(4)),
            {
                "type": "compaction",
                "id": "c\ud800",
                "parentId": "k\udfff",
                "timestamp": TS.format(5),
                "summary": "Earlier we looked at parsers.",
                "firstKeptEntryId": "u3",
                "tokensBefore": 100,
            },
            {
                "type": "label",
                "id": "l\ud800",
                "parentId": "c\ud800",
                "timestamp": TS.format(6),
                "targetId": "r\ud800",
                "label": "start",
            },
            message("u7", "l\ud800", "user", "Continue with the tokenizer.", TS.format(7)),
        ],
    )
