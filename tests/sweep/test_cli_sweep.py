"""``teton sweep`` as a user drives it: table, JSON, Parquet, HTML page, resume, a process pool,
one-line errors (exit 2)."""

import html as htmllib
import json
import re

import duckdb
import pytest
import yaml


@pytest.fixture
def sweep_file(tmp_path, small_sweep):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(small_sweep, sort_keys=False))
    return path


def _write(tmp_path, name, sweep):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    return path


def _best_table(page: str) -> list[list[str]]:
    """The cells of the page's first table (the best points), header row first."""
    table = re.search(r"<table>(.*?)</table>", page, flags=re.S).group(1)
    return [[htmllib.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr, re.S)]
            for tr in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)]


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


def test_a_sweep_and_a_run_spec_given_to_the_other_verb_say_which_verb_runs_them(cli, tmp_path, sweep_file, base_spec):
    """A sweep file given to ``teton run`` (or plan, search) and a run spec given to ``teton sweep``
    name the verb that runs them, not the first unknown key with the whole mapping as its value."""
    from cli_checks import one_line_error

    for verb in ("run", "search"):
        code, _, err = cli(verb, sweep_file)
        line = one_line_error(code, err, f"teton sweep {sweep_file} --db")
        assert "a sweep file" in line and "did you mean" not in line
    spec = _write(tmp_path, "spec.yaml", base_spec)
    code, _, err = cli("sweep", spec, "--db", tmp_path / "r.duckdb")
    line = one_line_error(code, err, "a run spec (cluster, model, job), not a sweep")
    assert "teton run" in line and "did you mean" not in line


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


def test_a_filter_that_drops_every_point_leaves_no_results_file(tmp_path, cli, example_spec):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"base": str(example_spec), "grid": {"job.tp": [4, 8]},
                                     "filter": ["job.tp > 100"]}))
    out = tmp_path / "results.duckdb"
    code, _, err = cli("sweep", str(sweep), "--db", str(out))
    assert code == 2 and "drops every one" in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("results.duckdb*"))


def test_a_filter_that_drops_every_point_is_one_line_exit_2(cli, tmp_path, base_spec):
    sweep = _write(tmp_path, "s.yaml", {"base": base_spec, "grid": {"job.tp": [1, 2]}, "filter": ["job.tp > 100"]})
    code, _, err = cli("sweep", sweep, "--db", tmp_path / "r.duckdb", "--executor", "serial")
    assert code == 2, err
    assert err.strip().count("\n") == 0 and "filter" in err and "job.tp > 100" in err and "every" in err


def test_rerun_with_a_changed_sweep_file_shows_this_sweeps_keys(cli, tmp_path, base_spec):
    """The second sweep names a key the first did not vary; its points are the same specs (seq_len is
    the base's), so they are already stored: the table, JSON, Parquet and HTML still show its value."""
    out = tmp_path / "r.duckdb"
    first = _write(tmp_path, "a.yaml", {"base": base_spec, "grid": {"job.tp": [1, 2]}})
    assert cli("sweep", first, "--db", out, "--executor", "serial")[0] == 0
    second = _write(tmp_path, "b.yaml", {"base": base_spec, "grid": {"job.tp": [1, 2], "job.seq_len": [4096]}})
    pq, page = tmp_path / "b.parquet", tmp_path / "b.html"
    code, text, err = cli("sweep", second, "--db", out, "--executor", "serial", "--json", "--parquet", pq,
                          "--out", page)
    assert code == 0, err
    d = json.loads(text)
    assert (d["already_stored"], d["evaluated"]) == (2, 0)
    assert sorted((r["job.tp"], r["job.seq_len"]) for r in d["top"]) == [(1, 4096), (2, 4096)]
    rows = duckdb.sql(f"SELECT \"job.tp\", \"job.seq_len\" FROM '{pq}' ORDER BY 1").fetchall()
    assert rows == [(1, 4096), (2, 4096)]
    assert "None" not in _best_table(page.read_text(encoding="utf-8"))


def test_unwritable_parquet_fails_before_the_sweep_runs(cli, tmp_path, base_spec):
    sweep = _write(tmp_path, "s.yaml", {"base": base_spec, "grid": {"job.tp": [1, 2]}})
    code, _, err = cli("sweep", sweep, "--db", tmp_path / "r.duckdb", "--executor", "serial",
                       "--parquet", tmp_path / "no-such-dir" / "r.parquet")
    assert code == 2 and "--parquet" in err and err.strip().count("\n") == 0
    assert not (tmp_path / "r.duckdb").exists()  # nothing was simulated or stored


def test_html_page_counts_every_stored_point_and_matches_the_store(cli, tmp_path, small_sweep):
    """12 points, 4 of them invalid: the page says 12 stored, 8 simulated, 4 invalid; its best-points
    table carries the store's numbers (memory in GiB, as ``teton run`` prints it)."""
    sweep = _write(tmp_path, "s.yaml", small_sweep)
    out, page = tmp_path / "r.duckdb", tmp_path / "s.html"
    code, _, err = cli("sweep", sweep, "--db", out, "--executor", "serial", "--out", page)
    assert code == 0, err
    text = page.read_text(encoding="utf-8")
    assert "12 stored points" in text and "8 simulated" in text and "4 invalid" in text
    assert "<script src" not in text  # plotly.js is inlined, nothing is fetched
    cells = _best_table(text)
    head, body = cells[0], cells[1:]
    assert head[:3] == ["job.tp", "job.pp", "job.precision"] and "mem GiB" in head
    con = duckdb.connect(str(out), read_only=True)
    stored = con.execute('SELECT "job.tp", "job.pp", "job.precision", step_time_s, mfu_bf16, memory_per_gpu_bytes '
                         "FROM results WHERE status = 'ok' AND fits_in_memory").fetchall()
    assert len(body) == len(stored) == 8
    want = {(str(tp), str(pp), prec): (f"{t:.3f}", f"{m * 100:.1f} %", f"{b / 2**30:.1f}")
            for tp, pp, prec, t, m, b in stored}
    i_mem = head.index("mem GiB")
    got = {tuple(r[:3]): (r[head.index("step s")], r[head.index("MFU")], r[i_mem]) for r in body}
    assert got == want


def test_table_memory_is_in_gib_like_teton_run(cli, tmp_path, base_spec):
    import teton

    sweep = _write(tmp_path, "s.yaml", {"base": base_spec, "grid": {"job.tp": [2]}})
    code, out, err = cli("sweep", sweep, "--db", tmp_path / "r.duckdb", "--executor", "serial")
    assert code == 0, err
    spec = {**base_spec, "job": {**base_spec["job"], "tp": 2}}
    gib = teton.simulate(spec).memory_per_gpu_bytes / 2**30
    assert "mem GiB" in out and f"{gib:.1f}" in out


def test_narrow_terminal_never_truncates_the_numbers(cli, tmp_path, base_spec, monkeypatch):
    """In an 80-column pipe with many swept keys, step time and MFU must print whole, not '5.4…'."""
    monkeypatch.setenv("COLUMNS", "80")
    keys = {"job.tp": [2], "job.pp": [1], "job.precision": ["bf16"], "job.zero": [1], "job.recompute": ["none"],
            "job.sequence_parallel": [True], "job.micro_batch": [1]}
    sweep = _write(tmp_path, "s.yaml", {"base": base_spec, "grid": keys})
    code, out, err = cli("sweep", sweep, "--db", tmp_path / "r.duckdb", "--executor", "serial")
    assert code == 0, err
    con = duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True)
    step, mfu = con.execute("SELECT step_time_s, mfu FROM results").fetchone()
    assert "…" not in out
    assert f"{step:.3f}" in out and f"{mfu * 100:.1f} %" in out


@pytest.mark.parametrize("workers", [1, 2])
def test_local_pool_gives_the_serial_results(cli, tmp_path, small_sweep, workers):
    """Same sweep, process pool of 1 or 2 workers vs in-process: the same rows, bit for bit."""
    sweep = _write(tmp_path, "s.yaml", small_sweep)
    cols = "key, status, error, step_time_s, mfu, memory_per_gpu_bytes, fits_in_memory"
    stores = {}
    for name, args in (("serial", ["--executor", "serial"]), ("pool", ["--workers", str(workers), "--batch", "3"])):
        out = tmp_path / f"{name}.duckdb"
        assert cli("sweep", sweep, "--db", out, *args)[0] == 0
        stores[name] = duckdb.connect(str(out), read_only=True).execute(f"SELECT {cols} FROM results ORDER BY key").fetchall()
    assert len(stores["serial"]) == 12 and stores["serial"] == stores["pool"]


def test_a_duckdb_file_with_a_foreign_results_table_is_one_line_exit_2(cli, tmp_path, base_spec):
    out = tmp_path / "mine.duckdb"
    con = duckdb.connect(str(out))
    con.execute("CREATE TABLE results (a INTEGER, b VARCHAR)")
    con.execute("INSERT INTO results VALUES (1, 'x')")
    con.close()
    sweep = _write(tmp_path, "s.yaml", {"base": base_spec, "grid": {"job.tp": [1, 2]}})
    code, _, err = cli("sweep", sweep, "--db", out, "--executor", "serial")
    assert code == 2 and "--db" in err and "results" in err and err.strip().count("\n") == 0
    assert duckdb.connect(str(out), read_only=True).execute("SELECT * FROM results").fetchall() == [(1, "x")]


def test_a_sweep_whose_every_point_is_invalid_exits_2_naming_the_first_reason(cli, tmp_path, base_spec):
    """No point simulated is no result: exit 2 with one line that names the first point and why it
    is invalid (64 GPUs are not divisible by tp 3), not exit 0 and an empty table; the rows stay."""
    sweep = _write(tmp_path, "s.yaml", {"base": base_spec, "grid": {"job.tp": [3, 5], "job.pp": [1, 2]}})
    out = tmp_path / "r.duckdb"
    for _again in (False, True):  # simulated the first time, read back the second
        code, text, err = cli("sweep", sweep, "--db", out, "--executor", "serial", "--json")
        line = err.strip()
        assert code == 2 and "\n" not in line and text == "", err
        con = duckdb.connect(str(out), read_only=True)
        assert con.execute("SELECT count(*) FROM results WHERE status = 'invalid'").fetchone()[0] == 4
        con.close()
        assert "every one of its 4 points is invalid" in line and "the first (job.tp=3, job.pp=1): job.gpus = 64" in line


@pytest.mark.parametrize("args, tasks", [([], 4), (["--batch", "64"], 1), (["--batch", "5"], 3)])
def test_the_default_batch_splits_a_small_sweep(cli, tmp_path, sweep_file, monkeypatch, args, tasks):
    """12 points, one serial worker: four tasks of 3 by default (the bar moves, a Ctrl-C loses
    little); an explicit --batch, even the old default of 64, as given."""
    import teton.sweep.run as run

    sizes = []
    real = run.evaluate_batch

    def counted(items):
        sizes.append(len(items))
        return real(items)

    monkeypatch.setattr(run, "evaluate_batch", counted)
    code, _, err = cli("sweep", sweep_file, "--db", tmp_path / "r.duckdb", "--executor", "serial", *args)
    assert code == 0, err
    assert len(sizes) == tasks and sum(sizes) == 12


@pytest.mark.parametrize("stop_at, says", [(4, "interrupted: all 12 points are stored in"),
                                           (2, "interrupted: 6 of 12 points are stored in")])
def test_an_interrupt_says_how_many_points_are_stored(tmp_path, small_sweep, monkeypatch, capsys, stop_at, says):
    """Ctrl-C after the last batch is stored says all points are (not "12 of 12 ... resume")."""
    import teton.sweep.run as run
    from teton.cli.sweep import _run
    from teton.sweep.grid import parse_sweep
    from teton.sweep.store import ResultStore

    real = run.run_sweep

    def interrupted(*a, **k):
        def stop(n):
            if n == stop_at:
                raise KeyboardInterrupt
        return real(*a, **{**k, "batch": 3, "on_batch": stop})

    monkeypatch.setattr(run, "run_sweep", interrupted)
    out = tmp_path / "r.duckdb"
    with ResultStore(out) as store, pytest.raises(SystemExit) as exit_:
        _run(parse_sweep(small_sweep), store, out, "serial", None, None)
    err = capsys.readouterr().err
    assert exit_.value.code == 130 and says in err and ("resume" in err) == (stop_at < 4)
