"""The content-addressed artifact store (core/ds4_core/artifacts/store.py) on real files:
dedup, corruption quarantined, crash safety of a write, modes."""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ds4_core.artifacts.gc import collect_garbage
from ds4_core.artifacts.store import (
    LOCK_FILE,
    TEMPORARY_PREFIX,
    ArtifactCorruptError,
    ArtifactMissingError,
    ArtifactStore,
    ArtifactStoreRefusedError,
    artifact_root,
    artifact_uri,
)

DATA = b"error: build failed\n" * 5000


def entries(root: Path) -> list[str]:
    """Every file under `root` but the lock file, relative, sorted."""
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.name != LOCK_FILE
    )


def test_an_object_lives_under_its_hash_and_reads_back(tmp_path: Path) -> None:
    store = ArtifactStore(artifact_root(tmp_path / "context.db"))
    stored = store.put(DATA)
    digest = hashlib.sha256(DATA).hexdigest()
    assert stored.artifact_id == digest and stored.size_bytes == len(DATA)
    assert not stored.deduplicated and stored.quarantined is None
    assert entries(tmp_path / "artifacts") == [f"{digest[:2]}/{digest}"]
    assert store.read(digest) == DATA
    assert store.artifact_ids() == [digest]
    assert artifact_uri(digest) == f"artifact://sha256/{digest}"
    assert stat.S_IMODE(store.path_for(digest).stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path_for(digest).parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "artifacts").stat().st_mode) == 0o700


def test_the_same_bytes_twice_are_stored_once(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    first = store.put(DATA)
    before = store.path_for(first.artifact_id).stat()
    again = store.put(DATA)
    assert again.artifact_id == first.artifact_id and again.deduplicated
    after = store.path_for(first.artifact_id).stat()
    # not written again (the same file), only touched: young for garbage collection
    assert after.st_ino == before.st_ino and after.st_mtime_ns >= before.st_mtime_ns
    assert len(store.artifact_ids()) == 1


def test_a_corrupt_object_is_quarantined_and_written_again_on_dedup(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    artifact_id = store.put(DATA).artifact_id
    path = store.path_for(artifact_id)
    path.write_bytes(b"flipped bits")
    again = store.put(DATA)
    assert not again.deduplicated and again.quarantined is not None
    assert again.quarantined.parent == tmp_path / "quarantine"
    assert again.quarantined.read_bytes() == b"flipped bits"
    assert store.read(artifact_id) == DATA


def test_a_corrupt_object_is_never_returned_by_a_read(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    artifact_id = store.put(DATA).artifact_id
    store.path_for(artifact_id).write_bytes(DATA[:-1])
    with pytest.raises(ArtifactCorruptError, match="moved to"):
        store.read(artifact_id)
    assert not store.contains(artifact_id)
    assert [p.read_bytes() for p in (tmp_path / "quarantine").iterdir()] == [DATA[:-1]]
    with pytest.raises(ArtifactMissingError, match=artifact_id):
        store.read(artifact_id)


def test_a_failed_rename_leaves_no_object_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ArtifactStore(tmp_path)

    def crash(*args: object) -> None:
        raise OSError("simulated crash between write and rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated"):
        store.put(DATA)
    monkeypatch.undo()
    assert store.artifact_ids() == [] and entries(tmp_path) == []
    assert store.put(DATA).artifact_id == hashlib.sha256(DATA).hexdigest()


def test_a_process_killed_before_the_rename_leaves_no_object(tmp_path: Path) -> None:
    """SIGKILL between fsync and rename: only a temporary file remains, never listed or read
    as an object, and swept later."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from ds4_core.artifacts.store import ArtifactStore
        os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
        ArtifactStore({str(tmp_path)!r}).put({DATA!r})
        """
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, timeout=60)
    assert done.returncode == -signal.SIGKILL
    store = ArtifactStore(tmp_path)
    left = entries(tmp_path)
    assert len(left) == 1 and left[0].split("/")[1].startswith(TEMPORARY_PREFIX)
    assert store.artifact_ids() == []
    artifact_id = hashlib.sha256(DATA).hexdigest()
    assert not store.contains(artifact_id)
    with pytest.raises(ArtifactMissingError):
        store.read(artifact_id)
    assert store.sweep_temporaries(older_than_s=3600) == 0  # may be a write in progress
    assert store.sweep_temporaries(older_than_s=-1) == 1
    assert entries(tmp_path) == []


@pytest.mark.parametrize("bad", ["", "ABC", "g" * 64, "A" * 64, "../" + "a" * 61])
def test_ids_that_are_not_sha256_hex_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="not an artifact id"):
        ArtifactStore(tmp_path).read(bad)


def test_stats_count_objects_and_quarantine_not_temporaries(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    assert store.stats() == {"objects": 0, "bytes": 0, "quarantined": 0, "quarantinedBytes": 0}
    first = store.put(DATA).artifact_id
    store.put(b"second")
    store.path_for(first).write_bytes(b"bad")
    store.put(DATA)  # quarantines the corrupt copy, writes DATA again
    (store.path_for(first).parent / (TEMPORARY_PREFIX + "x")).write_bytes(b"partial")
    assert store.stats() == {
        "objects": 2,
        "bytes": len(DATA) + len(b"second"),
        "quarantined": 1,
        "quarantinedBytes": 3,
    }


def planted_link(tmp_path: Path) -> tuple[ArtifactStore, str, Path]:
    """A store holding one object and, in its shard, a symbolic link named with the hash of
    an outside file's bytes (DATA): (store, that hash, the outside file)."""
    outside = tmp_path / "secret.txt"
    outside.write_bytes(DATA)
    digest = hashlib.sha256(DATA).hexdigest()
    store = ArtifactStore(tmp_path / "artifacts")
    store.put(b"other")
    store.path_for(digest).parent.mkdir(mode=0o700, exist_ok=True)
    store.path_for(digest).symlink_to(outside)
    return store, digest, outside


def test_a_symbolic_link_named_like_an_object_is_never_followed(tmp_path: Path) -> None:
    """A link named with the real hash of an outside file is not an object: not listed, not
    counted, and a read or a put moves it to quarantine instead of returning the file."""
    store, digest, outside = planted_link(tmp_path)
    assert store.artifact_ids() == [hashlib.sha256(b"other").hexdigest()]
    assert store.stats()["objects"] == 1 and not store.contains(digest)
    with pytest.raises(ArtifactCorruptError, match="symbolic link"):
        store.read(digest)
    [moved] = (tmp_path / "artifacts" / "quarantine").iterdir()
    assert moved.is_symlink() and outside.read_bytes() == DATA
    store.path_for(digest).symlink_to(outside)
    again = store.put(DATA)
    assert not again.deduplicated and again.quarantined is not None
    assert not store.path_for(digest).is_symlink() and store.read(digest) == DATA


def test_garbage_collection_quarantines_a_link_and_leaves_its_target(tmp_path: Path) -> None:
    store, digest, outside = planted_link(tmp_path)
    collect_garbage(store, set(), dry_run=True)
    assert store.path_for(digest).is_symlink()  # a dry run moves nothing
    collect_garbage(store, set(), dry_run=False)
    assert not os.path.lexists(store.path_for(digest)) and outside.read_bytes() == DATA
    [moved] = (tmp_path / "artifacts" / "quarantine").iterdir()
    assert moved.is_symlink()


@pytest.mark.parametrize("where", ["root", "shard"])
def test_a_store_directory_that_is_a_symbolic_link_is_refused(tmp_path: Path, where: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "artifacts"
    digest = hashlib.sha256(DATA).hexdigest()
    if where == "root":
        root.symlink_to(elsewhere)
    else:
        root.mkdir()
        (root / digest[:2]).symlink_to(elsewhere)
    store = ArtifactStore(root)
    with pytest.raises(ArtifactStoreRefusedError, match="symbolic link"):
        store.put(DATA)
    with pytest.raises(ArtifactStoreRefusedError, match="symbolic link"):
        store.read(digest)
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
    if where == "root":
        with pytest.raises(ArtifactStoreRefusedError):
            store.stats()
    else:
        assert store.artifact_ids() == []


def test_garbage_collection_never_removes_an_object_a_put_just_found(tmp_path: Path) -> None:
    """A plan finds (and touches) an old unreferenced object while a collection is between
    reading its age and removing it: the put waits for the collection and writes the object
    again, so it is there when the put returns (review 15A #8)."""
    import threading
    import time

    from ds4_core.artifacts import gc

    store = ArtifactStore(tmp_path)
    data = b"big output " * 2000
    artifact_id = store.put(data).artifact_id
    old = time.time() - 7200
    os.utime(store.path_for(artifact_id), (old, old))
    outcome: list[object] = []
    plan = threading.Thread(target=lambda: outcome.append(store.put(data)))
    real_unlink = gc._unlink

    def unlink_while_a_plan_puts(path: Path) -> bool:
        plan.start()
        plan.join(0.3)  # before the fix the put touched the object and returned here
        return real_unlink(path)

    gc._unlink = unlink_while_a_plan_puts  # type: ignore[assignment]
    try:
        assert gc.collect_garbage(store, set(), dry_run=False).removed == 1
    finally:
        gc._unlink = real_unlink  # type: ignore[assignment]
    plan.join(10)
    assert outcome and store.contains(artifact_id)
    assert store.read(artifact_id) == data
