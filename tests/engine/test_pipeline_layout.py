"""Megatron-Core's pipeline layout string (``job.pp_layout``): the layers of every virtual stage."""

import pytest

from teton.engine.step import simulate_step
from teton.errors import SpecError
from teton.spec import load_spec
from teton.spec.pipeline_layout import parse
from teton.workload.step_work import step_work

EXAMPLE = "examples/deepseek-v3-h800-2k.yaml"
ONE_F_ONE_B = ["job.pp_schedule=1f1b"]
# NVIDIA's DeepSeek-V3 recipes' sixteen stages: the embedding with 4 layers, 14 x 4, then 1 layer,
# the MTP module and the loss
RECIPE = "Et*4|(t*4|)*14tmL"


def test_the_syntax_unrolls_as_megatron_core_does():
    assert parse("Ettt|(tt|)*2,m|L") == ["Ettt", "tt", "tt", "m", "L"]
    assert parse(RECIPE) == ["Etttt", *["tttt"] * 14, "tmL"]


def test_each_virtual_stage_holds_the_layers_it_is_given():
    spec = load_spec(EXAMPLE, [*ONE_F_ONE_B, f"job.pp_layout={RECIPE}"])
    assert list(step_work(spec.model, spec.job).split.layers[:, 0]) == [4] * 15 + [1]
    # interleaved: stage i runs on rank i % pp, chunk i // pp (Megatron-Core's order)
    spec = load_spec(EXAMPLE, ["job.pp_schedule=interleaved", "job.pp=4", "job.virtual_stages=4", "job.dp=512", "job.global_batch=16384",
                               f"job.pp_layout={RECIPE}"])
    layers = step_work(spec.model, spec.job).split.layers
    assert layers.shape == (4, 4) and layers[0, 0] == 4 and layers[3, 3] == 1 and layers.sum() == spec.model.layers


def test_the_recipes_layout_unloads_the_output_heads_stage():
    """Under 1F1B the busiest stage sets the pace: the even split leaves the last stage its
    layers beside the output head and the MTP module; the recipe's layout gives it one."""
    even = simulate_step(load_spec(EXAMPLE, ONE_F_ONE_B))
    recipe = simulate_step(load_spec(EXAMPLE, [*ONE_F_ONE_B, f"job.pp_layout={RECIPE}"]))
    assert recipe.step_time_s < 0.95 * even.step_time_s


@pytest.mark.parametrize("layout, match", [
    ("Et*4|(t*4|)*13tmL", "has 15 stages"),
    ("Et*4|(t*4|)*14ttmL", "places 62 't'"),
    ("Et*4|(t*4|)*14tL", "places 0 'm'"),
    ("Et*4|(t*4|)*13t*4m|tL", "close with the loss"),
    ("t*4|E(t*4|)*14tmL", "open with the embedding"),
    ("Et*4|(t*4|)*14txL", "has 'x'"),
    ("E(t*4|)*99999999999tmL", "unrolls to more than"),
])
def test_a_bad_layout_is_a_one_line_error(layout, match):
    with pytest.raises(SpecError, match=match) as err:
        load_spec(EXAMPLE, [*ONE_F_ONE_B, f"job.pp_layout={layout}"])
    assert "job.pp_layout" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("sets", [["job.pp_first_stage_layers=3"], ["job.pp_split=balanced"],
                                  ["job.pp_schedule=dualpipe"]])
def test_not_with_the_other_ways_to_split(sets):
    with pytest.raises(SpecError, match="places every stage's layers itself"):
        load_spec(EXAMPLE, [*ONE_F_ONE_B, f"job.pp_layout={RECIPE}", *sets])


def test_megatrons_flag_maps_to_the_layout():
    from teton.spec.frameworks import import_config

    spec, _ = import_config(
        "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 30 --hidden-size 4096 --num-attention-heads 32 "
        "--seq-length 4096 --micro-batch-size 1 --global-batch-size 64 --bf16 --vocab-size 32000 "
        "--pipeline-model-parallel-size 4 --pipeline-model-parallel-layout 'Et*9|t*9|t*9|t*3L'")
    assert spec["job"]["pp_layout"] == "Et*9|t*9|t*9|t*3L"
    s = load_spec(spec)
    assert list(step_work(s.model, s.job).split.layers[:, 0]) == [9, 9, 9, 3]


def test_the_cli_names_the_field(cli):
    code, _, err = cli("run", EXAMPLE, "--set", "job.pp_schedule=1f1b", "--set", "job.pp_layout=Et*60|tmL")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "job.pp_layout" in err and "has 2 stages" in err


def test_nemos_list_of_layer_names_maps_to_the_layout():
    """NeMo 2.0's MegatronStrategy (and Megatron-Bridge) write the layout as lists of LayerType names."""
    from pathlib import Path

    from teton.spec.frameworks import import_config

    stages = [["embedding"] + ["decoder"] * 4] + [["decoder"] * 4] * 18 + [["decoder"] * 4 + ["loss"]]
    text = Path("tests/data/frameworks/nemo2-llama3-70b.yaml").read_text().replace(
        "    context_parallel_size: 1\n", f"    context_parallel_size: 1\n    pipeline_model_parallel_layout: {stages}\n")
    spec, report = import_config(text, "nemo")
    assert spec["job"]["pp_layout"] == "Etttt|" + "tttt|" * 18 + "ttttL"
    s = load_spec(spec)
    assert (step_work(s.model, s.job).split.layers == 4).all()
    with pytest.raises(SpecError, match="a stage's layers are embedding, decoder, mtp, loss"):
        import_config(text.replace("'loss'", "'head'"), "nemo")
