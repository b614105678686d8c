"""The Layout owns the degrees, their rules and every per-rank and per-step shape of a job."""

import pytest

from teton import SpecError, load_spec
from teton.spec.layout import Layout


def _spec(**job):
    return {"cluster": "meta-roce-24k", "model": "llama3-8b", "job": {"gpus": 32, "tp": 8, "cp": 4, **job}}


def test_sp_tokens_per_cp_rank_must_divide_by_tp():
    """b s / cp = 48 / 4 = 12 tokens per CP rank do not shard over TP 8 under sequence parallelism
    (seq_len 48 alone divides by tp and by 2 cp): a one-line error naming job.micro_batch."""
    with pytest.raises(SpecError) as e:
        load_spec(_spec(seq_len=48))
    assert "job.micro_batch" in str(e.value) and "12 tokens" in str(e.value) and "tp (8)" in str(e.value)
    assert "\n" not in str(e.value)
    load_spec(_spec(seq_len=48, micro_batch=2))  # 24 tokens per CP rank shard 3 a TP rank
    load_spec(_spec(seq_len=48, sequence_parallel=False))


def test_layout_derives_dp_and_the_batch_once():
    lay = load_spec(_spec(seq_len=8192, micro_batch=2, global_batch=64)).job.layout
    assert (lay.dp, lay.gpus, lay.model_parallel) == (1, 32, 32)
    assert (lay.sequences_per_step, lay.micro_batches, lay.tokens_per_step) == (64, 32, 64 * 8192)
    assert (lay.tokens, lay.elementwise_tokens) == (2 * 8192 // 4, 2 * 8192 // 4 // 8)
    assert lay == Layout.of(load_spec(_spec(seq_len=8192, micro_batch=2, global_batch=64)).job)


def test_a_tp_rank_holds_the_vocab_rows_its_lm_head_runs():
    """GPT-3's 50,257-token vocabulary over TP 8: each rank holds ceil(50257 / 8) = 6,283 padded
    rows of the embedding (it held 6,282.125; GPT-3's output head is tied to it), the rows its
    lm_head GEMM multiplies."""
    from teton.workload.ops import layer_params_per_gpu
    from teton.workload.step_work import step_work

    spec = load_spec({"cluster": "dgx-a100-superpod", "model": "gpt3-175b",
                      "job": {"gpus": 16, "tp": 8, "pp": 2, "seq_len": 2048, "global_batch": 16}})
    m, lay = spec.model, spec.job.layout
    work = step_work(m, spec.job)
    rows = lay.local_vocab(m.vocab)
    assert rows == 6283
    lm_head = next(op for op in work.head.fwd if op.name == "lm_head")
    assert lm_head.n == rows
    layers = work.split.layers * layer_params_per_gpu(m, spec.job)
    positions = m.embedding_params() - m.vocab * m.hidden
    assert work.chunk_params[0, 0] - layers[0, 0] == rows * m.hidden + positions
    # the tied head on the other pipeline stage reads its own copy of those rows (Megatron's shared
    # word embeddings, their gradients summed once a step: engine.shared_embedding)
    assert m.tied_embeddings and work.chunk_params[-1, -1] - layers[-1, -1] == rows * m.hidden + m.norm_params()


def test_the_memoised_layout_follows_every_copy_of_the_job():
    """job.layout is memoised by the frozen JobSpec's identity: a copy with other degrees (what the
    search and check_job make with model_copy) gets its own, never the original's."""
    job = load_spec("examples/llama3-405b-16k.yaml").job
    first = job.layout
    assert job.layout is first and first == Layout.of(job)
    for update in ({"tp": 4, "dp": 256}, {"global_batch": 1024}, {"micro_batch": 2, "dp": 128}):
        copy = job.model_copy(update=update)
        assert copy.layout == Layout.of(copy) and copy.layout != first
    assert job.layout is first  # the original keeps its own


# Megatron-Bridge's H100 MoE layout that teton refused ("job.ep = 32: must divide dp (16)"): EP 32
# over TP 2 x DP 16, expert-TP 1 (issue 25)
BRIDGE = {"cluster": "dgx-h100-superpod", "model": "qwen3-30b-a3b",
          "job": {"gpus": 32, "tp": 2, "ep": 32, "etp": 1, "seq_len": 4096, "global_batch": 256}}


def test_megatron_bridges_expert_layout_is_accepted():
    """etp ep edp = 1 x 32 x 1 = tp cp dp = 2 x 1 x 16: Megatron-Core's rule, not 'ep divides dp'."""
    from teton.spec.layout import MOE_ORDER

    spec = load_spec(BRIDGE)
    lay = spec.job.layout
    assert (lay.tp, lay.dp, lay.ep, lay.etp, lay.edp) == (2, 16, 32, 1, 1)
    assert lay.order == MOE_ORDER and lay.degrees == {"tp": 2, "cp": 1, "pp": 1, "dp": 16, "ep": 32, "etp": 1, "edp": 1}
    assert lay.rank_stride("ep") == 1  # EP's neighbours are the TP ranks
    import teton

    assert teton.simulate(spec).step_time_s > 0


def test_an_moe_job_takes_megatrons_order_and_a_dense_one_llama_3s():
    """No job.parallel_order: tp-cp-ep-dp-pp for an MoE model (what Megatron-Core and its recipes
    run), tp-cp-pp-dp for a dense one; an order the spec gives is kept."""
    moe = load_spec(BRIDGE)
    assert moe.job.parallel_order == ("tp", "cp", "ep", "dp", "pp") and "job.parallel_order" in moe.job_defaults
    dense = load_spec(_spec())
    assert dense.job.parallel_order == ("tp", "cp", "pp", "dp") == dense.job.layout.order
    given = load_spec({**BRIDGE, "job": {**BRIDGE["job"], "parallel_order": ["tp", "cp", "pp", "dp"]}})
    assert given.job.layout.order == ("tp", "cp", "pp", "ep", "dp")  # ep just inside dp


@pytest.mark.parametrize("job,model,words", [
    ({"etp": 3}, "qwen3-30b-a3b", ("job.etp", "must divide tp*cp*dp = 2*1*16 = 32")),
    ({"etp": 2}, "qwen3-30b-a3b", ("job.ep", "etp*ep = 2*32 must divide tp*cp*dp")),
    ({"ep": 1, "etp": 1}, "llama3-8b", ("job.etp", "needs a MoE model")),
    ({"ep": 2, "etp": 16}, {"base": "mixtral-8x7b", "moe_ffn_hidden": 1000}, ("job.etp", "expert FFN width (1000")),
])
def test_a_bad_expert_layout_is_a_one_line_error(job, model, words):
    with pytest.raises(SpecError) as e:
        load_spec({**BRIDGE, "model": model, "job": {**BRIDGE["job"], **job}})
    assert all(w in str(e.value) for w in words) and "\n" not in str(e.value), str(e.value)
