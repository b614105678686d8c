"""What breaks first: a frontier run (Llama 3 405B, the bundled examples' layouts scaled by DP) on
H100 and GB200 at 16K ... 350K GPUs, every figure from teton's own models.

Per (system, scale) (the specs: :mod:`teton.studies.frontier_specs`):

* **step**: ``teton.engine.step.simulate_step`` (analytical network): step time, MFU against the
  dense bf16 peak, the breakdown.
* **exposed DP**: the breakdown's ``dp_comm`` and ``dp_last_bucket`` (what overlap did not hide of
  the gradient reduce-scatter and parameter all-gather, ``StepResult.dp_exposed_s``), and the part
  of it the building boundary causes: that less the same job's as if one building held
  every GPU (its top tier non-blocking, no fibre), zero in one building.
* **checkpoint**: ``teton.reliability.recovery.checkpoint_costs`` on Meta's Tectonic (the storage
  model, ``teton.storage.checkpoint``): size, save until durable, GPU pause, restore, and the
  storage's **sustained write time** (size / the write rate it sustains,
  ``teton.storage.budget``: the shortest interval it can keep up with); the **storage needed**
  (``teton.storage.usage``: the kept checkpoints and the servers that hold and sustain them).
* **failures**: ``teton.reliability.goodput.failure_model`` (Llama 3 Table 5 rates per GPU, host,
  NIC and switch; the same per-GPU rates for GB200, an ASSUMPTION); the **Young / Daly interval**
  (``teton.reliability.interval``: Daly 2006 on the GPUs' pause per checkpoint), on whole steps and
  never shorter than the storage sustains (``teton.reliability.recommend.IntervalLimits``); **ETTR**
  from the Monte Carlo (``teton.reliability.goodput``) at that interval, over a 54-day window, with
  enough spare hosts to cover one repair time (``spares_to_cover``) so that ETTR is failures and
  recovery, not a spare pool.
* **start-up**: ``teton.reliability.recovery.pg_init_s``, stock (O(n)) and optimized (O(log n));
  the run uses ``pg_init`` (default optimized: Meta's, LLAMA3 §3.3.4).

What limits first (:func:`verdicts`): each limit is a budget, its **load** the share used; it is
crossed when the load passes 1. A system's verdict is the limit crossed at the smallest listed
scale; limits first crossed at the same scale are ordered by where the load passes 1 between that
scale and the one below (log-linear in GPUs), then by load.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from teton.studies.frontier_specs import SYSTEMS, System, frontier_spec_fields, job_gpus, parse_systems

DEFAULT_SCALES = (16384, 65536, 131072, 350000)
DEFAULT_SYSTEMS = ("h100", "gb200")
WINDOW_DAYS = 54.0  # the Table 5 window (teton.reliability.goodput.DEFAULT_DAYS)
MIN_SCALE = 1008  # one GB200 unit (14 NVL72 domains): the smallest scale both systems can run


@dataclass(frozen=True)
class Limit:
    """One limit: the quantity, its threshold and why that threshold."""

    key: str
    label: str
    rule: str
    why: str


LIMITS = (
    Limit("ettr", "ETTR", "ETTR < 90 %",
          "Llama 3's 16K run kept over 90 % effective training time (LLAMA3 §3.3.4): below it the run loses "
          "more to failures than the one frontier run on record; load = (1 - ETTR) / 10 %"),
    Limit("dp_exposed", "exposed DP", "exposed DP > 10 % of the step",
          "as large as the pipeline bubble the Llama 3 layout already accepts (0.58 s of 6.77 s, 9 %, "
          "teton run examples/llama3-405b-16k.yaml); load = exposed DP / step / 10 %"),
    Limit("checkpoint", "checkpoint writes", "sustained checkpoint write time > 100 % of the Young/Daly interval",
          "past it the storage, not the failure rate, sets the checkpoint interval (the storage cannot absorb "
          "a checkpoint as often as Young/Daly asks); load = size / sustained write rate / interval"),
    Limit("startup", "start-up", "process-group start-up > 10 min",
          "10 min is the NCCL watchdog's timeout, the largest other fixed part of a recovery (a hang's "
          "detection): past it start-up is the largest fixed cost of every interruption; load = start-up / 600 s"),
)
LIMIT_KEYS = tuple(lim.key for lim in LIMITS)
LIMIT_BY_KEY = {lim.key: lim for lim in LIMITS}
ETTR_MIN = 0.90
DP_EXPOSED_MAX = 0.10
STARTUP_MAX_S = 600.0


@dataclass(frozen=True)
class FrontierRow:
    """One (system, scale). Seconds, bytes, fractions; ``gpus`` is ``scale`` rounded to whole units."""

    system: str
    gpu: str
    scale: int
    gpus: int
    hosts: int
    nvlink_domains: int
    buildings: int
    layout: dict[str, int]
    precision: str
    global_batch: int
    tokens_per_step: int
    step_time_s: float
    mfu_bf16: float
    mfu: float
    tokens_per_s: float
    fits_in_memory: bool
    memory_per_gpu_bytes: float
    breakdown: dict[str, float]
    dp_exposed_s: float
    dp_exposed_one_building_s: float
    dp_cross_building_s: float
    checkpoint_bytes: float
    checkpoint_save_s: float
    checkpoint_blocking_s: float
    checkpoint_restore_s: float
    checkpoint_sustained_write_s: float
    storage_capacity_bytes: float
    storage_servers_needed: int
    storage_write_share: float
    unexpected_per_day: float
    planned_per_day: float
    mtbi_h: float
    young_interval_s: float
    daly_interval_s: float
    checkpoint_interval_s: float
    interval_bound: str
    practical_interval_s: float  # teton's recommendation beside it: the longest within 0.5 pp of the best ETTR
    ettr: float
    ettr_p5: float
    lost_gpu_hours_by_kind: dict[str, float]
    spare_hosts: int
    pg_init: str
    startup_s: float
    startup_stock_s: float
    startup_optimized_s: float
    loads: dict[str, float] = field(default_factory=dict)

    @property
    def dp_exposed_share(self) -> float:
        return self.dp_exposed_s / self.step_time_s


@dataclass(frozen=True)
class Verdict:
    """What limits one system first: the limit, the first listed scale that crosses it, and where
    its load passes 1 (interpolated; None when crossed at the smallest scale or not at all)."""

    system: str
    limit: str | None  # None: no limit crossed at the scales studied
    first_scale: int | None
    crossing_gpus: float | None
    by_limit: dict[str, dict[str, Any]]
    text: str


@dataclass(frozen=True)
class FrontierResult:
    rows: tuple[FrontierRow, ...]
    verdicts: tuple[Verdict, ...]
    scales: tuple[int, ...]
    systems: tuple[str, ...]
    runs: int
    days: float
    pg_init: str
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        rows = [{**asdict(r), "dp_exposed_share": r.dp_exposed_share} for r in self.rows]
        return {"scales": list(self.scales), "systems": list(self.systems), "runs": self.runs, "days": self.days,
                "pg_init": self.pg_init, "limits": [asdict(x) for x in LIMITS], "rows": rows,
                "verdicts": [asdict(v) for v in self.verdicts], "notes": list(self.notes)}


def parse_scales(value: Any) -> tuple[int, ...]:
    """GPU counts (``16384,65536`` or a list; teton's counts syntax); SpecError naming ``gpus``."""
    from teton.errors import SpecError
    from teton.spec.plan import parse_counts

    scales = parse_counts(value, "gpus")
    if scales[0] < MIN_SCALE:
        raise SpecError("gpus", scales[0], f"each scale at least {MIN_SCALE:,} GPUs (one GB200 unit of 14 NVL72 "
                                           "domains)")
    return scales


def loads(row: FrontierRow) -> dict[str, float]:
    """Each limit's budget used (module docstring): above 1, the limit is crossed."""
    interval = max(row.daly_interval_s, row.step_time_s)
    return {"ettr": (1.0 - row.ettr) / (1.0 - ETTR_MIN),
            "dp_exposed": row.dp_exposed_share / DP_EXPOSED_MAX,
            "checkpoint": row.checkpoint_sustained_write_s / interval,
            "startup": row.startup_s / STARTUP_MAX_S}


def frontier_study(scales: Sequence[int] | str = DEFAULT_SCALES, systems: Sequence[str] | str = DEFAULT_SYSTEMS,
                   runs: int = 32, days: float = WINDOW_DAYS, pg_init: str = "optimized", seed: int = 0,
                   progress: Callable[[int, int], None] | None = None) -> FrontierResult:
    """The study at ``scales`` (GPU counts) for ``systems`` (``h100``, ``gb200``): one row per
    (system, scale), and the verdicts. ``runs``: Monte Carlo runs per row. ``progress(done, total)``."""
    from teton.errors import SpecError

    scales = parse_scales(scales)
    keys = parse_systems(systems)
    if pg_init not in ("stock", "optimized"):
        raise SpecError("pg_init", pg_init, "stock or optimized")
    total = len(scales) * len(keys)
    rows = []
    for sys_key in keys:
        for scale in scales:
            if progress:
                progress(len(rows), total)
            rows.append(frontier_row(SYSTEMS[sys_key], scale, runs=runs, days=days, pg_init=pg_init, seed=seed))
    if progress:
        progress(total, total)
    notes = tuple(f"{SYSTEMS[r.system].key}: {r.scale:,} GPUs run as {r.gpus:,} ({r.gpus // SYSTEMS[r.system].unit_gpus:,}"
                  f" units of {SYSTEMS[r.system].unit_gpus:,} GPUs)" for r in rows if r.gpus != r.scale)
    return FrontierResult(tuple(rows), verdicts(rows), scales, keys, runs, days, pg_init, notes)


def _dp_exposed_one_building(system: System, gpus: int, buildings: int, dp_exposed_s: float) -> float:
    """The job's exposed DP as if one building held every GPU (module docstring)."""
    if buildings == 1:
        return dp_exposed_s
    from teton.engine.step import simulate_step
    from teton.spec import load_spec

    return float(simulate_step(load_spec(frontier_spec_fields(system, gpus, one_building=True))).dp_exposed_s)


def frontier_row(system: System, scale: int, runs: int = 32, days: float = WINDOW_DAYS, pg_init: str = "optimized",
                 seed: int = 0) -> FrontierRow:
    """One (system, scale) of the study (module docstring)."""
    from teton.engine.step import simulate_step
    from teton.spec import load_spec

    gpus = job_gpus(system, scale)
    spec = load_spec(frontier_spec_fields(system, gpus))
    step = simulate_step(spec)
    buildings = math.ceil(gpus / system.building_gpus)
    dp = float(step.dp_exposed_s)
    dp_one = _dp_exposed_one_building(system, gpus, buildings, dp)
    rel = _reliability(spec, step, runs, days, pg_init, seed)
    lay = spec.job.layout
    row = FrontierRow(
        system=system.key, gpu=spec.cluster.gpu_spec.name, scale=int(scale), gpus=gpus,
        hosts=gpus // spec.cluster.gpus_per_host, nvlink_domains=gpus // spec.cluster.domain_gpus,
        buildings=buildings, layout={"tp": lay.tp, "cp": lay.cp, "pp": lay.pp, "dp": lay.dp,
                                     "virtual_stages": lay.virtual_stages},
        precision=spec.job.precision, global_batch=spec.job.global_batch, tokens_per_step=int(step.tokens_per_step),
        step_time_s=step.step_time_s, mfu_bf16=step.mfu_bf16, mfu=step.mfu, tokens_per_s=step.tokens_per_s,
        fits_in_memory=step.fits_in_memory, memory_per_gpu_bytes=step.memory_per_gpu_bytes,
        breakdown=dict(step.breakdown), dp_exposed_s=dp, dp_exposed_one_building_s=dp_one,
        dp_cross_building_s=max(0.0, dp - dp_one), **rel)
    return _with_loads(row)


def _with_loads(row: FrontierRow) -> FrontierRow:
    from dataclasses import replace

    return replace(row, loads=loads(row))


def _reliability(spec, step, runs: int, days: float, pg_init: str, seed: int) -> dict[str, Any]:
    """The checkpoint, failure, interval, ETTR, storage and start-up fields of a row."""
    from teton.reliability.goodput import (
        data_loading_bytes_s,
        failure_model,
        fixed_downtime_s,
        goodput,
        mc_inputs,
        spares_to_cover,
    )
    from teton.reliability.interval import daly_interval_s, young_interval_s
    from teton.reliability.recommend import interval_limits, on_whole_steps
    from teton.reliability.recovery import checkpoint_costs, pg_init_s
    from teton.spec.reliability import parse_reliability
    from teton.spec.storage import spec_storage
    from teton.storage.usage import storage_use

    cfg = parse_reliability({"pg_init": pg_init})
    gpus, st = spec.job.gpus, step.step_time_s
    fm = failure_model(spec.cluster, gpus, cfg)
    read_s = data_loading_bytes_s(spec, step.tokens_per_s)
    ck = checkpoint_costs(spec, cfg, read_s)
    mtbi_s = fm.mtbi_h * 3600.0
    young, daly = young_interval_s(ck.blocking_s, mtbi_s), daly_interval_s(ck.blocking_s, mtbi_s)
    lim = interval_limits(ck, st)
    interval = lim.on_steps(daly)
    bound = "Young/Daly" if interval <= on_whole_steps(daly, st, 1) + 1e-9 else lim.bound
    inp = mc_inputs(fm, fixed_downtime_s(cfg, gpus, ck.restore_s), ck, cfg, spec.cluster.hosts, interval, None,
                    days * 86400.0)
    cfg = cfg.model_copy(update={"spare_hosts": spares_to_cover(inp)})
    g = goodput(spec, cfg, step_time_s=st, breakdown=dict(step.breakdown), days=days, runs=runs, seed=seed,
                interval_s=interval)
    hosts = gpus // spec.cluster.gpus_per_host
    use = storage_use(spec_storage(spec), hosts, ck.checkpoint_bytes, spec.storage.checkpoint.keep,
                      g.checkpoint.checkpoint_interval_s, 0.0, read_s)
    return dict(
        checkpoint_bytes=ck.checkpoint_bytes, checkpoint_save_s=ck.save_s, checkpoint_blocking_s=ck.blocking_s,
        checkpoint_restore_s=ck.restore_s, checkpoint_sustained_write_s=ck.min_interval_s,
        storage_capacity_bytes=use.capacity_bytes, storage_servers_needed=use.dedicated_servers,
        storage_write_share=use.bandwidth_share, unexpected_per_day=fm.unexpected_per_h * 24.0,
        planned_per_day=fm.planned_per_h * 24.0, mtbi_h=fm.mtbi_h, young_interval_s=young, daly_interval_s=daly,
        checkpoint_interval_s=g.checkpoint.checkpoint_interval_s, interval_bound=bound,
        practical_interval_s=g.interval.practical_interval_s, ettr=g.time.ettr,
        ettr_p5=g.time.ettr_percentiles["p5"], lost_gpu_hours_by_kind=dict(g.time.lost_gpu_hours_by_kind),
        spare_hosts=cfg.spare_hosts, pg_init=pg_init, startup_s=pg_init_s(cfg, gpus),
        startup_stock_s=pg_init_s(cfg.model_copy(update={"pg_init": "stock"}), gpus),
        startup_optimized_s=pg_init_s(cfg.model_copy(update={"pg_init": "optimized"}), gpus))


def _crossing(points: list[tuple[int, float]]) -> tuple[int | None, float | None]:
    """(first scale whose load passes 1, where the load passes 1 between it and the scale below,
    log-linear in GPUs; None below the smallest scale or when never crossed)."""
    for i, (g, load) in enumerate(points):
        if load > 1.0:
            if i == 0:
                return g, None
            g0, l0 = points[i - 1]
            t = (1.0 - l0) / (load - l0)
            return g, math.exp(math.log(g0) + t * (math.log(g) - math.log(g0)))
    return None, None


def verdicts(rows: Sequence[FrontierRow]) -> tuple[Verdict, ...]:
    """Per system, the limit that binds first (module docstring's rule), and every limit's crossing."""
    out = []
    for sys_key in dict.fromkeys(r.system for r in rows):
        mine = sorted((r for r in rows if r.system == sys_key), key=lambda r: r.gpus)
        by: dict[str, dict[str, Any]] = {}
        for lim in LIMITS:
            first, at = _crossing([(r.gpus, r.loads[lim.key]) for r in mine])
            load = next((r.loads[lim.key] for r in mine if r.gpus == first), mine[-1].loads[lim.key])
            by[lim.key] = {"first_scale": first, "crossing_gpus": at, "load": load}
        crossed = [k for k in LIMIT_KEYS if by[k]["first_scale"] is not None]
        if not crossed:
            top = max(LIMIT_KEYS, key=lambda k: by[k]["load"])
            out.append(Verdict(sys_key, None, None, None, by, f"{sys_key}: no limit crossed up to {mine[-1].gpus:,} "
                               f"GPUs; closest: {LIMIT_BY_KEY[top].label} at {by[top]['load']:.0%} of its budget"))
            continue
        first = min(crossed, key=lambda k: (by[k]["first_scale"], by[k]["crossing_gpus"] or 0.0, -by[k]["load"]))
        b = by[first]
        where = (f"between {_below(mine, b['first_scale']):,} and {b['first_scale']:,} GPUs (~{b['crossing_gpus']:,.0f})"
                 if b["crossing_gpus"] is not None else f"at {b['first_scale']:,} GPUs, the smallest scale studied")
        out.append(Verdict(sys_key, first, b["first_scale"], b["crossing_gpus"], by,
                           f"{sys_key}: {LIMIT_BY_KEY[first].label} limits first: {LIMIT_BY_KEY[first].rule} {where}"))
    return tuple(out)


def _below(rows: Sequence[FrontierRow], gpus: int) -> int:
    return max(r.gpus for r in rows if r.gpus < gpus)
