"""Imports only go down, and the code stays in pieces a reader can hold.

teton is layered (docs/architecture.md): a module may import its own package and the packages of
lower layers, never a higher one. The walk reads every ``import`` and ``from ... import`` of
``src/teton``, at module level and inside functions alike, so a deferred import cannot hide an
upward arrow. A package missing from ``LAYERS`` fails too: a new package must be given its place.
"""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "teton"

# Lowest first. A package may import packages of its own layer's predecessors only; packages
# within one layer do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("units", "memo", "progress", "atomic", "data", "version"),
    ("hardware",),
    ("spec",),
    ("topology", "collectives"),
    ("network",),
    ("placement", "workload"),
    ("engine",),
    ("storage",),
    ("reliability",),
    ("whole_run", "studies"),
    ("sweep",),
    ("validation",),
    ("report",),
    ("plan",),
    ("teton",),  # the public facade, src/teton/__init__.py: simulate, load_spec, Spec, __version__
    ("cli",),
    ("__main__",),  # python -m teton
)
LAYER_OF = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}
SPEC_MAY_IMPORT = {"spec", "hardware", "units", "errors"}  # the specs sit at the bottom
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 450


def _package(path: Path) -> str:
    rel = path.relative_to(SRC)
    if rel.parts == ("__init__.py",):
        return "teton"
    return rel.parts[0].removesuffix(".py")


def _module(path: Path) -> list[str]:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(path: Path, tree: ast.AST):
    """(line, teton package) of every import of a teton module in ``tree``."""
    here = _module(path)
    is_init = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here if is_init else here[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [f"{mod}.{a.name}" for a in node.names] if mod == "teton" else [mod]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != "teton":
                continue
            target = parts[1] if len(parts) > 1 else "teton"
            if target == "__version__":
                target = "teton"
            yield node.lineno, target


def _sources():
    return sorted(SRC.rglob("*.py"))


def test_every_package_has_a_layer():
    missing = sorted({_package(p) for p in _sources()} - set(LAYER_OF))
    assert not missing, f"give these packages a place in LAYERS: {missing}"


def test_imports_only_go_down():
    upward = []
    for path in _sources():
        src = _package(path)
        for line, target in _imported(path, ast.parse(path.read_text())):
            if target == src:
                continue
            if target not in LAYER_OF or LAYER_OF[target] >= LAYER_OF.get(src, -1):
                upward.append(f"{path.relative_to(SRC.parent)}:{line}: {src} imports {target}")
    assert not upward, "imports that do not go down:\n" + "\n".join(upward)


def test_spec_imports_only_hardware_units_errors():
    bad = [f"{p.relative_to(SRC.parent)}:{line}: spec imports {t}"
           for p in sorted((SRC / "spec").glob("*.py"))
           for line, t in _imported(p, ast.parse(p.read_text())) if t not in SPEC_MAY_IMPORT]
    assert not bad, "\n".join(bad)


def test_no_package_imports_cli_and_no_verb_imports_a_verb():
    shared = {"__init__", "conventions", "__main__"}  # helpers, not verbs (and every _module)
    bad = []
    for path in _sources():
        src = _package(path)
        for line, name in _verb_imports(path):
            verb = name.split(".")[2] if name.count(".") >= 2 else ""
            helper = verb in shared or verb.startswith("_")
            if src not in ("cli", "__main__") or (path.parent.name == "cli" and path.stem not in shared
                                                  and not helper):
                bad.append(f"{path.relative_to(SRC.parent)}:{line}: imports {name}")
    assert not bad, "\n".join(bad)


def _verb_imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("teton.cli"):
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("teton.cli"):
                    yield node.lineno, a.name


def test_no_function_over_80_lines():
    long = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(SRC.parent)}:{node.lineno}: {node.name} has {n} lines")
    assert not long, "\n".join(long)


def test_no_module_over_450_lines():
    big = [f"{p.relative_to(SRC.parent)}: {n} lines" for p in _sources()
           if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not big, "\n".join(big)


def test_one_memo_mechanism():
    """Caches go through ``teton.memo`` (IdentityMemo or ``cached``), not functools directly."""
    direct = [f"{p.relative_to(SRC.parent)}:{i}: {line.strip()}" for p in _sources() if p.name != "memo.py"
              for i, line in enumerate(p.read_text().splitlines(), 1)
              if "lru_cache" in line or "functools.cache" in line or line.startswith("from functools import cache")]
    assert not direct, "use teton.memo.cached / IdentityMemo:\n" + "\n".join(direct)


def _module_edges():
    """(importer, imported) teton modules, imports under ``if TYPE_CHECKING:`` left out (they never run)."""
    modules = {".".join(_module(p)): p for p in _sources()}
    edges = set()
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING"
                for n in ast.walk(node)}
        for node in ast.walk(tree):
            if id(node) in skip or not isinstance(node, ast.ImportFrom | ast.Import):
                continue
            targets = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                       [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names])
            for t in targets:
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != name and t != "teton":
                    edges.add((name, t))
    return edges


def test_no_import_cycle_between_modules():
    import networkx as nx

    cycles = list(nx.simple_cycles(nx.DiGraph(sorted(_module_edges()))))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c + c[:1]) for c in cycles)
