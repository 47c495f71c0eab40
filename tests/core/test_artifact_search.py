"""Literal search in a stored artifact (core/ds4_core/artifacts/search.py): case-insensitive,
bounded, redacted, re-hashed before reading, refused above the size limit."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.artifacts.search import (
    EXCERPT_CHARS,
    ArtifactTooLargeError,
    search_artifact,
)
from ds4_core.artifacts.store import ArtifactCorruptError, ArtifactStore

KEY = "sk-" + "proj" + "A1b2C3d4E5f6G7h8I9j0K1l2"
LOG = (
    "".join(
        f"line {i}: {'Error: disk FULL on /dev/sda ' + KEY if i % 100 == 7 else 'ok'}\n"
        for i in range(1000)
    )
    + "x" * 5000
    + " error at the end of a long line "
    + "y" * 5000
)


def stored(tmp_path: Path, data: bytes = LOG.encode()) -> tuple[ArtifactStore, str]:
    store = ArtifactStore(tmp_path)
    return store, store.put(data).artifact_id


def test_matches_are_literal_case_insensitive_with_their_lines(tmp_path: Path) -> None:
    store, artifact_id = stored(tmp_path)
    found = search_artifact(
        store, artifact_id, "DISK full", max_matches=100, max_search_bytes=10**6
    )
    assert [m.line for m in found.matches] == [i + 1 for i in range(1000) if i % 100 == 7]
    assert not found.truncated
    first = found.matches[0]
    assert first.column == len("line 7: Error: ") + 1 and first.excerpt.startswith(
        "line 7: Error: disk"
    )
    dots = search_artifact(store, artifact_id, "d.sk", max_matches=5, max_search_bytes=10**6)
    assert dots.matches == ()  # literal: `.` is not a wildcard


def test_matches_are_bounded_and_excerpts_redacted(tmp_path: Path) -> None:
    store, artifact_id = stored(tmp_path)
    found = search_artifact(store, artifact_id, "error", max_matches=3, max_search_bytes=10**6)
    assert len(found.matches) == 3 and found.truncated
    assert all(KEY not in m.excerpt for m in found.matches) and found.redactions == 3
    last = search_artifact(
        store, artifact_id, "END OF A LONG", max_matches=3, max_search_bytes=10**6
    )
    [match] = last.matches
    assert match.line == 1001 and match.excerpt.startswith("...") and match.excerpt.endswith("...")
    assert len(match.excerpt) <= EXCERPT_CHARS + 6 and "end of a long line" in match.excerpt


def test_a_corrupt_or_too_large_artifact_is_not_searched(tmp_path: Path) -> None:
    store, artifact_id = stored(tmp_path)
    with pytest.raises(ArtifactTooLargeError, match="maxSearchBytes"):
        search_artifact(store, artifact_id, "error", max_matches=3, max_search_bytes=100)
    store.path_for(artifact_id).write_bytes(LOG.encode().replace(b"disk", b"DISK"))
    with pytest.raises(ArtifactCorruptError):
        search_artifact(store, artifact_id, "disk", max_matches=3, max_search_bytes=10**6)


@pytest.mark.parametrize("query", ["", "q" * 1001])
def test_a_bad_query_is_refused_naming_it(tmp_path: Path, query: str) -> None:
    store, artifact_id = stored(tmp_path)
    with pytest.raises(ValueError, match="query"):
        search_artifact(store, artifact_id, query, max_matches=3, max_search_bytes=10**6)


def test_columns_count_utf16_code_units_from_one(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    text = "\U0001f600 a needle \u00e9 needle\nneedle"
    artifact_id = store.put(text.encode()).artifact_id
    found = search_artifact(store, artifact_id, "NEEDLE", max_matches=10, max_search_bytes=10**6)
    # the emoji is 2 UTF-16 units, the accented e one
    assert [(m.line, m.column) for m in found.matches] == [(1, 6), (1, 15), (2, 1)]


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("aaaa AAAA aAaA", "aa"),
        ("Error error ERROR\nerr", "ERROR"),
        ("caf\u00e9 CAF\u00c9 cafe", "caf\u00e9"),
        ("Stra\u00dfe STRASSE", "strasse"),
    ],
)
def test_the_ascii_fast_path_finds_what_the_regex_finds(
    tmp_path: Path, text: str, query: str
) -> None:
    store = ArtifactStore(tmp_path)
    artifact_id = store.put(text.encode()).artifact_id
    found = search_artifact(store, artifact_id, query, max_matches=100, max_search_bytes=10**6)
    expected = [m.start() for m in re.finditer(re.escape(query), text, re.IGNORECASE)]
    assert [m.column - 1 for m in found.matches if m.line == 1] == [
        at for at in expected if "\n" not in text[:at]
    ]


def pem(seed: int, lines: int) -> tuple[str, list[str]]:
    """A PEM private key block with `lines` distinct 64-character body lines."""
    body = [
        base64.b64encode(hashlib.sha512(f"{seed}-{i}".encode()).digest()[:48]).decode()
        for i in range(lines)
    ]
    begin, end = "-----BEGIN " + "RSA PRIVATE KEY-----", "-----END " + "RSA PRIVATE KEY-----"
    return begin + "\n" + "\n".join(body) + "\n" + end + "\n", body


@settings(max_examples=60, deadline=None)
@given(
    before=st.integers(0, 3000),
    lines=st.integers(1, 60),
    pick=st.integers(0, 10**6),
    cut=st.integers(0, 60),
    width=st.integers(1, 20),
)
def test_no_excerpt_shows_a_private_key_line(
    tmp_path_factory: pytest.TempPathFactory,
    before: int,
    lines: int,
    pick: int,
    cut: int,
    width: int,
) -> None:
    """A query taken from any key line, or the key's first characters, or its marker words,
    never returns a key line: the key is found over the whole object (review 15A #3)."""
    block, body = pem(pick, lines)
    text = "log line\n" * before + "$ cat id_rsa\n" + block + "log tail MII\n" * 3
    store, artifact_id = stored(tmp_path_factory.mktemp("s"), text.encode())
    line = body[pick % lines]
    for query in (line[cut % 60 : cut % 60 + width], line[:3], "PRIVATE KEY", "MII", "-----"):
        found = search_artifact(store, artifact_id, query, max_matches=100, max_search_bytes=10**7)
        shown = "\n".join(match.excerpt for match in found.matches)
        assert [key_line for key_line in body if key_line in shown] == []


def test_classified_text_is_not_searched_nor_shown(tmp_path: Path) -> None:
    """Matches inside a block above the shown levels are not reported; an excerpt reaching
    into one shows its placeholder (review 15A #3)."""
    secret = "quarterly numbers: revenue 41.2M"
    text = (
        "x\n" * 10
        + f"[ds4:local-only]\n{secret}\n[/ds4:local-only]\n"
        + "before [ds4:sensitive]zqxhidden revenue[/ds4:sensitive] after revenue\n"
        + "y\n" * 10
    )
    store, artifact_id = stored(tmp_path, text.encode())
    found = search_artifact(store, artifact_id, "revenue", max_matches=10, max_search_bytes=10**6)
    assert [m.excerpt for m in found.matches] == [
        "before [DS4 sensitive content excluded by privacy policy] after revenue"
    ]
    assert (
        search_artifact(store, artifact_id, "ds4:", max_matches=10, max_search_bytes=10**6).matches
        == ()
    )
    shown = search_artifact(
        store,
        artifact_id,
        "revenue",
        max_matches=10,
        max_search_bytes=10**6,
        allowed=("normal", "internal", "sensitive", "local-only"),
    )
    assert len(shown.matches) == 3 and "[ds4:" not in shown.matches[2].excerpt
