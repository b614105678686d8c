"""Issue 13: ``teton run`` echoes the resolved spec (model, cluster, GPU, precision, sequence
length, batch) and says which of those fields came from defaults."""

import json

MINIMAL = {"cluster": "dgx-h100-superpod", "model": "llama3-8b", "job": {"gpus": 64, "tp": 8}}


def _write(tmp_path, spec):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(spec))
    return path


def test_header_echoes_the_resolved_spec_and_its_defaults(cli, tmp_path):
    code, out, err = cli("run", _write(tmp_path, MINIMAL))
    assert code == 0, err
    head = "\n".join(out.splitlines()[:4])
    for text in ("llama3-8b", "dgx-h100-superpod", "h100-sxm", "bf16", "seq 8,192", "global batch 8",
                 "micro batch 1"):
        assert text in head, text
    defaults = next(line for line in out.splitlines() if line.startswith("defaults:"))
    for field in ("job.precision", "job.seq_len", "job.global_batch", "job.micro_batch"):
        assert field in defaults


def test_given_fields_are_not_defaults(cli, example_spec, tmp_path):
    code, out, _ = cli("run", example_spec)
    assert code == 0 and "llama3-405b" in out.splitlines()[0]
    assert not any(line.startswith("defaults:") for line in out.splitlines())
    code, out, _ = cli("run", _write(tmp_path, MINIMAL), "--set", "job.precision=fp8", "--json")
    d = json.loads(out)
    assert d["spec"]["precision"] == "fp8" and "job.precision" not in d["defaults"]
    assert {"job.seq_len", "job.global_batch", "job.micro_batch", "job.dp"} <= set(d["defaults"])
    assert d["spec"] == {"model": "llama3-8b", "cluster": "dgx-h100-superpod", "gpu": "h100-sxm", "gpus": 64,
                         "precision": "fp8", "seq_len": 8192, "global_batch": 8, "micro_batch": 1,
                         "tokens_per_step": 8 * 8192}


def test_global_batch_tokens_counts_as_given(cli, tmp_path):
    spec = {**MINIMAL, "job": {**MINIMAL["job"], "global_batch_tokens": 8192 * 16}}
    d = json.loads(cli("run", _write(tmp_path, spec), "--json")[1])
    assert "job.global_batch" not in d["defaults"] and d["spec"]["global_batch"] == 16
