"""A demanding user's QA pass over spec loading and the run / ops / compare / search / presets /
collective verbs: each test reproduces a defect found by hand (a traceback, a silently wrong or
misleading result) and pins the behaviour a user relies on instead."""

import json

import pytest

from teton.errors import SpecError
from teton.spec import load_spec
from teton.spec.load import parse_value

SMALL = "cluster: meta-roce-24k\nmodel: llama3-8b\njob: {gpus: 8}\n"


def _spec(tmp_path, text, name="spec.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _one_line_error(code, err, needle):
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert needle in lines[0], err
    return lines[0]


# --- spec files -------------------------------------------------------------------------------

@pytest.mark.parametrize("extra,needle", [
    ("network: [1]\n", "network = [1]: must be a mapping"),   # was: TypeError traceback
    ("notes: 5\n", "notes = 5"),                             # was: TypeError traceback
])
def test_wrong_section_types_are_one_line_errors(tmp_path, cli, extra, needle):
    code, _, err = cli("run", _spec(tmp_path, SMALL + extra))
    _one_line_error(code, err, needle)


def test_a_string_note_is_one_note_not_its_letters(tmp_path, cli):
    code, out, _ = cli("run", _spec(tmp_path, SMALL + "notes: trained on 8 GPUs\n"), "--json")
    assert code == 0
    assert "trained on 8 GPUs" in json.loads(out)["notes"]
    assert "t" not in json.loads(out)["notes"]


def test_circular_base_is_an_error_not_a_recursion(tmp_path, cli):
    (tmp_path / "loop.yaml").write_text("base: loop.yaml\nhosts: 2\n")
    code, _, err = cli("run", _spec(tmp_path, "cluster: loop.yaml\nmodel: llama3-8b\njob: {gpus: 8}\n"))
    _one_line_error(code, err, "circular")


def test_missing_cluster_file_says_so(tmp_path, cli):
    code, _, err = cli("run", _spec(tmp_path, SMALL), "--set", "cluster=nosuch.yaml")
    _one_line_error(code, err, "no such file")


def test_unknown_base_names_the_base_field(tmp_path, cli):
    code, _, err = cli("run", _spec(tmp_path, SMALL), "--set", "model.base=llama3-9b")
    _one_line_error(code, err, "model.base = 'llama3-9b'")


def test_missing_model_field_does_not_print_the_whole_mapping(tmp_path, cli):
    code, _, err = cli("run", _spec(tmp_path, "cluster: meta-roce-24k\nmodel: {layers: 2}\njob: {gpus: 8}\n"))
    line = _one_line_error(code, err, "model.hidden")
    assert "{'layers'" not in line and "required" in line


def test_non_utf8_spec_is_one_line(tmp_path, cli):
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\x80\x81\xff")
    code, _, err = cli("run", path)
    _one_line_error(code, err, "UTF-8")


# --- HF config.json ---------------------------------------------------------------------------

def test_malformed_hf_config_is_one_line(tmp_path, cli):
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 2,\n')
    code, _, err = cli("run", _spec(tmp_path, "cluster: meta-roce-24k\nmodel: config.json\njob: {gpus: 8}\n"))
    _one_line_error(code, err, "malformed JSON")


def test_non_llama_hf_config_names_the_missing_keys(tmp_path, cli):
    (tmp_path / "config.json").write_text(json.dumps(
        {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_layer": 12,
         "n_head": 12, "vocab_size": 50257}))
    code, _, err = cli("run", _spec(tmp_path, "cluster: meta-roce-24k\nmodel: config.json\njob: {gpus: 8}\n"))
    _one_line_error(code, err, "HF config lacks num_hidden_layers")


def test_hf_config_without_kv_heads_or_with_rope_scaling_imports(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
         "num_hidden_layers": 32, "vocab_size": 128256, "rope_scaling": {"factor": 8.0, "rope_type": "llama3"},
         "tie_word_embeddings": True}))
    spec = load_spec(_spec(tmp_path, "cluster: meta-roce-24k\nmodel: config.json\njob: {gpus: 8}\n"))
    assert spec.model.n_kv_heads == 32  # HF's default: num_key_value_heads = num_attention_heads
    assert spec.model.tied_embeddings


# --- --set ------------------------------------------------------------------------------------

def test_exponent_notation_is_a_number():
    assert parse_value("16e6") == 16_000_000 and isinstance(parse_value("16e6"), int)
    assert parse_value("1.5E+3") == 1500 and parse_value("8e-1") == 0.8
    assert parse_value("abc") == "abc" and parse_value("8") == 8


def test_set_with_exponent_notation_runs(tmp_path, cli):
    code, out, err = cli("run", _spec(tmp_path, SMALL), "--set", "job.seq_len=4e3", "--json")
    assert code == 0, err
    assert json.loads(out)["tokens_per_step"] == 8 * 4000


@pytest.mark.parametrize("item,field", [("job.tp=true", "job.tp"), ("job.zero=true", "job.zero"),
                                        ("network.qps_per_connection=true", "network.qps_per_connection")])
def test_a_boolean_is_not_an_integer(tmp_path, cli, item, field):
    # was: true read as 1 -- `job.tp=true` silently ran TP 1
    code, _, err = cli("run", _spec(tmp_path, SMALL), "--set", item)
    _one_line_error(code, err, f"{field} = True")


def test_override_errors_point_at_the_override_not_the_file_line(tmp_path, cli):
    path = _spec(tmp_path, SMALL.replace("{gpus: 8}", "\n  gpus: 8\n  tp: 1\n"))
    code, _, err = cli("run", path, "--set", "job.tp=abc")
    line = _one_line_error(code, err, "--set job.tp=abc")
    assert "spec.yaml:" not in line  # the file's tp: 1 is fine
    code, _, err = cli("run", path, "--set", "job.seq_len=-1")
    _one_line_error(code, err, "--set job.seq_len=-1")


@pytest.mark.parametrize("item", ["job..tp=3", "job.=3", "=3", "job.tp.x=3"])
def test_malformed_set_paths_are_one_line(tmp_path, cli, item):
    code, _, err = cli("run", _spec(tmp_path, SMALL), "--set", item)
    _one_line_error(code, err, "--set")


def test_set_indexes_a_preset_list(tmp_path):
    spec = load_spec(_spec(tmp_path, SMALL), ["cluster.layers.1.oversubscription=20"])
    assert [layer.oversubscription for layer in spec.cluster.layers] == [1.0, 20.0, 1.0]
    assert spec.cluster.hosts == 3072  # the rest of the preset kept
    with pytest.raises(SpecError, match="index it with 0..2"):
        load_spec(_spec(tmp_path, SMALL), ["cluster.layers.3.oversubscription=20"])


# --- job rules against the hardware --------------------------------------------------------------

def test_fp8_on_a_gpu_without_fp8_is_an_error(tmp_path, cli):
    # was: ran "fp8" on an A100 at the bf16 peak plus fp8 cast traffic: slower than bf16, labelled fp8
    code, _, err = cli("run", _spec(tmp_path, SMALL), "--set", "cluster=dgx-a100-superpod",
                       "--set", "job.precision=fp8")
    _one_line_error(code, err, "job.precision = 'fp8': a100-80gb has no fp8")


def test_fa3_on_a_gpu_without_fa3_is_an_error(tmp_path, cli):
    # was: silently priced as FlashAttention-2
    code, _, err = cli("run", _spec(tmp_path, SMALL), "--set", "cluster=dgx-a100-superpod",
                       "--set", "job.attention_kernel=fa3")
    _one_line_error(code, err, "job.attention_kernel = 'fa3'")


# --- teton run ----------------------------------------------------------------------------------

def test_trace_write_failure_is_one_line(tmp_path, cli):
    (tmp_path / "file").write_text("")
    code, out, err = cli("run", _spec(tmp_path, SMALL), "--timeline", tmp_path / "file" / "trace.json")
    _one_line_error(code, err, "--timeline")
    assert out == ""


def test_reliability_typo_is_reported_not_ignored(tmp_path, cli):
    code, _, err = cli("run", _spec(tmp_path, SMALL + "reliability: {token: 15.6T}\n"))
    _one_line_error(code, err, "reliability.token")


def test_reliability_without_run_length_says_why_nothing_is_computed(tmp_path, cli):
    code, out, _ = cli("run", _spec(tmp_path, SMALL + "reliability: {pue: 1.2}\n"), "--json")
    assert code == 0
    d = json.loads(out)
    assert "ettr" not in d and any("no run length" in n for n in d["notes"])


def test_run_table_labels_whole_run_numbers_with_units(tmp_path, cli):
    path = _spec(tmp_path, SMALL + "storage: tectonic-llama3\nreliability: {tokens: 1T}\n")
    code, out, _ = cli("run", path)
    assert code == 0
    code, js, _ = cli("run", path, "--json")
    d = json.loads(js)
    assert f"{d['ettr'] * 100:.1f} %" in out
    assert f"{d['time_to_train_days']:,.1f} days" in out
    assert f"${d['cost_usd']:,.0f}" in out
    assert "cost_usd" not in out and "ettr " not in out  # JSON keys are not table labels


# --- teton compare / search / presets / collective ---------------------------------------------

def test_compare_error_names_the_variant(cli, example_spec):
    code, _, err = cli("compare", example_spec, "--b", "job.tp=abc")
    _one_line_error(code, err, "variant B (--b job.tp=abc)")


def test_search_with_impossible_constraints_says_so(cli, example_spec):
    # was: an empty table and exit 0
    code, out, err = cli("search", example_spec, "--tp", "3")
    _one_line_error(code, err, "no layout passes the job rules")
    assert out == ""


def test_search_memory_is_in_gib_as_teton_run_prints_it(cli, example_spec):
    code, out, _ = cli("search", example_spec, "--tp", "8", "--pp", "16", "--cp", "1", "--virtual-stages", "8",
                       "--top", "1")
    assert code == 0
    code, js, _ = cli("run", example_spec, "--json")
    gib = json.loads(js)["memory_per_gpu_bytes"] / 2**30
    assert "mem GiB" in out and f"{gib:.1f}" in out  # 70.5, not 75.7 (GB)


def test_presets_show_hbm_in_gib_and_no_fake_fp8(cli):
    code, out, _ = cli("presets")
    assert code == 0
    row = next(line for line in out.splitlines() if "a100-80gb" in line and "312" in line)
    assert "-" in row.split("312")[1] and " 0 " not in row  # A100 has no fp8: not "0 TFLOPS"
    h100 = next(line for line in out.splitlines() if "h100-sxm" in line and "989" in line)
    assert "79.6" in h100  # the 79.6 GiB teton run reports memory against
    code, js, _ = cli("presets", "--json")
    assert json.loads(js)["gpus"]["h100-sxm"]["hbm_gib"] == pytest.approx(79.6, abs=0.05)


@pytest.mark.parametrize("out_path,needle", [("NODIR/x.png", "existing directory"), ("x.txt", "image path")])
def test_placement_study_checks_out_before_running(tmp_path, cli, out_path, needle):
    # was: a traceback from matplotlib after the whole study had run
    code, _, err = cli("collective", "--placement-study", "--trials", "1", "--png", tmp_path / out_path)
    _one_line_error(code, err, needle)


def test_pinning_study_fits_a_small_cluster(cli):
    # was: "groups = 'GPU ids 0..10239': must lie in 0..1119": 64 racks asked of a 7-rack cluster
    code, out, err = cli("collective", "--cluster", "dgx-a100-superpod", "--pinning-study", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["racks"] == 7 and len(d["normalized_busbw"]) == 6


@pytest.mark.parametrize("args", [("--png", "plot.png"), ("--neighbours",)])
def test_study_only_options_are_not_silently_ignored(cli, args):
    code, _, err = cli("collective", "--gpus", "8", *args)
    _one_line_error(code, err, "--placement-study only")


def test_unknown_nested_field_lists_the_nested_fields(tmp_path, cli):
    layer = "{name: rack, switch: rtsw, span_gpus: 16, oversubscription: 1.0, foo: 1}"
    code, _, err = cli("run", _spec(tmp_path, f"cluster: {{base: meta-roce-24k, layers: [{layer}]}}\n"
                                              "model: llama3-8b\njob: {gpus: 8}\n"))
    line = _one_line_error(code, err, "cluster.layers.0.foo")
    assert "oversubscription" in line and "backend_nic" not in line  # a layer's fields, not the cluster's


def test_compare_validates_both_variants_before_simulating(cli, example_spec, monkeypatch):
    import teton.engine.step

    def never(*args, **kwargs):
        raise AssertionError("simulated variant A before checking variant B")

    monkeypatch.setattr(teton.engine.step, "simulate_step", never)
    code, _, err = cli("compare", example_spec, "--b", "job.precision=fp4")
    _one_line_error(code, err, "variant B (--b job.precision=fp4)")


def test_a_key_given_twice_is_an_error_with_its_line(tmp_path, cli):
    """YAML keys are unique; PyYAML would let the second `tp` silently win."""
    path = _spec(tmp_path, "cluster: meta-roce-24k\nmodel: llama3-8b\njob:\n  gpus: 8\n  tp: 8\n"
                           "  seq_len: 8192\n  global_batch: 8\n  tp: 4\n")
    code, out, err = cli("run", path)
    _one_line_error(code, err, ":8: tp = 'given twice'")


@pytest.mark.parametrize("name,text,needle", [
    ("spec.toml", 'cluster = "meta-roce-24k"\nmodel = "llama3-8b"\n\n[job]\ngpus = 8\ntp = 8\nzero = 9\n'
                  "seq_len = 8192\nglobal_batch = 8\n", "spec.toml:7: job.zero = 9"),
    ("spec.json", '{\n "cluster": "meta-roce-24k",\n "model": "llama3-8b",\n "job": {\n  "gpus": 8,\n'
                  '  "zero": 9,\n  "seq_len": 8192,\n  "global_batch": 8\n }\n}\n', "spec.json:6: job.zero = 9"),
])
def test_field_errors_in_toml_and_json_carry_the_line(tmp_path, cli, name, text, needle):
    code, out, err = cli("run", _spec(tmp_path, text, name))
    _one_line_error(code, err, needle)


def test_exponent_notation_in_a_yaml_file_is_a_number(tmp_path, cli):
    """`tokens: 15e12` in a spec file means a number, as with --set (PyYAML's YAML 1.1 would keep
    the string and the field would refuse it)."""
    path = _spec(tmp_path, "cluster: meta-roce-24k\nmodel: llama3-8b\n"
                           "job: {gpus: 8, tp: 8, seq_len: 8192, global_batch_tokens: 65536e0}\n")
    code, out, err = cli("run", path, "--json")
    assert code == 0, err
    assert json.loads(out)["tokens_per_step"] == 65536
