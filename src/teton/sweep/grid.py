"""A sweep file: a base spec, the keys to vary, and which points to skip.

```yaml
base: examples/llama3-405b-16k.yaml      # a spec path (relative to this file) or an inline spec
grid:                                    # cartesian product of these lists
  job.tp: [4, 8]
  job.pp: [8, 16]
  cluster: [meta-roce-24k, meta-ib-24k]
zip:                                     # optional: each group's lists vary together
  - {job.seq_len: [4096, 8192], job.global_batch: [4096, 2048]}
filter:                                  # optional: keep a point only where every expression holds
  - job.tp * job.pp <= 64
```

File paths are read as ``teton run`` reads them (``teton.sweep.paths``): those in the base spec
relative to the base spec's file (a cluster's GPU file, a ``storage:`` file), those given as
grid or zip values relative to the sweep file, whatever the working directory; they are made
absolute when the sweep is read.

A point is a mapping ``dotted key -> value``. Its spec is the base with the point's values set
(shallower keys first, so ``cluster`` then ``cluster.hosts``). Its key is the SHA-256 of the
canonical JSON of that merged spec mapping (plus teton's version and the store's schema
version): the same spec mapping always gets the same key, whatever sweep or order produced it,
which is what resume relies on. The key hashes the mapping as written, not the resolved spec:
``job.pp: 1`` and an omitted ``pp`` are different keys. The files the spec names (a cluster,
model, software, storage or hardware file, with or without an extension) and the files those
name in turn (a cluster file's GPU file) are hashed by their contents too: an edited file makes
new points, never a stale stored row. teton's own code is not in the key (it would change every
key at every commit): each stored row records the fingerprint of the code that computed it
(``teton.sweep.code_version``), and a run under other code simulates the row again
(``teton.sweep.run``).

Filter expressions are parsed with :mod:`ast` and evaluated by a small interpreter (numbers,
strings, arithmetic, comparisons, ``and``/``or``/``not``, ``in``, ``min``/``max``/``abs``) -
never by ``eval``. A name like ``job.tp`` reads the point's value, else the base spec's.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import itertools
import json
import operator
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teton.errors import SpecError, closest
from teton.spec.load import read_file, set_path
from teton.sweep.keys import check_key
from teton.sweep.named_files import file_digest, named_files
from teton.sweep.paths import absolute, key_place

SWEEP_KEYS = ("base", "grid", "zip", "filter", "notes")  # notes: free text, ignored
STORE_SCHEMA = 2  # bump when the row layout or the hashed content changes
MAX_SWEEP_POINTS = 100_000  # grid points before filtering: each is set, hashed and filtered up front

def canonical_json(obj: Any) -> str:
    """Key-sorted, compact JSON: the same mapping always gives the same text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def point_key(merged_spec: dict[str, Any]) -> str:
    """Stable key of one point: SHA-256 of teton's version, the store schema, the merged spec's
    canonical JSON and the contents of the files it names (a cluster, model, software, storage or
    hardware file, and the files those name in turn, relative to their own folders: a cluster
    file's GPU file; an edited one is a new point, not a stored one); first 32 hex digits. A new
    teton version re-evaluates rather than reuse rows; so does any other code, by the fingerprint
    each row records (module docstring)."""
    from teton.version import __version__

    files = "".join(f"{path}={file_digest(path)};" for path in sorted(named_files(merged_spec)))
    text = f"teton-{__version__}/sweep-{STORE_SCHEMA}/" + canonical_json(merged_spec) + "/" + files
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# ---------------------------------------------------------------- filter expressions

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: lambda a, b: _power(a, b)}
MAX_FILTER_BITS = 4096  # an integer a filter computes: ((10**1000)**1000)**1000 would take hours


def _arith(op, a, b):
    """``op(a, b)`` of a filter, its integer result bounded (a sequence's repeat too: 'x' * 10**12)."""
    if op is operator.mul and (isinstance(a, (str, tuple)) or isinstance(b, (str, tuple))):
        n = b if isinstance(a, (str, tuple)) else a
        if isinstance(n, int) and n > MAX_SWEEP_POINTS:
            raise ValueError(f"a repeat of {n} is too long")
    out = op(a, b)
    if isinstance(out, int) and out.bit_length() > MAX_FILTER_BITS:
        raise ValueError(f"a result of {out.bit_length():,} bits is too large (at most {MAX_FILTER_BITS:,})")
    return out


def _power(base, exponent):
    """``base ** exponent`` with the exponent bounded: ``10 ** 10 ** 10`` would build a number of
    ten billion digits and hang the sweep."""
    if isinstance(exponent, (int, float)) and abs(exponent) > 1024:
        raise ValueError(f"exponent {exponent} is too large (at most 1024)")
    return operator.pow(base, exponent)
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_FUNCS = {"min": min, "max": max, "abs": abs}


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


@dataclass(frozen=True)
class FilterExpr:
    """One ``filter:`` expression, parsed once; :meth:`holds` evaluates it on a point."""

    text: str
    tree: ast.Expression

    @classmethod
    def parse(cls, text: Any) -> FilterExpr:
        if not isinstance(text, str) or not text.strip():
            raise SpecError("filter", text, "each filter is an expression string like 'job.tp * job.pp <= 64'")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as err:
            raise SpecError("filter", text, f"not an expression ({err.msg})") from None
        expr = cls(text.strip(), tree)
        for node in ast.walk(tree):
            ok = isinstance(node, (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub,
                                   ast.UAdd, ast.BinOp, ast.Compare, ast.Constant, ast.Name, ast.Attribute,
                                   ast.Load, ast.Tuple, ast.List, ast.Call, ast.IfExp, *_BIN, *_CMP))
            if not ok:
                raise SpecError("filter", text, f"{type(node).__name__} is not allowed in a filter")
            if isinstance(node, ast.Call) and (not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS
                                               or node.keywords):
                raise SpecError("filter", text, f"only {', '.join(_FUNCS)} may be called")
        return expr

    def names(self) -> set[str]:
        """The dotted names the expression reads (outermost attribute chains only)."""
        out: set[str] = set()

        def visit(node: ast.AST) -> None:
            name = _dotted(node)
            if name is not None:
                out.add(name)
                return
            if isinstance(node, ast.Call):
                for a in node.args:
                    visit(a)
                return
            for child in ast.iter_child_nodes(node):
                visit(child)

        visit(self.tree)
        return out

    def holds(self, lookup) -> bool:
        try:
            return bool(self._eval(self.tree.body, lookup))
        except SpecError:
            raise
        except Exception as err:  # noqa: BLE001 - e.g. a comparison of str and int
            raise SpecError("filter", self.text, f"cannot evaluate ({type(err).__name__}: {err})") from None

    def _eval(self, node: ast.AST, lookup) -> Any:
        name = _dotted(node)
        if name is not None:
            return lookup(name, self.text)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self._eval(e, lookup) for e in node.elts)
        if isinstance(node, ast.BoolOp):
            values = (self._eval(v, lookup) for v in node.values)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.UnaryOp):
            v = self._eval(node.operand, lookup)
            return (not v) if isinstance(node.op, ast.Not) else (-v if isinstance(node.op, ast.USub) else +v)
        if isinstance(node, ast.BinOp):
            return _arith(_BIN[type(node.op)], self._eval(node.left, lookup), self._eval(node.right, lookup))
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, lookup)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                right = self._eval(comp, lookup)
                if not _CMP[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self._eval(node.body if self._eval(node.test, lookup) else node.orelse, lookup)
        if isinstance(node, ast.Call):
            return _FUNCS[node.func.id](*(self._eval(a, lookup) for a in node.args))
        raise SpecError("filter", self.text, f"{type(node).__name__} is not allowed in a filter")


# ---------------------------------------------------------------- the sweep


@dataclass(frozen=True)
class Point:
    """One point of a sweep: its key, the varied values, and the merged spec mapping."""

    key: str
    values: dict[str, Any]
    spec: dict[str, Any]


@dataclass(frozen=True)
class Sweep:
    """A parsed sweep: base spec mapping, axes (each a tuple of keys varying together), filters."""

    base: dict[str, Any]
    axes: tuple[tuple[tuple[str, ...], tuple[tuple[Any, ...], ...]], ...]  # (keys, rows of values)
    filters: tuple[FilterExpr, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for keys, _ in self.axes for k in keys)

    @property
    def size(self) -> int:
        """Points before filtering."""
        n = 1
        for _, rows in self.axes:
            n *= len(rows)
        return n

    def _lookup(self, values: dict[str, Any]):
        def lookup(name: str, text: str) -> Any:
            if name in values:
                return values[name]
            node: Any = self.base
            for part in name.split("."):
                if isinstance(node, dict) and part in node:
                    node = node[part]
                else:
                    raise SpecError("filter", text, f"{name} is neither a swept key nor set in the base spec")
            return node

        return lookup

    def raw_points(self) -> Iterator[dict[str, Any]]:
        """Every combination in grid order (the first key varies slowest), before filtering."""
        for combo in itertools.product(*(rows for _, rows in self.axes)):
            values: dict[str, Any] = {}
            for (keys, _), row in zip(self.axes, combo, strict=True):
                values.update(zip(keys, row, strict=True))
            yield values

    def points(self) -> tuple[list[Point], int]:
        """(points that pass the filters, number filtered out); keys are unique (duplicates merged)."""
        order = sorted(self.keys, key=lambda k: k.count("."))
        parts = {k: tuple(k.split(".")) for k in order}
        out: list[Point] = []
        seen: set[str] = set()
        filtered = 0
        for values in self.raw_points():
            if self.filters:
                lookup = self._lookup(values)
                if not all(f.holds(lookup) for f in self.filters):
                    filtered += 1
                    continue
            merged = self.base
            for k in order:
                merged = set_path(merged, parts[k], values[k])
            key = point_key(merged)
            if key in seen:  # e.g. a zip group that repeats a combination
                continue
            seen.add(key)
            out.append(Point(key, values, merged))
        return out, filtered


def _paths_of(parts: tuple[str, ...], vals: tuple[Any, ...], sweep_dir: Path) -> tuple[Any, ...]:
    """A swept key's values with the file paths among them (a cluster file, a GPU file, a
    storage file; preset names stay) made absolute against the sweep file's folder."""
    place = key_place(parts)
    return vals if place is None else tuple(absolute(v, place, sweep_dir) for v in vals)


def _values(key: str, raw: Any, where: str) -> tuple[Any, ...]:
    if not isinstance(raw, list) or not raw:
        raise SpecError(f"{where}.{key}", raw, "must be a non-empty list of values")
    return tuple(raw)


def parse_sweep(source: str | Path | dict[str, Any]) -> Sweep:
    """A sweep file (YAML / TOML / JSON) or mapping -> :class:`Sweep`; one-line SpecError on bad input."""
    base_dir = Path.cwd()
    where = "sweep"
    sweep_dir = base_dir
    if isinstance(source, dict):
        data = source
    elif not isinstance(source, (str, Path)):
        raise SpecError("source", source, "a sweep file's path or a sweep mapping")
    else:
        path = Path(source)
        data = read_file(path)
        base_dir = sweep_dir = path.resolve().parent
        where = str(path)
    unknown = sorted(set(data) - set(SWEEP_KEYS))
    if unknown and "base" not in data and {"cluster", "model", "job"} <= set(data):
        raise SpecError("sweep", sorted(data), "a run spec (cluster, model, job), not a sweep: run it with teton "
                        "run; a sweep names it as its base (base: FILE) beside grid: or zip: axes", where=where)
    if unknown:
        raise SpecError(unknown[0], data[unknown[0]], closest(unknown[0], SWEEP_KEYS), where=where)
    base = _sweep_base(data, base_dir, where)
    axes = _sweep_axes(data, sweep_dir, where)
    keys = [k for ks, _ in axes for k in ks]
    raw_filters = data.get("filter") or []
    if isinstance(raw_filters, str):
        raw_filters = [raw_filters]
    if not isinstance(raw_filters, list):
        raise SpecError("filter", raw_filters, "must be an expression or a list of expressions", where=where)
    filters = tuple(FilterExpr.parse(f) for f in raw_filters)
    sweep = Sweep(base=base, axes=tuple(axes), filters=filters)
    for f in filters:  # unknown names fail now, not half-way through the sweep
        for name in f.names():
            if name not in keys:
                sweep._lookup({})(name, f.text)
    return sweep


def _sweep_base(data: dict[str, Any], base_dir: Path, where: str) -> dict[str, Any]:
    """The sweep's ``base``: a spec file (relative to ``base_dir``) or an inline mapping, every
    file path in it (``teton.sweep.paths``) made absolute against the folder of the file that
    holds it, as ``teton run`` reads them."""
    if "base" not in data:
        raise SpecError("base", None, "missing; give a spec path or an inline spec mapping", where=where)
    raw_base = data["base"]
    if isinstance(raw_base, str):
        bpath = base_dir / raw_base
        if not os.path.isfile(bpath):
            raise SpecError("base", raw_base, "no such spec file", where=where)
        base = read_file(bpath)
        base_dir = bpath.resolve().parent
    elif isinstance(raw_base, dict):
        base = copy.deepcopy(raw_base)
    else:
        raise SpecError("base", raw_base, "must be a spec path or an inline spec mapping", where=where)
    return absolute(base, (), base_dir)


def _sweep_axes(data: dict[str, Any], sweep_dir: Path, where: str) -> list[tuple[tuple[str, ...], tuple]]:
    """The axes of the grid: one per ``grid`` key, one per ``zip`` group (keys whose lists vary
    together); at least one, at most ``MAX_SWEEP_POINTS`` points, every key once."""
    axes: list[tuple[tuple[str, ...], tuple[tuple[Any, ...], ...]]] = []
    grid = data.get("grid") or {}
    if not isinstance(grid, dict):
        raise SpecError("grid", grid, "must be a mapping of dotted spec keys to lists of values", where=where)
    for key, raw in grid.items():
        vals = _paths_of(check_key(key, "grid"), _values(key, raw, "grid"), sweep_dir)
        axes.append(((key,), tuple((v,) for v in vals)))
    groups = data.get("zip") or []
    if isinstance(groups, dict):
        groups = [groups]
    if not isinstance(groups, list):
        raise SpecError("zip", groups, "must be a list of mappings (keys whose lists vary together)", where=where)
    for i, group in enumerate(groups):
        if not isinstance(group, dict) or not group:
            raise SpecError(f"zip[{i}]", group, "must be a non-empty mapping of keys to equal-length lists")
        cols = []
        for key, raw in group.items():
            cols.append(_paths_of(check_key(key, f"zip[{i}]"), _values(key, raw, f"zip[{i}]"), sweep_dir))
        lengths = {len(c) for c in cols}
        if len(lengths) != 1:
            raise SpecError(f"zip[{i}]", {k: len(c) for k, c in zip(group, cols, strict=True)},
                            "the lists of one zip group must have equal lengths")
        axes.append((tuple(group), tuple(zip(*cols, strict=True))))
    if not axes:
        raise SpecError("grid", grid, "empty; give at least one dotted spec key with a list of values", where=where)
    size = 1
    for _, rows in axes:
        size *= len(rows)
    if size > MAX_SWEEP_POINTS:
        raise SpecError("grid", f"{size:,} points", f"at most {MAX_SWEEP_POINTS:,} points before filtering; split "
                        "the sweep", where=where)
    keys = [k for ks, _ in axes for k in ks]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise SpecError("grid", dup[0], "a key may appear once across grid and zip")
    return axes
