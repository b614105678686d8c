"""Regression tests for the crashes the fuzz test (``tests/cli/test_fuzz.py``) found: each was a
traceback, or an error spread over several lines, and is now a one-line ``error:`` with exit 2
naming the field, the value and what is allowed."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "llama3-405b-16k.yaml"
KINETO = ROOT / "tests" / "data" / "traces" / "a100-2rank-nccl.kineto.json.gz"
DEEP = "[" * 3000 + "]" * 3000  # nested past Python's recursion limit
LONG = "x" * 300  # longer than a file name may be (255 bytes): os.stat raises ENAMETOOLONG


def one_error_line(code: int, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# ---- an error is one line, whatever characters the input echoed in it has


@pytest.mark.parametrize("args", [
    ("run", str(EXAMPLE), "--set", "job.t\np=8"),  # a newline in a --set key: raw in the field name
    ("run", str(EXAMPLE), "--set", "bogus\x1ekey=1"),  # a record separator: str.splitlines breaks on it
    ("run", str(EXAMPLE), "--set", "cluster=a\u2028b.yaml"),  # a Unicode line separator in a file name
])
def test_an_error_message_stays_on_one_line(cli, args):
    line = one_error_line(*cli(*args)[::2])
    assert "\\" in line  # the character is shown escaped


def test_a_huge_value_is_shortened_in_the_error(cli, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"cluster: meta-roce-24k\nmodel: llama3-8b\njob: {{gpus: 8, tp: [{', '.join(['1'] * 20000)}]}}\n")
    line = one_error_line(*cli("run", spec)[::2])
    assert len(line) < 1000 and "1, 1, ...]" in line  # the list shown bounded


# ---- a spec file with a character YAML's reader refuses


def test_a_yaml_alias_bomb_is_a_quick_one_line_error(cli, tmp_path):
    # nine levels of nine aliases ("billion laughs"): ~800 bytes of file, ~4e8 strings as a value;
    # the message's repr was built whole before it was cut (39 s and 4.4 GB; a tenth level ran out
    # of memory with a traceback)
    levels = [' - &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for prev, name in zip("abcdefghi", "bcdefghij", strict=True):
        levels.append(f" - &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    spec = tmp_path / "spec.yaml"
    spec.write_text("cluster: meta-roce-24k\nmodel: llama3-8b\njob: {gpus: 8}\nnotes:\n" + "\n".join(levels) + "\n")
    line = one_error_line(*cli("run", spec)[::2])
    assert line.startswith(f"error: {spec}: notes = [[") and len(line) < 1000 and "a list of strings" in line


def test_a_control_character_in_a_yaml_spec(cli, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("cluster: meta-roce-24k\nmodel: llama3-8b\x9e\njob: {gpus: 8}\n")
    line = one_error_line(*cli("run", spec)[::2])
    assert "malformed YAML" in line and "spec.yaml" in line


# ---- input nested past the recursion limit, and YAML aliases that contain themselves


@pytest.mark.parametrize("name, content", [
    ("spec.yaml", f"cluster: meta-roce-24k\nmodel: llama3-8b\njob: {DEEP}\n"),
    ("spec.json", '{"job": ' + DEEP + "}"),
    ("spec.yaml", "cluster: meta-roce-24k\nmodel: llama3-8b\njob: &j {gpus: 8, tp: [[[*j]]]}\n"),
])
def test_a_deeply_nested_spec(cli, tmp_path, name, content):
    spec = tmp_path / name
    spec.write_text(content)
    line = one_error_line(*cli("run", spec)[::2])
    assert "nested too deeply" in line or "contains itself" in line


def test_a_deeply_nested_set_value(cli):
    one_error_line(*cli("run", EXAMPLE, "--set", f"job.tp={DEEP}")[::2])


def test_deeply_nested_runs_calibration_and_traces(cli, tmp_path):
    runs = tmp_path / "runs.yaml"
    runs.write_text(f"runs: {DEEP}\n")
    assert "runs" in one_error_line(*cli("fit", runs)[::2])
    cal = tmp_path / "cal.json"
    cal.write_text('{"efficiency_overrides": ' + DEEP + "}")
    assert "calibration" in one_error_line(*cli("calibrate", cal)[::2])
    assert "calibration" in one_error_line(*cli("validate", "--case", "korthikanti-2022-figure1",
                                                "--calibration", cal)[::2])
    kineto = tmp_path / "trace.json"
    kineto.write_text('{"traceEvents": ' + DEEP + "}")
    assert "trace" in one_error_line(*cli("fit", "--trace", kineto)[::2])
    philly = tmp_path / "philly.json"
    philly.write_text("[\n" + DEEP + "\n]\n")
    code, out, err = cli("schedule", philly, "--json")
    one_error_line(code, err.splitlines()[-1])  # the entry is reported and skipped: no job is left
    assert "nested too deeply" in err


# ---- names longer than a file name may be, where a path or a preset is expected


@pytest.mark.parametrize("args", [
    ("collective", "--cluster", LONG),
    ("placement", "--slurm-topology", "topo.conf", "--cluster", LONG + ".yaml"),
    ("schedule", LONG + ".csv"),
    ("fit", LONG + ".yaml"),
    ("report", str(EXAMPLE), "--sections", "step", "--out", LONG + ".html"),
    ("sweep", str(ROOT / "examples" / "sweep-405b.yaml"), "--db", LONG + ".duckdb"),
    ("checkpoint", str(EXAMPLE), "--measure", LONG),
    ("run", str(EXAMPLE), "--timeline", LONG + ".json"),
])
def test_a_name_too_long(cli, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    one_error_line(*cli(*args)[::2])


def test_a_spec_naming_a_cluster_file_too_long(cli, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"cluster: {LONG}.yaml\nmodel: llama3-8b\njob: {{gpus: 8}}\n")
    assert "cluster" in one_error_line(*cli("run", spec)[::2])


# ---- an output file that cannot be written


@pytest.mark.parametrize("target", ["adir", "nodir/cluster.yaml", "afile/cluster.yaml", LONG + ".yaml"])
def test_calibrate_cluster_out_that_cannot_be_written(cli, tmp_path, monkeypatch, target):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("")
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"efficiency_overrides": {"gemm_bf16": 0.7}}))
    assert "--cluster-out" in one_error_line(*cli("calibrate", cal, "--cluster-out", target)[::2])


def test_checkpoint_png_error_names_the_png_flag(cli, tmp_path):
    line = one_error_line(*cli("checkpoint", EXAMPLE, "--png", tmp_path / (LONG + ".png"))[::2])
    assert line.startswith("error: --png = ")


# ---- a synthetic trace too large for numpy


def test_a_synthetic_trace_too_large(cli):
    line = one_error_line(*cli("schedule", "synthetic:99999999999999999999")[::2])
    assert "1,000,000" in line


# ---- a calibration whose values are not numbers (the efficiency memo hashed them)


@pytest.mark.parametrize("overrides", [{"gemm_bf16": {"a": 1}}, {"mem": [0.5]}])
def test_a_calibration_value_that_is_a_mapping_or_a_list(cli, tmp_path, overrides):
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(overrides))  # a plain mapping of override keys
    for args in (("calibrate", cal), ("validate", "--case", "korthikanti-2022-figure1", "--calibration", cal)):
        assert "calibration.efficiency_overrides." in one_error_line(*cli(*args)[::2])  # the file's schema


# ---- a CSV field larger than the csv module's limit


def test_a_csv_field_too_large(cli, tmp_path):
    big = "x" * 200_000
    header = tmp_path / "header.csv"
    header.write_text(big + "\n")
    assert "not a CSV line" in one_error_line(*cli("schedule", header)[::2])
    row = tmp_path / "row.csv"
    row.write_text(f"job_id,arrival_s,gpus,duration_s\nj1,0,8,3600\n{big}\n")
    code, out, err = cli("schedule", row, "--json", "--policy", "fifo")
    assert code == 0 and "not a CSV line" in err and json.loads(out)["jobs"] == 1
    alibaba = tmp_path / "pai_task_table.csv"
    alibaba.write_text(f"{big}\nj,t,1,Terminated,0,100,1,1,100,V100\n")
    code, out, err = cli("schedule", alibaba, "--json", "--policy", "fifo")
    assert code == 0 and "not a CSV line" in err
    runs = tmp_path / "runs.csv"
    runs.write_text(f"spec,step_time_s\n{big},1\n")
    assert "runs" in one_error_line(*cli("fit", runs)[::2])


# ---- a YAML key that is not a string (0:, 1.5:, true:, null:) was passed on as a keyword argument


@pytest.mark.parametrize("extra, where", [
    ("{0}", "0"),  # a flow mapping with an int key and no value: the whole file
    ("cluster: meta-roce-24k\nmodel: llama3-8b\njob: {gpus: 8, 0: 1}\n", "job.0"),
    ("cluster: meta-roce-24k\nmodel: llama3-8b\njob: {gpus: 8}\nnetwork: {true: 1}\n", "network.True"),
    ("cluster: meta-roce-24k\nmodel: llama3-8b\njob: {gpus: 8}\nstorage: {preset: tectonic-llama3, checkpoint: "
     "{null: 1}}\n", "storage.checkpoint.None"),
    ("cluster: meta-roce-24k\nmodel: llama3-8b\njob: {gpus: 8}\nreliability: {1.5: 1}\n", "reliability.1.5"),
])
def test_a_yaml_key_that_is_not_a_string(cli, tmp_path, extra, where):
    spec = tmp_path / "spec.yaml"
    spec.write_text(extra)
    for verb in ("run", "checkpoint"):
        line = one_error_line(*cli(verb, spec)[::2])
        assert f"{where} = " in line and "a key must be a name" in line


def test_a_set_value_with_a_key_that_is_not_a_string(cli):
    assert "a key must be a name" in one_error_line(*cli("run", EXAMPLE, "--set", "job={0: 1}")[::2])


# ---- a step time so small that the run's step counts overflow (1e-308 s a step)


@pytest.mark.parametrize("args, field", [
    (("--step-time", "1e-308"), "--step-time"),
    (("--set", "reliability.step_time_s=1e-300"), "reliability.step_time_s"),  # NaN in the JSON before
    (("--tokens", "1e12", "--set", "reliability.tokens_per_step=1e-300"), "reliability.tokens_per_step"),
])
def test_goodput_with_a_vanishing_step(cli, args, field):
    line = one_error_line(*cli("goodput", EXAMPLE, "--runs", "2", "--json", *args)[::2])
    assert f" {field} = " in line  # refused at load (a spec field's range) or by goodput (the flag)


# ---- a global batch of billions of micro-batches per DP rank ran out of memory (the OOM killer)


def test_a_batch_of_too_many_micro_batches(cli):
    line = one_error_line(*cli("run", EXAMPLE, "--set", "job.global_batch=2147483648")[::2])
    assert "micro-batches per DP rank" in line


def test_an_infinite_gpu_count_in_a_schedule_trace_is_a_skipped_line(cli, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,gpus,duration_s\n1,0,inf,10\n2,0,8,10\n")
    code, out, err = cli("schedule", str(trace), "--cluster", "meta-roce-24k", "--json")
    assert code == 0 and "Traceback" not in err
    code, _, err = cli("schedule", str(trace), "--cluster", "meta-roce-24k", "--strict")
    assert code == 2 and "finite" in err and len(err.strip().splitlines()) == 1


# ---- stop 50's probe of plan, search, placement, schedule and collective


@pytest.mark.parametrize("args, needle", [
    (("collective", "--policy", "random,linear"), "one policy"),  # not 'unknown; did you mean random'
    (("schedule", "synthetic:10", "--format", "philly"), "synthetic:N generates its jobs"),  # was ignored
    (("placement", str(EXAMPLE), "--fidelity", "x"), "--fidelity = 'x'"),
])
def test_probe_findings_are_one_line_errors(cli, args, needle):
    code, _, err = cli(*args)
    assert needle in one_error_line(code, err)


def test_placement_takes_the_flow_model_as_a_flag_and_sizes_go_to_a_pebibyte(cli):
    from teton.cli._common import parse_size

    code, out, _ = cli("placement", str(EXAMPLE), "--fidelity", "flow", "--policy", "topology-aware", "--json")
    assert code == 0 and json.loads(out)[0]["step_time_s"] == pytest.approx(6.918, rel=0.01)  # README's flow figure
    assert parse_size("1P", "-e") == 1024**5


def test_a_search_where_nothing_fits_names_the_layout_closest_to_fitting(cli, tmp_path):
    """Nothing fits (70B on one host): the table is ranked by step time, so the note says which
    layout comes closest and by how much, not that layouts were skipped for fitting with less."""
    spec = tmp_path / "s.yaml"
    spec.write_text("cluster: dgx-h100-superpod\nmodel: llama3-70b\njob: {gpus: 8, tp: 8, global_batch: 8, seq_len: 8192}\n")
    code, out, _ = cli("search", str(spec), "--tp", "8", "--cp", "1", "--pp", "1")
    assert code == 0 and "no layout fits in memory; the closest" in out and "GiB short" in out
    assert "not simulated" not in out
