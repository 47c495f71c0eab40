"""No import circle in `ds4_lsp` or `ds4_core`: the import graph, read from the sources with
`ast`, has no cycle, and a failure names each cycle (`a -> b -> a`). The same graph checks the
LSP layers: only `ds4_lsp.app` imports the handlers.

What counts as an import:

* every `import` and `from ... import` statement, at module level or inside a function (a lazy
  import still ties the two modules: it runs on first use, and a circle through it breaks the
  layering even when it does not break start-up);
* relative imports resolved against the importing module's package; `from pkg import name`
  is an edge to `pkg.name` when that is a module, else to `pkg` itself;
* only edges between modules of the two packages (third-party imports are not followed).

Imports under `if TYPE_CHECKING:` are counted separately: they never run, so they cannot leave a
module half initialized, and they are how a part names the type of the object that owns it
(a service annotated with `Ds4Server`, which creates it). Counting them as imports would force
either a copy of the owner's interface (a `Protocol` to keep in step) or `Any` annotations. The
run-time graph must have no cycle at all; a cycle that needs a type-only edge is allowed only
when that edge names one of `TYPE_ONLY_OWNERS`, so no other back reference creeps in unseen.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import ds4_core
import ds4_lsp

PACKAGES = (Path(ds4_lsp.__file__).parent, Path(ds4_core.__file__).parent)

TYPE_ONLY_OWNERS = frozenset({"ds4_lsp.server"})
"""Modules a type-only import may point back to: the owner whose parts are annotated with its
type (`Ds4Server` creates `ProjectSync`, the stale-snippet diagnostics read its state)."""


@dataclass(frozen=True)
class Edge:
    """`source` imports `target` at `line`; `type_only` when under `if TYPE_CHECKING:`."""

    source: str
    target: str
    line: int
    type_only: bool


def module_files() -> dict[str, Path]:
    """Every module of the two packages by dotted name (`ds4_lsp.handlers.plan`)."""
    modules: dict[str, Path] = {}
    for root in PACKAGES:
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def is_type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING` or `typing.TYPE_CHECKING`."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def imports(tree: ast.AST, type_only: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every import statement under `tree` (functions and classes included), with whether it
    sits in the body of an `if TYPE_CHECKING:` (its `else` runs, so it counts as run time)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, type_only
        elif isinstance(node, ast.If) and is_type_checking(node.test):
            for child in node.body:
                yield from imports(ast.Module(body=[child], type_ignores=[]), True)
            for child in node.orelse:
                yield from imports(ast.Module(body=[child], type_ignores=[]), type_only)
        else:
            yield from imports(node, type_only)


def package_of(module: str, path: Path) -> str:
    """The package a relative import in `module` starts from."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def targets(node: ast.AST, module: str, path: Path, known: set[str]) -> list[str]:
    """The modules of `known` that one import statement loads by name."""
    found: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.name
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.append(name)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = package_of(module, path)
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            base = f"{base}.{node.module}" if node.module else base
        else:
            base = node.module or ""
        for alias in node.names:
            if f"{base}.{alias.name}" in known:
                found.append(f"{base}.{alias.name}")
            elif base in known:
                found.append(base)
    return found


def import_edges() -> list[Edge]:
    """The import graph of `ds4_lsp` and `ds4_core` (self-imports left out)."""
    modules = module_files()
    known = set(modules)
    edges: list[Edge] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, type_only in imports(tree):
            for target in targets(node, module, path, known):
                if target != module:
                    line = getattr(node, "lineno", 0)
                    edges.append(Edge(module, target, line, type_only))
    return edges


def cycles(edges: list[Edge]) -> list[tuple[list[str], set[str]]]:
    """One cycle per strongly connected component of more than one module (Tarjan), as the
    list of its modules from the component's smallest name round to it again, with the whole
    component (every module that lies on some cycle with it)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [(shortest_cycle(graph, component), component) for component in components]


def shortest_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the smallest module of `component` (breadth first)."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if nxt not in parents:
                    parents[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle in component {sorted(component)}")


def describe(found: tuple[list[str], set[str]], edges: list[Edge]) -> str:
    """`a (line 12) -> b (line 3) -> a`, the line of each import, and the other modules of the
    component when there are more."""
    cycle, component = found
    lines = {(e.source, e.target): e.line for e in edges}
    steps = [f"{a} (line {lines[(a, b)]})" for a, b in zip(cycle, cycle[1:], strict=False)]
    text = " -> ".join([*steps, cycle[-1]])
    others = sorted(component - set(cycle))
    return f"{text}; also in this circle: {', '.join(others)}" if others else text


def test_the_graph_sees_lazy_relative_and_type_only_imports() -> None:
    """The parser itself: a function-level import, a relative one and a type-only one."""
    edges = {(e.source, e.target, e.type_only) for e in import_edges()}
    assert ("ds4_lsp.app", "ds4_lsp.handlers.plan", False) in edges  # from a package
    assert ("ds4_lsp.__main__", "ds4_lsp.app", False) in edges  # in main(), relative
    assert ("ds4_lsp.services.progress", "ds4_lsp.server", True) in edges
    assert ("ds4_core.compaction.records", "ds4_core.tokens", False) in edges  # `..tokens`
    assert ("ds4_core.results", "ds4_core.wire", False) in edges  # `.wire`
    circle = [Edge("a", "b", 1, False), Edge("b", "c", 2, False), Edge("c", "a", 3, False)]
    circle += [Edge("b", "d", 4, False), Edge("d", "b", 5, False), Edge("c", "e", 6, False)]
    assert [describe(found, circle) for found in cycles(circle)] == [
        "a (line 1) -> b (line 2) -> c (line 3) -> a; also in this circle: d"
    ]


def test_no_import_cycle_at_run_time() -> None:
    """Module-level and function-level imports form no cycle (type-only imports left out)."""
    edges = [edge for edge in import_edges() if not edge.type_only]
    found = [describe(cycle, edges) for cycle in cycles(edges)]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_type_only_imports_point_back_only_to_their_owner() -> None:
    """With `if TYPE_CHECKING:` imports counted, every cycle closes through a type-only import
    of an owner in `TYPE_ONLY_OWNERS`; drop those imports and no cycle is left."""
    edges = import_edges()
    kept = [e for e in edges if not (e.type_only and e.target in TYPE_ONLY_OWNERS)]
    found = [describe(cycle, kept) for cycle in cycles(kept)]
    assert found == [], "cycles through type-only imports:\n" + "\n".join(found)


def test_only_the_app_imports_handlers_and_only_the_entry_point_imports_the_app() -> None:
    """The LSP layers (docs/architecture.md "The LSP layer"): `ds4_lsp.app` alone imports the
    handlers; handlers import neither the app nor each other; `ds4_lsp.__main__` alone imports
    the app; the server and the services import no handler."""
    found = sorted(
        f"{e.source} imports {e.target} (line {e.line})"
        for e in import_edges()
        if (e.target.startswith("ds4_lsp.handlers") and e.source != "ds4_lsp.app")
        or (e.target == "ds4_lsp.app" and e.source != "ds4_lsp.__main__")
    )
    assert found == []
