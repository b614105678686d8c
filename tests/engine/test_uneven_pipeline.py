"""An uneven pipeline split: Megatron-Core's first / last stage layer counts
(``job.pp_first_stage_layers`` / ``pp_last_stage_layers``)."""

import pytest

import teton
from teton.engine.step import simulate_step
from teton.errors import SpecError
from teton.spec import load_spec
from teton.spec.frameworks import import_config
from teton.workload.step_work import step_work

EXAMPLE = "examples/deepseek-v3-h800-2k.yaml"


def test_the_ends_hold_what_they_are_given_and_the_middle_the_rest_evenly():
    spec = load_spec(EXAMPLE, ["job.pp_first_stage_layers=3", "job.pp_last_stage_layers=2"])
    layers = step_work(spec.model, spec.job).split.layers[:, 0]
    assert layers[0] == 3 and layers[-1] == 2 and set(layers[1:-1]) == {4} and layers.sum() == spec.model.layers


def test_lighter_ends_balance_dualpipes_end_ranks():
    """Under DualPipe rank 0 and rank p-1 each hold both ends of the model (embedding, output head,
    multi-token prediction): giving the end stages fewer layers shortens the busiest rank."""
    even = simulate_step(load_spec(EXAMPLE))
    uneven = simulate_step(load_spec(EXAMPLE, ["job.pp_first_stage_layers=3", "job.pp_last_stage_layers=2"]))
    # about 11 % on this example (with its selective recompute the heads weigh more against the
    # layers than under full recompute, where it was 4-5 %)
    assert uneven.step_time_s < 0.95 * even.step_time_s


@pytest.mark.parametrize("sets, match", [
    (["job.pp_first_stage_layers=3", "job.pp_last_stage_layers=3"], "do not divide evenly"),
    (["job.pp_first_stage_layers=60"], "at least one"),
    (["job.pp=1", "job.dp=2048", "job.pp_schedule=1f1b", "job.pp_first_stage_layers=3"], "needs a pipeline"),
])
def test_bad_splits_are_one_line_errors(sets, match):
    with pytest.raises(SpecError, match=match):
        load_spec(EXAMPLE, sets)


def test_not_with_virtual_stages_or_embedding_slots():
    with pytest.raises(SpecError, match="one chunk per rank"):
        load_spec("examples/llama3-405b-16k.yaml", ["job.pp_first_stage_layers=7"])
    base = ["job.virtual_stages=1", "job.pp_schedule=1f1b", "job.pp_round=null"]
    with pytest.raises(SpecError, match="pp_embedding_slots"):
        load_spec("examples/llama3-405b-16k.yaml", [*base, "job.pp_first_stage_layers=7"])


def test_megatron_flags_map_to_the_stage_sizes():
    spec, report = import_config(
        "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 30 --hidden-size 4096 --num-attention-heads 32 "
        "--seq-length 4096 --micro-batch-size 1 --global-batch-size 64 --bf16 --vocab-size 32000 "
        "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 6")
    assert spec["job"]["pp_first_stage_layers"] == 6 and spec["job"]["pp_last_stage_layers"] == 6
    s = load_spec(spec)
    assert list(step_work(s.model, s.job).split.layers[:, 0]) == [6, 9, 9, 6]
    assert teton.simulate(spec).step_time_s > 0


def test_a_balanced_split_evens_out_the_ranks_flops():
    """pp_split: balanced picks the end stages' layers: DeepSeek-V3 under DualPipe gets 3 / 2 (its
    3 dense layers lead, the head and MTP close), the fastest of the uneven splits tried by hand."""
    spec = load_spec(EXAMPLE, ["job.pp_split=balanced"])
    layers = step_work(spec.model, spec.job).split.layers[:, 0]
    assert (layers[0], layers[-1]) == (3, 2) and set(layers[1:-1]) == {4}
    hand = load_spec(EXAMPLE, ["job.pp_first_stage_layers=3", "job.pp_last_stage_layers=2"])
    assert simulate_step(spec).step_time_s == pytest.approx(simulate_step(hand).step_time_s)


def test_a_balanced_split_gives_the_output_heads_stage_fewer_layers():
    from teton.spec.model_flops import last_stage_extra_flops_per_token, layer_flops_per_token

    data = {"cluster": "dgx-h100-superpod", "model": "llama3-8b",
            "job": {"gpus": 32, "tp": 8, "pp": 4, "seq_len": 8192, "global_batch": 64}}
    even = load_spec(data)
    balanced = load_spec({**data, "job": {**data["job"], "pp_split": "balanced"}})
    m, seq = even.model, 8192

    def busiest(spec):
        layers = step_work(spec.model, spec.job).split.layers[:, 0].astype(float)
        per = layer_flops_per_token(m, m.layer_types()[0], seq)
        load = layers * per
        load[-1] += last_stage_extra_flops_per_token(m, seq)
        return load.max(), layers

    (b_max, b_layers), (e_max, _) = busiest(balanced), busiest(even)
    assert b_max < e_max and b_layers[-1] < b_layers[1]
    assert simulate_step(balanced).step_time_s < simulate_step(even).step_time_s


def test_balanced_takes_no_stage_sizes_of_its_own():
    with pytest.raises(SpecError, match="pp_split = balanced"):
        load_spec(EXAMPLE, ["job.pp_split=balanced", "job.pp_first_stage_layers=3"])
