"""The DS4 context engine: `ContextEngine`, a thin facade over one service per concern.

    facade.py      ContextEngine: public API, store lifecycle, settings, locks; delegates
    context.py     EngineContext (store and settings providers) and ProgressCallback
    sessions.py    session files: path resolution, the one session-file error translation,
                   the LRU cache of parsed files and their contexts
    indexing.py    session sync, rebuild, import of compaction entries into the summary graph
    planning.py    ds4/plan: preparing a session, managed plans with history and project
                   evidence, the plan's manifest
    profiles.py    the model of a call (window, output limit) and its token budget
    retrieving.py  ds4/retrieve: history and project evidence for a query
    manifests.py   keeping manifests (SQLite or the in-memory window), project provenance,
                   ds4/manifest
    compacting.py  ds4/compact, compactCommitted/compactFailed, ds4.summaries
    health.py      ds4.health
    project.py     engine.project: workspace folders, project sync, status, stale snippets
    convert.py     typed results from same-named fields and the project layer's records

See docs/architecture.md for which service answers each `ds4/*` method.
"""

from .context import ProgressCallback
from .facade import ContextEngine

__all__ = ["ContextEngine", "ProgressCallback"]
