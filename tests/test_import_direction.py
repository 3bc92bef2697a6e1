"""Imports go one way between the rooms: course/ and demos/ above worker/, plumbing/ below all
three. worker/ once imported demos' Redis handle, event stream, heartbeat and hardware store,
demos/hardware.py and worker/tasks.py imported each other, and so did demos/services.py and
demos/tasks.py. Read from the source (function-level imports included), so a lazy import
cannot hide a circle."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("course", "demos", "worker", "problems", "plumbing")
# Packages that register their members: the package's __init__ imports each member, which
# imports the package's shared pieces back. A circle inside one of these is their design.
REGISTRIES = ("demos.runners", "problems.calculators")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for room in ROOMS for p in (ROOT / room).rglob("*.py")
             if "migrations" not in p.parts}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base
                         for a in node.names]
            else:
                continue
            for name in names:
                while name and name not in files:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    targets.add(name)
        graph[module] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_worker_imports_nothing_from_demos_or_course_and_plumbing_nothing_above():
    graph = import_graph()
    upward = {m: sorted(t for t in targets if t.split(".")[0] in ("demos", "course"))
              for m, targets in graph.items() if m.split(".")[0] == "worker"}
    assert {m: t for m, t in upward.items() if t} == {}
    below = {m: sorted(t for t in targets if t.split(".")[0] != "plumbing")
             for m, targets in graph.items() if m.split(".")[0] == "plumbing"}
    assert {m: t for m, t in below.items() if t} == {}


def test_no_import_circles_outside_the_registries():
    graph = import_graph()
    def inside(circle: list[str], registry: str) -> bool:
        return all(m == registry or m.startswith(f"{registry}.") for m in circle)

    found = [c for c in circles(graph) if not any(inside(c, r) for r in REGISTRIES)]
    assert found == []
    # The finder finds circles: two modules importing each other are one.
    assert circles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
