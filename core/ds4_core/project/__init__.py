"""Project knowledge: which workspace files exist, what may be indexed, windows and search.

Contracts in docs/project-knowledge.md; rules from docs/reference.md §3.9-§3.11.
"""

from ds4_core.privacy.secrets import secret_reason
from ds4_core.project.discovery import (
    DiscoveredFile,
    Discovery,
    GitState,
    ProjectRootError,
    discover_project,
)
from ds4_core.project.filters import decode_text, path_exclusion, read_indexable

__all__ = [
    "DiscoveredFile",
    "Discovery",
    "GitState",
    "ProjectRootError",
    "decode_text",
    "discover_project",
    "path_exclusion",
    "read_indexable",
    "secret_reason",
]
