"""Layout search: valid layouts only, ranked, fitting first."""

import json

from teton.spec import load_spec
from teton.sweep import SearchSpace, candidate_jobs, search_layouts


def _spec():
    return load_spec({"cluster": "dgx-h100-superpod", "model": "llama3-8b",
                      "job": {"gpus": 64, "tp": 8, "seq_len": 8192, "global_batch": 256}})


def test_candidates_obey_the_job_rules():
    spec = _spec()
    cands = list(candidate_jobs(spec, SearchSpace(tp=(1, 2, 3, 8), cp=(1,), pp=(1, 2), virtual_stages=(1, 2))))
    assert cands
    for c in cands:
        j = c.job
        assert j.tp * j.cp * j.pp * j.dp_degree == 64 and j.tp != 3
        assert j.tokens_per_step == spec.job.tokens_per_step


def test_search_ranks_fitting_layouts_by_step_time():
    d = search_layouts(_spec(), SearchSpace(tp=(1, 2, 4, 8), cp=(1,), pp=(1, 2, 4), virtual_stages=(1,)))
    rows = d["rows"]
    fitting = [r for r in rows if r["fits_in_memory"]]
    assert fitting and rows[: len(fitting)] == fitting
    times = [r["step_time_s"] for r in fitting]
    assert times == sorted(times)


def test_search_cli_json(cli, tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"cluster": "dgx-h100-superpod", "model": "llama3-8b",
                                "job": {"gpus": 64, "tp": 8, "seq_len": 8192, "global_batch": 256}}))
    code, out, _ = cli("search", path, "--tp", "2,8", "--pp", "1,2", "--cp", "1", "--virtual-stages", "1",
                       "--top", "3", "--json")
    d = json.loads(out)
    assert code == 0 and len(d["rows"]) == 3 and d["evaluated"] >= 3
    code, _, err = cli("search", path, "--tp", "two")
    assert code == 2 and "--tp" in err
