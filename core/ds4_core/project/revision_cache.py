"""What project retrieval reads from SQLite, kept per index revision across requests.

A request's FTS work is mostly per concept (`fts_pass._concept_pass`): the rows a concept
matches (its document frequency and where it occurs), the bm25 ranking of its best rows, and,
in a prose request, the whole-file bm25 of the request's words. An agent's requests about one
task repeat most of their words, and the index changes far less often than it is read, so
these answers are kept until the index changes: a cached value is exactly what the statement
would return now, never an approximation.

**Revision.** The key of everything here is the connection's view of the database:
`PRAGMA data_version` (changes when another connection, in this process or another, commits)
and `Connection.total_changes` (rows this connection inserted, updated or deleted, trigger
programs included; a rolled-back change still counts, which only invalidates more). When
either moves, every value kept for that connection is dropped before the next read. A value
is only stored when the revision read before computing it is still the revision after (a
commit between the two drops it), and never inside an open transaction (what it read could
still be rolled back, which moves neither number).

**Scope.** One cache per thread (`Store.connection()` is the calling thread's connection),
for the last `MAX_CONNECTIONS` connections it used; the cache holds a reference to each, so
a connection is never confused with a later one at the same address. Entries are evicted
least recently used beyond `MAX_ENTRIES`, or when the rowids held exceed `MAX_ROWIDS`
(~60 bytes each in a set). Values are shared between requests: tuples, frozensets, and
dicts that no caller changes.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

MAX_CONNECTIONS = 4
"""Connections (per thread) whose values are kept; the least recently used is dropped."""
MAX_ENTRIES = 512
"""Values kept per connection (least recently used dropped)."""
MAX_ROWIDS = 250_000
"""Rowids (sum of `size` of the values) kept per connection: ~15 MB at most (a set of ints
costs ~60 bytes a member)."""

T = TypeVar("T")


class _ConnectionCache:
    def __init__(self, conn: sqlite3.Connection, revision: tuple[int, int]) -> None:
        self.conn = conn  # held: its address cannot be reused while this lives
        self.revision = revision
        self.entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self.size = 0

    def reset(self, revision: tuple[int, int]) -> None:
        self.revision = revision
        self.entries.clear()
        self.size = 0

    def put(self, key: Hashable, value: object, size: int) -> None:
        if size > MAX_ROWIDS:
            return
        old = self.entries.pop(key, None)
        if old is not None:
            self.size -= old[1]
        self.entries[key] = (value, size)
        self.size += size
        while len(self.entries) > MAX_ENTRIES or self.size > MAX_ROWIDS:
            _key, (_value, dropped) = self.entries.popitem(last=False)
            self.size -= dropped


_local = threading.local()


def revision(conn: sqlite3.Connection) -> tuple[int, int]:
    """The connection's view of the database: (`PRAGMA data_version`, `total_changes`).

    Two equal values from the same connection mean no row was changed in between, by it or
    by any other connection (module docstring). Raises `sqlite3.Error` from the pragma."""
    (version,) = conn.execute("PRAGMA data_version").fetchone()
    return int(version), conn.total_changes


def _cache_for(conn: sqlite3.Connection) -> _ConnectionCache:
    caches: list[_ConnectionCache] | None = getattr(_local, "caches", None)
    if caches is None:
        caches = _local.caches = []
    now = revision(conn)
    for position, cache in enumerate(caches):
        if cache.conn is conn:
            if position:
                caches.insert(0, caches.pop(position))
            if cache.revision != now:
                cache.reset(now)
            return cache
    cache = _ConnectionCache(conn, now)
    caches.insert(0, cache)
    del caches[MAX_CONNECTIONS:]
    return cache


def cached(
    conn: sqlite3.Connection,
    key: Hashable,
    compute: Callable[[], T],
    size: Callable[[T], int] = lambda _value: 1,
) -> T:
    """`compute()` (which reads `conn`), or the value it returned for `key` at this revision.

    Args:
        conn: the connection `compute` reads (the calling thread's).
        key: what identifies the statement and its parameters (include the project path and
            every parameter that changes the answer).
        compute: the read; its value must be immutable (it is shared by later calls).
        size: the value's weight against `MAX_ROWIDS` (rowids held; 1 by default).

    Returns:
        The value, identical to what `compute()` would return now.

    Raises:
        Whatever `compute` raises (nothing is stored then), or `sqlite3.Error` from the
        revision pragma.
    """
    cache = _cache_for(conn)
    found = cache.entries.get(key)
    if found is not None:
        cache.entries.move_to_end(key)
        return found[0]  # type: ignore[return-value]
    before = cache.revision
    value = compute()
    if not conn.in_transaction and revision(conn) == before:
        cache.put(key, value, size(value))
    return value


def clear() -> None:
    """Drop every value kept by the calling thread (for benchmarks of a cold cache)."""
    _local.caches = []


__all__ = ["MAX_CONNECTIONS", "MAX_ENTRIES", "MAX_ROWIDS", "cached", "clear", "revision"]
