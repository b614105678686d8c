"""teton run / presets / validate and the Python API, as a user drives them."""

import json

import pytest

import teton

KEYS = {"step_time_s", "mfu", "tflops_per_gpu", "tokens_per_s", "memory_per_gpu_bytes", "fits_in_memory", "breakdown"}


def test_run_json_has_the_contract_keys(example_spec, cli):
    code, out, _ = cli("run", example_spec, "--json")
    assert code == 0
    d = json.loads(out)
    assert KEYS <= set(d)
    assert d["step_time_s"] > 0 and 0 < d["mfu"] < 1
    assert sum(d["breakdown"].values()) == pytest.approx(d["step_time_s"], rel=1e-9)
    assert {"compute", "tp_comm", "pp_comm", "dp_comm", "pipeline_bubble", "optimizer"} <= set(d["breakdown"])


def test_run_table_prints_memory_breakdown(example_spec, cli):
    code, out, _ = cli("run", example_spec)
    assert code == 0 and "activations" in out and "pipeline_bubble" in out and "MFU" in out


def test_api_matches_cli(example_spec, cli):
    _, out, _ = cli("run", example_spec, "--json")
    r = teton.simulate(example_spec)
    assert json.loads(out)["step_time_s"] == pytest.approx(r.step_time_s, rel=1e-12)


def test_same_spec_same_numbers(example_spec):
    a, b = teton.simulate(example_spec), teton.simulate(example_spec)
    assert a.to_dict() == b.to_dict()


def test_set_override_changes_the_job(example_spec):
    base = teton.simulate(example_spec)
    more = teton.simulate(example_spec, ["job.global_batch=4096"])
    assert more.micro_batches == base.micro_batches * 2
    assert more.breakdown["pipeline_bubble"] / more.step_time_s < base.breakdown["pipeline_bubble"] / base.step_time_s


def test_toml_json_yaml_agree(tmp_path, example_spec):
    import tomllib  # noqa: F401 - the loader's TOML reader

    import yaml

    data = yaml.safe_load(example_spec.read_text())
    (tmp_path / "s.json").write_text(json.dumps(data))
    toml = ['cluster = "meta-roce-24k"', 'model = "llama3-405b"', "seed = 0", "[job]"]
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


def test_hf_config_as_model(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,'
                   ' "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}')
    r = teton.simulate({"cluster": "dgx-h100-superpod", "model": str(cfg),
                        "job": {"gpus": 64, "tp": 8, "seq_len": 8192, "global_batch": 64}})
    assert r.fits_in_memory


def test_presets_lists_everything(cli):
    code, out, _ = cli("presets", "--json")
    d = json.loads(out)
    assert code == 0
    assert {"meta-roce-24k", "meta-ib-24k", "meta-rsc-16k", "dgx-a100-superpod", "dgx-h100-superpod"} <= set(d["clusters"])
    assert {"llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b", "llama3.1-405b",
            "gpt3-175b"} <= set(d["models"])
    assert {"a100-40gb", "a100-80gb", "h100-sxm", "h100-96gb", "h200", "b200"} <= set(d["gpus"])


def test_fp8_speeds_up_gemm_bound_steps(example_spec):
    bf16 = teton.simulate(example_spec)
    fp8 = teton.simulate(example_spec, ["job.precision=fp8"])
    assert fp8.breakdown["compute"] < bf16.breakdown["compute"]
    assert fp8.mfu < bf16.mfu  # MFU is measured against the (2x) fp8 peak


def test_full_recompute_costs_time_and_saves_memory(example_spec):
    none = teton.simulate(example_spec)
    full = teton.simulate(example_spec, ["job.recompute=full"])
    assert full.step_time_s > none.step_time_s
    assert full.memory_breakdown["activations"] < none.memory_breakdown["activations"] / 5


def test_validate_json_lists_table4_rows_with_the_row3_note(cli):
    code, out, _ = cli("validate", "--json", "--case", "llama3-405b-table4")
    d = json.loads(out)
    assert code == 0
    rows = [r for r in d["rows"] if r["metric"].startswith("tflops_per_gpu")]
    assert len(rows) == 3
    assert "DP = 8" in rows[2]["note"] and rows[0]["note"] == ""
    for r in rows:  # three predictions, never mixed: burst is the fastest, the band judges leave-one-out
        assert r["burst"] > r["in_sample"] and r["within_tolerance"] == (abs(r["error_loo"]) <= r["tolerance"])
    # the 8K -> 16K GPU drop comes out of the model: fewer micro-batches per DP rank
    assert rows[1]["predicted"] < rows[0]["predicted"]
    ratio_pred = rows[1]["predicted"] / rows[0]["predicted"]
    assert abs(ratio_pred - 400 / 430) < 0.03
    judged = [abs(r["error_loo"] if r.get("loo") is not None else r["error"]) for r in d["rows"]]
    assert d["mean_abs_error"] == pytest.approx(sum(judged) / len(judged))


def test_validation_bounds_are_judged_one_sided():
    from teton.validation.cases import ValidationRow

    lo = ValidationRow("c", "m", 0.9, 0.99, 0.0, "s", kind="lower_bound")
    up = ValidationRow("c", "m", 0.4, 0.96, 0.0, "s", kind="upper_bound")
    assert lo.within and not up.within
    assert not ValidationRow("c", "m", 0.9, 0.80, 0.0, "s", kind="lower_bound").within
    assert ValidationRow("c", "m", 1.0, 1.04, 0.05, "s").within


def test_network_claims_case_runs(cli):
    code, out, _ = cli("validate", "--json", "--case", "meta-network-claims")
    rows = {r["metric"]: r for r in json.loads(out)["rows"]}
    assert code == 0
    assert rows["allgather_norm_bw_optimised_min"]["within_tolerance"]  # topology-aware + E-ECMP >= 90 %
    assert rows["allgather_norm_bw_unoptimised_min"]["predicted"] < 0.9  # out of the box: well below


def test_mfu_is_model_flops_over_peak_hand_calc(example_spec):
    r = teton.simulate(example_spec)
    n_matmul = 126 * (2 * 16384 * 16384 + 2 * 16384 * 1024 + 3 * 16384 * 53248 + 2 * 16384) + 128256 * 16384 + 16384
    per_token = 6 * n_matmul + 12 * 126 * 8192 * 16384  # PaLM: 6N + 12 L s d (full attention matrix)
    flops = per_token * 2048 * 8192
    assert r.model_flops_per_step == pytest.approx(flops, rel=1e-12)
    assert r.mfu == pytest.approx(flops / (r.step_time_s * 16384 * 989.4e12), rel=1e-12)
    assert r.tflops_per_gpu == pytest.approx(flops / (r.step_time_s * 16384) / 1e12, rel=1e-12)
    assert r.tokens_per_s == pytest.approx(2048 * 8192 / r.step_time_s, rel=1e-12)


def test_run_adds_checkpoint_and_goodput_keys_when_asked(tmp_path, example_spec, cli):
    import yaml

    data = yaml.safe_load(example_spec.read_text())
    data["storage"] = {"preset": "tectonic-llama3"}
    data["reliability"] = {"tokens": 15.6e12}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    code, out, _ = cli("run", path, "--json")
    d = json.loads(out)
    assert code == 0
    for key in ("checkpoint_save_s", "checkpoint_blocking_s", "checkpoint_restore_s", "goodput", "ettr",
                "time_to_train_days", "energy_mwh", "cost_usd"):
        assert key in d and d[key] > 0
    assert d["checkpoint_blocking_s"] <= d["checkpoint_save_s"]
    # time to train >= the failure-free time for 15.6T tokens at this step time
    ideal_days = 15.6e12 / d["tokens_per_s"] / 86400
    assert d["time_to_train_days"] >= ideal_days * 0.999
    code, out, _ = cli("run", example_spec, "--json")
    assert "checkpoint_save_s" not in json.loads(out)


def test_fa3_speeds_up_attention_bound_long_context(example_spec):
    longctx = ["job.cp=16", "job.dp=8", "job.seq_len=131072", "job.global_batch=128"]
    fa2 = teton.simulate(example_spec, longctx)
    fa3 = teton.simulate(example_spec, [*longctx, "job.attention_kernel=fa3"])
    assert fa3.breakdown["compute"] < 0.8 * fa2.breakdown["compute"]
    assert fa3.breakdown["tp_comm"] == pytest.approx(fa2.breakdown["tp_comm"])


@pytest.mark.parametrize("name", ["llama3-405b-16k.yaml", "llama3-70b-ib-2k.toml", "gpt3-175b-a100.yaml",
                                  "custom-cluster.yaml"])
def test_bundled_examples_run(name, example_spec):
    r = teton.simulate(example_spec.parent / name)
    assert r.step_time_s > 0 and r.fits_in_memory


def test_gpu_speed_variation_paces_large_jobs_more(example_spec):
    from teton.engine.step import slowest_gpu_factor

    assert slowest_gpu_factor(16384, 0.0) == 1.0
    assert slowest_gpu_factor(8, 0.02) < slowest_gpu_factor(16384, 0.02)
    # E[max of 2 standard normals] = 1/sqrt(pi); Blom's approximation is within 5 % of it
    z2 = (1 - 1 / slowest_gpu_factor(2, 0.1)) / 0.1
    assert z2 == pytest.approx(1 / 3.14159265 ** 0.5, rel=0.05)
    base = teton.simulate(example_spec)
    slow = teton.simulate(example_spec, ["cluster.gpu_speed_cv=0.02"])
    f = slowest_gpu_factor(16384, 0.02)
    assert slow.breakdown["compute"] == pytest.approx(base.breakdown["compute"] * f, rel=1e-9)
    assert slow.breakdown["tp_comm"] == pytest.approx(base.breakdown["tp_comm"])


def test_run_writes_a_chrome_trace(example_spec, cli, tmp_path):
    out = tmp_path / "trace.json"
    code, stdout, _ = cli("run", example_spec, "--json", "--timeline", out)
    assert code == 0 and "timeline" not in json.loads(stdout)
    events = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(events) == 16 * 8 * 16 * 2  # ranks x chunks x micro-batches x passes
    assert max(e["ts"] + e["dur"] for e in events) <= json.loads(stdout)["step_time_s"] * 1e6 + 1
    code, _, err = cli("run", example_spec, "--timeline", tmp_path / "missing" / "t.json")
    assert code == 2 and "--timeline" in err
