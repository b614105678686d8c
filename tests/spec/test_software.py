"""The software stack is part of the spec: presets, the job defaults they set, overrides, and the
in-situ values (and band) they key."""

import pytest

import teton
from teton.errors import SpecError
from teton.spec import load_spec
from teton.spec.software import SOFTWARE_PRESETS, STACK_JOB_FIELDS, SoftwareSpec

JOB = {"gpus": 64, "tp": 8, "pp": 1, "seq_len": 4096, "global_batch": 64}


def _spec(software=None, **job):
    spec = {"cluster": "dgx-h100-superpod", "model": "llama3-8b", "job": {**JOB, **job}}
    if software is not None:
        spec["software"] = software
    return load_spec(spec)


def test_every_preset_loads_and_every_training_run_names_one():
    from teton.validation.cases import all_training_runs

    for name, fields in SOFTWARE_PRESETS.items():
        assert SoftwareSpec(**fields).name == name
    assert {r.stack for r in all_training_runs()} <= set(SOFTWARE_PRESETS)


def test_a_stack_sets_the_defaults_of_the_jobs_framework_fields():
    job = _spec("megatron-lm-2022").job
    assert (job.tp_overlap, job.pp_p2p, job.pp_scatter_gather, job.flash_attention) == ("bwd", "blocking", True, False)
    nemo = _spec("nemo-24.07").job
    assert nemo.tp_overlap == "full" and nemo.cp_algo == "ring" and nemo.attention_kernel == "cudnn"
    assert nemo.grad_accum_dtype == "bf16"
    plain = _spec().job
    assert plain.software.name == "unknown" and plain.tp_overlap == "none"
    assert set(STACK_JOB_FIELDS) <= set(type(plain).model_fields)


def test_a_field_the_job_gives_wins_over_the_stack():
    job = _spec("megatron-lm-2022", tp_overlap="none", flash_attention=True).job
    assert job.tp_overlap == "none" and job.flash_attention
    over = load_spec({"cluster": "dgx-h100-superpod", "model": "llama3-8b", "job": JOB, "software": "nemo-24.07"},
                     ["job.cp_algo=all_gather", "software.tp_comm_overlap=bwd"])
    assert over.job.cp_algo == "all_gather" and over.job.tp_overlap == "bwd"
    assert over.software.name == "nemo-24.07"  # an override keeps the stack's name (its in-situ values)


def test_cudnn_attention_is_priced_as_flashattention3_only_where_the_gpu_has_it():
    """A cuDNN stack runs the cudnn kernel everywhere; it is priced at FlashAttention-3's figures on
    Hopper and at the family's flash figures elsewhere (Blackwell's are cuDNN's own), times the
    fitted cudnn_attention_in_situ; FA3 asked for outright on a GPU without it is refused."""
    from teton.hardware import efficiency_for
    from teton.hardware.gpus import GPUS

    assert _spec("nemo-25.02").job.attention_kernel == "cudnn"
    b200 = load_spec({"cluster": "dgx-b200-superpod", "model": "llama3-8b", "job": JOB, "software": "nemo-25.02"})
    assert b200.job.attention_kernel == "cudnn"
    hopper, blackwell = efficiency_for(GPUS["h100-sxm"]), efficiency_for(GPUS["b200"])
    assert hopper.attention("cudnn", True) == hopper.attention("fa3", True) != hopper.attention("fa2", True)
    assert blackwell.attention("cudnn", False) == blackwell.attention("fa2", False)
    with pytest.raises(SpecError, match="job.attention_kernel"):  # asked for outright: not silently fa2
        load_spec({"cluster": "dgx-b200-superpod", "model": "llama3-8b", "job": JOB,
                   "software": {"base": "unknown", "attention": "fa3"}})


def test_an_unseen_stack_gets_the_prior_and_a_wider_band():
    seen = teton.simulate({"cluster": "meta-roce-24k", "model": "llama3-8b", "software": "meta-llama3-2024",
                           "job": JOB})
    unseen = teton.simulate({"cluster": "meta-roce-24k", "model": "llama3-8b", "job": JOB})
    assert seen.prediction_mode == unseen.prediction_mode == "in_situ"
    assert any("across-stack prior" in n for n in unseen.notes)
    assert not any("across-stack prior" in n for n in seen.notes)
    width = lambda r: r.step_time_s_high / r.step_time_s_low  # noqa: E731
    assert width(unseen) > width(seen)


@pytest.mark.parametrize("software, needle", [
    ({"base": "nemo-24.07", "fp8_recipe": "bogus"}, "software.fp8_recipe"),
    ("nemo-24.7", "did you mean nemo-24.07"),
    ({"base": "unknown", "cpu_offload_layers": -1}, "software.cpu_offload_layers"),
    ({"base": "unknown", "cuda_graph": "full"}, "software.cuda_graph"),
])
def test_bad_software_is_a_one_line_error(software, needle):
    with pytest.raises(SpecError) as err:
        _spec(software)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_job_carrying_another_stack_than_the_section_is_refused():
    spec = _spec("nemo-24.07")
    with pytest.raises(SpecError, match="differs from the software"):
        load_spec({"cluster": "dgx-h100-superpod", "model": "llama3-8b", "software": "megatron-lm-2022",
                   "job": dict(spec.job)})
    again = load_spec({"cluster": "dgx-h100-superpod", "model": "llama3-8b", "job": dict(spec.job)})
    assert again.job == spec.job  # a resolved job handed back keeps its stack
