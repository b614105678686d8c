"""Whole-run goodput: failure model + recovery + Monte Carlo + interval policy + energy and cost.

``goodput(spec, ...)`` answers "when will the model be done, at what ETTR, energy and cost, with
which checkpoint interval"; ``run_summary(spec, step_time_s, tokens_per_step)`` is the small
form ``teton run`` adds to its result when the spec's ``reliability:`` asks for a run length.

Run length: a token budget (``steps = ceil(tokens / tokens_per_step)`` of the step model's step
time) or a fixed number of days (default 54, the Table 5 window). The optional diurnal variation
(LLAMA3 §3.3.4: 1-2 % peak-to-peak from mid-day temperatures and DVFS) and straggler slowdowns
(and, on a multi-plane fabric, the slower steps while a plane is down: :mod:`teton.reliability.planes`)
enter mean-field, as a longer effective step ``step / (1 - diurnal/2) * (1 + stragglers)``: they
stretch time-to-train but not ETTR (slow steps are still useful training); ``goodput`` is ETTR
divided by that stretch, i.e. achieved / failure-free-nominal token throughput.
The checkpoint interval is ``--interval``, else ``reliability.checkpoint_interval_s``, else the
storage policy's ``storage.checkpoint.interval_s`` (the one ``teton checkpoint`` checks for
sustainability), else the practical interval teton recommends (:mod:`teton.reliability.recommend`:
the longest interval the storage sustains within ``reliability.interval_ettr_tolerance_pp`` of the
best ETTR; by the renewal model, or the Monte Carlo sweep's with ``interval_sweep``); it is rounded
to whole steps and never shorter than one save (the source then says so). A given interval the
storage cannot sustain is run as given, with a warning.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from teton.errors import SpecError
from teton.reliability.energy import busy_fraction, cost_usd, energy_mwh, power_model
from teton.reliability.goodput_figures import (
    CheckpointFigures,
    GoodputResult,
    RunFigures,
    TimeFigures,
    checkpoint_figures,
    energy_figures,
    interruption_figures,
    time_figures,
)
from teton.reliability.interval import daly_interval_s, young_interval_s
from teton.reliability.montecarlo import MCInputs
from teton.reliability.planes import PlaneLoss, plane_loss
from teton.reliability.rates import (
    CAUSES,
    ComponentCounts,
    default_rates_per_hour,
    job_components,
    job_rates_per_hour,
)
from teton.reliability.recommend import interval_limits
from teton.reliability.recovery import CheckpointCosts, checkpoint_costs, fixed_downtime_s, pg_init_s
from teton.reliability.sweep import run_intervals
from teton.spec import as_spec
from teton.spec.cluster import ClusterSpec
from teton.spec.reliability import ReliabilitySpec, check_runs_seed, parse_reliability
from teton.units import parse_count

# The Monte Carlo advances every run by one interruption per vector step (at most 200,000): a
# run expected to see more than this many is refused up front rather than cut short.
MAX_INTERRUPTIONS_PER_RUN = 100_000
MIN_STEP_S = 1e-6  # a step time below this is a typo (1e-308), not a training step
DEFAULT_DAYS = 54.0  # the Table 5 window, when the spec gives no run length


@dataclass(frozen=True)
class FailureModel:
    counts: ComponentCounts
    rates_per_component_h: dict[str, float]
    job_rates_h: dict[str, float]  # interruptions per hour of this job, by cause

    @property
    def unexpected_per_h(self) -> float:
        return sum(v for k, v in self.job_rates_h.items() if k != "planned_maintenance")

    @property
    def planned_per_h(self) -> float:
        return self.job_rates_h["planned_maintenance"]

    @property
    def mtbi_h(self) -> float:
        """Mean time between unexpected interruptions (the ones that lose work)."""
        return 1.0 / self.unexpected_per_h if self.unexpected_per_h > 0 else math.inf


def failure_model(cluster: ClusterSpec, gpus: int, cfg: ReliabilitySpec) -> FailureModel:
    """Per-component rates (Table 5 defaults, then the spec's overrides) and the job's rates."""
    counts = job_components(cluster, gpus)
    rates = default_rates_per_hour()
    if cfg.shares is not None:
        base_job = job_rates_per_hour(rates, counts)
        mtbi = cfg.unexpected_mtbi_h or 1.0 / sum(v for k, v in base_job.items() if k != "planned_maintenance")
        for c in CAUSES:
            if not c.planned:
                n = counts.of(c.scope)
                rates[c.key] = cfg.shares.get(c.key, 0.0) / mtbi / n if n > 0 else 0.0
    rates.update(cfg.rates_per_hour)
    for c in CAUSES:
        if not c.planned:
            rates[c.key] *= cfg.rate_scale
    return FailureModel(counts, rates, job_rates_per_hour(rates, counts))


def interruption_table(cluster: ClusterSpec, gpu_counts: list[int], cfg: ReliabilitySpec | None = None) -> list[dict]:
    """Expected interruptions per day and MTBI for jobs of several sizes on ``cluster``."""
    cfg = cfg or ReliabilitySpec()
    rows = []
    for g in gpu_counts:
        fm = failure_model(cluster, g, cfg)
        rows.append({"gpus": g, "hosts": fm.counts.hosts, "switches": round(fm.counts.switches, 1),
                     "unexpected_per_day": fm.unexpected_per_h * 24.0, "mtbi_h": fm.mtbi_h,
                     "planned_per_day": fm.planned_per_h * 24.0,
                     "pg_init_stock_s": pg_init_s(cfg.model_copy(update={"pg_init": "stock"}), g),
                     "pg_init_optimized_s": pg_init_s(cfg.model_copy(update={"pg_init": "optimized"}), g)})
    return rows


def _step(spec: Any, cfg: ReliabilitySpec, step_time_s: float | None, tokens_per_step: float | None,
          breakdown: dict | None, simulate: Callable[[Any], Any] | None) -> tuple[float, float, dict | None, str]:
    """Step time and tokens per step: explicit > reliability section > the step simulator
    ``simulate(spec)`` the caller passes (``teton.simulate`` or the engine's ``simulate_step``)."""
    tps = tokens_per_step or cfg.tokens_per_step or float(spec.job.layout.tokens_per_step)
    st = step_time_s or cfg.step_time_s
    source = "given"
    if st is None:
        if simulate is None:
            raise SpecError("step_time_s", None, "give the step time (or reliability.step_time_s), "
                            "or a step simulator to simulate it")
        result = simulate(spec)
        st = float(result.step_time_s)
        breakdown = breakdown or dict(result.breakdown)
        source = "teton.simulate"
    return float(st), float(tps), breakdown, source


def _storage_interval_s(spec: Any) -> float | None:
    """``storage.checkpoint.interval_s`` of the spec, when it has a storage section that sets one."""
    if getattr(spec, "storage", None) is None:
        return None
    from teton.spec.storage import checkpoint_policy

    return checkpoint_policy(spec).interval_s


# a run length given as an argument overrides the spec's field: the error names the one that was given
_LENGTH_ARGUMENT_FIELDS = {"days": "days", "tokens": "tokens"}
_LENGTH_SPEC_FIELDS = {"days": "reliability.days", "tokens": "reliability.tokens"}


def _run_length(cfg: ReliabilitySpec, days: float | None,
                tokens: float | None) -> tuple[float | None, float | None, str]:
    """The run length (module docstring): ``days`` or ``tokens`` given, else the spec's
    ``reliability.days`` / ``.tokens``, else ``DEFAULT_DAYS`` (the Table 5 window).

    Returns (days, tokens, the field that set the length); exactly one of days, tokens is set."""
    if days is not None and tokens is not None:
        raise SpecError(_LENGTH_ARGUMENT_FIELDS["tokens"], tokens,
                        "give the run length in days or in tokens, not both")
    names = _LENGTH_ARGUMENT_FIELDS
    if days is None and tokens is None:
        names = _LENGTH_SPEC_FIELDS
        days, tokens = cfg.days, cfg.tokens
        if days is None and tokens is None:
            days = DEFAULT_DAYS
    if isinstance(tokens, str):  # "15.6T", as the CLI and teton.plan take it
        tokens = parse_count(tokens, names["tokens"])
    for key, v in (("days", days), ("tokens", tokens)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0):
            raise SpecError(names[key], v, "must be a positive number")
    return days, tokens, names["days" if tokens is None else "tokens"]


def _check_step(step_time_s: float, tokens_per_step: float, step_time_given: bool,
                tokens_per_step_given: bool) -> None:
    """Refuse a step the run's float step counts cannot follow: a run counts steps (checkpoint
    intervals, tokens) in floats, and a step of 1e-308 s makes them inf (``MIN_STEP_S``)."""
    if not MIN_STEP_S <= step_time_s < math.inf:
        raise SpecError("step_time_s" if step_time_given else "reliability.step_time_s", step_time_s,
                        f"must be at least {MIN_STEP_S:g} s (one training step)")
    if not 1 <= tokens_per_step < math.inf:
        raise SpecError("tokens_per_step" if tokens_per_step_given else "reliability.tokens_per_step",
                        tokens_per_step, "must be at least 1 token")


def step_slowdown(cfg: ReliabilitySpec) -> float:
    """The mean-field stretch of every step by diurnal variation and stragglers (module
    docstring): ``1 / (1 - diurnal/2) * (1 + stragglers)``; effective step = step time x it."""
    return 1.0 / (1.0 - cfg.diurnal_variation / 2.0) * (1.0 + cfg.straggler_slowdown)


def mc_inputs(fm: FailureModel, downtime_s: dict[str, float], ck: CheckpointCosts, cfg: ReliabilitySpec,
              cluster_hosts: int, interval_s: float, work_s: float | None, horizon_s: float | None) -> MCInputs:
    """The Monte Carlo's inputs: the job's interruption rates and fixed downtimes by cause, the
    checkpoint timing, the run length (``work_s`` of training or ``horizon_s`` of wall time), the
    spare pool (``reliability.spare_hosts``, else the cluster hosts the job leaves free) and the
    infant-mortality hazard multiplier of the hardware causes."""
    spares = cfg.spare_hosts if cfg.spare_hosts is not None else max(cluster_hosts - fm.counts.hosts, 0)
    infant = cfg.infant_mortality.multiplier if cfg.infant_mortality is not None else None
    return MCInputs(
        rates_per_s=np.array([fm.job_rates_h[c.key] / 3600.0 for c in CAUSES]),
        downtime_s=np.array([downtime_s[c.key] for c in CAUSES]),
        hardware=np.array([c.hardware for c in CAUSES]), planned=np.array([c.planned for c in CAUSES]),
        replaces_host=np.array([c.replaces_host for c in CAUSES]),
        interval_s=interval_s, blocking_s=ck.blocking_s, save_s=ck.save_s, work_s=work_s, horizon_s=horizon_s,
        spares=spares, repair_s=cfg.repair_h * 3600.0, infant=infant)


def goodput(spec: Any, cfg: ReliabilitySpec | None = None, *, step_time_s: float | None = None,
            tokens_per_step: float | None = None, breakdown: dict | None = None, days: float | None = None,
            tokens: float | None = None, runs: int | None = None, seed: int | None = None,
            interval_s: float | None = None, interval_sweep: bool = False,
            progress: Callable[[int, int], None] | None = None, samples: bool = False,
            simulate: Callable[[Any], Any] | None = None) -> GoodputResult:
    """Monte Carlo of the whole run (:class:`GoodputResult`; ``to_dict()`` for JSON, keys
    documented in the CLI). ``progress(done, total)``: Monte Carlo runs finished, the interval
    sweep's included. ``simulate(spec)``: the step simulator (``teton.simulate``, the engine's
    ``simulate_step``), for the step time when neither ``step_time_s`` nor
    ``reliability.step_time_s`` gives it, and on a multi-plane fabric for the step with a plane
    down (:mod:`teton.reliability.planes`; not charged without it).

    ``samples``: also keep every run's time to train (``time_to_train_samples_days``, a numpy
    array), for a caller that combines the failure spread with another (``teton plan``)."""
    check_runs_seed(runs, seed)
    spec = as_spec(spec)
    cfg = cfg or parse_reliability(spec.reliability)
    days, tokens, length_field = _run_length(cfg, days, tokens)
    runs = cfg.runs if runs is None else runs
    if seed is not None and seed != spec.seed:  # one seed for every draw: storage stragglers too
        spec = spec.model_copy(update={"seed": seed})
    seed = spec.seed
    cluster, gpus = spec.cluster, spec.job.gpus
    st, tps, breakdown, st_source = _step(spec, cfg, step_time_s, tokens_per_step, breakdown, simulate)
    _check_step(st, tps, bool(step_time_s), bool(tokens_per_step))
    fm = failure_model(cluster, gpus, cfg)
    planes = plane_loss(spec, fm.counts, fm.rates_per_component_h, cfg.plane_repair_h, st, simulate,
                        st_source == "teton.simulate")
    slow = step_slowdown(cfg) * planes.stretch
    st_eff = st * slow
    if steps_in(days, st_eff) < 1:
        raise SpecError("step_time_s", st, f"one step takes longer than the {days:g}-day run: no step completes "
                        "(a longer run, or the job's real step time)")

    ck = checkpoint_costs(spec, cfg, data_loading_bytes_s(spec, tps / st_eff))
    down = fixed_downtime_s(cfg, gpus, ck.restore_s)
    given = interval_s or cfg.checkpoint_interval_s or _storage_interval_s(spec)
    lim = interval_limits(ck, st_eff)
    mtbi_s = fm.mtbi_h * 3600.0
    young, daly = ((young_interval_s(ck.blocking_s, mtbi_s), daly_interval_s(ck.blocking_s, mtbi_s))
                   if math.isfinite(mtbi_s) else (math.inf, math.inf))
    steps = math.ceil(tokens / tps) if tokens is not None else None
    inp = mc_inputs(fm, down, ck, cfg, cluster.hosts, lim.min_s, steps * st_eff if steps is not None else None,
                    days * 86400.0 if days is not None else None)
    _check_interruptions(inp, length_field, days if steps is None else tokens)
    iv = run_intervals(inp, lim, given, young, daly, cfg.interval_ettr_tolerance_pp, runs, seed, interval_sweep,
                       progress)
    res = iv.result

    pm = power_model(cluster, fm.counts, cfg, busy_fraction(breakdown, st))
    e = energy_mwh(pm, res.train_s, res.checkpoint_s + res.down_s)
    run = RunFigures(gpus, fm.counts.hosts, fm.counts.switches, "tokens" if steps is not None else "days", tokens,
                     days, runs, seed, st, st_source, st_eff, tps, steps)
    time = time_figures(res, gpus, steps, st, st_eff, tps, slow)
    ckf = checkpoint_figures(iv, ck, down, cfg, gpus, inp.spares)
    warnings = (*iv.warnings, *spare_warnings(run, time, ckf, cfg, inp, cluster.hosts, iv.recommendation.practical_ettr),
                *local_storage_warnings(spec, inp), *capacity_warnings(ck))
    return GoodputResult(
        run, interruption_figures(fm, res, inp.infant), time, ckf, energy_figures(pm, e, cost_usd(cfg, gpus, res.wall_s, e)),
        iv.sweep_rows, tuple(_assumptions(run, ckf, cfg, pm, planes)), warnings, iv.recommendation, planes,
        time_to_train_samples_days=res.wall_s / 86400.0 if samples and steps is not None else None)


def steps_in(days: float | None, step_s: float) -> float:
    """Steps a run of ``days`` holds without failures (inf for a token-budget run, ``days`` None)."""
    return math.inf if days is None else days * 86400.0 / step_s


def data_loading_bytes_s(spec: Any, tokens_per_s: float) -> float:
    """The data loader's read rate: the spec's ``storage.data_loading.tokens_per_s`` (else the
    run's ``tokens_per_s``) x its ``bytes_per_token`` (:mod:`teton.storage.dataload`)."""
    from teton.spec.storage import DataLoadingSpec

    loader = DataLoadingSpec() if getattr(spec, "storage", None) is None else spec.storage.data_loading
    return float(loader.tokens_per_s or tokens_per_s) * float(loader.bytes_per_token)


SPARE_WAIT_WARN_FRACTION = 0.02  # warn when waiting for a spare host takes this share of the wall time
SPARE_COVER_QUANTILE = 0.99


def spares_to_cover(inp: MCInputs, quantile: float = SPARE_COVER_QUANTILE) -> int:
    """Spare hosts that cover the host replacements of one repair time with probability
    ``quantile``: the Poisson quantile of (rate of host-replacing interruptions) x repair time,
    at least 1."""
    lam = float(np.sum(inp.rates_per_s[inp.replaces_host])) * inp.repair_s
    k, term = 0, math.exp(-lam)
    cdf = term
    while cdf < quantile and k < 100_000:
        k += 1
        term *= lam / k
        cdf += term
    return max(k, 1)


def spare_warnings(run: RunFigures, time: TimeFigures, ck: CheckpointFigures, cfg: ReliabilitySpec,
                   inp: MCInputs, cluster_hosts: int, interval_ettr: float | None = None) -> list[str]:
    """A warning when the wait for spare hosts takes at least ``SPARE_WAIT_WARN_FRACTION`` of the
    wall time: its cause (no / too few spare hosts, the repair time), what to set, and that the
    interval recommendation's ETTR (``interval_ettr``, the renewal model's) leaves the waits out."""
    wall_gpu_h = time.gpu_hours
    frac = time.lost_gpu_hours_by_kind["spare_wait"] / wall_gpu_h if wall_gpu_h > 0 else 0.0
    if frac < SPARE_WAIT_WARN_FRACTION:
        return []
    why = (f"reliability.spare_hosts = {cfg.spare_hosts}" if cfg.spare_hosts is not None else
           f"the job uses {run.hosts} of the cluster's {cluster_hosts} hosts")
    need = max(spares_to_cover(inp), ck.spare_hosts + 1)
    return [f"ETTR {time.ettr:.1%}: {frac:.0%} of the wall time is spent waiting for a spare host. "
            f"There are {ck.spare_hosts} spare hosts ({why}), and a failed host returns only after its repair "
            f"(reliability.repair_h = {cfg.repair_h:g} h). Add spares: reliability.spare_hosts = {need} "
            f"(--set reliability.spare_hosts={need}; covers the host failures of one repair time at "
            f"{SPARE_COVER_QUANTILE:.0%}), or shorten reliability.repair_h"
            + (f". The recommended interval's ETTR ({interval_ettr:.1%}) leaves these waits out: it is the run's "
               "with spares enough" if interval_ettr is not None else "")]


def capacity_warnings(ck: CheckpointCosts) -> list[str]:
    """A warning when the checkpoints the storage policy keeps exceed the storage's usable capacity."""
    if ck.kept_bytes is None or ck.usable_capacity_bytes is None or ck.kept_bytes <= ck.usable_capacity_bytes:
        return []
    return [f"the checkpoints kept ({ck.kept_bytes / 1e12:,.2f} TB: storage.checkpoint.keep of "
            f"{ck.checkpoint_bytes / 1e12:,.2f} TB) do not fit the storage's usable capacity "
            f"({ck.usable_capacity_bytes / 1e12:,.2f} TB): add storage.servers or keep fewer checkpoints"]


def local_storage_warnings(spec: Any, inp: MCInputs) -> list[str]:
    """A warning when the checkpoints sit on the hosts' own drives (a ``local`` storage system) and
    some interruptions replace a host: the replacement's drives hold none of the lost host's
    shards, so those restores need a copy elsewhere, which teton does not price (it restores every
    interruption from the local drives)."""
    has_storage = spec.storage is not None or spec.cluster.storage is not None
    if not has_storage or float(np.sum(inp.rates_per_s[inp.replaces_host])) <= 0:
        return []
    from teton.spec.storage import spec_storage

    if spec_storage(spec).kind != "local":
        return []
    return ["checkpoints on the hosts' own drives (a local storage system) are lost with a host that is "
            "replaced: the restore after a host failure needs a replica on other hosts or a remote copy, "
            "which is not priced here (every restore reads the local drives); checkpoint to shared storage "
            "or add the replica's traffic to the save"]


def _check_interruptions(inp: MCInputs, field: str, value: float | None) -> None:
    """Refuse a run the Monte Carlo cannot follow to its end (``MAX_INTERRUPTIONS_PER_RUN``).

    Expected interruptions: a fixed-length run alternates up-time (mean 1 / rate) and outages
    (mean downtime), ``horizon / (1/rate + downtime)``; a token budget needs at least its training
    time of up-time, ``work x rate`` (a lower bound: re-done work and checkpoints add more).
    """
    rate = float(np.sum(inp.rates_per_s))
    if rate <= 0:
        return
    if inp.work_s is not None:
        n = inp.work_s * rate
    else:
        n = inp.horizon_s / (1.0 / rate + float(np.sum(inp.rates_per_s * inp.downtime_s)) / rate)
    if n > MAX_INTERRUPTIONS_PER_RUN:
        raise SpecError(field, value, f"about {n:.3g} interruptions per run, more than the Monte Carlo follows "
                        f"({MAX_INTERRUPTIONS_PER_RUN:,}): shorten the run or lower the failure rates")


def _assumptions(run: RunFigures, ck: CheckpointFigures, cfg: ReliabilitySpec, pm, planes: PlaneLoss) -> list[str]:
    a = [
        f"failure rates: Llama 3 Table 5 counts / (components x 1,296 h), scaled to {run.gpus} GPUs, "
        f"{run.hosts} hosts, {run.switch_equivalents:.1f} switch-equivalents; rate_scale={cfg.rate_scale}",
        f"step time {run.step_time_s:.3f} s ({run.step_time_source}); effective "
        f"{run.effective_step_time_s:.3f} s with diurnal {cfg.diurnal_variation:.1%} and "
        f"stragglers {cfg.straggler_slowdown:.1%}; {run.tokens_per_step:.4g} tokens/step",
        f"checkpoint save {ck.checkpoint_save_s:.1f} s, blocking {ck.checkpoint_blocking_s:.1f} s, "
        f"restore {ck.checkpoint_restore_s:.1f} s ({ck.checkpoint_source})",
        f"detection: crash {cfg.crash_detect_s:g} s, hang {cfg.hang_detect_s:g} s (NCCL watchdog); host swap "
        f"{cfg.host_swap_s:g} s from {ck.spare_hosts} spare hosts, repair {cfg.repair_h:g} h; "
        f"pg init ({cfg.pg_init}) {ck.pg_init_s:.0f} s",
        f"power: GPU {pm.gpu_train_w:.0f} W training (busy fraction {pm.busy_fraction:.2f}), "
        f"{pm.gpu_idle_w:.0f} W idle; PUE {cfg.pue}",
        f"cost: ${cfg.usd_per_gpu_hour:.2f} per GPU-hour" if cfg.capex_per_gpu_usd is None else
        (f"cost: capex ${cfg.capex_per_gpu_usd:,.0f}/GPU over {cfg.depreciation_years:g} y + "
         f"${cfg.usd_per_kwh}/kWh"),
    ]
    if planes.planes > 1:
        a.append(f"{planes.planes} fabric planes: {planes.failures_per_day:.2g} leaf switch/cable failures a day, "
                 f"each a plane down for {cfg.plane_repair_h:g} h ({planes.degraded_share:.1%} of the time), "
                 + (f"the step {planes.degraded_step_ratio:.3f}x meanwhile: +{planes.stretch - 1:.2%} on every step"
                    if planes.degraded_step_ratio is not None else "the slower step not simulated (no step simulator)"))
    if run.mode == "days":
        a.append("fixed run length: time_to_train_days is null; see tokens_trained")
    return a


RUN_SUMMARY_KEYS = ("goodput", "ettr", "time_to_train_days", "energy_mwh", "cost_usd", "unexpected_interruptions",
                    "checkpoint_interval_s", "young_daly_interval_s")


def run_summary(spec: Any, step_time_s: float, tokens_per_step: float, breakdown: dict | None = None,
                runs: int | None = None, simulate: Callable[[Any], Any] | None = None) -> dict:
    """The keys ``teton run`` adds when ``reliability:`` gives a run length (``tokens`` or ``days``)."""
    r = goodput(spec, step_time_s=step_time_s, tokens_per_step=tokens_per_step, breakdown=breakdown,
                runs=runs, simulate=simulate).to_dict()
    return {k: r[k] for k in RUN_SUMMARY_KEYS}
