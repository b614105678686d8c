"""The Python API's inputs: a bad argument is a one-line ``teton.SpecError`` naming it, not a
TypeError or numpy's ValueError from deep inside (docs/api.md); specs hash by value."""

import pytest

from teton.engine.step import simulate_step
from teton.errors import SpecError
from teton.plan import make_plan, plan_request
from teton.reliability import goodput
from teton.spec import load_spec
from teton.sweep.grid import parse_sweep

EXAMPLE = "examples/llama3-405b-16k.yaml"
SMALL = {"cluster": "meta-roce-24k", "model": "llama3-8b",
         "job": {"gpus": 64, "tp": 2, "pp": 2, "seq_len": 4096, "global_batch": 64, "zero": 1}}


@pytest.mark.parametrize("call,message", [
    (lambda: load_spec(EXAMPLE, "job.tp=8"), "overrides = 'job.tp=8': a list of key.path=value strings"),
    (lambda: load_spec(EXAMPLE, [5]), "overrides = [5]: a list of key.path=value strings"),
    (lambda: load_spec(5), "source = 5: a spec file's path or a spec mapping"),
    (lambda: load_spec(None), "source = None: a spec file's path or a spec mapping"),
    (lambda: parse_sweep([1]), "source = [1]: a sweep file's path or a sweep mapping"),
])
def test_a_mistyped_argument_is_named(call, message):
    with pytest.raises(SpecError, match="^" + message.replace("[", r"\[").replace("]", r"\]")):
        call()


@pytest.mark.parametrize("runs,seed,message", [
    (-5, 0, "runs = -5: must be an integer in 1..100,000"),
    (0, 0, "runs = 0: must be an integer in 1..100,000"),  # was taken as "not given": 1000 runs
    (10, -1, "seed = -1: must be a non-negative integer"),
])
def test_goodput_refuses_bad_runs_and_seeds(runs, seed, message):
    with pytest.raises(SpecError, match=message):
        goodput(load_spec(SMALL), tokens=1e12, runs=runs, seed=seed, simulate=simulate_step)


@pytest.mark.parametrize("options,message", [
    ({"runs": "abc"}, "runs = 'abc': must be an integer"),
    ({"runs": -5}, "runs = -5: must be an integer"),
    ({"seed": "x"}, "seed = 'x': must be a non-negative integer"),
    ({"gpu": "64"}, r"gpu = '64': unknown field \(did you mean gpus\?\)"),  # had planned the default spread
])
def test_plan_request_refuses_bad_and_unknown_options(options, message):
    with pytest.raises(SpecError, match=message):
        plan_request(load_spec(SMALL), {"tokens": "1T", **options})


def test_make_plan_refuses_an_unknown_executor_even_for_one_gpu_count():
    req = plan_request(load_spec(SMALL), {"tokens": "1T", "gpus": "64", "runs": 10})
    with pytest.raises(SpecError, match="executor = 'nope': must be one of"):
        make_plan(req, executor="nope")


def test_specs_hash_by_value():
    """A Spec is frozen; its cluster's efficiency mapping made hash() fail ('unhashable type: dict')."""
    a, b = load_spec(EXAMPLE), load_spec(EXAMPLE)
    other = load_spec(EXAMPLE, ["cluster.efficiency.tensor_core_in_situ=0.7"])
    assert a == b and hash(a) == hash(b) and len({a, b, other}) == 2
    assert {a: 1}[b] == 1


def test_entry_points_take_a_spec_file_path_and_name_what_they_cannot_take():
    """search, goodput and plan took only a resolved Spec: a path raised AttributeError ('str'
    object has no attribute 'model'), a string search space TypeError deep in the layout code,
    goodput(tokens='15T') TypeError, where the CLI and teton.plan read '15.6T'."""
    from teton.sweep.search import rank_layouts, search_layouts
    from teton.sweep.space import SearchSpace

    space = SearchSpace(tp=(2,), cp=(1,), pp=(2,), virtual_stages=(1,), micro_batch=(1,), recompute=("none",), zero=(1,))
    assert search_layouts(SMALL, space)["rows"]
    g = goodput(EXAMPLE, tokens="1T", runs=5, seed=0, simulate=simulate_step)
    assert g.to_dict()["tokens"] == 1e12
    assert plan_request(EXAMPLE, {"tokens": "1T"}).tokens == 1e12
    for call, field in ((lambda: rank_layouts(SMALL, "tp=1"), "space"), (lambda: SearchSpace(pp="16"), "pp"),
                        (lambda: goodput(42), "spec"), (lambda: plan_request(EXAMPLE, "tokens=1T"), "options")):
        with pytest.raises(SpecError) as err:
            call()
        assert err.value.field == field and "\n" not in str(err.value)
