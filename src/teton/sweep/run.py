"""Run a sweep: batches of points evaluated on a ``concurrent.futures.Executor``, stored by the driver.

Each task is a batch of points (``--batch``; by default :func:`default_batch`: about four batches
per worker, at most 64 points each, so every worker has work and the progress bar moves on small
sweeps too, and a Ctrl-C loses little in flight): a worker loads every point's spec
and calls :func:`teton.engine.step.simulate_step` (about 1 ms; plus the checkpoint and whole-run
models when the spec has ``storage:`` / a ``reliability:`` run length, :mod:`teton.whole_run`),
so per-task overhead (pickling,
scheduling) is paid once per batch, not per point. The driver keeps a bounded window of batches
in flight, and commits each finished batch to the store as it arrives (one transaction), so an
interrupted sweep (Ctrl-C, kill) keeps every finished batch and a re-run skips those points by
key. Executors: ``serial`` (in-process), ``local`` (a process pool, the default), ``ray``
(``ray.remote`` tasks, imported only when asked; ``RAY_ADDRESS`` selects a running cluster).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, Executor, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from teton.errors import SpecError
from teton.sweep.code_version import code_fingerprint
from teton.sweep.grid import Point, Sweep, canonical_json
from teton.sweep.store import ResultStore, sql_type

EXECUTORS = ("local", "ray", "serial")
SCALAR_METRICS = ("step_time_s", "mfu", "mfu_bf16", "hfu", "hfu_bf16", "precision", "tflops_per_gpu", "tokens_per_s", "memory_per_gpu_bytes", "fits_in_memory",
                  "hbm_bytes", "largest_memory_term", "model_flops_per_step", "tokens_per_step", "gpus",
                  "micro_batches", "fidelity", "placement")
INT_METRICS = ("tokens_per_step", "gpus", "micro_batches")


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def result_row(result) -> dict[str, Any]:
    """The scalar metrics of a StepResult as flat columns (floats, ints, bools, text)."""
    row: dict[str, Any] = {}
    for name in SCALAR_METRICS:
        v = _plain(getattr(result, name))
        if isinstance(v, bool) or isinstance(v, str):
            row[name] = v
        elif name in INT_METRICS:
            row[name] = int(v)
        else:
            row[name] = float(v)
    for k, v in result.breakdown.items():
        row[f"breakdown_{k}_s"] = float(v)
    for k, v in result.memory_breakdown.items():
        row[f"memory_{k}_bytes"] = float(v)
    for k, v in result.layout.items():
        row[f"layout_{k}"] = int(v)
    row["notes"] = "; ".join(result.notes) or None
    row["warnings"] = "; ".join(result.warnings) or None
    return row


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".strip()


def evaluate_batch(items: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Worker task: ``(key, spec mapping)`` pairs -> rows with ``key``, ``status``, ``error`` and metrics.

    A spec that fails validation is ``invalid`` with its one-line SpecError; any other exception
    from the simulator is ``failed`` (kept, and retried on resume).
    """
    from teton.engine.step import simulate_step
    from teton.spec import load_spec
    from teton.whole_run import run_extras

    rows = []
    for key, mapping in items:
        try:
            spec = load_spec(mapping)
            result = simulate_step(spec)
            extras = {k: _plain(v) for k, v in run_extras(spec, result).items()
                      if isinstance(_plain(v), (int, float, str, bool))}
        except SpecError as err:
            rows.append({"key": key, "status": "invalid", "error": str(err)})
            continue
        except Exception as err:  # noqa: BLE001 - recorded in the row, the sweep goes on
            rows.append({"key": key, "status": "failed", "error": _one_line(err)})
            continue
        rows.append({"key": key, "status": "ok", "error": None, **result_row(result), **extras})
    return rows


# ---------------------------------------------------------------- executors


class SerialExecutor(Executor):
    """Runs each task in the calling process when it is submitted (tests, debugging, profiling)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        fut: Future = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except Exception as err:  # noqa: BLE001 - delivered through the future, like a pool
            fut.set_exception(err)
        return fut


def _worker_init() -> None:
    """Pool workers ignore Ctrl-C: the driver handles it, cancels what is queued, keeps what is stored.

    A worker starts with SIGINT blocked (:class:`_Pool` forks it so): a Ctrl-C that lands between
    the fork and this line stays pending, and ignoring the signal discards it, so no worker dies
    of a KeyboardInterrupt before it is told to ignore them (a dead worker breaks the pool, and
    one forked but never started leaves the driver's exit waiting on it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextmanager
def _sigint_blocked():
    """SIGINT blocked in this thread for the block (where the platform can block it); a Ctrl-C
    meanwhile is delivered when the block ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _Pool(ProcessPoolExecutor):
    """A process pool whose workers are started (at a submit) with SIGINT blocked: they inherit the
    mask until :func:`_worker_init` ignores the signal."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        with _sigint_blocked():
            return super().submit(fn, *args, **kwargs)


RAY_CONNECT_TIMEOUT_S = 5.0  # Ray itself retries an unanswered address for minutes


def _check_reachable(address: str) -> None:
    """A ``host:port`` (or ``ray://host:port``) ``RAY_ADDRESS`` must answer a TCP connection within
    :data:`RAY_CONNECT_TIMEOUT_S`: a one-line error, not minutes of Ray's retries. ``auto`` and
    ``local`` are Ray's to resolve."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_CONNECT_TIMEOUT_S).close()
    except OSError as err:
        raise SpecError("RAY_ADDRESS", address, f"no Ray cluster answers there ({err.strerror or err}); start it, "
                        "or unset RAY_ADDRESS to run a local Ray") from None


class RayExecutor(Executor):
    """``concurrent.futures`` on Ray: each submit is a ``ray.remote`` task; its ObjectRef's future.

    Connects to ``RAY_ADDRESS`` when set, else starts a local Ray with ``workers`` CPUs.
    """

    def __init__(self, workers: int | None = None):
        try:
            import ray
        except ImportError:
            raise SpecError("executor", "ray", "Ray is not installed; pip install ray (or use the local executor)") from None
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            address = os.environ.get("RAY_ADDRESS")
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address:
                _check_reachable(address)
                ray.init(address=address, **kwargs)
            else:
                ray.init(num_cpus=workers, **kwargs)
                self._started = True
        self._remote: dict[Any, Any] = {}
        self._refs: list[Any] = []
        try:
            self.max_workers = int(ray.cluster_resources().get("CPU", workers or 1))
        except Exception:  # noqa: BLE001 - only sizes the window of batches in flight
            self.max_workers = workers or 1

    def submit(self, fn, /, *args, **kwargs) -> Future:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = self._ray.remote(num_cpus=1)(fn)
        ref = remote.remote(*args, **kwargs)
        self._refs.append(ref)
        return ref.future()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if cancel_futures:
            for ref in self._refs:
                try:
                    self._ray.cancel(ref)
                except Exception:  # noqa: BLE001 - finished or already gone
                    pass
        self._refs = []
        if self._started:
            self._ray.shutdown()
            self._started = False


def check_executor(kind: str, workers: int | None = None) -> None:
    """Fail fast (one-line SpecError) on an unknown executor, bad worker count, or Ray missing."""
    if kind not in EXECUTORS:
        raise SpecError("executor", kind, f"must be one of {', '.join(EXECUTORS)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise SpecError("workers", workers, "must be a positive integer")
    if kind == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise SpecError("executor", "ray", "Ray is not installed; pip install ray (or use the local executor)")


def make_executor(kind: str, workers: int | None = None) -> Executor:
    """``serial`` | ``local`` (ProcessPoolExecutor) | ``ray``."""
    check_executor(kind, workers)
    if kind == "serial":
        return SerialExecutor()
    if kind == "ray":
        return RayExecutor(workers)
    import multiprocessing as mp

    # fork where the platform has it: workers start in ~20 ms and inherit the imported modules
    # (forkserver / spawn pay ~1.5 s of imports per sweep). Safe here: workers run only teton's
    # numpy / numba code (no numba threading layer is used) and never touch the driver's DuckDB
    # connection or progress bar.
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    import teton.engine.step  # noqa: F401 - imported once here, inherited by forked workers
    import teton.spec  # noqa: F401

    return _Pool(max_workers=workers or os.cpu_count() or 1, mp_context=ctx, initializer=_worker_init)


# ---------------------------------------------------------------- the driver


@dataclass(frozen=True)
class SweepSummary:
    """What one run of a sweep did."""

    points: int  # after filtering
    filtered: int  # dropped by the sweep's filter expressions
    already_stored: int  # skipped: stored by an earlier run (resume)
    evaluated: int  # evaluated by this run
    ok: int  # stored rows of this sweep, by status
    invalid: int
    failed: int
    fitting: int
    elapsed_s: float

    @property
    def points_per_s(self) -> float:
        return self.evaluated / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "points_per_s": self.points_per_s}


def parallelism(ex: Executor, workers: int | None = None) -> int:
    """How many batches ``ex`` runs at once: 1 serial, the pool's workers, Ray's CPUs."""
    if isinstance(ex, SerialExecutor):
        return 1
    n = getattr(ex, "max_workers", None) or getattr(ex, "_max_workers", None) or workers or os.cpu_count() or 1
    return max(1, int(n))


def point_types(sweep: Sweep) -> dict[str, str]:
    """Column type of each swept key, from all its values."""
    out = {}
    for keys, rows in sweep.axes:
        for i, key in enumerate(keys):
            out[key] = sql_type(row[i] for row in rows)
    return out


def _rows_for(points: Sequence[Point], results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The store rows of a batch's results: the point's key, values and outcome, and the
    fingerprint of the code that computed them."""
    by_key = {p.key: p for p in points}
    rows = []
    for res in results:
        p = by_key[res["key"]]
        rows.append({"key": p.key, "status": res["status"], "error": res["error"], "point": canonical_json(p.values),
                     **p.values, **{k: v for k, v in res.items() if k not in ("key", "status", "error")},
                     "code": code_fingerprint()})
    return rows


def sweep_points(sweep: Sweep) -> tuple[list[Point], int]:
    """(points, how many the filters dropped); a SpecError when the filters drop them all (checked
    before anything runs or any results file is created)."""
    points, filtered = sweep.points()
    if not points:
        raise SpecError("filter", " and ".join(f.text for f in sweep.filters),
                        f"drops every one of the grid's {sweep.size} points; nothing to simulate")
    return points, filtered


def worker_died(executor: str, err: BaseException, what: str) -> SpecError:
    """The one-line error for a pool whose worker died (killed, out of memory): ``what`` says
    what was kept and how to go on."""
    return SpecError("executor", executor, f"a worker died ({type(err).__name__}: killed or out of memory?); {what}")


MAX_BATCH = 64  # points per task at most, when the batch size is not given
BATCHES_PER_WORKER = 4


def default_batch(points: int, workers: int) -> int:
    """Points per task when none is given: ``points`` split into about
    :data:`BATCHES_PER_WORKER` batches per worker, at least 1 point, at most :data:`MAX_BATCH`."""
    return max(1, min(MAX_BATCH, -(-points // (BATCHES_PER_WORKER * max(1, workers)))))


def run_sweep(sweep: Sweep, store: ResultStore, executor: str | Executor = "local", workers: int | None = None,
              batch: int | None = None, progress: Callable[[int, int], None] | None = None,
              on_batch: Callable[[int], None] | None = None) -> SweepSummary:
    """Evaluate every point of ``sweep`` not already in ``store``; commit each batch as it finishes.

    ``batch``: points per task; None: :func:`default_batch` of the points left to run and the
    executor's parallelism.
    ``progress(done, total)`` after each stored batch (``done`` counts points stored by earlier
    runs too); ``on_batch(n)`` after the n-th batch of this run is committed (an exception raised
    there - e.g. KeyboardInterrupt - stops the sweep with everything committed so far kept).
    Filters that leave no point are a SpecError; points already stored (by any sweep) get this
    sweep's swept-key values in their columns (:meth:`ResultStore.fill_points`).
    """
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise SpecError("batch", batch, "must be a positive integer")
    if not isinstance(executor, Executor):
        check_executor(executor, workers)
    t0 = time.perf_counter()
    points, filtered = sweep_points(sweep)
    todo, types = _points_to_run(store, sweep, points)
    already = len(points) - len(todo)
    if progress is not None:
        progress(already, len(points))
    evaluated = 0
    if todo:
        own = not isinstance(executor, Executor)
        ex = make_executor(executor, workers) if own else executor
        name = executor if own else type(ex).__name__
        tick = None if progress is None else (lambda n: progress(already + n, len(points)))
        par = parallelism(ex, workers)
        size = batch or default_batch(len(todo), par)
        batches = [todo[i:i + size] for i in range(0, len(todo), size)]
        try:
            evaluated = _run_batches(ex, batches, store, types, par, name, already, tick, on_batch)
        except BaseException:
            if own:
                ex.shutdown(wait=False, cancel_futures=True)
            raise
        if own:
            ex.shutdown(wait=True)
    counts = store.counts()
    return SweepSummary(points=len(points), filtered=filtered, already_stored=already, evaluated=evaluated,
                        ok=counts["ok"], invalid=counts["invalid"], failed=counts["failed"], fitting=counts["fitting"],
                        elapsed_s=time.perf_counter() - t0)


def _points_to_run(store: ResultStore, sweep: Sweep, points: list[Point]) -> tuple[list[Point], dict[str, str]]:
    """The points the store does not hold yet (failed and outdated rows, and rows other code
    computed, dropped first), and the sweep's column types; rows stored by another sweep file may
    lack this sweep's key columns: they get this sweep's values."""
    store.scope([p.key for p in points])
    store.discard_failed()
    store.discard_outdated()
    store.discard_other_code(code_fingerprint())
    done = store.done_keys()
    types = point_types(sweep)
    store.fill_points({p.key: p.values for p in points if p.key in done}, types)
    return [p for p in points if p.key not in done], types


def _run_batches(ex: Executor, batches: list[list[Point]], store: ResultStore, types: dict[str, str],
                 workers: int, executor_name: str, already: int, progress: Callable[[int], None] | None,
                 on_batch: Callable[[int], None] | None) -> int:
    """Run ``batches`` on ``ex``, a window of them in flight (one when serial, each runs at submit;
    else enough to keep every worker busy), storing each as it finishes (batches that finish
    together share one commit); ``progress(evaluated)`` after each commit. Returns the points
    evaluated. A dead worker is a one-line error once what finished is stored."""
    window = 1 if isinstance(ex, SerialExecutor) else 2 * workers
    queue = iter(batches)
    pending: dict[Future, list[Point]] = {}

    def submit_next() -> None:
        nxt = next(queue, None)
        if nxt is not None:
            try:
                pending[ex.submit(evaluate_batch, [(p.key, p.spec) for p in nxt])] = nxt
            except BrokenExecutor as err:  # a worker died while the pool was idle
                raise worker_died(executor_name, err, f"{already + evaluated} points are stored: "
                                  "run the same command again to resume") from None

    evaluated = n_batches = 0
    for _ in range(window):
        submit_next()
    while pending:
        finished, _ = wait(pending, return_when=FIRST_COMPLETED)
        rows: list[dict[str, Any]] = []
        broken: BaseException | None = None
        for fut in finished:
            try:
                rows += _rows_for(pending[fut], fut.result())
            except BrokenExecutor as err:
                broken = err
        store.write(rows, types)
        if broken is not None:
            raise worker_died(executor_name, broken, f"{already + evaluated + len(rows)} points are stored: "
                              "run the same command again to resume") from None
        for fut in finished:
            evaluated += len(pending.pop(fut))
            n_batches += 1
            if on_batch is not None:
                on_batch(n_batches)
            submit_next()
        if progress is not None:
            progress(evaluated)
    return evaluated
