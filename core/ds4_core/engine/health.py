"""Health: `ds4.health` and `ds4 health`, the engine's and the index's state in one answer
(versions, the database, counts, notices, settings warnings, the project status), with status
`warning` when anything needs the user's attention.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from .. import __version__
from ..artifacts.gc import last_gc
from ..artifacts.store import ArtifactStore, artifact_root
from ..results import HealthResult, ProjectStatus
from ..sessions.sync import sessions_with_copies
from ..store import Store
from ..store import manifests as manifest_repo
from ..store import sessions as session_repo
from ..store import summaries as summary_repo
from ..tokens import ESTIMATOR_VERSION
from ..wire import JsonObject


def check_health(
    store: Store,
    *,
    database_path: str,
    notices: Sequence[str],
    config_warnings: Sequence[str],
    project: ProjectStatus,
    ephemeral_manifests: int,
    privacy: JsonObject | None = None,
    calibration: Sequence[JsonObject] = (),
) -> HealthResult:
    """The health of the engine over the open `store` (`ContextEngine.health`).

    `status` is `warning` when there are database `notices`, settings warnings, project
    snippets sent to the model that changed since (`project.stale_snippets`), or session files
    sharing one session id (named in `warnings`), or a profile's calibration has a critical
    drift warning (named too), or the database file was deleted under the running engine;
    else `ok`. `privacy` is the active policy
    (`privacy.policy.policy_summary`); `calibration` each profile's calibration
    (`engine.usage.UsageReports.profiles`).

    Raises:
        sqlite3.Error: the database cannot be read.
    """
    counts = session_repo.counts(store)
    gone = (
        []
        if database_path == ":memory:" or Path(database_path).exists()
        else [
            f"the database file '{database_path}' no longer exists (deleted while running?): "
            "what is written now is lost when this process ends; restart the server to start "
            "a new one"
        ]
    )
    critical = [
        f"calibration of {profile['provider']}/{profile['model']}: {warning['message']}"
        for profile in calibration
        for warning in profile.get("warnings", ())
        if warning.get("severity") == "critical"
    ]
    stale = project.stale_snippets or 0
    copies = [
        f"session id '{sid}' is used by several files: '{indexed}' (indexed), "
        + ", ".join(f"'{o}'" for o in others)
        + "; they share one index and summary graph"
        for sid, indexed, others in sessions_with_copies(store)
    ]
    return HealthResult(
        status=(
            "warning" if notices or config_warnings or stale or copies or critical or gone else "ok"
        ),
        version=__version__,
        schema_version=store.schema_version,
        database_path=database_path,
        sqlite_version=sqlite3.sqlite_version,
        fts5=True,
        sessions=counts["sessions"],
        entries=counts["entries"],
        manifests=manifest_repo.count_manifests(store),
        summaries=summary_repo.counts(store),
        ephemeral_manifests=ephemeral_manifests,
        estimator=ESTIMATOR_VERSION,
        notices=tuple(notices),
        config_warnings=tuple(config_warnings),
        project=project,
        privacy=dict(privacy or {}),
        warnings=tuple(
            ([f"{stale} project snippet(s) sent to the model have changed since"] if stale else [])
            + copies
            + critical
            + gone
        ),
        calibration=tuple(calibration),
        artifacts=artifact_stats(database_path),
    )


def artifact_stats(database_path: str) -> JsonObject:
    """`ArtifactStore.stats` of the store beside `database_path` and its `lastGc`
    (`gc.last_gc`); zeros for `:memory:` or when the directory cannot be read."""
    empty: JsonObject = {
        "objects": 0,
        "bytes": 0,
        "quarantined": 0,
        "quarantinedBytes": 0,
        "lastGc": None,
    }
    if database_path == ":memory:":
        return empty
    root = artifact_root(database_path)
    try:
        return {**ArtifactStore(root).stats(), "lastGc": last_gc(root)}
    except OSError:
        return empty
