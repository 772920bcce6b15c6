"""The package's import graph: no cycles, and no import from a layer to a layer above it.

The layers, inner to outer, are the subpackages of ``tcsmt/`` as docs/architecture.md orders them
(:data:`LAYERS`).  A module may import modules of its own layer or of the layers below it, never of a
layer above; and no set of modules may import each other in a cycle.  Every import counts, also one made
inside a function (a lazy import is still a dependency).  Read with Python's ``ast``: nothing is imported.
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "tcsmt"

#: inner to outer; a module belongs to the first layer one of whose prefixes it equals or extends
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("tcsmt.errors", "tcsmt.version")),
    ("io", ("tcsmt.io",)),
    ("arith", ("tcsmt.arith",)),
    ("backends", ("tcsmt.backends",)),
    ("sim", ("tcsmt.sim",)),
    ("kernels", ("tcsmt.kernels",)),
    ("hwcheck", ("tcsmt.hwcheck",)),
    ("solve", ("tcsmt.solve",)),
    ("queries", ("tcsmt.identify", "tcsmt.verify")),
    ("library", ("tcsmt.library",)),
    ("peers", ("tcsmt.peers",)),
    ("api", ("tcsmt", "tcsmt.dot", "tcsmt.torch")),
    ("cli", ("tcsmt.cli", "tcsmt.__main__")),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The tcsmt modules ``name`` imports (``from pkg import mod`` counts as importing ``pkg.mod``)."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "tcsmt")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "tcsmt":
                continue
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.add(sub if sub in known else mod)
    out.discard(name)
    return {m for m in out if m in known}


def layer_of(name: str) -> int:
    best, best_len = None, -1
    for i, (_layer, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    assert best is not None, f"{name} is in no layer: add its subpackage to LAYERS and docs/architecture.md"
    return best


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_every_module_has_a_layer():
    for name in modules():
        layer_of(name)


def test_no_import_cycles():
    found = cycles(graph())
    assert not found, f"import cycles: {found}"


def test_no_upward_imports():
    g = graph()
    upward = sorted(f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]})"
                    for a, deps in g.items() for b in deps if layer_of(b) > layer_of(a))
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_the_checks_see_a_cycle_and_an_upward_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer_of("tcsmt.arith.semantics") < layer_of("tcsmt.solve.discriminate") < layer_of("tcsmt.cli.commands")
    assert layer_of("tcsmt.errors") == 0 and layer_of("tcsmt.torch") > layer_of("tcsmt.library.api")
