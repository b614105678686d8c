"""Outside ``teton.spec`` a job's degrees and shapes are read through its Layout (issue 22).

The rule, an AST walk over every module of ``src/teton`` outside ``src/teton/spec/``: an
attribute read whose name is in :data:`DEGREES` (the degrees, the batch and the shapes
derived from them; ``spec.layout.Layout`` has each under the same name, ``dp_degree`` as ``dp``
and ``parallel_order`` as ``order``) counts when it is read off

* a name ``job`` or ``j``, or one ending in ``_job``, unless a parameter of that name is
  annotated with another type;
* an attribute ``.job`` (``spec.job.tp``, ``task.spec.job.seq_len``);
* a parameter annotated ``JobSpec``, whatever its name.

So ``job.tp`` and ``spec.job.pp`` count, ``job.layout.tp`` and ``lay.tp`` do not. ``job.gpus``
is not in the set: it is the job's request (``Layout.check`` holds the degrees' product to it),
read by the scheduler and the reports as a GPU count.

:data:`ALLOWED` names the functions whose ``job`` is not a JobSpec (a trace's jobs carry tp and
pp columns of their own), each with why.
"""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "teton"
DEGREES = frozenset({
    "tp", "cp", "pp", "dp", "dp_degree", "ep", "virtual_stages", "micro_batch", "seq_len", "sequence_parallel",
    "micro_batches", "sequences_per_step", "tokens_per_step", "pp_round", "pp_round_size", "parallel_order",
})
# (module path under src/teton, function): why its reads are not a JobSpec's
ALLOWED = {
    ("placement/scheduler.py", "_shape_of"): "job is a trace's TraceJob: tp and pp are the trace's optional columns",
    ("placement/traces.py", "write_ours"): "j is a trace's TraceJob, written back as the trace's columns",
}


def _other_typed(fn: ast.AST) -> set[str]:
    """Parameters of ``fn`` annotated with a type other than JobSpec."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    return {a.arg for a in args if a.annotation is not None and "JobSpec" not in ast.unparse(a.annotation)}


def _job_typed(fn: ast.AST) -> set[str]:
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    return {a.arg for a in args if a.annotation is not None and "JobSpec" in ast.unparse(a.annotation)}


def _reads(node: ast.AST, fn: ast.AST, out: list):
    for child in ast.iter_child_nodes(node):
        scope = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
        if isinstance(child, ast.Attribute) and child.attr in DEGREES and isinstance(child.ctx, ast.Load):
            v = child.value
            named = isinstance(v, ast.Name) and (
                v.id in _job_typed(fn)
                or ((v.id in ("job", "j") or v.id.endswith("_job")) and v.id not in _other_typed(fn)))
            if named or (isinstance(v, ast.Attribute) and v.attr == "job"):
                out.append((getattr(fn, "name", "<module>"), child.lineno, ast.unparse(child)))
        _reads(child, scope, out)


def degree_reads(root: Path = SRC) -> list[str]:
    """``path:line: expression`` of every read the rule counts, the allowed ones left out."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("spec/"):
            continue
        reads: list = []
        tree = ast.parse(path.read_text(encoding="utf-8"))
        _reads(tree, tree, reads)
        found += [f"{rel}:{line}: {text}" for fn, line, text in reads if (rel, fn) not in ALLOWED]
    return found


def test_no_degree_is_read_off_a_jobspec_outside_spec():
    reads = degree_reads()
    assert not reads, f"{len(reads)} degree reads off a JobSpec (read them through job.layout):\n" + "\n".join(reads)


def test_the_rule_finds_the_reads_it_describes(tmp_path):
    """The walk sees a read off job, off .job, off a JobSpec parameter of any name and inside a
    nested function; not one through the layout, nor off a parameter of another type."""
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "job.py").write_text("def f(job):\n    return job.tp\n")  # spec/ may
    (tmp_path / "m.py").write_text(
        "def f(job, spec, base: 'JobSpec', trace_job: 'TraceJob'):\n"
        "    def g():\n        return job.cp\n"
        "    return (job.tp, spec.job.pp, base.seq_len, job.layout.tp, trace_job.tp, job.gpus, g)\n")
    found = sorted(r.split(": ", 1)[1] for r in degree_reads(tmp_path))
    assert found == ["base.seq_len", "job.cp", "job.tp", "spec.job.pp"]


def test_the_allow_list_names_functions_that_exist():
    for (rel, fn), _why in ALLOWED.items():
        tree = ast.parse((SRC / rel).read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.FunctionDef) and n.name == fn for n in ast.walk(tree)), (rel, fn)
