"""Issue 13: ``teton search`` searches expert parallelism on a MoE model (and only there)."""

import json

from teton.spec import load_spec
from teton.sweep import SearchSpace, candidate_jobs, search_layouts

MOE = {"cluster": "dgx-h100-superpod", "model": "mixtral-8x7b",
       "job": {"gpus": 256, "tp": 2, "ep": 8, "seq_len": 4096, "global_batch": 512}}
SMALL = dict(tp=(2,), cp=(1,), pp=(1,), virtual_stages=(1,), micro_batch=(1,), recompute=("none",), zero=(1,))


def test_search_evaluates_several_ep_degrees_on_a_moe_model():
    spec = load_spec(MOE)
    d = search_layouts(spec, SearchSpace(**SMALL))
    assert {r["ep"] for r in d["rows"]} == {1, 2, 4, 8}  # every divisor of the 8 experts (and of dp 128)
    assert len({r["step_time_s"] for r in d["rows"]}) == 4
    eps = {c.job.ep for c in candidate_jobs(spec, SearchSpace(**{**SMALL, "ep": (2, 3, 8, 256)}))}
    assert eps == {2, 8}  # 3 does not divide the experts, 256 neither: the job rules skip them


def test_dense_model_searches_ep_1_only():
    spec = load_spec({**MOE, "model": "llama3-8b", "job": {**MOE["job"], "ep": 1, "tp": 8}})
    assert {c.job.ep for c in candidate_jobs(spec, SearchSpace(**{**SMALL, "tp": (8,)}))} == {1}


def test_search_cli_ep_option_column_and_json(cli, tmp_path):
    path = tmp_path / "moe.json"
    path.write_text(json.dumps(MOE))
    args = ("search", path, "--tp", "2", "--cp", "1", "--pp", "1", "--virtual-stages", "1", "--ep", "2,8")
    code, out, err = cli(*args, "--json")
    assert code == 0, err
    assert {r["ep"] for r in json.loads(out)["rows"]} == {2, 8}
    code, out, err = cli(*args)
    assert code == 0, err
    header = next(line for line in out.splitlines() if "step s" in line)
    assert " ep " in header


def test_ep_on_a_dense_model_is_a_one_line_error(cli, tmp_path):
    path = tmp_path / "dense.json"
    path.write_text(json.dumps({"cluster": "dgx-h100-superpod", "model": "llama3-8b",
                                "job": {"gpus": 64, "tp": 8, "global_batch": 256}}))
    code, _, err = cli("search", path, "--ep", "2")
    assert code == 2 and "--ep" in err and "MoE" in err and err.count("\n") == 1
    code, _, err = cli("search", path, "--ep", "two")
    assert code == 2 and "--ep" in err
