"""Offloading large tool results (core/ds4_core/artifacts/offload.py): stored exactly, the
given messages untouched, small results and other roles left as they are, failures still
condensed."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
from test_planner import result

from ds4_core.artifacts.condense import tool_result_text
from ds4_core.artifacts.offload import offload_messages
from ds4_core.artifacts.store import ArtifactStore
from ds4_core.config import DEFAULT_CONFIG

SETTINGS = DEFAULT_CONFIG.artifacts


def conversation(big: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "x" * 20000},
        result("toolu_01", "small output"),
        result("toolu_02", big),
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]


def test_only_large_tool_results_are_stored_and_replaced(tmp_path: Path) -> None:
    big = "line with \ud800 lone surrogate and é\n" * 1000
    messages = conversation(big)
    before = copy.deepcopy(messages)
    store = ArtifactStore(tmp_path)
    sent, offloaded = offload_messages(messages, store, SETTINGS)
    assert messages == before  # the caller's (session) messages are never changed
    assert [o.position for o in offloaded] == [2]
    assert sent[0] is messages[0] and sent[1] is messages[1] and sent[3] is messages[3]
    artifact_id = offloaded[0].artifact_id
    assert artifact_id is not None and offloaded[0].not_stored is None
    assert store.read(artifact_id).decode("utf-8", "surrogatepass") == big
    assert f"Artifact ID: {artifact_id}" in tool_result_text(sent[2])
    assert len(tool_result_text(sent[2])) < SETTINGS.max_inline_tool_result_chars


def test_disabled_offloads_nothing(tmp_path: Path) -> None:
    off, _ = DEFAULT_CONFIG.with_settings({"artifacts.enabled": False})
    messages = conversation("y" * 50000)
    sent, offloaded = offload_messages(messages, ArtifactStore(tmp_path), off.artifacts)
    assert offloaded == [] and sent == messages and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case", ["too-large", "no-store", "write-failed"])
def test_an_output_not_stored_is_still_condensed(tmp_path: Path, case: str) -> None:
    settings, _ = DEFAULT_CONFIG.with_settings(
        {"artifacts": {"maxArtifactBytes": 20000, "maxSearchBytes": 20000}}
    )
    store: ArtifactStore | None = ArtifactStore(tmp_path / "a")
    size = 30000 if case == "too-large" else 15000
    if case == "no-store":
        store = None
    if case == "write-failed":
        (tmp_path / "a").write_text("a file where the directory should be")
    sent, offloaded = offload_messages(conversation("z" * size), store, settings.artifacts)
    assert [(o.artifact_id, o.not_stored) for o in offloaded] == [(None, case)]
    assert "Artifact ID: none (not stored)" in tool_result_text(sent[2])
    if case != "write-failed":
        assert not (tmp_path / "a").exists() or os.listdir(tmp_path / "a") == []
