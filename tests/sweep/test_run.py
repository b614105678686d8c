"""Running sweeps: every point stored once, invalid points recorded, resume after Ctrl-C / kill -9,
deterministic rows whatever the executor or batch size."""

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import Executor
from pathlib import Path

import pytest

from teton.errors import SpecError
from teton.sweep.grid import parse_sweep
from teton.sweep.run import SerialExecutor, evaluate_batch, run_sweep
from teton.sweep.store import ResultStore

ROOT = Path(__file__).resolve().parents[2]


class RecordingExecutor(SerialExecutor):
    """Serial, and remembers every point key it evaluated."""

    def __init__(self):
        self.keys: list[str] = []

    def submit(self, fn, /, items, **kwargs):
        self.keys.extend(k for k, _ in items)
        return super().submit(fn, items, **kwargs)


def _rows(path):
    with ResultStore(path) as store:
        return store.rows(order="key")


def test_serial_sweep_stores_every_point_with_metrics(tmp_path, small_sweep):
    sweep = parse_sweep(small_sweep)
    with ResultStore(tmp_path / "r.duckdb") as store:
        s = run_sweep(sweep, store, executor="serial", batch=5)
        rows = store.rows(order="key")
    assert (s.points, s.evaluated, s.already_stored, s.ok, s.invalid, s.failed) == (12, 12, 0, 8, 4, 0)
    assert len(rows) == 12 and len({r["key"] for r in rows}) == 12
    for r in rows:
        if r["job.tp"] == 3:
            assert r["status"] == "invalid" and "tp" in r["error"] and r["step_time_s"] is None
            continue
        assert r["status"] == "ok" and r["error"] is None
        assert r["step_time_s"] > 0 and 0 < r["mfu"] < 1 and r["memory_per_gpu_bytes"] > 0
        parts = sum(v for k, v in r.items() if k.startswith("breakdown_") and v is not None)
        assert parts == pytest.approx(r["step_time_s"], rel=1e-9)
        assert r["layout_tp"] == r["job.tp"] and r["layout_pp"] == r["job.pp"]
        assert json.loads(r["point"]) == {"job.tp": r["job.tp"], "job.pp": r["job.pp"],
                                          "job.precision": r["job.precision"]}


def test_stored_metrics_match_teton_simulate(tmp_path, small_sweep):
    import teton

    sweep = parse_sweep(small_sweep)
    points, _ = sweep.points()
    with ResultStore(tmp_path / "r.duckdb") as store:
        run_sweep(sweep, store, executor="serial")
        by_key = {r["key"]: r for r in store.rows()}
    p = next(p for p in points if p.values == {"job.tp": 8, "job.pp": 2, "job.precision": "fp8"})
    ref = teton.simulate(p.spec)
    row = by_key[p.key]
    assert row["step_time_s"] == ref.step_time_s and row["fits_in_memory"] == ref.fits_in_memory
    assert row["breakdown_dp_comm_s"] == ref.breakdown["dp_comm"]


def test_interrupted_sweep_resumes_without_re_evaluating(tmp_path, small_sweep):
    sweep = parse_sweep(small_sweep)
    out = tmp_path / "r.duckdb"
    first = RecordingExecutor()

    def stop_after_two(n):
        if n == 2:
            raise KeyboardInterrupt

    with ResultStore(out) as store, pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, store, executor=first, batch=3, on_batch=stop_after_two)
    assert len(_rows(out)) == 6 and len(first.keys) == 6
    second = RecordingExecutor()
    with ResultStore(out) as store:
        s = run_sweep(sweep, store, executor=second, batch=3)
    assert (s.already_stored, s.evaluated) == (6, 6)
    assert not set(first.keys) & set(second.keys)
    assert len(_rows(out)) == 12
    third = RecordingExecutor()
    with ResultStore(out) as store:
        s = run_sweep(sweep, store, executor=third)
    assert third.keys == [] and (s.already_stored, s.evaluated) == (12, 0)


def test_rows_that_other_code_computed_are_simulated_again(tmp_path, small_sweep, monkeypatch):
    """teton's version string outlives many code changes: each row records a fingerprint of the
    code that computed it, so a rerun after an edit simulates every point again (replacing the
    rows); the same code resumes."""
    out = tmp_path / "r.duckdb"
    with ResultStore(out) as store:
        run_sweep(parse_sweep(small_sweep), store, executor="serial")
    monkeypatch.setattr("teton.sweep.run.code_fingerprint", lambda: "edited-code")
    for evaluated in (12, 0):  # the edited code's rows, then those rows reused
        again = RecordingExecutor()
        with ResultStore(out) as store:
            s = run_sweep(parse_sweep(small_sweep), store, executor=again)
        assert (s.evaluated, s.already_stored, len(again.keys)) == (evaluated, 12 - evaluated, evaluated)
        assert (s.ok, s.invalid) == (8, 4)
    rows = _rows(out)
    assert len(rows) == 12 and {r["code"] for r in rows} == {"edited-code"}


def test_the_default_batch_gives_every_worker_several_tasks(tmp_path, small_sweep):
    """Without a batch size, 12 points on 2 workers are 6 tasks of 2 (about 4 per worker), and
    progress moves before the end; an explicit batch is kept as given."""
    from teton.sweep.run import default_batch

    class TwoWorkers(Executor):
        """Runs each task at submit, but counts as 2 workers."""

        max_workers = 2

        def __init__(self):
            self.sizes: list[int] = []

        def submit(self, fn, /, items, **kwargs):
            self.sizes.append(len(items))
            return SerialExecutor().submit(fn, items, **kwargs)

    for batch, sizes, moves in ((None, [2] * 6, True), (64, [12], False)):
        ex, ticks = TwoWorkers(), []
        with ResultStore(tmp_path / f"r{batch}.duckdb") as store:
            run_sweep(parse_sweep(small_sweep), store, executor=ex, batch=batch,
                      progress=lambda i, n, seen=ticks: seen.append(i))
        assert ex.sizes == sizes and ticks[-1] == 12 and any(0 < t < 12 for t in ticks) == moves
    assert [default_batch(n, w) for n, w in ((12, 2), (3, 16), (10_000, 8), (100, 1))] == [2, 1, 64, 25]


def test_failed_points_are_kept_and_retried_on_resume(tmp_path, small_sweep, monkeypatch):
    import teton.engine.step as step

    sweep = parse_sweep(small_sweep)
    real = step.simulate_step

    def flaky(spec, *a, **k):
        if spec.job.pp == 2:
            raise ZeroDivisionError("boom")
        return real(spec, *a, **k)

    monkeypatch.setattr(step, "simulate_step", flaky)
    with ResultStore(tmp_path / "r.duckdb") as store:
        s = run_sweep(sweep, store, executor="serial")
        assert s.failed == 4 and s.ok == 4
        failed = [r for r in store.rows() if r["status"] == "failed"]
        assert failed[0]["error"] == "ZeroDivisionError: boom"
        monkeypatch.setattr(step, "simulate_step", real)
        again = RecordingExecutor()
        s = run_sweep(sweep, store, executor=again)
        assert sorted(again.keys) == sorted(r["key"] for r in failed)
        assert (s.failed, s.ok, s.invalid) == (0, 8, 4)


def test_same_rows_whatever_the_executor_and_batch(tmp_path, small_sweep):
    """The one process-pool test: 2 workers, batch 1 (completion order varies) vs serial, batch 64."""
    sweep = parse_sweep(small_sweep)
    with ResultStore(tmp_path / "a.duckdb") as store:
        run_sweep(sweep, store, executor="serial", batch=64)
    with ResultStore(tmp_path / "b.duckdb") as store:
        s = run_sweep(sweep, store, executor="local", workers=2, batch=1)
    assert s.evaluated == 12
    assert _rows(tmp_path / "a.duckdb") == _rows(tmp_path / "b.duckdb")


KILLER = """
import os, signal, sys
from teton.sweep.grid import parse_sweep
from teton.sweep.run import run_sweep
from teton.sweep.store import ResultStore
sweep = parse_sweep(sys.argv[1])
def on_batch(n):
    if n == 3:
        os.kill(os.getpid(), getattr(signal, sys.argv[3]))
with ResultStore(sys.argv[2]) as store:
    try:
        run_sweep(sweep, store, executor=sys.argv[4], workers=2, batch=2, on_batch=on_batch)
    except KeyboardInterrupt:
        sys.exit(130)
"""


@pytest.mark.parametrize("sig, executor", [("SIGKILL", "serial"), ("SIGINT", "local")])
def test_killed_process_keeps_committed_batches(tmp_path, small_sweep, cli, sig, executor):
    """kill -9 right after the 3rd commit (serial), Ctrl-C with a process pool: resume finishes the rest."""
    sweep_file = tmp_path / "sweep.json"
    sweep_file.write_text(json.dumps(small_sweep))
    out = tmp_path / "r.duckdb"
    proc = subprocess.run([sys.executable, "-c", KILLER, str(sweep_file), str(out), sig, executor],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == (-signal.SIGKILL if sig == "SIGKILL" else 130), proc.stderr
    stored = len(_rows(out))
    if executor == "serial":
        assert stored == 6  # three committed batches of 2; nothing after
    else:  # batches that finished together share a commit; those still in flight are dropped, not half-written
        assert 6 <= stored < 12 and stored % 2 == 0
    code, text, err = cli("sweep", sweep_file, "--db", out, "--executor", "serial", "--json")
    assert code == 0, err
    d = json.loads(text)
    assert d["already_stored"] == stored and d["evaluated"] == 12 - stored
    assert (d["ok"], d["invalid"]) == (8, 4) and len(_rows(out)) == 12


def test_evaluate_batch_records_invalid_specs(base_spec):
    bad = dict(base_spec, job={**base_spec["job"], "tp": 3})
    rows = evaluate_batch([("a", base_spec), ("b", bad), ("c", {"cluster": "nope", "model": "llama3-8b", "job": {}})])
    assert [r["status"] for r in rows] == ["ok", "invalid", "invalid"]
    assert "\n" not in rows[1]["error"] and "tp" in rows[1]["error"] and "known:" in rows[2]["error"]


def test_ray_executor_adapter_with_a_stand_in_ray(monkeypatch, tmp_path, small_sweep):
    """RayExecutor turns submit into ray.remote(fn).remote(...).future(); checked against a stand-in module."""
    import types
    from concurrent.futures import Future

    calls = {"init": None, "tasks": 0, "shutdown": 0}

    class Ref:
        def __init__(self, value):
            self.value = value

        def future(self):
            f = Future()
            f.set_result(self.value)
            return f

    def remote(num_cpus=None):
        def wrap(fn):
            def run(*a, **k):
                calls["tasks"] += 1
                return Ref(fn(*a, **k))

            return types.SimpleNamespace(remote=run)

        return wrap

    fake = types.SimpleNamespace(
        is_initialized=lambda: calls["init"] is not None,
        init=lambda **kw: calls.__setitem__("init", kw),
        remote=remote, cancel=lambda ref: None,
        shutdown=lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1))
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object() if name == "ray" else None)
    sweep = parse_sweep(small_sweep)
    with ResultStore(tmp_path / "r.duckdb") as store:
        s = run_sweep(sweep, store, executor="ray", workers=2, batch=4)
    assert s.evaluated == 12 and calls["tasks"] == 3 and calls["init"]["num_cpus"] == 2 and calls["shutdown"] == 1
    assert _rows(tmp_path / "r.duckdb") and isinstance(SerialExecutor(), Executor)


def test_missing_ray_is_a_one_line_error(monkeypatch, tmp_path, small_sweep, cli):
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(small_sweep))
    code, _, err = cli("sweep", path, "--db", tmp_path / "r.duckdb", "--executor", "ray")
    assert code == 2 and "pip install ray" in err and err.count("\n") == 1
    assert not os.path.exists(tmp_path / "r.duckdb")


def test_real_ray_matches_serial(tmp_path, small_sweep):
    """Only where Ray is installed (an optional extra): a local Ray instance gives the serial rows."""
    pytest.importorskip("ray")
    sweep = parse_sweep(small_sweep)
    with ResultStore(tmp_path / "a.duckdb") as store:
        run_sweep(sweep, store, executor="serial")
    with ResultStore(tmp_path / "b.duckdb") as store:
        s = run_sweep(sweep, store, executor="ray", workers=2, batch=5)
    assert s.evaluated == 12 and _rows(tmp_path / "a.duckdb") == _rows(tmp_path / "b.duckdb")


def test_ctrl_c_on_the_cli_stops_with_130_and_resumes(tmp_path, base_spec):
    """SIGINT to the whole process group (what Ctrl-C does) while a pool runs: exit 130, a one-line
    note, no worker tracebacks; the re-run evaluates only what is missing."""
    import time

    sweep = {"base": base_spec, "grid": {"job.tp": [1, 2, 4, 8], "job.pp": [1, 2, 4], "job.zero": [1, 2, 3],
                                         "job.recompute": ["none", "full"], "job.precision": ["bf16", "fp8"]}}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(sweep))
    out = tmp_path / "r.duckdb"
    cmd = [sys.executable, "-m", "teton", "sweep", str(path), "--db", str(out), "--workers", "2", "--batch", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True)
    wal = out.with_suffix(".duckdb.wal")  # grows with each committed batch
    deadline, first_size = time.time() + 60, None
    while time.time() < deadline and proc.poll() is None:
        size = wal.stat().st_size if wal.exists() else None
        if first_size is None:
            first_size = size
        elif size is not None and size > first_size:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the sweep finished before the interrupt landed")
    assert proc.returncode == 130 and "interrupted:" in err and "Traceback" not in err, err
    stored = len(_rows(out))
    rerun = subprocess.run([*cmd, "--json"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    d = json.loads(rerun.stdout)
    assert stored > 0 and d["points"] == 144
    assert (d["already_stored"], d["evaluated"]) == (stored, 144 - stored)


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask") or not hasattr(os, "fork"), reason="POSIX fork pools")
def test_a_ctrl_c_landing_as_a_worker_starts_does_not_kill_it(tmp_path, small_sweep, monkeypatch):
    """Ctrl-C reaches the whole process group, so a worker can get it between its fork and its
    initializer (which ignores it): the pool starts workers with SIGINT blocked, so the signal is
    dropped there and the sweep goes on (a worker killed there broke the pool, or hung the exit)."""
    import concurrent.futures.process as pool

    start = pool._process_worker

    def interrupted_at_start(*args, **kwargs):  # runs in the forked worker, before the initializer
        os.kill(os.getpid(), signal.SIGINT)
        return start(*args, **kwargs)

    monkeypatch.setattr(pool, "_process_worker", interrupted_at_start)
    sweep = parse_sweep(small_sweep)
    with ResultStore(tmp_path / "r.duckdb") as store:
        s = run_sweep(sweep, store, executor="local", workers=2, batch=3)
    assert s.evaluated == s.points > 0


def test_a_dead_worker_is_a_one_line_error_and_keeps_what_was_stored(tmp_path, small_sweep):
    from concurrent.futures.process import BrokenProcessPool

    from teton.errors import SpecError

    class DiesOnThirdBatch(SerialExecutor):
        """The third batch's future holds the pool's error (``at_submit``: the submit raises it,
        as a pool whose worker died while idle does)."""

        def __init__(self, at_submit):
            self.n, self.at_submit = 0, at_submit

        def submit(self, fn, /, *args, **kwargs):
            self.n += 1
            if self.n == 3:
                from concurrent.futures import Future

                err = BrokenProcessPool("a child process terminated abruptly")
                if self.at_submit:
                    raise err
                f = Future()
                f.set_exception(err)
                return f
            return super().submit(fn, *args, **kwargs)

    sweep = parse_sweep(small_sweep)
    for at_submit in (False, True):
        path = tmp_path / f"r{at_submit}.duckdb"
        with ResultStore(path) as store, pytest.raises(SpecError, match="4 points are stored"):
            run_sweep(sweep, store, executor=DiesOnThirdBatch(at_submit), batch=2)
        assert len(_rows(path)) == 4


def test_an_unanswered_ray_address_is_one_error_not_minutes_of_retries():
    from teton.sweep.run import _check_reachable

    with pytest.raises(SpecError, match="RAY_ADDRESS = '127.0.0.1:1': no Ray cluster answers there"):
        _check_reachable("127.0.0.1:1")
    _check_reachable("auto")  # Ray's own to resolve
