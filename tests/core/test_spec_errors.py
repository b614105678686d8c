"""Bad specs: each one a single-line error naming the field, exit code 2, no traceback."""

import json

import pytest
import yaml

GOOD = {
    "cluster": "meta-roce-24k",
    "model": "llama3-405b",
    "job": {"gpus": 16384, "tp": 8, "pp": 16, "dp": 128, "seq_len": 8192, "global_batch": 2048,
            "pp_schedule": "interleaved", "virtual_stages": 8, "pp_embedding_slots": True, "zero": 2},
}


def _with(**changes):
    spec = json.loads(json.dumps(GOOD))
    for path, value in changes.items():
        node = spec
        keys = path.split("__")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        if value is _DELETE:
            node.pop(keys[-1])
        else:
            node[keys[-1]] = value
    return spec


_DELETE = object()

BAD = [
    ("degrees don't multiply", _with(job__dp=64), "job.dp"),
    ("tp doesn't divide heads", _with(job__tp=3, job__dp=_DELETE, job__gpus=48 * 16, job__global_batch=2048), "job.tp"),
    ("tp doesn't divide kv heads", _with(job__tp=16, job__dp=64), "kv_heads"),
    ("pp larger than layers", _with(job__pp=256, job__virtual_stages=1, job__pp_schedule="1f1b", job__dp=8,
                                    job__global_batch=2048), "job.pp"),
    ("batch not divisible", _with(job__global_batch=2000), "job.global_batch"),
    ("more GPUs than the cluster", _with(job__gpus=32768, job__dp=256, job__global_batch=4096), "only 24576"),
    ("unknown cluster preset", _with(cluster="meta-roce-42k"), "meta-roce-24k"),
    ("unknown model preset", _with(model="llama3-450b"), "llama3-405b"),
    ("zero gpus", _with(job__gpus=0), "job.gpus"),
    ("negative seq_len", _with(job__seq_len=-8192), "job.seq_len"),
    ("zero micro batch", _with(job__micro_batch=0), "job.micro_batch"),
    ("unknown precision", _with(job__precision="fp4"), "job.precision"),
    ("unknown job field", _with(job__tensor_parallel=8), "job.tensor_parallel"),
    ("unknown section", _with(jobs={}), "jobs"),
    ("unknown recompute", _with(job__recompute="some"), "job.recompute"),
    ("bad zero stage", _with(job__zero=4), "job.zero"),
    ("virtual stages with 1f1b", _with(job__pp_schedule="1f1b"), "job.virtual_stages"),
    ("interleaved needs m % pp", _with(job__global_batch=128 * 8), "divisible by pp"),
    ("missing job", _with(job=_DELETE), "job"),
    ("model override negative", _with(model={"base": "llama3-8b", "layers": -1}), "model.layers"),
    ("cluster unknown host", _with(cluster={"base": "meta-roce-24k", "host": "grand-canyon"}), "grand-teton"),
    ("bad network fidelity", _with(network={"fidelity": "packet"}), "network.fidelity"),
    ("negative seed", _with(seed=-1), "seed"),
]


@pytest.mark.parametrize("name,spec,needle", BAD, ids=[b[0] for b in BAD])
def test_bad_spec_is_one_line_exit_2(tmp_path, cli, name, spec, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, out, err = cli("run", path)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error:") and needle in lines[0]
    assert "Traceback" not in err


def test_malformed_yaml_reports_the_line(tmp_path, cli):
    path = tmp_path / "bad.yaml"
    path.write_text("cluster: meta-roce-24k\nmodel: llama3-405b\njob:\n  gpus: [16384\n  tp: 8\n")
    code, _, err = cli("run", path)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "bad.yaml:" in err and "malformed YAML" in err


def test_field_error_carries_its_line_number(tmp_path, cli):
    path = tmp_path / "bad.yaml"
    path.write_text("cluster: meta-roce-24k\nmodel: llama3-405b\njob:\n  gpus: 16384\n  tp: 8\n  pp: 16\n"
                    "  seq_len: -5\n")
    code, _, err = cli("run", path)
    assert code == 2 and "bad.yaml:7" in err and "job.seq_len" in err


def test_bad_override_syntax(example_spec, cli):
    code, _, err = cli("run", example_spec, "--set", "job.tp")
    assert code == 2 and "key.path=value" in err


def test_unknown_option_is_one_line(example_spec, cli):
    code, _, err = cli("run", example_spec, "--frobnicate")
    assert code == 2 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [
    ("collective", "--op", "foo"),
    ("placement", "EXAMPLE", "--occupancy", "2"),
    ("validate", "--case", "nope"),
    ("goodput", "EXAMPLE", "--tokens", "abc"),
])
def test_errors_of_verbs_with_progress_bars_are_exactly_one_line(cli, example_spec, args):
    code, out, err = cli(*(example_spec if a == "EXAMPLE" else a for a in args))
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1, repr(err)  # no stray progress-bar line
