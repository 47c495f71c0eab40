"""Views of a session's summary graph: the wire shape, a text tree and Graphviz DOT.

`graph_view` is what the `ds4.summaries` command and `ds4 summaries --json` return (no node
content, only ids, kinds, levels, lifecycles, validation, token estimates and roles);
`render_tree` and `render_dot` draw that view. Graph rules: docs/compaction.md "Graph rules"
and docs/reference.md §3.13. Token estimates are `chars-v2` (docs/reference.md §3.3).

Roles (exactly one per node):

* `active-root`: the branch's current root (resolved by the caller from the compaction entries
  on the active path).
* `active`: reachable from the active root through edges (what the active root summarizes).
* `past-head`: a committed root (no committed parent) other than the active one whose Pi
  compaction entry is on the active path (an earlier root the branch moved past, e.g. before
  a Pi-native compaction).
* `alternate-branch`: any other committed root (a root of another branch of the session).
* `inner`: committed, has a committed parent, not reachable from the active root.
* `prepared` / `failed`: a node of an operation not (yet) committed.

Only committed parents make a node non-root: a pending aggregate over the active root does not
hide it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..quoting import terminal_text
from ..tokens import estimate_text_tokens
from .nodes import SummaryNode

ROLES: tuple[str, ...] = (
    "active-root",
    "active",
    "past-head",
    "alternate-branch",
    "inner",
    "prepared",
    "failed",
)
"""Every role `graph_view` assigns, in display order."""

_ROOT_ORDER = {"active-root": 0, "past-head": 1, "alternate-branch": 2, "prepared": 3, "failed": 4}
_ACTIVE_ROLES = frozenset({"active-root", "active"})
_ROLE_LABELS = {
    "active-root": "active root",
    "past-head": "past head",
    "alternate-branch": "alternate branch",
}
MAX_INDENT_DEPTH = 32
"""Deeper tree levels are drawn at this indentation with a `[+n]` depth marker."""
LEGEND = (
    "legend: * = active root and what it summarizes; L<n> = graph level; "
    "tok = estimated tokens (chars-v2); (see above) = shared node already shown"
)


def _reachable(start: str | None, children: Mapping[str, Sequence[str]]) -> set[str]:
    """Ids reachable from `start` through `children` (iterative; `start` included)."""
    if start is None:
        return set()
    seen: set[str] = set()
    stack = [start]
    while stack:
        node_id = stack.pop()
        if node_id in seen:
            continue
        seen.add(node_id)
        stack.extend(children.get(node_id, ()))
    return seen


def _role(
    node: SummaryNode,
    active_root_id: str | None,
    active: set[str],
    committed_parent: set[str],
    active_path: Collection[str],
) -> str:
    if node.summary_id == active_root_id:
        return "active-root"
    if node.lifecycle in ("prepared", "failed"):
        return node.lifecycle
    if node.summary_id in active:
        return "active"
    if node.summary_id in committed_parent:
        return "inner"
    if node.pi_entry_id is not None and node.pi_entry_id in active_path:
        return "past-head"
    return "alternate-branch"


def graph_view(
    nodes: Sequence[SummaryNode],
    *,
    active_root_id: str | None,
    active_path_entry_ids: Collection[str],
    session_id: str,
    session_file: str | None,
    leaf_id: str | None,
) -> dict[str, Any]:
    """The wire shape of a session's summary graph (no node content).

    Args:
        nodes: the session's nodes (e.g. `store.summaries.session_nodes`), in display order.
        active_root_id: the active branch's root, or None (ignored when not among `nodes`).
        active_path_entry_ids: the entry ids on the path from the session root to the leaf
            (decides `past-head` vs `alternate-branch`).
        session_id, session_file, leaf_id: echoed.

    Returns `{sessionId, sessionFile, leafId, activeRootId, nodes: [{summaryId, kind, level,
    lifecycle, validationStatus, validationIssueCodes, createdAt, provider, model, tokens
    (chars-v2 estimate of the content), sourceEntryCount (direct sources), childIds, piEntryId,
    firstKeptEntryId, reason, role}], roots: [{summaryId, role}] (active root, past heads,
    alternate branches, then tops of prepared/failed operations), counts: {nodes, committed,
    prepared, failed (lifecycles), roots, active-root, active, past-head, alternate-branch,
    inner (roles)}, tree: render_tree(view)}`.
    Children that are not among `nodes` are listed in `childIds` but not drawn.
    """
    by_id = {node.summary_id: node for node in nodes}
    if active_root_id not in by_id:
        active_root_id = None
    children = {node.summary_id: node.child_ids for node in nodes}
    has_parent: set[str] = set()
    committed_parent: set[str] = set()
    for node in nodes:
        has_parent.update(node.child_ids)
        if node.lifecycle == "committed":
            committed_parent.update(node.child_ids)
    active = _reachable(active_root_id, children)
    path = (
        active_path_entry_ids
        if isinstance(active_path_entry_ids, set | frozenset)
        else set(active_path_entry_ids)
    )
    roles = {
        node.summary_id: _role(node, active_root_id, active, committed_parent, path)
        for node in nodes
    }
    view_nodes = [
        {
            "summaryId": node.summary_id,
            "kind": node.kind,
            "level": node.graph_level,
            "lifecycle": node.lifecycle,
            "validationStatus": node.validation_status,
            "validationIssueCodes": list(node.validation_issue_codes),
            "createdAt": node.created_at,
            "provider": node.provider,
            "model": node.model,
            "tokens": estimate_text_tokens(node.content),
            "sourceEntryCount": len(node.source_entry_ids),
            "childIds": list(node.child_ids),
            "piEntryId": node.pi_entry_id,
            "firstKeptEntryId": node.first_kept_entry_id,
            "reason": node.reason,
            "role": roles[node.summary_id],
        }
        for node in nodes
    ]
    roots = [
        {"summaryId": node.summary_id, "role": roles[node.summary_id]}
        for node in nodes
        if (roles[node.summary_id] in ("active-root", "past-head", "alternate-branch"))
        or (node.lifecycle != "committed" and node.summary_id not in has_parent)
    ]
    roots.sort(key=lambda root: _ROOT_ORDER.get(root["role"], len(_ROOT_ORDER)))
    counts: dict[str, int] = {
        "nodes": len(nodes),
        "committed": sum(1 for n in nodes if n.lifecycle == "committed"),
        "prepared": sum(1 for n in nodes if n.lifecycle == "prepared"),
        "failed": sum(1 for n in nodes if n.lifecycle == "failed"),
        "roots": len(roots),
    }
    for role in ROLES[:5]:  # "prepared" / "failed" are the lifecycle counts above
        counts[role] = sum(1 for r in roles.values() if r == role)
    view: dict[str, Any] = {
        "sessionId": session_id,
        "sessionFile": session_file,
        "leafId": leaf_id,
        "activeRootId": active_root_id,
        "nodes": view_nodes,
        "roots": roots,
        "counts": counts,
    }
    view["tree"] = render_tree(view)
    return view


def _one_line(value: Any) -> str:
    """`value` as text safe on one terminal line (`quoting.terminal_text`: controls, line and
    paragraph separators, bidi controls and lone surrogates escaped visibly)."""
    return terminal_text(value)


def _node_line(node: Mapping[str, Any], depth: int, shared: bool) -> str:
    marker = "* " if node.get("role") in _ACTIVE_ROLES else "  "
    if depth <= MAX_INDENT_DEPTH:
        indent = "  " * depth
    else:
        indent = "  " * MAX_INDENT_DEPTH + f"[+{depth - MAX_INDENT_DEPTH}] "
    text = _one_line(
        f"{node.get('summaryId')} {node.get('kind')} L{node.get('level')} "
        f"{node.get('lifecycle')} {node.get('validationStatus')} {node.get('tokens')} tok"
    )
    notes = []
    label = _ROLE_LABELS.get(str(node.get("role")))
    if label and depth == 0:
        notes.append(label)
    if shared:
        notes.append("see above")
    suffix = "".join(f" ({note})" for note in notes)
    return f"{marker}{indent}{text}{suffix}"


def _tree_roots(view: Mapping[str, Any], by_id: Mapping[str, Mapping[str, Any]]) -> list[str]:
    roots: Iterable[Any] = view.get("roots") or ()
    ordered = [
        root["summaryId"]
        for root in sorted(
            (r for r in roots if isinstance(r, Mapping) and r.get("summaryId") in by_id),
            key=lambda r: _ROOT_ORDER.get(str(r.get("role")), len(_ROOT_ORDER)),
        )
    ]
    return list(dict.fromkeys(ordered))


def render_tree(view: Mapping[str, Any]) -> str:
    """The graph of `view` (from `graph_view`) as an indented text tree.

    One tree per root: the active root first, then past heads, alternate branches, and the
    tops of prepared/failed operations; children in child order, indented two spaces per level
    (at most `MAX_INDENT_DEPTH` levels, deeper ones marked `[+n]`). Each line reads
    `<mark><id> <kind> L<level> <lifecycle> <validation> <tokens> tok (<root role>)`, where the
    mark is `* ` for the active root and every node it summarizes and two spaces otherwise. A
    node reachable twice is drawn once; later occurrences say `(see above)` and are not
    expanded. A legend line comes first. Control characters and line separators in any field
    are drawn as U+FFFD, so every node is exactly one line. Iterative, so a 1,000-level chain is fine. Nodes not
    reached from any listed root (a view without `roots`, or corrupt data) are drawn as extra
    roots, parentless ones first.
    """
    nodes = [n for n in view.get("nodes") or () if isinstance(n, Mapping)]
    if not nodes:
        return "no summaries"
    by_id: dict[str, Mapping[str, Any]] = {}
    for item in nodes:
        by_id.setdefault(str(item.get("summaryId")), item)
    child_set = {str(c) for item in nodes for c in item.get("childIds") or ()}
    parentless = [node_id for node_id in by_id if node_id not in child_set]
    lines = [LEGEND]
    drawn: set[str] = set()
    starts = _tree_roots(view, by_id) + parentless + list(by_id)
    for start in starts:
        if start in drawn:
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        while stack:
            node_id, depth = stack.pop()
            node = by_id.get(node_id)
            if node is None:
                continue
            if node_id in drawn:
                lines.append(_node_line(node, depth, shared=True))
                continue
            drawn.add(node_id)
            lines.append(_node_line(node, depth, shared=False))
            child_ids = [str(c) for c in node.get("childIds") or () if str(c) in by_id]
            stack.extend((child, depth + 1) for child in reversed(child_ids))
    return "\n".join(lines)


_XML_UNSAFE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def _html_text(value: Any) -> str:
    """`value` as text inside a Graphviz HTML-like label: XML-escaped (backslashes too, since
    Graphviz treats them as escapes elsewhere), characters XML cannot hold replaced by U+FFFD."""
    text = _XML_UNSAFE.sub("\ufffd", str(value))
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("\\", "&#92;")
        .replace("\r\n", "<BR/>")
        .replace("\n", "<BR/>")
        .replace("\r", "<BR/>")
        .replace("\t", " ")
    )


def _dot_string(value: Any) -> str:
    """`value` as a double-quoted DOT string (`"` and `\\` escaped, line breaks as `\\n`,
    other control characters dropped); used for plain attribute values."""
    text = _XML_UNSAFE.sub("", str(value).replace("\r\n", "\n").replace("\r", "\n"))
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


class EntrySpan(NamedTuple):
    """The Pi entries a summary node covers (`entry_spans`)."""

    first: str
    """The first entry id ds4 knows the node covers."""
    last: str
    """The last entry id it covers."""
    entry_count: int
    """How many entries from `first` to `last` it covers (direct sources, added up)."""
    earlier: bool = False
    """True when the node also covers entries before `first` that ds4 has no list of: an
    aggregate over an imported Pi-native summary (which lists no sources), at any depth."""


def entry_spans(nodes: Sequence[SummaryNode]) -> dict[str, EntrySpan]:
    """The Pi entries each node covers: `{summaryId: EntrySpan(first, last, entry_count, earlier)}`.

    A segment or branch node covers its direct `source_entry_ids` (in span order); an
    aggregate covers its children's spans, first child's first to last child's last, with the
    counts added. A child among `nodes` without a span (an imported Pi-native summary, which
    covers what precedes its kept entry) or with `earlier` set makes the aggregate's span
    `earlier` (open at the start: child order is chronological, and such a summary is always
    the previous root, child 0). Children outside `nodes` and nodes that cover nothing are left
    out (so an aggregate over missing children has no span). Iterative: a 1000-level chain is
    fine.
    """
    by_id = {node.summary_id: node for node in nodes}
    spans: dict[str, EntrySpan] = {}
    done: set[str] = set()
    for start in by_id:
        stack: list[tuple[str, bool]] = [(start, False)]
        while stack:
            summary_id, expanded = stack.pop()
            node = by_id.get(summary_id)
            if node is None or (summary_id in done and not expanded):
                continue
            if node.source_entry_ids:
                sources = node.source_entry_ids
                spans[summary_id] = EntrySpan(sources[0], sources[-1], len(sources))
                done.add(summary_id)
            elif not expanded:
                stack.append((summary_id, True))
                stack.extend((child, False) for child in node.child_ids if child not in done)
                done.add(summary_id)  # a cycle (never stored) cannot loop forever
            else:
                parts = [spans[c] for c in node.child_ids if c in spans]
                if parts:
                    earlier = any(
                        c in by_id and (c not in spans or spans[c].earlier) for c in node.child_ids
                    )
                    count = sum(p.entry_count for p in parts)
                    spans[summary_id] = EntrySpan(parts[0].first, parts[-1].last, count, earlier)
    return spans


def _span_text(span: EntrySpan | None, first_kept: Any) -> str:
    if span is None:
        # An imported Pi-native summary lists no sources: it covers what precedes its kept entry.
        return f"entries before {_one_line(first_kept)}" if first_kept else "entries: none known"
    first, last, count, earlier = span
    if earlier:  # also entries before `first` that ds4 has no list of
        known = _one_line(first) if count == 1 else f"{_one_line(first)} .. {_one_line(last)}"
        return f"entries \u2026 {known} ({count}+)"
    if count == 1:
        return f"entry {_one_line(first)}"
    return f"entries {_one_line(first)} .. {_one_line(last)} ({count})"


DOT_LEGEND: tuple[str, ...] = (
    "filled, bold: the active root and what it summarizes (bold edges between them)",
    "dotted: prepared (not committed yet); dashed: failed; edge label: child order",
    "past-head: an earlier root the branch moved past; alternate-branch: another branch's root",
    "inner: summarized by a node off the active path",
    "entries \u2026 a .. b (n+): also entries before a (an imported Pi summary lists none)",
)
"""The lines of the legend under the title of `render_dot`'s picture."""


def _dot_title(view: Mapping[str, Any]) -> str:
    """The graph label: the session and leaf on one line each escaped like entry ids, then the
    legend (`DOT_LEGEND`) in a smaller font, left-aligned."""
    title = f"ds4 summary graph of session {_one_line(view.get('sessionId'))}"
    if view.get("leafId") is not None:
        title += f", leaf {_one_line(view.get('leafId'))}"
    legend = "".join(f'{_html_text(line)}<BR ALIGN="LEFT"/>' for line in DOT_LEGEND)
    return f'{_html_text(title)}<BR/><FONT POINT-SIZE="10">{legend}</FONT>'


def render_dot(view: Mapping[str, Any], spans: Mapping[str, EntrySpan] | None = None) -> str:
    """The graph of `view` (from `graph_view`) as a Graphviz DOT `digraph`.

    One node per summary, named `n0`, `n1`, ... in view order (safe identifiers whatever the
    summary ids hold), with an HTML-like label of five lines: its id; kind, level and
    estimated tokens (`segment L0, 812 tok`); the entry span from `spans` (`entry_spans`;
    `entries <first> .. <last> (<count>)`, `entries \u2026 <first> .. <last> (<count>+)` when
    it also covers earlier entries ds4 has no list of; without one `entries before
    <firstKeptEntryId>`, or "entries: none known"); lifecycle and validation; role
    (`active-root`, `active`, ...). Every text is XML-escaped (backslashes
    too), characters XML cannot hold become U+FFFD, so any id or session text yields one
    well-formed graph. Nodes of the active path are bold and filled, as are the edges between
    two of them (the path from the active root down); failed nodes are dashed, prepared ones
    dotted. Edges run parent -> child, labelled with the child order; edges to children
    outside the view are left out. The graph label names the session and the leaf (escaped
    visibly like entry ids: `quoting.terminal_text`) above a legend (`DOT_LEGEND`).
    """
    spans = spans or {}
    nodes = [n for n in view.get("nodes") or () if isinstance(n, Mapping)]
    names: dict[str, str] = {}
    for node in nodes:
        names.setdefault(str(node.get("summaryId")), f"n{len(names)}")
    lines = [
        "digraph summaries {",
        f"  graph [rankdir=TB, labelloc=t, label=<{_dot_title(view)}>];",
        '  node [shape=box, fontname="monospace"];',
        '  edge [fontname="monospace"];',
    ]
    emitted: set[str] = set()
    active: set[str] = set()
    for node in nodes:
        summary_id = str(node.get("summaryId"))
        if summary_id in emitted:
            continue
        emitted.add(summary_id)
        role = str(node.get("role"))
        label = "<BR/>".join(
            _html_text(part)
            for part in (
                summary_id,
                f"{node.get('kind')} L{node.get('level')}, {node.get('tokens')} tok",
                _span_text(spans.get(summary_id), node.get("firstKeptEntryId")),
                f"{node.get('lifecycle')} {node.get('validationStatus')}",
                role,
            )
        )
        attributes = [f"label=<{label}>"]
        if role in _ACTIVE_ROLES:
            active.add(summary_id)
            attributes += ['style="bold,filled"', 'fillcolor="lightyellow"']
        elif node.get("lifecycle") == "failed":
            attributes.append('style="dashed"')
        elif node.get("lifecycle") == "prepared":
            attributes.append('style="dotted"')
        lines.append(f"  {names[summary_id]} [{', '.join(attributes)}];")
    drawn: set[str] = set()
    for node in nodes:
        summary_id = str(node.get("summaryId"))
        if summary_id in drawn:
            continue
        drawn.add(summary_id)
        parent = names[summary_id]
        for order, child in enumerate(node.get("childIds") or ()):
            child_name = names.get(str(child))
            if child_name is None:
                continue
            style = ', style="bold"' if summary_id in active and str(child) in active else ""
            lines.append(f"  {parent} -> {child_name} [label={_dot_string(order)}{style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = [
    "DOT_LEGEND",
    "LEGEND",
    "MAX_INDENT_DEPTH",
    "ROLES",
    "EntrySpan",
    "entry_spans",
    "graph_view",
    "render_dot",
    "render_tree",
]
