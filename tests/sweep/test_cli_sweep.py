"""``teton sweep`` as a user drives it: table, JSON, Parquet, resume, one-line errors (exit 2)."""

import json

import duckdb
import pytest
import yaml


@pytest.fixture
def sweep_file(tmp_path, small_sweep):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(small_sweep, sort_keys=False))
    return path


def test_json_reports_counts_and_the_fitting_fastest_first(cli, tmp_path, sweep_file):
    code, out, _ = cli("sweep", sweep_file, "--db", tmp_path / "r.duckdb", "--executor", "serial",
                       "--batch", "4", "--top", "5", "--json")
    assert code == 0
    d = json.loads(out)
    assert (d["points"], d["evaluated"], d["ok"], d["invalid"], d["failed"]) == (12, 12, 8, 4, 0)
    top = d["top"]
    assert len(top) == 5 and all(r["job.tp"] in (2, 8) for r in top)
    key = [(not r["fits_in_memory"], r["step_time_s"]) for r in top]
    assert key == sorted(key)
    assert len(d["errors"]) == 4 and all(e["job.tp"] == 3 and "tp" in e["error"] for e in d["errors"])
    code, out, _ = cli("sweep", sweep_file, "--db", tmp_path / "r.duckdb", "--executor", "serial", "--json")
    again = json.loads(out)
    assert (again["already_stored"], again["evaluated"]) == (12, 0) and again["top"][:5] == top


def test_table_and_parquet_export(cli, tmp_path, sweep_file):
    pq = tmp_path / "r.parquet"
    code, out, err = cli("sweep", sweep_file, "--db", tmp_path / "r.duckdb", "--executor", "serial",
                         "--parquet", pq)
    assert code == 0 and "job.tp" in out and "MFU" in out and "12 points" in err and "4 invalid" in err
    rows = duckdb.sql(f"SELECT key, \"job.tp\", status, step_time_s FROM '{pq}' ORDER BY key").fetchall()
    assert len(rows) == 12 and len({r[0] for r in rows}) == 12
    con = duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True)
    assert rows == con.execute('SELECT key, "job.tp", status, step_time_s FROM results ORDER BY key').fetchall()


def test_two_sweeps_share_one_store(cli, tmp_path, sweep_file, base_spec):
    out = tmp_path / "r.duckdb"
    assert cli("sweep", sweep_file, "--db", out, "--executor", "serial")[0] == 0
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"base": base_spec, "grid": {"job.tp": [2, 4], "job.zero": [1, 3]}}))
    code, text, _ = cli("sweep", other, "--db", out, "--executor", "serial", "--json")
    d = json.loads(text)
    # job.tp=2 with zero=1 is the same spec as a point of the first sweep only if every other field agrees:
    # the first sweep also set pp and precision, so all four points are new
    assert code == 0 and d["points"] == 4 and d["evaluated"] == 4 and all("job.zero" in r for r in d["top"])
    con = duckdb.connect(str(out), read_only=True)
    assert con.execute("SELECT count(*) FROM results").fetchone()[0] == 16


@pytest.mark.parametrize("args, needle", [
    (["--executor", "dask"], "--executor"),
    (["--workers", "0"], "--workers"),
    (["--batch", "0"], "--batch"),
])
def test_bad_options_exit_2(cli, tmp_path, sweep_file, args, needle):
    code, _, err = cli("sweep", sweep_file, "--db", tmp_path / "r.duckdb", *args)
    assert code == 2 and needle in err and err.count("\n") == 1


def test_unwritable_or_wrong_out_exit_2(cli, tmp_path, sweep_file):
    for out, needle in ((tmp_path / "missing" / "r.duckdb", "does not exist"), (tmp_path, "is a directory"),
                        (sweep_file, "not a DuckDB")):
        code, _, err = cli("sweep", sweep_file, "--db", out, "--executor", "serial")
        assert code == 2 and needle in err and err.count("\n") == 1, err


def test_bad_sweep_file_exit_2(cli, tmp_path, base_spec):
    for grid, needle in (({"job.tpp": [1]}, "did you mean tp"), ({}, "empty")):
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump({"base": base_spec, "grid": grid}))
        code, _, err = cli("sweep", path, "--db", tmp_path / "r.duckdb")
        assert code == 2 and needle in err and err.count("\n") == 1, err


def test_the_bundled_example_sweep_runs(cli, tmp_path):
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "sweep-405b.yaml"
    code, out, err = cli("sweep", example, "--db", tmp_path / "r.duckdb", "--executor", "serial", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["points"] + d["filtered"] == 32 and d["filtered"] == 8 and d["ok"] > 0 and d["failed"] == 0
    assert all(r["job.tp"] * r["job.pp"] >= 64 for r in d["top"])


def test_storage_sweep_stores_the_whole_run_and_ranks_by_time_to_train(cli, tmp_path):
    sweep = {"base": {"cluster": "meta-roce-24k", "model": "llama3-8b",
                      "job": {"gpus": 64, "tp": 8, "global_batch": 64},
                      "storage": {"preset": "tectonic-llama3", "checkpoint": {"mode": "sync"}},
                      "reliability": {"tokens": 2e11, "runs": 4}},
             "grid": {"storage.servers": [1, 8, 64]}}
    path = tmp_path / "storage.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    code, out, _ = cli("sweep", path, "--db", tmp_path / "s.duckdb", "--executor", "serial", "--json")
    assert code == 0
    top = json.loads(out)["top"]
    assert [r["storage.servers"] for r in top] == [64, 8, 1]  # faster storage, shorter run
    saves = [r["checkpoint_save_s"] for r in top]
    assert saves == sorted(saves) and saves[-1] > saves[0] * 8  # 64x fewer servers, far slower saves
    days = [r["time_to_train_days"] for r in top]
    assert days == sorted(days) and all(0 < r["ettr"] <= 1 for r in top)
    assert len({r["step_time_s"] for r in top}) == 1  # storage does not change the step
    code, out, _ = cli("sweep", path, "--db", tmp_path / "s.duckdb", "--executor", "serial")
    assert code == 0 and "ETTR" in out and "days" in out and "time-to-train" in out


def test_html_page_of_a_sweep(cli, tmp_path, sweep_file):
    page = tmp_path / "sweep.html"
    code, _, _ = cli("sweep", sweep_file, "--db", tmp_path / "r.duckdb", "--executor", "serial", "--out", page)
    assert code == 0
    html = page.read_text(encoding="utf-8")
    for section in ("best", "effects", "memory-vs-time"):
        assert f'<section id="{section}">' in html
    assert "fig-effects-job-tp" in html and "<script src" not in html  # offline: plotly.js inlined
    code, _, err = cli("sweep", sweep_file, "--db", tmp_path / "r2.duckdb", "--out", tmp_path / "no" / "x.html")
    assert code == 2 and "--out" in err and err.count("\n") == 1
    assert not (tmp_path / "r2.duckdb").exists()  # refused before anything ran
