"""`ds4.health` when the database file is deleted under a running engine (issue 14's trial):
the engine keeps writing to the unlinked file, so health must say so instead of `ok`."""

from __future__ import annotations

from pathlib import Path

from ds4_core.engine import ContextEngine
from ds4_core.requests import ModelSpec, PlanRequest


def test_health_warns_when_the_database_file_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "context.db"
    engine = ContextEngine(database_path=path)
    messages = [{"role": "user", "content": "hello", "timestamp": 1}]
    engine.plan(PlanRequest(messages=messages, model=ModelSpec("p", "m", 100_000)))
    assert engine.health().status == "ok"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    health = engine.health()
    assert health.status == "warning"
    assert any(f"the database file '{path}' no longer exists" in w for w in health.warnings)
    engine.close()
