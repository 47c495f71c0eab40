"""Views of the summary graph: roles, the text tree and Graphviz DOT (docs/compaction.md "Graph
rules"; the `ds4.summaries` command and `ds4 summaries --json`)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.compaction.nodes import SummaryNode
from ds4_core.compaction.render import (
    DOT_LEGEND,
    LEGEND,
    MAX_INDENT_DEPTH,
    EntrySpan,
    entry_spans,
    graph_view,
    render_dot,
    render_tree,
)
from ds4_core.quoting import terminal_text
from ds4_core.tokens import estimate_text_tokens

SESSION = "sess-r"


def node(
    summary_id: str,
    kind: str = "segment",
    children: tuple[str, ...] = (),
    *,
    level: int = 0,
    lifecycle: str = "committed",
    pi_entry_id: str | None = None,
    content: str | None = None,
) -> SummaryNode:
    return SummaryNode(
        summary_id=summary_id,
        session_id=SESSION,
        kind=kind,  # type: ignore[arg-type]
        content=content if content is not None else f"SECRET CONTENT OF {summary_id} " * 3,
        source_hash="h",
        graph_level=level,
        created_at="2026-01-01T00:00:00.000Z",
        validation_status="valid",
        lifecycle=lifecycle,  # type: ignore[arg-type]
        pi_entry_id=pi_entry_id,
        operation_id=summary_id,
        source_entry_ids=("e1", "e2") if kind != "aggregate" else (),
        child_ids=children,
    )


def every_role_graph() -> list[SummaryNode]:
    """Main line s0 -> a1, a Pi-native compaction pn, then a3 = agg[pn, s3] (the active root);
    another branch b1 = agg[s0, t1]; a pending a4 = agg[a3, s4]; a failed f5."""
    return [
        node("s0", pi_entry_id="p0"),
        node("s1"),
        node("a1", "aggregate", ("s0", "s1"), level=1, pi_entry_id="p1"),
        node("t1"),
        node("b1", "aggregate", ("s0", "t1"), level=1, pi_entry_id="q1"),
        node("pn", "branch", pi_entry_id="pn"),
        node("s3"),
        node("a3", "aggregate", ("pn", "s3"), level=1, pi_entry_id="p3"),
        node("s4", lifecycle="prepared"),
        node("a4", "aggregate", ("a3", "s4"), level=2, lifecycle="prepared"),
        node("f5", lifecycle="failed"),
    ]


def view_of(nodes: list[SummaryNode], active_root_id: str | None = "a3") -> dict[str, Any]:
    return graph_view(
        nodes,
        active_root_id=active_root_id,
        active_path_entry_ids=["p0", "p1", "pn", "p3", "leaf"],
        session_id=SESSION,
        session_file="/s/sess-r.jsonl",
        leaf_id="leaf",
    )


def test_every_node_gets_its_role() -> None:
    view = view_of(every_role_graph())
    roles = {n["summaryId"]: n["role"] for n in view["nodes"]}
    assert roles == {
        "a3": "active-root",
        "pn": "active",
        "s3": "active",
        "a1": "past-head",
        "s0": "inner",
        "s1": "inner",
        "t1": "inner",
        "b1": "alternate-branch",
        "s4": "prepared",
        "a4": "prepared",
        "f5": "failed",
    }
    assert view["roots"] == [
        {"summaryId": "a3", "role": "active-root"},
        {"summaryId": "a1", "role": "past-head"},
        {"summaryId": "b1", "role": "alternate-branch"},
        {"summaryId": "a4", "role": "prepared"},
        {"summaryId": "f5", "role": "failed"},
    ]
    assert view["activeRootId"] == "a3" and view["leafId"] == "leaf"
    assert view["sessionFile"] == "/s/sess-r.jsonl" and view["sessionId"] == SESSION
    assert view["counts"] == {
        "nodes": 11,
        "committed": 8,
        "prepared": 2,
        "failed": 1,
        "roots": 5,
        "active-root": 1,
        "active": 2,
        "past-head": 1,
        "alternate-branch": 1,
        "inner": 3,
    }


def test_the_view_carries_no_summary_text_but_its_token_estimate() -> None:
    nodes = every_role_graph()
    view = view_of(nodes)
    assert "SECRET CONTENT" not in json.dumps(view)
    a3 = next(n for n in view["nodes"] if n["summaryId"] == "a3")
    assert a3 == {
        "summaryId": "a3",
        "kind": "aggregate",
        "level": 1,
        "lifecycle": "committed",
        "validationStatus": "valid",
        "validationIssueCodes": [],
        "createdAt": "2026-01-01T00:00:00.000Z",
        "provider": None,
        "model": None,
        "tokens": estimate_text_tokens(nodes[7].content),
        "sourceEntryCount": 0,
        "childIds": ["pn", "s3"],
        "piEntryId": "p3",
        "firstKeptEntryId": None,
        "reason": None,
        "role": "active-root",
    }


def test_without_an_active_root_every_committed_root_is_a_branch_or_past_head() -> None:
    roles = {n["summaryId"]: n["role"] for n in view_of(every_role_graph(), None)["nodes"]}
    assert roles["a3"] == "past-head" and roles["pn"] == "inner"
    unknown = view_of(every_role_graph(), "not-a-node")
    assert unknown["activeRootId"] is None


def test_the_tree_starts_from_the_active_root_and_marks_its_path() -> None:
    nodes = every_role_graph()
    tok = estimate_text_tokens(nodes[0].content)
    agg_tok = estimate_text_tokens(nodes[2].content)
    tree = view_of(nodes)["tree"]
    assert tree.splitlines() == [
        LEGEND,
        f"* a3 aggregate L1 committed valid {agg_tok} tok (active root)",
        f"*   pn branch L0 committed valid {tok} tok",
        f"*   s3 segment L0 committed valid {tok} tok",
        f"  a1 aggregate L1 committed valid {agg_tok} tok (past head)",
        f"    s0 segment L0 committed valid {tok} tok",
        f"    s1 segment L0 committed valid {tok} tok",
        f"  b1 aggregate L1 committed valid {agg_tok} tok (alternate branch)",
        f"    s0 segment L0 committed valid {tok} tok (see above)",
        f"    t1 segment L0 committed valid {tok} tok",
        f"  a4 aggregate L2 prepared valid {agg_tok} tok",
        f"*   a3 aggregate L1 committed valid {agg_tok} tok (see above)",
        f"    s4 segment L0 prepared valid {tok} tok",
        f"  f5 segment L0 failed valid {tok} tok",
    ]
    assert render_tree(view_of([])) == "no summaries"


def chain(levels: int) -> list[SummaryNode]:
    nodes = [node("s-0", pi_entry_id="p-0")]
    previous = "s-0"
    for index in range(1, levels + 1):
        nodes.append(node(f"s-{index}"))
        nodes.append(
            node(
                f"a-{index}",
                "aggregate",
                (previous, f"s-{index}"),
                level=index,
                pi_entry_id=f"p-{index}",
            )
        )
        previous = f"a-{index}"
    return nodes


def test_a_thousand_level_chain_renders_without_recursion_and_bounded_indentation() -> None:
    nodes = chain(1000)
    view = view_of(nodes, "a-1000")
    lines = view["tree"].splitlines()[1:]
    assert len(lines) == len(nodes) == 2001
    assert all(line.startswith("* ") for line in lines)
    assert lines[0].startswith("* a-1000 aggregate L1000")
    assert max(len(line) for line in lines) < 2 * MAX_INDENT_DEPTH + 100
    assert "[+968] " in view["tree"]  # depth 1000 is drawn at the cap with its depth marked
    assert view["counts"]["active"] == 2000
    dot = render_dot(view)
    assert dot.count(" -> ") == 2000


def parse_dot(text: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, str, dict[str, str]]]]:
    """A small DOT parser for the subset render_dot writes (Graphviz is not installed here):
    returns ({node: attributes}, [(tail, head, attributes)]); raises AssertionError on any
    syntax error, unbalanced HTML string or unterminated quoted string."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif text.startswith("->", i):
            tokens.append(("op", "->"))
            i += 2
        elif ch in "{}[]=;,":
            tokens.append(("op", ch))
            i += 1
        elif ch == '"':
            match = re.compile(r'"((?:\\.|[^"\\])*)"', re.S).match(text, i)
            assert match, f"unterminated quoted string at {i}"
            tokens.append(("id", match.group(1)))
            i = match.end()
        elif ch == "<":
            depth, j = 0, i
            while True:
                assert j < len(text), "unterminated HTML string"
                depth += {"<": 1, ">": -1}.get(text[j], 0)
                j += 1
                if depth == 0:
                    break
            tokens.append(("html", text[i + 1 : j - 1]))
            i = j
        else:
            match = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|-?(?:\d+\.?\d*|\.\d+)").match(text, i)
            assert match, f"unexpected character {ch!r} at {i}"
            tokens.append(("id", match.group(0)))
            i = match.end()
    pos = 0

    def take(kind: str | None = None, value: str | None = None) -> tuple[str, str]:
        nonlocal pos
        assert pos < len(tokens), "unexpected end"
        token = tokens[pos]
        assert kind is None or token[0] == kind, f"expected {kind}, got {token}"
        assert value is None or token[1] == value, f"expected {value!r}, got {token}"
        pos += 1
        return token

    def attributes() -> dict[str, str]:
        result: dict[str, str] = {}
        if pos < len(tokens) and tokens[pos] == ("op", "["):
            take()
            while tokens[pos] != ("op", "]"):
                key = take("id")[1]
                take("op", "=")
                kind, value = take()
                assert kind in ("id", "html")
                if kind == "html":
                    ET.fromstring(f"<x>{value}</x>")  # a well-formed HTML-like label
                result[key] = value
                if tokens[pos] in (("op", ","), ("op", ";")):
                    take()
            take("op", "]")
        return result

    take("id", "digraph")
    if tokens[pos][0] == "id":
        take("id")
    take("op", "{")
    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str, dict[str, str]]] = []
    while tokens[pos] != ("op", "}"):
        name = take("id")[1]
        if tokens[pos] == ("op", "->"):
            take()
            head = take("id")[1]
            edges.append((name, head, attributes()))
        else:
            attrs = attributes()
            if name not in ("graph", "node", "edge"):
                nodes[name] = attrs
        if tokens[pos] == ("op", ";"):
            take()
    take("op", "}")
    assert pos == len(tokens), "text after the graph"
    return nodes, edges


def label_text(html: str) -> str:
    root = ET.fromstring(f"<x>{html.replace('<BR/>', chr(10))}</x>")
    return "".join(root.itertext())


def test_dot_has_one_styled_node_per_summary_and_ordered_edges() -> None:
    view = view_of(every_role_graph())
    nodes, edges = parse_dot(render_dot(view))
    ids = {label_text(attrs["label"]).splitlines()[0]: name for name, attrs in nodes.items()}
    assert set(ids) == {n["summaryId"] for n in view["nodes"]}
    assert nodes[ids["a3"]]["style"] == "bold,filled"
    assert nodes[ids["s3"]]["style"] == "bold,filled"
    assert nodes[ids["f5"]]["style"] == "dashed"
    assert "style" not in nodes[ids["a1"]]
    a4_tokens = next(n["tokens"] for n in view["nodes"] if n["summaryId"] == "a4")
    assert label_text(nodes[ids["a4"]]["label"]).splitlines() == [
        "a4",
        f"aggregate L2, {a4_tokens} tok",
        "entries: none known",  # no spans given
        "prepared valid",
        "prepared",
    ]
    # The active path: a3 (active root) -> pn, s3 (active) edges are bold, the others plain.
    assert (ids["a3"], ids["pn"], {"label": "0", "style": "bold"}) in edges
    assert (ids["a3"], ids["s3"], {"label": "1", "style": "bold"}) in edges
    assert (ids["a4"], ids["a3"], {"label": "0"}) in edges
    assert sum(1 for edge in edges if edge[2].get("style") == "bold") == 2
    assert len(edges) == 8


def spanned_graph() -> list[SummaryNode]:
    """every_role_graph with distinct entry spans: s0 covers e1..e3, s1 e4..e5, pn one entry."""
    sources = {"s0": ("e1", "e2", "e3"), "s1": ("e4", "e5"), "pn": ("p-x",), "s3": ("e6", "e7")}
    return [
        replace(n, source_entry_ids=sources.get(n.summary_id, n.source_entry_ids))
        for n in every_role_graph()
    ]


def test_entry_spans_of_segments_and_aggregates() -> None:
    spans = entry_spans(spanned_graph())
    assert spans["s0"] == EntrySpan("e1", "e3", 3)
    assert spans["a1"] == EntrySpan("e1", "e5", 5)  # first child's first .. last child's last
    assert spans["pn"] == EntrySpan("p-x", "p-x", 1)
    assert spans["a3"] == EntrySpan("p-x", "e7", 3)
    assert spans["a4"] == EntrySpan("p-x", "e2", 5)  # over a3 (3) and s4 (e1, e2)
    assert not any(span.earlier for span in spans.values())
    orphan = node("o", "aggregate", ("missing",), level=1)
    assert "o" not in entry_spans([orphan])


def test_entry_spans_of_a_thousand_level_chain_without_recursion() -> None:
    spans = entry_spans(chain(1000))
    assert spans["a-1000"].entry_count == 2 * 1001


def imported_then_compacted() -> list[SummaryNode]:
    """An imported Pi-native summary pi-1 (no sources, kept entry e3), then ds4's segment s1
    over e3, e4 and the aggregate a1 = agg[pi-1, s1]; a2 = agg[a1, s2] one compaction later."""
    imported = replace(node("pi-1", "branch"), source_entry_ids=(), first_kept_entry_id="e3")
    return [
        imported,
        replace(node("s1"), source_entry_ids=("e3", "e4")),
        node("a1", "aggregate", ("pi-1", "s1"), level=1),
        replace(node("s2"), source_entry_ids=("e5",)),
        node("a2", "aggregate", ("a1", "s2"), level=2),
    ]


def test_an_aggregate_over_an_imported_summary_is_open_at_the_start() -> None:
    graph = imported_then_compacted()
    spans = entry_spans(graph)
    assert "pi-1" not in spans
    assert spans["s1"] == EntrySpan("e3", "e4", 2)
    assert spans["a1"] == EntrySpan("e3", "e4", 2, earlier=True)
    assert spans["a2"] == EntrySpan("e3", "e5", 3, earlier=True)  # inherited from a1
    nodes, _edges = parse_dot(render_dot(view_of(graph, "a2"), spans))
    span_lines = {
        label_text(a["label"]).split("\n")[0]: label_text(a["label"]).split("\n")[2]
        for a in nodes.values()
    }
    assert span_lines == {
        "pi-1": "entries before e3",
        "s1": "entries e3 .. e4 (2)",
        "a1": "entries \u2026 e3 .. e4 (2+)",
        "a2": "entries \u2026 e3 .. e5 (3+)",
        "s2": "entry e5",
    }
    lone = [graph[0], graph[3], node("a3", "aggregate", ("pi-1", "s2"), level=1)]
    assert entry_spans(lone)["a3"] == EntrySpan("e5", "e5", 1, earlier=True)
    nodes, _edges = parse_dot(render_dot(view_of(lone, "a3"), entry_spans(lone)))
    assert "entries \u2026 e5 (1+)" in {
        label_text(a["label"]).split("\n")[2] for a in nodes.values()
    }


def test_dot_labels_name_kind_level_tokens_span_and_status() -> None:
    graph = spanned_graph()
    view = view_of(graph)
    nodes, _edges = parse_dot(render_dot(view, entry_spans(graph)))
    labels = {
        label_text(a["label"]).splitlines()[0]: label_text(a["label"]) for a in nodes.values()
    }
    tokens = {n["summaryId"]: n["tokens"] for n in view["nodes"]}
    assert labels["a3"].splitlines() == [
        "a3",
        f"aggregate L1, {tokens['a3']} tok",
        "entries p-x .. e7 (3)",
        "committed valid",
        "active-root",
    ]
    assert labels["pn"].splitlines()[2] == "entry p-x"
    assert labels["f5"].splitlines()[3:] == ["failed valid", "failed"]


WEIRD = [
    'quote"inside',
    "back\\slash\\",
    "<b>&amp; html</b>",
    "new\nline\r\nand\rcr",
    "ctl\x00\x01\x1b\x7f",
    "lone\ud800surrogate",
    "]; digraph x { a -> b }",
    "tab\tand ünïcødé ✓",
]


@pytest.mark.parametrize("weird", WEIRD)
def test_dot_escapes_any_id_and_session_text(weird: str) -> None:
    nodes = [node(weird + "-child"), node(weird, "aggregate", (weird + "-child",), level=1)]
    view = graph_view(
        nodes,
        active_root_id=weird,
        active_path_entry_ids=(),
        session_id=weird,
        session_file=None,
        leaf_id=None,
    )
    dot = render_dot(view)
    parsed_nodes, edges = parse_dot(dot)
    assert len(parsed_nodes) == 2 and len(edges) == 1
    first_lines = {label_text(a["label"]).split("\n")[0] for a in parsed_nodes.values()}
    if (
        "\n" not in weird
        and "\r" not in weird
        and not re.search(r"[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]", weird)
    ):
        assert weird.replace("\t", " ") in first_lines  # a tab is drawn as a space


def chain_view(
    ids: list[str], session: str, sources: tuple[str, ...] = ("e1", "e2")
) -> tuple[list[SummaryNode], dict[str, Any]]:
    """A chain ids[-1] -> ... -> ids[0] (a segment over `sources`), ids[-1] the active root."""
    nodes = [replace(node(ids[0]), source_entry_ids=sources)] + [
        node(summary_id, "aggregate", (ids[index],), level=index + 1)
        for index, summary_id in enumerate(ids[1:])
    ]
    view = graph_view(
        nodes,
        active_root_id=ids[-1],
        active_path_entry_ids=(),
        session_id=session,
        session_file=None,
        leaf_id=None,
    )
    return nodes, view


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6, unique=True), st.text())
def test_dot_is_always_parseable(ids: list[str], session: str) -> None:
    _nodes, view = chain_view(ids, session)
    parsed_nodes, edges = parse_dot(render_dot(view))
    assert len(parsed_nodes) == len(ids) and len(edges) == len(ids) - 1
    assert len(view["tree"].splitlines()) == len(ids) + 1


HOSTILE = st.text(
    st.sampled_from(
        ['"', "\\", "\n", "\r", "<", ">", "&", "]", ";", "{", "}", "-", "x", "\x00", "\ud800", "é"]
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(HOSTILE, min_size=1, max_size=5, unique=True),
    st.lists(HOSTILE, min_size=1, max_size=4),
    HOSTILE,
)
def test_dot_with_hostile_ids_and_entry_spans_is_one_graph(
    ids: list[str], entries: list[str], session: str
) -> None:
    """Quotes, backslashes, newlines, markup and controls in summary ids, entry ids and the
    session id: the output is always exactly one well-formed digraph with every node."""
    nodes, view = chain_view(ids, session, tuple(entries))
    dot = render_dot(view, entry_spans(nodes))
    assert dot.count("digraph") == 1  # the alphabet cannot spell it: one graph, not two
    parsed_nodes, edges = parse_dot(dot)
    assert len(parsed_nodes) == len(ids) and len(edges) == len(ids) - 1
    assert all(len(label_text(a["label"]).split("\n")) >= 5 for a in parsed_nodes.values())
    assert all(edge[2].get("style") == "bold" for edge in edges)  # the whole chain is active


@pytest.mark.parametrize("weird", WEIRD)
def test_an_imported_summary_without_sources_names_its_kept_entry(weird: str) -> None:
    imported = replace(node("pi-1", "branch"), source_entry_ids=(), first_kept_entry_id=weird)
    view = view_of([imported, node("bare", "aggregate", ("gone",), level=1)], None)
    nodes, _edges = parse_dot(render_dot(view, entry_spans([imported])))
    spans = sorted(label_text(a["label"]).split("\n")[2] for a in nodes.values())
    assert spans[0] == "entries before " + terminal_text(weird).replace("\t", " ")
    assert spans[1] == "entries: none known"


def graph_label_lines(dot: str) -> list[str]:
    """The text lines of the graph label (title, then legend) of a `render_dot` output."""
    match = re.search(r"^  graph \[.*, label=<(.*)>\];$", dot, re.M)
    assert match, dot
    html = re.sub(r"<BR(?: ALIGN=\"LEFT\")?/>", "\n", match.group(1))
    root = ET.fromstring(f"<x>{html}</x>")  # well-formed
    return "".join(root.itertext()).rstrip("\n").split("\n")


def test_dot_title_names_session_and_leaf_and_a_legend_follows() -> None:
    lines = graph_label_lines(render_dot(view_of(every_role_graph())))
    assert lines == [f"ds4 summary graph of session {SESSION}, leaf leaf", *DOT_LEGEND]
    legend = " ".join(DOT_LEGEND)
    for word in ("filled", "bold", "dotted", "dashed", "past-head", "inner", "(n+)"):
        assert word in legend


@pytest.mark.parametrize("weird", WEIRD + ["abc\u202egpj.exe", "bidi\u2066x\u2069 \u2028ls"])
def test_dot_title_escapes_session_and_leaf_like_entry_ids(weird: str) -> None:
    view = graph_view(
        [node("s0")],
        active_root_id="s0",
        active_path_entry_ids=(),
        session_id=weird,
        session_file=None,
        leaf_id=weird + "-leaf",
    )
    dot = render_dot(view)
    parse_dot(dot)
    title = graph_label_lines(dot)[0]
    shown = terminal_text(weird).replace("\t", " ")
    assert title == f"ds4 summary graph of session {shown}, leaf {shown}-leaf"
    assert not re.search(r"[\x00-\x1f\u2028\u2029\u202a-\u202e\u2066-\u2069]", title)
