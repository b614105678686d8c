"""Layout search: valid layouts only, ranked, fitting first; expert parallelism searched on MoE
models only; ``teton search``'s JSON, table and one-line errors."""

import json
from dataclasses import replace

from cli_checks import one_line_error

from teton.spec import load_spec
from teton.sweep import SearchSpace, candidate_jobs, search_layouts
from teton.sweep.space import REFINE_TOP

DENSE = {"cluster": "dgx-h100-superpod", "model": "llama3-8b",
         "job": {"gpus": 64, "tp": 8, "seq_len": 8192, "global_batch": 256}}


def _spec():
    return load_spec(DENSE)


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
    path.write_text(json.dumps(DENSE))
    code, out, _ = cli("search", path, "--tp", "2,8", "--pp", "1,2", "--cp", "1", "--virtual-stages", "1",
                       "--top", "3", "--json")
    d = json.loads(out)
    assert code == 0 and len(d["rows"]) == 3 and d["evaluated"] >= 3
    code, _, err = cli("search", path, "--tp", "two")
    assert code == 2 and "--tp" in err


def test_fitting_only_simulates_just_the_rows_that_fit():
    """``teton plan``'s shortcut: the memory verdict without the step is the step's, so the rows are
    the fitting rows of a full search; ``evaluated`` still counts every valid layout."""
    space = SearchSpace(tp=(1, 2, 8), cp=(1,), pp=(1, 2, 4), virtual_stages=(1,))
    full = search_layouts(_spec(), space)
    fast = search_layouts(_spec(), space, fitting_only=True)
    assert 0 < full["fitting"] < len(full["rows"])  # both verdicts occur
    assert fast["rows"] == [r for r in full["rows"] if r["fits_in_memory"]]
    assert fast["evaluated"] == full["evaluated"] and fast["fitting"] == full["fitting"]


def test_a_jobs_pp_round_does_not_hide_other_pipelines():
    """Llama 3's round size N belongs to the job's own (pp, v): layouts with another pp search
    with rounds of their pp instead of being dropped as invalid."""
    spec = load_spec({"cluster": "dgx-h100-superpod", "model": "llama3-8b",
                      "job": {"gpus": 64, "tp": 8, "pp": 4, "dp": 2, "seq_len": 8192, "global_batch": 32,
                              "pp_schedule": "interleaved", "virtual_stages": 2, "pp_round": 8}})
    space = SearchSpace(tp=(8,), cp=(1,), pp=(2, 4), virtual_stages=(1, 2))
    layouts = {(c.job.pp, c.job.virtual_stages): c.job.pp_round for c in candidate_jobs(spec, space)}
    assert layouts == {(2, 1): None, (2, 2): None, (4, 1): None, (4, 2): 8}


def test_zero2_is_searched_both_ways():
    """ZeRO-2 reduced once per step keeps the unsharded FP32 accumulation buffer (as ZeRO-1 does);
    reduced every micro-batch it shards the gradients. On Llama 3 8B over 8 GPUs only the latter
    (and ZeRO-3) fit, and the search finds it."""
    spec = load_spec({"cluster": "meta-ib-24k", "model": "llama3-8b",
                      "job": {"gpus": 8, "dp": 8, "seq_len": 8192, "global_batch": 512}})
    space = SearchSpace(tp=(1,), cp=(1,), pp=(1,), virtual_stages=(1,), micro_batch=(1,), recompute=("none",),
                        zero=(1, 2, 3), prune=False)
    d = search_layouts(spec, space)
    fitting = [(r["zero"], r["grad_reduce"]) for r in d["rows"] if r["fits_in_memory"]]
    assert fitting[0] == (2, "per_microbatch") and (3, "per_microbatch") in fitting
    assert (1, "per_step") not in fitting
    # ZeRO-3 only adds traffic to the ZeRO-2 layout that fits, and ZeRO-2 reduced once a step needs
    # ZeRO-1's memory (which does not fit) at no less work: the default search leaves both out
    pruned = search_layouts(spec, replace(space, prune=True))
    assert [(r["zero"], r["grad_reduce"]) for r in pruned["rows"] if r["fits_in_memory"]] == [(2, "per_microbatch")]
    assert [(r["zero"], r["fits_in_memory"]) for r in pruned["rows"]] == [(2, True), (1, False)]
    assert pruned["dominated"] == 2 and pruned["evaluated"] == d["evaluated"]


def test_search_with_impossible_constraints_says_so(cli, example_spec):
    # was: an empty table and exit 0
    code, out, err = cli("search", example_spec, "--tp", "3")
    one_line_error(code, err, "no layout passes the job rules")
    assert out == ""


def test_search_memory_is_in_gib_as_teton_run_prints_it(cli, example_spec):
    code, out, _ = cli("search", example_spec, "--tp", "8", "--pp", "16", "--cp", "1", "--virtual-stages", "8",
                       "--top", "1")
    assert code == 0
    code, js, _ = cli("run", example_spec, "--json")
    gib = json.loads(js)["memory_per_gpu_bytes"] / 2**30
    assert "mem GiB" in out and f"{gib:.1f}" in out  # 70.5, not 75.7 (GB)


MOE = {"cluster": "dgx-h100-superpod", "model": "mixtral-8x7b",
       "job": {"gpus": 256, "tp": 2, "ep": 8, "seq_len": 4096, "global_batch": 512}}


SMALL_SPACE = dict(tp=(2,), cp=(1,), pp=(1,), virtual_stages=(1,), micro_batch=(1,), recompute=("none",), zero=(1,))


def test_search_evaluates_several_ep_degrees_on_a_moe_model():
    spec = load_spec(MOE)
    d = search_layouts(spec, SearchSpace(**SMALL_SPACE, refine_top=None))
    assert {r["ep"] for r in d["rows"]} == {1, 2, 4, 8}  # every divisor of the 8 experts (and of dp 128)
    assert {(r["ep"], r["etp"]) for r in d["rows"]} == {(ep, etp) for ep in (1, 2, 4, 8) for etp in (1, 2)}
    assert len({r["step_time_s"] for r in d["rows"]}) == 8
    eps = {c.job.ep for c in candidate_jobs(spec, SearchSpace(**{**SMALL_SPACE, "ep": (2, 3, 8, 256)}))}
    assert eps == {2, 8}  # 3 does not divide the experts, 256 neither: the job rules skip them
    # staged: the first pass takes the smallest EP that fits, the refinement every larger one
    staged = search_layouts(spec, SearchSpace(**SMALL_SPACE))
    fitting = {r["ep"] for r in d["rows"] if r["fits_in_memory"]}
    assert fitting == {4, 8} and {r["ep"] for r in staged["rows"]} == fitting
    assert staged["rows"][0] == d["rows"][0]


def test_search_varies_expert_tp_and_the_rank_order_on_a_moe_model():
    """etp 1 and tp by default (``--etp`` narrows it), and with pp > 1 Megatron-Core's order beside
    Llama 3's: the order decides whether EP stays inside a pipeline stage's hosts."""
    spec = load_spec(MOE)
    space = SearchSpace(**{**SMALL_SPACE, "pp": (2,), "ep": (8,)})
    cands = [c.job.layout for c in candidate_jobs(spec, space)]
    megatron, llama = ("tp", "cp", "ep", "dp", "pp"), ("tp", "cp", "pp", "ep", "dp")
    assert {(lay.etp, lay.order) for lay in cands} == {(e, o) for e in (1, 2) for o in (megatron, llama)}
    d = search_layouts(spec, space)
    by = {(r["etp"], tuple(r["parallel_order"])): r["step_time_s"] for r in d["rows"]}
    assert by[(2, megatron)] < by[(2, llama)]  # EP 8 on the 16 GPUs of 2 hosts vs across 8 stages' hosts
    assert {c.job.layout.etp for c in candidate_jobs(spec, SearchSpace(**{**SMALL_SPACE, "etp": (1, 3)}))} == {1}


def test_dense_model_searches_ep_1_only():
    spec = load_spec({**MOE, "model": "llama3-8b", "job": {**MOE["job"], "ep": 1, "tp": 8}})
    assert {c.job.ep for c in candidate_jobs(spec, SearchSpace(**{**SMALL_SPACE, "tp": (8,)}))} == {1}


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
    assert " ep " in header and " etp " in header and "order" in header
    code, out, err = cli(*args, "--etp", "1", "--json")
    assert code == 0, err
    assert {r["etp"] for r in json.loads(out)["rows"]} == {1}


def test_ep_on_a_dense_model_is_a_one_line_error(cli, tmp_path):
    path = tmp_path / "dense.json"
    path.write_text(json.dumps({"cluster": "dgx-h100-superpod", "model": "llama3-8b",
                                "job": {"gpus": 64, "tp": 8, "global_batch": 256}}))
    code, _, err = cli("search", path, "--ep", "2")
    assert code == 2 and "--ep" in err and "MoE" in err and err.count("\n") == 1
    code, _, err = cli("search", path, "--ep", "two")
    assert code == 2 and "--ep" in err
    code, _, err = cli("search", path, "--etp", "1")
    assert code == 2 and "--etp" in err and "MoE" in err and err.count("\n") == 1


def test_a_staged_moe_search_finds_the_exhaustive_best():
    """An MoE search refines EP, then expert TP and the rank order, on the best layouts of a first
    pass: on Mixtral's 256 GPUs over 3 TP x 3 PP x 2 v x 2 micro-batch x 2 recompute x 4 EP
    degrees its fastest ten fitting layouts are the exhaustive search's, in order, from under half
    the layouts."""
    spec = load_spec(MOE)
    space = dict(tp=(1, 2, 4), cp=(1,), pp=(1, 2, 4), virtual_stages=(1, 2), micro_batch=(1, 2),
                 recompute=("none", "full"), zero=(1,))
    staged = search_layouts(spec, SearchSpace(**space))
    every = search_layouts(spec, SearchSpace(**space, refine_top=None))
    assert staged["refined_top"] == REFINE_TOP and every["refined_top"] is None
    assert staged["evaluated"] < every["evaluated"] / 2

    def key(r):
        return (r["tp"], r["pp"], r["ep"], r["etp"], tuple(r["parallel_order"]), r["virtual_stages"],
                r["micro_batch"], r["recompute"], r["step_time_s"])

    assert [key(r) for r in staged["rows"][:10]] == [key(r) for r in every["rows"][:10]]
    # passes 2 and 3 place layouts away from the first expert choice (EP 8, etp 1) among the ten
    top = staged["rows"][:10]
    assert any(r["ep"] < 8 for r in top) and any(r["etp"] > 1 for r in top)


def test_search_cli_exhaustive_switch(cli, tmp_path):
    path = tmp_path / "moe.json"
    path.write_text(json.dumps(MOE))
    args = ("search", path, "--tp", "2", "--cp", "1", "--pp", "1,2", "--virtual-stages", "1", "--ep", "4,8")
    code, out, err = cli(*args)
    assert code == 0, err
    assert f"tried on the best {REFINE_TOP}" in out
    code, out, err = cli(*args, "--exhaustive", "--json")
    assert code == 0, err
    assert json.loads(out)["refined_top"] is None


def test_dominated_layouts_are_left_out_without_changing_the_ranking():
    """A layout whose recompute and ZeRO stage only add work to a fitting layout of the same degrees
    is not simulated: every row the pruned search ranks is the exhaustive search's, in its order,
    with the same best; only dominated rows are missing."""
    spec = load_spec(MOE)
    space = dict(tp=(1, 2), cp=(1,), pp=(1, 2), virtual_stages=(1,), micro_batch=(1, 2),
                 recompute=("none", "selective", "full"), zero=(1, 2, 3), refine_top=None)
    pruned = search_layouts(spec, SearchSpace(**space))
    every = search_layouts(spec, SearchSpace(**space, prune=False))

    def key(r):
        return (r["tp"], r["pp"], r["ep"], r["etp"], tuple(r["parallel_order"]), r["micro_batch"], r["recompute"],
                r["zero"], r["grad_reduce"], r["step_time_s"])

    kept = [key(r) for r in pruned["rows"] if r["fits_in_memory"]]
    ranked = [key(r) for r in every["rows"] if r["fits_in_memory"]]
    assert pruned["dominated"] > 0 and every["dominated"] == 0 and pruned["evaluated"] == every["evaluated"]
    assert kept[0] == ranked[0] and len(kept) < len(ranked)
    where = {k: i for i, k in enumerate(ranked)}
    assert all(k in where for k in kept) and [where[k] for k in kept] == sorted(where[k] for k in kept)
    # what was left out is slower than the layout of the same degrees that dominated it
    best_of = {}
    for k in kept:
        best_of.setdefault(k[:6], k[-1])
    assert all(k[-1] >= best_of[k[:6]] for k in ranked if k not in set(kept) and k[:6] in best_of)
    # of the layouts that do not fit, one is left out only for another of the same degrees that is
    # no slower and needs no more memory (and every one kept is the exhaustive search's)
    short = {key(r): r["memory_per_gpu_bytes"] for r in every["rows"] if not r["fits_in_memory"]}
    short_kept = [key(r) for r in pruned["rows"] if not r["fits_in_memory"]]
    assert all(k in short for k in short_kept)
    for k, mem in short.items():
        if k not in set(short_kept) and k[:6] not in best_of:
            assert any(j[:6] == k[:6] and j[-1] <= k[-1] and short[j] <= mem for j in short_kept), k


def test_a_saver_rules_refusal_is_not_remembered_for_the_other_savers():
    """A degree rule's refusal of an expert choice is remembered across a layout's memory savers;
    a saver's own rule (DualPipe refuses ZeRO-3) is not: the same layout still passes with ZeRO-1."""
    from teton.sweep.candidates import _expert_candidates

    spec = load_spec("examples/deepseek-v3-h800-2k.yaml")
    lay = spec.job.layout
    layout = dict(tp=lay.tp, cp=lay.cp, pp=lay.pp, dp=lay.dp, ep=lay.ep, recompute=spec.job.recompute,
                  grad_reduce=None)
    degrees, refused = (lay.tp, lay.pp, lay.dp), set()
    assert not list(_expert_candidates(spec, SearchSpace(), {**layout, "zero": 3}, degrees, refused))
    assert not refused
    assert list(_expert_candidates(spec, SearchSpace(), {**layout, "zero": 1}, degrees, refused))
    # a degree rule (etp must divide the expert FFN width) is remembered
    bad = list(_expert_candidates(spec, SearchSpace(etp=(7,)), {**layout, "zero": 1}, degrees, refused))
    assert not bad and refused


def test_a_staged_first_pass_takes_the_largest_ep_that_fits():
    """The first pass tries EP largest first: Mixtral's 8 experts at EP 8 (which fits), not the
    smallest EP that fits (4); a saver dominated there is counted, not simulated."""
    spec = load_spec(MOE)
    first = list(candidate_jobs(spec, SearchSpace(**SMALL_SPACE), first_expert_choice=True))
    assert [c.job.ep for c in first] == [8]
    every = {c.job.ep for c in candidate_jobs(spec, SearchSpace(**SMALL_SPACE))}
    assert every == {1, 2, 4, 8}


def test_a_rule_of_the_degrees_alone_refuses_the_layout_once(monkeypatch):
    """A refusal naming a field of candidates.DEGREE_FIELDS skips the layout's other expert choices
    and savers unchecked: the candidates are the same as when every choice is checked (fails if a
    rule naming one of those fields reads the expert choice or a saver)."""
    import teton.sweep.candidates as candidates

    spec = load_spec(MOE)
    space = SearchSpace(tp=(1, 2, 4), cp=(1,), pp=(1, 2, 4, 32, 64), virtual_stages=(1, 2, 8), micro_batch=(1, 4),
                        recompute=("none", "full"), zero=(1, 3))

    def layouts(first: bool) -> list:
        return [(c.job.layout, c.job.recompute, c.job.zero, fits, d)
                for c, fits, d in candidates._candidates(spec, space, first)]

    fast = layouts(False), layouts(True)
    monkeypatch.setattr(candidates, "DEGREE_FIELDS", frozenset())
    assert (layouts(False), layouts(True)) == fast
    assert fast[0]


def test_a_staged_search_simulates_each_layout_once_and_counts_the_rest_dominated(monkeypatch):
    """Every valid layout of a staged MoE search is simulated once or counted dominated: the EP
    pass's dominated savers are counted too (they were dropped uncounted), and a candidate that two
    of the best layouts both propose at some EP is simulated once."""
    import teton.sweep.search as search
    from teton.sweep.candidates import _candidates

    calls = []
    real = search.simulate_step
    monkeypatch.setattr(search, "simulate_step", lambda s: calls.append(search._identity(s)) or real(s))
    spec = load_spec(MOE)
    space = SearchSpace(tp=(1, 2, 4), cp=(1,), pp=(1, 2, 4), virtual_stages=(1, 2), micro_batch=(1, 2),
                        recompute=("none", "selective", "full"), zero=(1, 2))
    d = search_layouts(spec, space)
    # simulated once each; the rest of the valid layouts dominated, or (a refinement that does not
    # fit while the best so far does) counted and left unsimulated
    assert len(calls) == len(set(calls)) <= d["evaluated"] - d["dominated"]
    first_pass = sum(dominated for _, _, dominated in _candidates(spec, space, True))
    assert d["dominated"] > first_pass


def test_search_tries_each_cp_algorithm_on_cp_layouts_only(cli, tmp_path):
    """--cp-algo: a CP layout at each algorithm (a layout of its own, ranked with the others), a
    layout without CP once at the job's own; an algorithm a layout's heads refuse (a2a with fewer
    KV heads on a TP rank than CP ranks) drops out; a bad name is a one-line error."""
    spec = load_spec({"cluster": "dgx-h100-superpod", "model": "llama3-8b",
                      "job": {"gpus": 64, "tp": 2, "cp": 2, "seq_len": 32768, "global_batch": 64}})
    space = SearchSpace(tp=(2, 8), cp=(1, 2, 4), pp=(1,), virtual_stages=(1,), micro_batch=(1,),
                        recompute=("full",), zero=(1,), cp_algo=("ring", "a2a"))
    rows = search_layouts(spec, space)["rows"]
    algos = {(r["tp"], r["cp"]): set() for r in rows}
    for r in rows:
        algos[r["tp"], r["cp"]].add(r["cp_algo"])
    assert algos[2, 2] == {"ring", "a2a"} and algos[2, 4] == {"ring", "a2a"}
    assert algos[2, 1] == {spec.job.cp_algo}  # cp 1: the job's own, once
    assert algos[8, 2] == {"ring"}  # 8 KV heads over tp 8: one a rank, which cp 2 cannot split
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"cluster": "dgx-h100-superpod", "model": "llama3-8b",
                                "job": {"gpus": 64, "tp": 2, "cp": 2, "seq_len": 32768, "global_batch": 64}}))
    code, out, _ = cli("search", path, "--tp", "2", "--cp", "2", "--pp", "1", "--cp-algo", "ring,a2a", "--top", "50")
    assert code == 0 and "cp algo" in out and "a2a" in out
    code, _, err = cli("search", path, "--cp-algo", "ulysses")
    one_line_error(code, err, "--cp-algo")


def test_search_tries_hierarchical_cp_with_its_all_to_alls_in_the_nvlink_domain():
    """--cp-algo a2a+p2p: the all-to-all groups are the most CP ranks of one 8-GPU host that divide
    cp and a TP rank's heads (tp 1: 8, tp 2: 4; cp 4 at tp 2 fits a host whole, so it runs 2); rows
    carry cp_a2a; where no group of two or more exists, the layout is not tried with it."""
    from teton.spec.layout import hierarchical_cp_a2a

    spec = load_spec({"cluster": "dgx-h100-superpod", "model": "llama3-8b",
                      "job": {"gpus": 64, "tp": 1, "cp": 16, "seq_len": 65536, "global_batch": 8}})
    assert [hierarchical_cp_a2a(spec.model, tp, cp, spec.cluster.domain_gpus) for tp, cp in ((1, 16), (2, 16), (2, 4), (8, 2), (1, 2))] == \
        [8, 4, 2, None, None]
    space = SearchSpace(tp=(1, 8), cp=(2, 16), pp=(1,), virtual_stages=(1,), micro_batch=(1,),
                        recompute=("full",), zero=(1,), cp_algo=("ring", "a2a+p2p"))
    rows = search_layouts(spec, space)["rows"]
    hier = {(r["tp"], r["cp"]): r["cp_a2a"] for r in rows if r["cp_algo"] == "a2a+p2p"}
    assert hier == {(1, 16): 8}  # tp 8 x cp 2 and tp 8 x cp 16: no two CP ranks in one host
    assert all("cp_a2a" not in r for r in rows if r["cp_algo"] != "a2a+p2p")


def test_a_search_offers_only_the_recompute_modes_the_framework_has():
    """Megatron's stacks have none / selective / full recompute; torchtitan's per-op and per-layer
    policies are not theirs to run (and a spec that asks for one is a one-line error)."""
    import pytest

    from teton.errors import SpecError

    space = SearchSpace(tp=(8,), cp=(1,), pp=(1,), virtual_stages=(1,), micro_batch=(1,), zero=(1,), prune=False)
    unknown = {c.job.recompute for c in candidate_jobs(_spec(), space)}
    megatron = {c.job.recompute for c in candidate_jobs(load_spec({**DENSE, "software": "megatron-lm-2025"}), space)}
    assert {"selective_op", "selective_layer"} <= unknown
    assert megatron == {"none", "selective", "full"}
    with pytest.raises(SpecError, match="job.recompute.*megatron-bridge has recompute none / selective / full"):
        load_spec({**DENSE, "software": "megatron-bridge-26.04", "job": {**DENSE["job"], "recompute": "selective_layer"}})
    titan = {**DENSE, "software": {"framework": "torchtitan"}, "job": {**DENSE["job"], "recompute": "selective"}}
    with pytest.raises(SpecError, match="torchtitan has recompute"):
        load_spec(titan)
