"""pagemill's domains depend on each other one way: no import cycle among its packages
(jobs, webhooks, db, accounting, ...) and top-level modules (queue, settings, ...).

A cycle means two domains can only be understood, changed and tested together; the
one that was meant to be lower (db under everything, webhooks under jobs) no longer
is. Every import counts, as in tests/test_import_boundaries.py, including those inside
functions and under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

from tests.support.services import ROOT

# An edge: (importing unit, imported unit) -> where, e.g. "pagemill/jobs/events.py:31".
Edges = dict[tuple[str, str], str]


def domain_of(module: str, root_name: str) -> str | None:
    """pagemill.jobs.events -> pagemill.jobs; pagemill.queue -> pagemill.queue."""
    parts = module.split(".")
    if parts[0] != root_name or len(parts) < 2:
        return None
    return ".".join(parts[:2])


def imports_of(path: Path, package_root: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of each import; `from pagemill import queue` names
    pagemill.queue, since the domain is the thing imported."""
    module_parts = path.relative_to(package_root.parent).with_suffix("").parts
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            package = module_parts[:-1]
            base = package[: len(package) - (node.level - 1)] if node.level else ()
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def domain_edges(package_root: Path) -> Edges:
    edges: Edges = {}
    for path in sorted(package_root.rglob("*.py")):
        relative = path.relative_to(package_root.parent)
        source = domain_of(".".join(relative.with_suffix("").parts), package_root.name)
        if source is None:
            continue
        for line, module in imports_of(path, package_root):
            target = domain_of(module, package_root.name)
            if target is not None and target != source:
                edges.setdefault((source, target), f"{relative}:{line}")
    return edges


def cycles(edges: Edges) -> list[list[str]]:
    """One cycle through each strongly connected group of domains (Tarjan's algorithm)."""
    graph: dict[str, list[str]] = defaultdict(list)
    for source, target in sorted(edges):
        graph[source].append(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_within(graph, group) for group in groups]


def _cycle_within(graph: dict[str, list[str]], group: set[str]) -> list[str]:
    start = min(group)
    path, seen = [start], {start}
    while True:
        step = next(t for t in graph[path[-1]] if t in group)
        if step in seen:
            return [*path[path.index(step) :], step]
        path.append(step)
        seen.add(step)


def describe(cycle: list[str], edges: Edges) -> str:
    return " -> ".join(cycle) + "  (" + ", ".join(edges[(a, b)] for a, b in pairwise(cycle)) + ")"


def test_pagemill_domains_import_each_other_one_way() -> None:
    edges = domain_edges(ROOT / "pagemill")
    assert ("pagemill.jobs", "pagemill.webhooks") in edges, "the walk found no imports"
    assert [describe(cycle, edges) for cycle in cycles(edges)] == []


def test_a_cycle_is_found_however_it_is_written(tmp_path: Path) -> None:
    root = tmp_path / "pagemill"
    for package in ("jobs", "webhooks", "db"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "queue.py").write_text("from pagemill.db import models\n")
    (root / "db" / "models.py").write_text("import pagemill.domain\n")
    (root / "jobs" / "service.py").write_text("from pagemill.webhooks import outbox\n")
    (root / "webhooks" / "outbox.py").write_text("from pagemill import queue\n")
    assert cycles(domain_edges(root)) == []
    (root / "db" / "session.py").write_text("def later():\n    from ..jobs import service\n")
    edges = domain_edges(root)
    [cycle] = cycles(edges)
    assert cycle == [
        "pagemill.db",
        "pagemill.jobs",
        "pagemill.webhooks",
        "pagemill.queue",
        "pagemill.db",
    ]
    assert describe(cycle, edges).endswith(
        "(pagemill/db/session.py:2, pagemill/jobs/service.py:1, "
        "pagemill/webhooks/outbox.py:1, pagemill/queue.py:1)"
    )
