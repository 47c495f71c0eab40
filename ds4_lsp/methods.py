"""The names of the ds4 protocol surface: custom JSON-RPC methods (`ds4/*`) and workspace
commands (`ds4.*`). docs/protocol.md documents each; `ds4_lsp.app` maps them to handlers."""

DS4_PLAN = "ds4/plan"
DS4_RETRIEVE = "ds4/retrieve"
DS4_MANIFEST = "ds4/manifest"
DS4_TOOL_EXECUTED = "ds4/toolExecuted"
DS4_INDEX_UPDATED = "ds4/indexUpdated"
"""Server to client notification: a project sync ran (`services.project_sync`)."""
DS4_COMPACT = "ds4/compact"
DS4_SUMMARIZE = "ds4/summarize"
"""Server to client request: the summary text of a compaction (`handlers.compaction`)."""
DS4_COMPACT_COMMITTED = "ds4/compactCommitted"
DS4_COMPACT_FAILED = "ds4/compactFailed"

REBUILD_INDEX = "ds4.rebuildIndex"
HEALTH = "ds4.health"
PROJECT_STATUS = "ds4.projectStatus"
SUMMARIES = "ds4.summaries"
