"""Hardware of your own (issue 24 item 6): a GPU, host or NIC inline or in its own file, checked
by the catalog's schema with one-line errors, the nearest family's efficiencies with a note, and
every preset written as a file that loads back to the identical object."""

from pathlib import Path

import pytest
import yaml

import teton
from teton.errors import SpecError
from teton.hardware import GPUS
from teton.hardware.efficiency import efficiency_for, family_of
from teton.hardware.gpus import gpu_family
from teton.spec.load import load_spec
from teton.spec.presets import catalog_object, catalogs, load_document

ROOT = Path(__file__).resolve().parents[2]
MI300X = ROOT / "examples" / "mi300x-cluster.yaml"
JOB = {"gpus": 16, "tp": 8, "seq_len": 4096, "global_batch": 16}


def _gpu(**changes) -> dict:
    """An MI300X-like GPU mapping (examples/hardware/mi300x.yaml) with ``changes``."""
    return {**yaml.safe_load((ROOT / "examples" / "hardware" / "mi300x.yaml").read_text()), **changes}


def _spec(cluster: dict, model: str = "llama3-8b") -> dict:
    return {"cluster": {"base": "dgx-h100-superpod", **cluster}, "model": model, "job": dict(JOB)}


def test_the_mi300x_example_runs_on_its_own_gpu_with_the_nearest_family_and_a_note():
    spec = load_spec(MI300X)
    gpu = spec.cluster.gpu_spec
    assert (gpu.name, gpu.peak_tflops["bf16"], gpu.peak_tflops["fp8"], gpu.hbm_bytes, gpu.tdp_w) == (
        "mi300x", 1307.4, 2614.9, 192e9, 750)
    assert gpu_family(gpu) == ("hopper", "h200")  # no family declared: the nearest catalog GPU's
    assert spec.cluster.host_spec.name == "mi300x-platform" and spec.cluster.nic.name == "pollara-400g"
    r = teton.simulate(MI300X)
    assert r.fits_in_memory and 0 < r.mfu < 1 and r.hbm_bytes == 192e9
    note = next(n for n in r.notes if "mi300x is not a catalog GPU" in n)
    assert "hopper family's" in note and "assumed" in note and "nccl_nvls" not in note  # no NVLS on a mesh
    assert "interpolated by distance" in note  # its in-situ prior: every family's, by distance


def test_a_custom_gpus_in_situ_prior_moves_smoothly_across_a_family_boundary():
    """Without a declared family, the in-situ values are the families' interpolated by distance:
    1 % more HBM bandwidth moves the step by well under 1 % where the nearest family changes
    (it jumped 19 % when the nearest family's values were taken whole), and a GPU on a catalog
    GPU's figures gets that family's values."""
    from teton.hardware.in_situ import gpu_in_situ_values, in_situ_values

    steps = [teton.simulate(MI300X, [f"cluster.host.gpu.hbm_bw_bytes_s={hb}e12"]).step_time_s
             for hb in (7.7, 7.8, 7.9, 8.0)]
    assert max(abs(b / a - 1) for a, b in zip(steps[:-1], steps[1:], strict=True)) < 0.01
    b200_like = GPUS["b200"].model_copy(update={"name": "not-b200"})
    assert gpu_in_situ_values(b200_like) == in_situ_values("blackwell")[0]


def test_the_mi300x_example_runs_from_the_cli(cli):
    code, out, err = cli("run", MI300X)
    assert code == 0 and "1,024 x mi300x" in out and "not a catalog GPU" in out


def test_a_gpu_in_its_own_file_referenced_from_a_cluster_file(tmp_path):
    """Paths resolve against the file that names them: spec -> cluster file -> host file -> GPU file."""
    (tmp_path / "hw").mkdir()
    (tmp_path / "hw" / "gpu.yaml").write_text(yaml.safe_dump(_gpu(name="next-chip", family="blackwell")))
    (tmp_path / "hw" / "host.yaml").write_text(yaml.safe_dump({"base": "dgx-h100", "name": "next-host",
                                                               "gpu": "gpu.yaml"}))
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump({"base": "dgx-h100-superpod", "host": "hw/host.yaml"}))
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({"cluster": "cluster.yaml", "model": "llama3-8b", "job": JOB}))
    spec = load_spec(tmp_path / "spec.yaml")
    assert spec.cluster.gpu_spec.name == "next-chip" and family_of(spec.cluster.gpu_spec) == "blackwell"
    assert spec.cluster.host_spec.gpus == 8 and spec.cluster.host_spec.backend_nic == "cx7-400g"
    r = teton.simulate(tmp_path / "spec.yaml")
    assert "declared family" in " ".join(r.notes)


def test_a_custom_gpu_changes_the_prediction_and_caches_key_it_by_value():
    """Two GPUs of one name but other figures in one process do not share memoised tables."""
    slow = teton.simulate(_spec({"gpu": _gpu(name="x", family="hopper")}))
    fast = teton.simulate(_spec({"gpu": _gpu(name="x", family="hopper", peak_tflops={"bf16": 2600.0})}))
    assert fast.step_time_s < slow.step_time_s


def test_a_catalog_gpu_written_and_read_back_is_the_catalog_gpu(cli, tmp_path):
    code, text, _ = cli("presets", "--show", "h100-sxm")
    assert code == 0
    (tmp_path / "gpu.yaml").write_text(text)
    spec = {"cluster": {"base": "dgx-h100-superpod", "gpu": str(tmp_path / "gpu.yaml")}, "model": "llama3-8b",
            "job": JOB}
    assert load_spec(spec).cluster.gpu_spec == GPUS["h100-sxm"]
    mine, catalog = teton.simulate(spec), teton.simulate({**spec, "cluster": "dgx-h100-superpod"})
    assert mine.notes == catalog.notes and not any("catalog GPU" in n for n in mine.notes)
    assert mine.step_time_s == catalog.step_time_s


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_every_preset_round_trips(cli, fmt):
    for kind, presets in catalogs().items():
        for name in presets:
            code, text, err = cli("presets", "--show", name, "--format", fmt)
            assert code == 0, err
            assert load_document(kind, yaml.safe_load(text)) == catalog_object(kind, name), (kind, name)


@pytest.mark.parametrize("kind, name, section", [("host", "dgx-a100", "host"), ("nic", "cx6-200g", "backend_nic"),
                                                 ("cluster", "selene", None), ("model", "llama3-70b", "model"),
                                                 ("software", "nemo-24.07", "software"),
                                                 ("storage", "hammerspace-pnfs", "storage")])
def test_a_shown_preset_file_loads_as_its_spec_section(cli, tmp_path, kind, name, section):
    code, text, _ = cli("presets", "--show", name)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    assert load_document(kind, path) == catalog_object(kind, name)
    base = {"cluster": "selene", "model": "llama3-8b", "job": JOB}
    if section in ("host", "backend_nic"):
        base["cluster"] = {"base": "selene", section: path.name}
    elif section is None:
        base["cluster"] = path.name
    else:
        base[section] = path.name
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(base))
    spec = load_spec(tmp_path / "spec.yaml")
    got = {"host": lambda: spec.cluster.host_spec, "backend_nic": lambda: spec.cluster.nic,
           None: lambda: spec.cluster, "model": lambda: spec.model, "software": lambda: spec.software,
           "storage": lambda: spec.storage.system(spec.cluster.storage)}[section]()
    assert got == catalog_object(kind, name)


BAD = [
    ({"host": {"base": "dgx-h100", "name": "h", "gpus": 0}}, "cluster.host.gpus = 0: must be an integer in 1..4,096"),
    ({"host": {"base": "dgx-h100", "name": "h", "backend_nic": "cx8-800g"}},
     "cluster.host.backend_nic = 'cx8-800g': its 800 Gb/s (100.0 GB/s) exceeds the host's PCIe x16 link"),
    ({"backend_nic": {"name": "n", "gbps": 1600, "latency_us": 1}}, "cluster.backend_nic = 'n': its 1600 Gb/s"),
    ({"host": {"base": "dgx-h100", "name": "h", "gpus_per_pcie_link": 16}},
     "cluster.host.gpus_per_pcie_link = 16: at most the host's 8 GPUs"),
    ({"gpu": _gpu(bogus=1)}, "cluster.gpu.bogus = 1: unknown field; allowed: family, "),
    ({"gpu": _gpu(hbm_bytes=True)}, "cluster.gpu.hbm_bytes = True: must be a finite number"),
    ({"gpu": _gpu(hbm_bw_bytes_s=-5)}, "cluster.gpu.hbm_bw_bytes_s = -5: must be a finite number in [1e-12, 1e+15]"),
    ({"gpu": _gpu(idle_w=900)}, "cluster.gpu.idle_w = 900.0: must be at most tdp_w (750 W)"),
    ({"gpu": _gpu(family="cdna3")}, "cluster.gpu.family = 'cdna3': input should be 'a100', 'hopper', 'blackwell' or 'blackwell-ultra'"),
    ({"gpu": _gpu(peak_tflops={"fp8": 100})}, "cluster.gpu.peak_tflops = {'fp8': 100.0}: needs a bf16 peak"),
    ({"gpu": _gpu(peak_tflops={"bf16": 100, "int4": 9})}, "cluster.gpu.peak_tflops.int4 = 9.0: unknown precision"),
    ({"gpu": _gpu(peak_tflops={"bf16": 0})}, "cluster.gpu.peak_tflops.bf16 = 0.0: must be TFLOP/s in (0, 1e+06]"),
    ({"gpu": {"base": "h100-sxm", "name": "h100-sxm", "tdp_w": 1000}},
     "cluster.gpu.name = 'h100-sxm': the catalog's GPU of this name differs (tdp_w)"),
    ({"gpu": "mi300"}, "cluster.gpu = 'mi300': unknown; "),
    ({"gpu": "no/such.yaml"}, "cluster.gpu = 'no/such.yaml': not a gpu preset, and no such file"),
    ({"gpu": {"base": "mi300"}}, "cluster.gpu.base = 'mi300': unknown"),
    ({"gpu": 7}, "cluster.gpu = 7: must be a GPU: a preset name, a file or a mapping"),
    ({"host": {"base": "dgx-h100", "name": "h", "gpu": {"name": "g"}}}, "cluster.host.gpu.peak_tflops = None: missing"),
]


@pytest.mark.parametrize("cluster, message", BAD, ids=[m.split(" =")[0] + str(i) for i, (_, m) in enumerate(BAD)])
def test_bad_hardware_is_one_line_naming_the_field(cluster, message):
    with pytest.raises(SpecError) as err:
        load_spec(_spec(cluster))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_bad_hardware_in_a_file_names_the_field_at_the_cli(cli, tmp_path):
    (tmp_path / "gpu.yaml").write_text(yaml.safe_dump(_gpu(sm_count=0)))
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(_spec({"gpu": "gpu.yaml"})))
    code, out, err = cli("run", tmp_path / "spec.yaml")
    assert code == 2 and "cluster.gpu.sm_count = 0: must be an integer in 1..100,000" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_circular_hardware_base_is_an_error(tmp_path):
    (tmp_path / "a.yaml").write_text(yaml.safe_dump({"base": "b.yaml"}))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump({"base": "a.yaml"}))
    with pytest.raises(SpecError, match="circular base reference"):
        load_spec({**_spec({}), "cluster": {"base": "dgx-h100-superpod", "gpu": str(tmp_path / "a.yaml")}})


def test_set_on_a_hardware_slot_starts_from_the_catalog_entry():
    spec = load_spec(_spec({}), ["cluster.gpu.hbm_bytes=2e11"])
    gpu = spec.cluster.gpu_spec
    assert gpu.name == "h100-sxm-custom" and gpu.hbm_bytes == 2e11 and gpu.peak_tflops == GPUS["h100-sxm"].peak_tflops
    host = load_spec(_spec({}), ["cluster.host.gpu=h200"]).cluster.host_spec
    assert host.name == "dgx-h100-custom" and host.gpu_spec == GPUS["h200"]


def test_a_gpu_without_flash_attention_3_refuses_fa3_and_gets_fa2_by_default():
    spec = _spec({"gpu": _gpu(family="hopper")})
    assert efficiency_for(load_spec(spec).cluster.gpu_spec).attn_fa3_fwd is None
    with pytest.raises(SpecError, match="attention_kernel"):
        load_spec({**spec, "job": {**JOB, "attention_kernel": "fa3"}})
    assert load_spec(spec).job.attention_kernel == "fa2"


def test_the_nearest_family_follows_the_figures():
    b200_like = GPUS["b200"].model_copy(update={"name": "b300-ish", "family": None})
    a100_like = GPUS["a100-80gb"].model_copy(update={"name": "a100-ish", "family": None})
    assert gpu_family(b200_like) == ("blackwell", "b200") and gpu_family(a100_like)[0] == "a100"


def test_a_peak_set_alone_keeps_the_base_gpus_other_peaks():
    """``--set cluster.gpu.peak_tflops.bf16=...`` (or ``gpu: {base: ..., peak_tflops: {bf16: ...}}``)
    changes one peak: the base GPU's fp8 peak stays, so an fp8 job still runs (it had replaced the
    whole mapping: 'h100-sxm-custom has no fp8 tensor cores')."""
    spec = load_spec("examples/llama3-405b-16k.yaml", ["cluster.gpu.peak_tflops.bf16=1100", "job.precision=fp8"])
    assert spec.cluster.gpu_spec.peak_tflops == {"tf32": 494.7, "bf16": 1100.0, "fp8": 1978.9}
    base = teton.simulate("examples/llama3-405b-16k.yaml", ["job.precision=fp8"])
    faster = teton.simulate(spec)
    assert faster.step_time_s < base.step_time_s  # the bf16 GEMMs (the head, attention) got faster
    mapping = load_spec(_spec({"gpu": {"base": "h100-sxm", "peak_tflops": {"fp8": 2500}}}))
    assert mapping.cluster.gpu_spec.peak_tflops == {"tf32": 494.7, "bf16": 989.4, "fp8": 2500.0}
