"""Issue 24 item 5: a field the chosen fidelity ignores gets a note; command-line paths resolve
against the working directory, paths in a file against that file; an HF config names its model."""

import json

import pytest
from cli_checks import write_spec

import teton
from teton.spec import load_spec
from teton.spec.fields import Section
from teton.spec.network import NetworkSpec

HF = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
      "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}
SPEC = "cluster: dgx-h100-superpod\nmodel: llama3-8b\njob: {gpus: 8, tp: 8, global_batch: 8}\n"


def test_a_flow_only_field_on_an_analytical_run_is_named_with_the_fidelity_that_reads_it(example_spec):
    plain = teton.simulate(example_spec)
    r = teton.simulate(example_spec, ["network.routing=ecmp", "network.qps_per_connection=1"])
    assert r.step_time_s == plain.step_time_s  # the analytical model reads neither
    ignored = [n for n in r.notes if "ignored" in n]
    assert ignored == ["network.routing = ecmp is ignored: only network.fidelity = flow reads it (this spec's is "
                       "analytical)",
                       "network.qps_per_connection = 1 is ignored: only network.fidelity = flow reads it (this spec's "
                       "is analytical)"]
    assert not [n for n in load_spec(example_spec, ["network.nvls=false"]).notes if "ignored" in n]  # both read it
    flow = load_spec(example_spec, ["network.fidelity=flow", "network.routing=ecmp"])
    assert not [n for n in flow.notes if "ignored" in n]


def test_the_cli_prints_the_note(cli, example_spec):
    code, out, err = cli("run", example_spec, "--set", "network.routing=ecmp", "--json")
    assert code == 0, err
    assert any(n.startswith("network.routing = ecmp is ignored") for n in json.loads(out)["notes"])


def test_every_field_the_analytical_model_ignores_declares_it():
    """One rule: every network field but the selector either changes an analytical step or says
    which fidelity reads it; and the declaration is only on Section models' fields."""
    base, no_sp = "examples/llama3-405b-16k.yaml", ["job.sequence_parallel=false"]  # TP all-reduces: NVLS
    plain = teton.simulate(base, no_sp).step_time_s
    other = {"routing": "ecmp", "qps_per_connection": 1, "nvls": False}
    assert set(other) == set(NetworkSpec.model_fields) - {"fidelity"}
    for name, value in other.items():
        declared = "read_when" in (NetworkSpec.model_fields[name].json_schema_extra or {})
        changes = teton.simulate(base, [*no_sp, f"network.{name}={json.dumps(value)}"]).step_time_s != plain
        assert declared != changes, name
    assert issubclass(NetworkSpec, Section)


def test_a_set_path_resolves_against_the_working_directory(tmp_path, monkeypatch):
    spec_dir, here = tmp_path / "specs", tmp_path / "work"
    spec_dir.mkdir()
    here.mkdir()
    (here / "mine.json").write_text(json.dumps({**HF, "num_hidden_layers": 16}))
    (spec_dir / "mine.json").write_text(json.dumps(HF))  # the same name beside the spec: not this one
    spec = write_spec(spec_dir, SPEC)
    monkeypatch.chdir(here)
    assert load_spec(spec, ["model=mine.json"]).model.layers == 16
    # inside the file, a path is the file's
    inside = write_spec(spec_dir, SPEC.replace("model: llama3-8b", "model: mine.json"))
    assert load_spec(inside).model.layers == 32


def test_a_runs_file_set_path_resolves_against_the_runs_file(tmp_path, monkeypatch):
    from teton.validation.runs import load_runs

    (tmp_path / "specs").mkdir()
    write_spec(tmp_path / "specs", SPEC)
    (tmp_path / "small.json").write_text(json.dumps({**HF, "num_hidden_layers": 16}))
    runs = tmp_path / "runs.yaml"
    runs.write_text("runs:\n  - {spec: specs/spec.yaml, set: [model=small.json], step_time_s: 1.0}\n")
    monkeypatch.chdir(tmp_path / "specs")  # neither cwd nor the spec's folder holds small.json
    assert load_runs(runs)[0].spec.model.layers == 16


@pytest.mark.parametrize("extra, name", [({"_name_or_path": "meta-llama/Meta-Llama-3-8B"}, "meta-llama/Meta-Llama-3-8B"),
                                         ({}, "llama-8b"),
                                         ({"model_type": None}, "my-model")])
def test_an_hf_config_names_its_model_from_the_config(tmp_path, extra, name):
    cfg = {k: v for k, v in {**HF, **extra}.items() if v is not None}
    folder = tmp_path / "some-folder"
    folder.mkdir()
    (folder / "my-model.json").write_text(json.dumps(cfg))
    spec = load_spec(write_spec(folder, SPEC.replace("model: llama3-8b", "model: my-model.json")))
    assert spec.model.name == name


def test_a_set_storage_file_resolves_against_the_working_directory(tmp_path, monkeypatch):
    spec_dir, here = tmp_path / "specs", tmp_path / "work"
    spec_dir.mkdir()
    here.mkdir()
    (here / "store.yaml").write_text("preset: tectonic-llama3\nservers: 20\n")
    (spec_dir / "store.yaml").write_text("preset: tectonic-llama3\nservers: 40\n")
    spec = write_spec(spec_dir, SPEC)
    monkeypatch.chdir(here)
    assert load_spec(spec, ["storage=store.yaml"]).storage.system().servers == 20
