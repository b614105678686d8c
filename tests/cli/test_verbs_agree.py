"""Every verb that reports a step time reports the same one: run, compare, search, sweep and ops
against ``teton.simulate`` on one small spec."""

import json
import math

import pytest

import teton
from teton.spec import load_spec
from teton.workload.step_work import step_work

SMALL = """\
cluster: dgx-h100-superpod
model: llama3-8b
job: {gpus: 64, tp: 2, pp: 2, seq_len: 4096, global_batch: 64, zero: 1}
"""


def test_every_verb_reports_the_same_step_time(cli, tmp_path):
    spec = tmp_path / "small.yaml"
    spec.write_text(SMALL)
    api = teton.simulate(spec)
    fp8 = teton.simulate(spec, ["job.precision=fp8"])

    code, out, _ = cli("run", spec, "--json")
    assert code == 0 and json.loads(out)["step_time_s"] == api.step_time_s

    code, out, _ = cli("compare", spec, "--b", "job.precision=fp8", "--json")
    d = json.loads(out)
    assert d["a"]["step_time_s"] == api.step_time_s and d["b"]["step_time_s"] == fp8.step_time_s

    code, out, _ = cli("search", spec, "--tp", "2", "--pp", "2", "--cp", "1", "--virtual-stages", "1", "--top", "50",
                       "--json")
    rows = [r for r in json.loads(out)["rows"]  # ZeRO 1 and 2 coincide here: search lists the pair once
            if (r["micro_batch"], r["recompute"], r["grad_reduce"]) == (1, "none", "per_step") and r["zero"] in (1, 2)]
    assert [r["step_time_s"] for r in rows] == [api.step_time_s]

    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"base: {spec}\ngrid: {{job.precision: [bf16, fp8]}}\n")
    code, out, _ = cli("sweep", sweep, "--db", tmp_path / "r.duckdb", "--executor", "serial", "--json")
    top = {r["job.precision"]: r["step_time_s"] for r in json.loads(out)["top"]}
    assert top == {"bf16": api.step_time_s, "fp8": fp8.step_time_s}

    # teton ops: a micro-batch's blocks, times the micro-batches and each rank's layers, are the
    # busiest rank's compute and TP time
    code, out, _ = cli("ops", spec, "--block", "all", "--json")
    totals = json.loads(out)["totals_s"]
    s = load_spec(spec)
    work = step_work(s.model, s.job)
    per_rank = work.split.layers_on_rank()
    m = work.micro_batches

    def rank_s(r, cat):
        layer = totals["layer.fwd"].get(cat, 0) + totals["layer.bwd"].get(cat, 0)
        extra = ("embedding" if r == 0 else "head")
        return m * (per_rank[r] * layer + totals[f"{extra}.fwd"].get(cat, 0) + totals[f"{extra}.bwd"].get(cat, 0))

    busiest = max(range(2), key=lambda r: rank_s(r, "compute") + rank_s(r, "tp"))
    assert rank_s(busiest, "compute") == pytest.approx(api.breakdown["compute"], rel=1e-12)
    assert rank_s(busiest, "tp") == pytest.approx(api.breakdown["tp_comm"], rel=1e-12)
    assert math.isclose(api.tokens_per_s * api.step_time_s, 64 * 4096)
