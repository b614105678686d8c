"""``--set key.path=value``: what an override changes, how its value is read, and errors that name
the override (not the spec file's line)."""

import json

import pytest
from cli_checks import one_line_error, write_spec
from layouts import LLAMA3_8B_8_GPUS_YAML

import teton
from teton.errors import SpecError
from teton.spec import load_spec
from teton.spec.load import parse_value


def test_set_override_changes_the_job(example_spec):
    base = teton.simulate(example_spec)
    more = teton.simulate(example_spec, ["job.global_batch=4096"])
    assert more.micro_batches == base.micro_batches * 2
    assert more.breakdown["pipeline_bubble"] / more.step_time_s < base.breakdown["pipeline_bubble"] / base.step_time_s


def test_exponent_notation_is_a_number():
    assert parse_value("16e6") == 16_000_000 and isinstance(parse_value("16e6"), int)
    assert parse_value("1.5E+3") == 1500 and parse_value("8e-1") == 0.8
    assert parse_value("abc") == "abc" and parse_value("8") == 8


def test_set_with_exponent_notation_runs(tmp_path, cli):
    spec = write_spec(tmp_path, LLAMA3_8B_8_GPUS_YAML)
    code, out, err = cli("run", spec, "--set", "job.seq_len=4e3", "--json")
    assert code == 0, err
    assert json.loads(out)["tokens_per_step"] == 8 * 4000


@pytest.mark.parametrize("item,field", [("job.tp=true", "job.tp"), ("job.zero=true", "job.zero"),
                                        ("network.qps_per_connection=true", "network.qps_per_connection")])
def test_a_boolean_is_not_an_integer(tmp_path, cli, item, field):
    # was: true read as 1 -- `job.tp=true` silently ran TP 1
    code, _, err = cli("run", write_spec(tmp_path, LLAMA3_8B_8_GPUS_YAML), "--set", item)
    one_line_error(code, err, f"{field} = True")


def test_override_errors_point_at_the_override_not_the_file_line(tmp_path, cli):
    path = write_spec(tmp_path, LLAMA3_8B_8_GPUS_YAML.replace("{gpus: 8}", "\n  gpus: 8\n  tp: 1\n"))
    code, _, err = cli("run", path, "--set", "job.tp=abc")
    line = one_line_error(code, err, "--set job.tp=abc")
    assert "spec.yaml:" not in line  # the file's tp: 1 is fine
    code, _, err = cli("run", path, "--set", "job.seq_len=-1")
    one_line_error(code, err, "--set job.seq_len=-1")


@pytest.mark.parametrize("item", ["job..tp=3", "job.=3", "=3", "job.tp.x=3"])
def test_malformed_set_paths_are_one_line(tmp_path, cli, item):
    code, _, err = cli("run", write_spec(tmp_path, LLAMA3_8B_8_GPUS_YAML), "--set", item)
    one_line_error(code, err, "--set")


def test_set_indexes_a_preset_list(tmp_path):
    spec = load_spec(write_spec(tmp_path, LLAMA3_8B_8_GPUS_YAML), ["cluster.layers.1.oversubscription=20"])
    assert [layer.oversubscription for layer in spec.cluster.layers] == [1.0, 20.0, 1.0]
    assert spec.cluster.hosts == 3072  # the rest of the preset kept
    with pytest.raises(SpecError, match="index it with 0..2"):
        load_spec(write_spec(tmp_path, LLAMA3_8B_8_GPUS_YAML), ["cluster.layers.3.oversubscription=20"])


def test_bad_override_syntax(example_spec, cli):
    code, _, err = cli("run", example_spec, "--set", "job.tp")
    assert code == 2 and "key.path=value" in err


def test_set_errors_blame_the_set_not_the_file(cli, example_spec):
    """A cross-field rule broken by an override names the --set that broke it, not a file line."""
    for item in ("job.tp=3", "job.micro_batch=4096"):
        code, _, err = cli("run", str(example_spec), "--set", item)
        assert code == 2 and err.startswith(f"error: --set {item}:") and ".yaml:" not in err, err
    # two overrides, one of which breaks the spec on its own: only that one is named
    code, _, err = cli("run", str(example_spec), "--set", "job.seq_len=8192", "--set", "model.layers=7")
    assert code == 2 and err.startswith("error: --set model.layers=7:") and "seq_len" not in err, err


def test_a_file_error_is_still_blamed_on_the_file(tmp_path, cli, example_spec):
    bad = tmp_path / "bad.yaml"
    bad.write_text(example_spec.read_text().replace("dp: 128", "dp: 64"))
    code, _, err = cli("run", str(bad), "--set", "job.seq_len=8192")
    assert code == 2 and "bad.yaml:" in err and "--set" not in err, err


def test_a_cross_field_error_blames_only_the_override_that_breaks_it(cli, example_spec):
    """tp*cp*pp*dp = gpus is reported on job.dp; with --set job.dp=64 beside the culprit --set job.tp=3,
    only job.tp=3 is blamed (it blamed the --set that named the reported field), and unrelated
    overrides are never named."""
    code, _, err = cli("run", str(example_spec), "--set", "job.gpus=8192", "--set", "job.dp=64",
                       "--set", "job.tp=3", "--set", "network.nvls=false")
    assert code == 2 and err.startswith("error: --set job.tp=3: job.dp = 64:"), err
    assert "network" not in err and "job.gpus" not in err.split(": job.dp")[0], err
    # two overrides that each break it (removing either leaves it broken): both, and only them
    code, _, err = cli("run", str(example_spec), "--set", "job.tp=4", "--set", "network.nvls=false",
                       "--set", "job.pp=8")
    assert code == 2 and err.startswith("error: --set job.tp=4 --set job.pp=8: job.dp"), err


def test_integers_read_as_yaml_1_2_reads_them_in_sets_and_files(tmp_path):
    """YAML 1.1's octal and base-60 integers misread a user's numbers silently: ``--set
    job.pp=010`` ran with pp = 8, ``global_batch: 0100`` as 64, ``1:00:00`` as 3600."""
    from teton.spec import load_spec
    from teton.spec.load import parse_value

    assert [parse_value(t) for t in ("010", "0100", "08", "0o17", "0x1f", "1_000")] == [10, 100, 8, 15, 31, 1000]
    assert parse_value("1:00:00") == "1:00:00"
    path = tmp_path / "s.yaml"
    path.write_text("cluster: meta-roce-24k\nmodel: llama3-8b\njob:\n  gpus: 0064\n  tp: 08\n  global_batch: 0256\n")
    job = load_spec(path).job
    assert (job.gpus, job.tp, job.global_batch) == (64, 8, 256)
    assert load_spec(path, overrides=["job.pp=02", "job.dp=04"]).job.pp == 2


def test_a_spec_error_crosses_a_process_pool_whole():
    """A SpecError raised in a worker of `teton plan`'s process pool broke the pool ("a worker
    died"): its default pickle could not be rebuilt. It now arrives as itself."""
    import pickle
    from concurrent.futures import ProcessPoolExecutor

    from teton.errors import SpecError

    err = pickle.loads(pickle.dumps(SpecError("tokens", 1e40, "too many interruptions", where="plan")))
    assert (type(err), str(err), err.field, err.value) == (SpecError, "plan: tokens = 1e+40: too many interruptions",
                                                           "tokens", 1e40)
    with ProcessPoolExecutor(1) as pool:
        with pytest.raises(SpecError, match="must be at least 1"):
            pool.submit(_raise_spec_error).result()


def _raise_spec_error():
    from teton.errors import SpecError

    raise SpecError("gpus", 0, "must be at least 1")
