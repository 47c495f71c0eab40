"""Active paths of one parsed session, reused as the session grows.

`active_path` walks from a leaf to the root through the whole session every time: O(path). A
language server asks for the path of the newest leaf after every append, and the new leaf's
path is almost always the previous leaf's path plus the appended entries. `PathIndex` keeps
entries by id and the last few paths it walked; a walk that reaches the end of a kept path
reuses it, so the cost after an append is that of the appended entries.

The result always equals `active_path(entries, leaf_id)` (a property test checks it): the
index is rebuilt instead of extended when an appended entry reuses an existing id (last wins
would change earlier paths) or when a kept path's root gains a parent.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from .context import LAST_ENTRY, LeafId, UnknownLeafError, current_thinking_level
from .reader import SessionEntry

KEPT_PATHS = 4
"""Paths remembered per index (the leaves a client plans for: usually one)."""


class PathIndex:
    """Entries by id (last wins on duplicate ids) and the recently walked paths of a session.

    Args:
        entries: all entries of the session in file order.
    """

    def __init__(self, entries: Sequence[SessionEntry]) -> None:
        self.entries = entries
        self.by_id: dict[str, SessionEntry] = {e.entry_id: e for e in entries}
        # leaf id -> (path, ids, level): `ids` holds at least the path's ids (a superset is only
        # ever less reuse, never a wrong path), shared by the paths that extend one another;
        # `level` is the thinking level at the end of the path.
        self._paths: OrderedDict[str, tuple[list[SessionEntry], set[str], str]] = OrderedDict()
        self._lock = threading.Lock()  # the engine serves several threads

    def extended(self, entries: Sequence[SessionEntry], added: Sequence[SessionEntry]) -> PathIndex:
        """The index of `entries` = the entries of this index followed by `added`.

        Reuses this index's work when the append cannot change earlier paths; this index is
        left as it was (another thread may still use it).
        """
        if any(entry.entry_id in self.by_id for entry in added):
            return PathIndex(entries)
        index = PathIndex.__new__(PathIndex)
        index.entries = entries
        index.by_id = dict(self.by_id)
        index.by_id.update((entry.entry_id, entry) for entry in added)
        index._lock = threading.Lock()
        with self._lock:
            kept = list(self._paths.items())
        index._paths = OrderedDict(
            (leaf, (path, ids, level))
            for leaf, (path, ids, level) in kept
            if path[0].parent_id is None
            or path[0].parent_id == path[0].entry_id
            or path[0].parent_id not in index.by_id
        )
        return index

    def entry(self, entry_id: str) -> SessionEntry | None:
        """The entry with `entry_id` (the last one on duplicate ids), or None."""
        return self.by_id.get(entry_id)

    def path(self, leaf_id: LeafId = LAST_ENTRY) -> list[SessionEntry]:
        """`active_path(entries, leaf_id)`: root first. Callers must not mutate the list.

        Raises:
            UnknownLeafError: `leaf_id` is a string that names no entry.
        """
        return self.path_and_level(leaf_id)[0]

    def path_and_level(self, leaf_id: LeafId = LAST_ENTRY) -> tuple[list[SessionEntry], str]:
        """`path(leaf_id)` and `current_thinking_level` of it, both reused from an earlier
        walk when the leaf extends it (the level scan would otherwise read the whole path).

        Raises:
            UnknownLeafError: `leaf_id` is a string that names no entry.
        """
        if leaf_id is None:
            return [], current_thinking_level([])
        if leaf_id is LAST_ENTRY:
            if not self.entries:
                return [], current_thinking_level([])
            leaf = self.entries[-1]
        else:
            found = self.by_id.get(leaf_id)
            if found is None:
                raise UnknownLeafError(leaf_id)
            leaf = found
        with self._lock:
            paths = dict(self._paths)
        kept = paths.get(leaf.entry_id)
        if kept is not None and kept[0][-1] is leaf:
            return kept[0], kept[2]
        walked: list[SessionEntry] = []
        visited: set[str] = set()
        prefix: list[SessionEntry] = []
        ids: set[str] | None = None
        prefix_level = ""
        current: SessionEntry | None = leaf
        while current is not None and current.entry_id not in visited:
            known = paths.get(current.entry_id)
            if known is not None and known[0][-1] is current:
                if visited.isdisjoint(known[1]):  # else the full walk meets a cycle: walk on
                    prefix, ids, prefix_level = known
                    break
            visited.add(current.entry_id)
            walked.append(current)
            parent_id = current.parent_id
            if parent_id is None or parent_id == current.entry_id:
                break
            current = self.by_id.get(parent_id)
        walked.reverse()
        if prefix and ids is not None:
            path = prefix + walked
            ids.update(visited)  # shared: the kept path's set becomes a superset of its ids
            changes = [e for e in walked if e.entry_type == "thinking_level_change"]
            level = current_thinking_level(changes[-1:]) if changes else prefix_level
        else:
            path, ids = walked, visited
            level = current_thinking_level(path)
        with self._lock:
            self._paths[leaf.entry_id] = (path, ids, level)
            self._paths.move_to_end(leaf.entry_id)
            while len(self._paths) > KEPT_PATHS:
                self._paths.popitem(last=False)
        return path, level
