"""Historical retrieval: task descriptors, literal + FTS5 search, evidence rendering.

`describe_task` (docs/reference.md §3.1) turns a request into search terms; `retrieve_history`
(docs/reference.md §3.2) ranks entries of one session's index; `render_evidence` (§3.2) quotes a
hit as a user-role message.
"""

from ds4_core.retrieval.descriptor import (
    STOPWORDS,
    TECHNOLOGIES,
    TaskDescriptor,
    build_fts_query,
    describe_task,
    last_user_text,
    text_of_message,
)
from ds4_core.retrieval.evidence import evidence_tokens, render_evidence
from ds4_core.retrieval.history import (
    HistoryHit,
    HistoryRetrieval,
    RetrievalStats,
    RetrievalStatus,
    retrieve_history,
)

__all__ = [
    "STOPWORDS",
    "TECHNOLOGIES",
    "HistoryHit",
    "HistoryRetrieval",
    "RetrievalStats",
    "RetrievalStatus",
    "TaskDescriptor",
    "build_fts_query",
    "describe_task",
    "evidence_tokens",
    "last_user_text",
    "render_evidence",
    "retrieve_history",
    "text_of_message",
]
