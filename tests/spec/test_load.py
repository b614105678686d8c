"""Spec files: YAML, TOML and JSON read alike; presets with overrides and inline models; notes;
numbers in exponent notation."""

import json

from cli_checks import write_spec
from layouts import LLAMA3_8B_8_GPUS_YAML

import teton


def test_toml_json_yaml_agree(tmp_path, example_spec):
    import tomllib  # noqa: F401 - the loader's TOML reader

    import yaml

    data = yaml.safe_load(example_spec.read_text())
    (tmp_path / "s.json").write_text(json.dumps(data))
    toml = ['cluster = "meta-roce-24k"', 'model = "llama3-405b"', f'software = "{data["software"]}"', "seed = 0", "[job]"]
    for k, v in data["job"].items():
        toml.append(f"{k} = {json.dumps(v)}")
    toml += ["[network]", 'fidelity = "analytical"']
    (tmp_path / "s.toml").write_text("\n".join(toml))
    ref = teton.simulate(example_spec).step_time_s
    assert teton.simulate(tmp_path / "s.json").step_time_s == ref
    assert teton.simulate(tmp_path / "s.toml").step_time_s == ref


def test_base_plus_overrides_and_inline_model(tmp_path):
    spec = {"cluster": {"base": "meta-roce-24k", "hosts": 16}, "model": {"base": "llama3-8b", "layers": 16},
            "job": {"gpus": 128, "tp": 8, "pp": 2, "seq_len": 4096, "global_batch": 64}}
    r = teton.simulate(spec)
    assert r.gpus == 128 and r.layout["dp"] == 8 and r.step_time_s > 0


def test_a_string_note_is_one_note_not_its_letters(tmp_path, cli):
    spec = write_spec(tmp_path, LLAMA3_8B_8_GPUS_YAML + "notes: trained on 8 GPUs\n")
    code, out, _ = cli("run", spec, "--json")
    assert code == 0
    assert "trained on 8 GPUs" in json.loads(out)["notes"]
    assert "t" not in json.loads(out)["notes"]


def test_exponent_notation_in_a_yaml_file_is_a_number(tmp_path, cli):
    """`tokens: 15e12` in a spec file means a number, as with --set (PyYAML's YAML 1.1 would keep
    the string and the field would refuse it)."""
    path = write_spec(tmp_path, "cluster: meta-roce-24k\nmodel: llama3-8b\n"
                                "job: {gpus: 8, tp: 8, seq_len: 8192, global_batch_tokens: 65536e0}\n")
    code, out, err = cli("run", path, "--json")
    assert code == 0, err
    assert json.loads(out)["tokens_per_step"] == 65536
