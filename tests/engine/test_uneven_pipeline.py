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
