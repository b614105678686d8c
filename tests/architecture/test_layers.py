"""Imports only go down, and the code stays in pieces a reader can hold.

teton is layered (docs/architecture.md): a module may import its own package and the packages of
lower layers, never a higher one. The walk reads every ``import`` and ``from ... import`` of
``src/teton``, absolute and relative, at module level and inside functions alike, so a deferred
or relative import cannot hide an upward arrow. A package missing from ``LAYERS`` fails too: a new
package must be given its place. Every check takes the tree's root, so the tests at the end run
them on small trees made to break them (a relative-import cycle, an empty tree, ...).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "teton"

# Lowest first. A package may import packages of its own layer's predecessors only; packages
# within one layer do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("units", "memo", "progress", "atomic", "data", "version"),
    ("hardware", "order_stats"),
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
# the specs sit at the bottom: hardware and the bottom layer's utilities (units, errors, memo) only
SPEC_MAY_IMPORT = {"spec", "hardware", "units", "errors", "memo"}
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 450
FLAG = re.compile(r"--([a-z][a-z0-9-]*)")


def _sources(root: Path = SRC) -> list[Path]:
    """Every module of the tree at ``root``; a missing or empty tree is a failure, not a pass."""
    files = sorted(root.rglob("*.py")) if root.is_dir() else []
    if not files:
        raise AssertionError(f"no Python modules under {root}: nothing to check")
    return files


def _package(path: Path, root: Path = SRC) -> str:
    rel = path.relative_to(root)
    if rel.parts == ("__init__.py",):
        return "teton"
    return rel.parts[0].removesuffix(".py")


def _module(path: Path, root: Path = SRC) -> list[str]:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (imports that never run)."""
    return {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING"
            for n in ast.walk(node)}


def _imports(path: Path, tree: ast.AST, root: Path = SRC, runtime_only: bool = False):
    """(line, dotted names) of every import in ``tree``, relative ones resolved against the
    module's own package: ``import a.b`` gives ``a.b``; ``from a import b`` gives ``a`` and ``a.b``
    (b may be a module or a name in a); ``runtime_only`` leaves out ``if TYPE_CHECKING:`` imports."""
    here = _module(path, root)
    base_pkg = here if path.name == "__init__.py" else here[:-1]
    skip = _type_checking_only(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            yield node.lineno, [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = base_pkg[: len(base_pkg) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield node.lineno, [mod] + [f"{mod}.{a.name}" for a in node.names]


def _imported(path: Path, tree: ast.AST, root: Path = SRC):
    """(line, teton package) of every import of a teton module in ``tree``."""
    for line, names in _imports(path, tree, root):
        targets = set()
        for name in names:
            parts = name.split(".")
            if parts[0] != "teton":
                continue
            if len(parts) == 1:
                targets.add("teton")
            elif (root / parts[1]).is_dir() or (root / f"{parts[1]}.py").is_file():
                targets.add(parts[1])
            elif not (len(parts) == 2 and names[0] == "teton"):  # not ``from teton import NAME``
                targets.add(parts[1])  # no such package: reported as having no layer
        for target in sorted(targets):
            yield line, target


def _where(path: Path, root: Path, line: int | None = None) -> str:
    rel = path.relative_to(root.parent)
    return f"{rel}:{line}" if line is not None else str(rel)


def unplaced_packages(root: Path = SRC) -> list[str]:
    return sorted({_package(p, root) for p in _sources(root)} - set(LAYER_OF))


def upward_imports(root: Path = SRC) -> list[str]:
    upward = []
    for path in _sources(root):
        src = _package(path, root)
        for line, target in _imported(path, ast.parse(path.read_text()), root):
            if target == src:
                continue
            if target not in LAYER_OF or LAYER_OF[target] >= LAYER_OF.get(src, -1):
                upward.append(f"{_where(path, root, line)}: {src} imports {target}")
    return upward


def spec_imports(root: Path = SRC) -> list[str]:
    return [f"{_where(p, root, line)}: spec imports {t}" for p in _sources(root) if _package(p, root) == "spec"
            for line, t in _imported(p, ast.parse(p.read_text()), root) if t not in SPEC_MAY_IMPORT]


CLI_SHARED = {"__init__", "conventions", "__main__"}  # helpers, not verbs (and every _module)


def verb_imports(root: Path = SRC) -> list[str]:
    """Imports of ``teton.cli`` outside the CLI, and of one verb's module by another verb."""
    bad = []
    for path in _sources(root):
        src = _package(path, root)
        for line, names in _imports(path, ast.parse(path.read_text()), root):
            cli = sorted({n for n in names if n == "teton.cli" or n.startswith("teton.cli.")})
            if not cli:
                continue
            verbs = {n.split(".")[2] for n in cli if n.count(".") >= 2} & _cli_modules(root)
            helpers_only = all(v in CLI_SHARED or v.startswith("_") for v in verbs)
            verb_importing = path.parent.name == "cli" and path.stem not in CLI_SHARED and not helpers_only
            if src not in ("cli", "__main__") or verb_importing:
                bad.append(f"{_where(path, root, line)}: imports {cli[0] if len(cli) == 1 else cli}")
    return bad


def _cli_modules(root: Path) -> set[str]:
    return {p.stem for p in (root / "cli").glob("*.py")}


def long_functions(root: Path = SRC) -> list[str]:
    long = []
    for path in _sources(root):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{_where(path, root, node.lineno)}: {node.name} has {n} lines")
    return long


def big_modules(root: Path = SRC) -> list[str]:
    return [f"{_where(p, root)}: {n} lines" for p in _sources(root)
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]


def module_edges(root: Path = SRC) -> set[tuple[str, str]]:
    """(importer, imported) teton modules, relative imports resolved, imports into the facade
    (``teton``) included, imports under ``if TYPE_CHECKING:`` left out (they never run)."""
    modules = {".".join(_module(p, root)): p for p in _sources(root)}
    edges = set()
    for name, path in modules.items():
        for _line, targets in _imports(path, ast.parse(path.read_text()), root, runtime_only=True):
            for t in targets:
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != name:
                    edges.add((name, t))
    return edges


def import_cycles(root: Path = SRC) -> list[list[str]]:
    import networkx as nx

    return list(nx.simple_cycles(nx.DiGraph(sorted(module_edges(root)))))


def cli_flags(root: Path = SRC) -> set[str]:
    """The flags the CLI defines: every string literal of ``cli/`` that is one flag (``"--set"``)."""
    flags = set()
    for path in _sources(root / "cli"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and FLAG.fullmatch(node.value):
                flags.add(node.value)
    return flags


# modules that read another program's command line: its flags (Megatron-LM's --seed, --load) are
# not teton's, whatever their spelling
OTHER_PROGRAMS_FLAGS = {"spec/frameworks/megatron.py": "Megatron-LM's arguments, read by teton import"}


def flags_in_library(root: Path = SRC) -> list[str]:
    """String literals outside ``cli/`` that start with a flag the CLI defines (a parameter's
    name belongs there; the CLI translates it to its flag)."""
    flags = cli_flags(root)
    bad = []
    for path in _sources(root):
        rel = path.relative_to(root)
        if rel.parts[0] == "cli" or rel.as_posix() in OTHER_PROGRAMS_FLAGS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                m = FLAG.match(node.value)
                if m and m.group(0) in flags:
                    bad.append(f"{_where(path, root, node.lineno)}: {node.value[:60]!r}")
    return bad


def direct_caches(root: Path = SRC) -> list[str]:
    return [f"{_where(p, root, i)}: {line.strip()}" for p in _sources(root) if p.name != "memo.py"
            for i, line in enumerate(p.read_text().splitlines(), 1)
            if "lru_cache" in line or "functools.cache" in line or line.startswith("from functools import cache")]


# --- the checks on src/teton --------------------------------------------------------------

def test_every_package_has_a_layer():
    missing = unplaced_packages()
    assert not missing, f"give these packages a place in LAYERS: {missing}"


def test_imports_only_go_down():
    upward = upward_imports()
    assert not upward, "imports that do not go down:\n" + "\n".join(upward)


def test_spec_imports_only_hardware_and_the_bottom_utilities():
    bad = spec_imports()
    assert not bad, "\n".join(bad)


def test_no_package_imports_cli_and_no_verb_imports_a_verb():
    bad = verb_imports()
    assert not bad, "\n".join(bad)


def test_no_function_over_80_lines():
    long = long_functions()
    assert not long, "\n".join(long)


def test_no_module_over_450_lines():
    big = big_modules()
    assert not big, "\n".join(big)


def test_one_memo_mechanism():
    """Caches go through ``teton.memo`` (IdentityMemo or ``cached``), not functools directly."""
    direct = direct_caches()
    assert not direct, "use teton.memo.cached / IdentityMemo:\n" + "\n".join(direct)


def test_no_import_cycle_between_modules():
    cycles = import_cycles()
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c + c[:1]) for c in cycles)


def test_library_code_names_no_cli_flag():
    """Library errors name parameters; only ``cli/`` speaks of flags (cli/_common.py translates)."""
    assert len(cli_flags()) > 50  # the CLI's flags were found: the check below has something to find
    bad = flags_in_library()
    assert not bad, "CLI flags named outside src/teton/cli (name the parameter instead):\n" + "\n".join(bad)


# --- the checker itself, on trees made to break it ----------------------------------------

def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package tree ``teton/`` under ``tmp_path`` holding ``files`` (path -> source)."""
    root = tmp_path / "teton"
    root.mkdir()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


CHECKS = (unplaced_packages, upward_imports, spec_imports, verb_imports, long_functions, big_modules,
          module_edges, import_cycles, cli_flags, flags_in_library, direct_caches)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("make", ["missing", "empty", "no modules"])
def test_every_check_fails_on_a_missing_or_empty_tree(tmp_path, check, make):
    root = tmp_path / "teton"
    if make != "missing":
        root.mkdir()
    if make == "no modules":
        (root / "engine").mkdir()
        (root / "engine" / "README.txt").write_text("not a module")
    with pytest.raises(AssertionError, match="no Python modules"):
        check(root)


def test_a_relative_import_cycle_is_found(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "", "engine/__init__.py": "",
                            "engine/a.py": "from .b import f\n",
                            "engine/b.py": "def f():\n    from . import a\n"})
    assert ("teton.engine.a", "teton.engine.b") in module_edges(root)
    assert ("teton.engine.b", "teton.engine.a") in module_edges(root)
    assert [sorted(c) for c in import_cycles(root)] == [["teton.engine.a", "teton.engine.b"]]


def test_a_cycle_through_the_facade_is_found(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "from teton.engine.step import simulate\n",
                            "engine/__init__.py": "", "engine/step.py": "import teton\n"})
    assert import_cycles(root), "an edge into the facade was skipped"


def test_a_type_checking_import_makes_no_edge(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "", "engine/__init__.py": "",
                            "engine/a.py": "from .b import f\n",
                            "engine/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                           "    from .a import g\n"})
    assert not import_cycles(root)


def test_relative_imports_going_up_are_found(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "", "engine/__init__.py": "", "plan/__init__.py": "",
                            "engine/step.py": "from ..plan import make_plan\n",
                            "storage/__init__.py": "from .. import simulate\n",
                            "spec/__init__.py": "from ..network import cost\n", "network/__init__.py": ""})
    up = upward_imports(root)
    assert any("engine/step.py:1: engine imports plan" in u for u in up), up
    assert any("storage/__init__.py:1: storage imports teton" in u for u in up), up
    assert spec_imports(root) == ["teton/spec/__init__.py:1: spec imports network"]


def test_relative_imports_of_a_verb_are_found(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "", "cli/__init__.py": "from . import run\n",
                            "cli/_common.py": "", "cli/run.py": "from ._common import x\n",
                            "cli/plan.py": "from .run import simulate_cmd\n",
                            "report/html.py": "from ..cli._common import x\n"})
    bad = verb_imports(root)
    assert len(bad) == 2 and "cli/plan.py:1" in bad[0] and "report/html.py:1" in bad[1], bad


def test_a_package_without_a_layer_is_found(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "", "gadgets/__init__.py": "", "engine/x.py": "import teton.gizmo\n"})
    assert unplaced_packages(root) == ["gadgets"]
    assert any("engine imports gizmo" in u for u in upward_imports(root))


def test_a_flag_in_library_code_is_found(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "",
                            "cli/sweep.py": 'import typer\nW = typer.Option(None, "--workers")\n',
                            "sweep/run.py": 'def f(n):\n    raise ValueError("--workers", n)\n'
                                            'def g(n):\n    raise ValueError("workers", f"--workers={n}")\n'
                                            'def h():\n    return "--not-a-flag", "see --workers"\n'})
    assert cli_flags(root) == {"--workers"}
    assert flags_in_library(root) == ["teton/sweep/run.py:2: '--workers'", "teton/sweep/run.py:4: '--workers='"]


def test_long_functions_and_big_modules_are_found(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    root = _tree(tmp_path, {"__init__.py": "", "engine/a.py": f"def f():\n{body}",
                            "engine/b.py": "x = 1\n" * (MAX_MODULE_LINES + 1)})
    assert long_functions(root) == [f"teton/engine/a.py:1: f has {MAX_FUNCTION_LINES + 1} lines"]
    assert big_modules(root) == [f"teton/engine/b.py: {MAX_MODULE_LINES + 1} lines"]
