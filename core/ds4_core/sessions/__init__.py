"""Pi session files: line framing, reading and migration, searchable text, active context.

See docs/architecture.md ("sessions/...") and docs/reference.md §P for the rules.
"""

from ds4_core.sessions.context import (
    LAST_ENTRY,
    SessionContext,
    UnknownLeafError,
    active_path,
    build_session_context,
    context_for_path,
    current_model,
    current_thinking_level,
)
from ds4_core.sessions.jsonl import RawLine, iter_raw_lines
from ds4_core.sessions.reader import (
    CURRENT_SESSION_VERSION,
    NotAPiSessionError,
    ResumeState,
    SessionEntry,
    SessionFile,
    SessionFormatError,
    SessionHeader,
    SessionReader,
    UnsupportedSessionVersionError,
    read_all,
    read_header,
)
from ds4_core.sessions.searchable import entry_role, searchable_text

__all__ = [
    "CURRENT_SESSION_VERSION",
    "LAST_ENTRY",
    "NotAPiSessionError",
    "RawLine",
    "ResumeState",
    "SessionContext",
    "SessionEntry",
    "SessionFile",
    "SessionFormatError",
    "SessionHeader",
    "SessionReader",
    "UnknownLeafError",
    "UnsupportedSessionVersionError",
    "active_path",
    "build_session_context",
    "context_for_path",
    "current_model",
    "current_thinking_level",
    "entry_role",
    "iter_raw_lines",
    "read_all",
    "read_header",
    "searchable_text",
]
