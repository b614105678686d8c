"""The sections of ``teton report``: each turns a spec (and its simulated step) into tables, charts
and notes. The numbers come straight from the models (``teton.simulate``, the placement
comparison, the storage and reliability models, the validation cases); nothing is re-derived here.

A section whose model cannot run for this spec (e.g. a cluster that names no storage) says so in
a note instead of failing the whole report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from teton.engine.compute import gemm_precision
from teton.errors import SpecError
from teton.report import plots
from teton.units import GB, GIB  # checkpoint sizes in GB (as storage vendors count), memory in GiB
from teton.workload.headroom import fit_text, headroom_text

GOODPUT_RUNS = 32  # Monte Carlo runs per interval in the report (teton goodput uses the spec's, more)
SEARCH_TOP = 10


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    title: str = ""


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    lead: str = ""
    tables: tuple[Table, ...] = ()
    figures: tuple[tuple[str, Any], ...] = ()  # (name, plotly figure)
    notes: tuple[str, ...] = ()
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    """What the sections share: the spec, its simulated step (with the pipeline timeline), options."""

    spec: Any
    result: Any
    goodput_runs: int = GOODPUT_RUNS
    occupancy: float = 0.0


def fmt_s(seconds: float) -> str:
    """Seconds as the report (and ``teton run``) prints them."""
    return f"{seconds:.3f} s"


def fmt_pct(fraction: float, digits: int = 1) -> str:
    return f"{fraction * 100:.{digits}f} %"


def _kv(rows: list[tuple[str, str]], title: str = "") -> Table:
    return Table(("quantity", "value"), tuple(rows), title)


def spec_section(ctx: Context) -> Section:
    spec = ctx.spec
    c, m, j = spec.cluster, spec.model, spec.job
    prec = gemm_precision(j.precision, j.software.fp8_recipe)  # the peak the GEMMs run at (fp4 under NVFP4)
    lay = j.layout
    gpu = c.gpu_spec
    fabric = ", ".join(f"{layer.name} {layer.span_gpus:,} GPUs" + (f" (1:{layer.oversubscription:g} up)"
                                                                   if layer.oversubscription > 1 else "")
                       for layer in c.layers)
    cluster = _kv([("cluster", c.name), ("hosts x GPUs", f"{c.hosts:,} x {c.gpus_per_host} ({c.gpus:,} GPUs"
                                                         + (f", NVLink domains of {c.domain_gpus})"
                                                            if c.domain_gpus != c.gpus_per_host else ")")),
                   ("GPU", f"{gpu.name}, {gpu.hbm_bytes / GIB:.1f} GiB HBM, {gpu.peak_flops(prec) / 1e12:.0f} "
                           f"dense TFLOP/s {prec}"),
                   ("fabric", f"{c.topology}: {fabric}"), ("storage", c.storage or "-"),
                   ("network model", f"flow, routing {spec.routing}" if spec.network.fidelity == "flow" else "analytical")], "cluster")
    model = _kv([("model", m.name), ("parameters", f"{m.total_params() / 1e9:,.2f} B"),
                 ("layers x hidden", f"{m.layers} x {m.hidden} (FFN {m.ffn_hidden})"),
                 ("heads (KV heads)", f"{m.heads} ({m.n_kv_heads})"), ("vocabulary", f"{m.vocab:,}")], "model")
    expert = [f"ep {lay.ep}"] * (lay.ep > 1) + [f"etp {lay.etp}"] * (lay.etp != lay.tp)
    layout = _kv([("GPUs", f"{j.gpus:,}"), ("tp x cp x pp x dp", f"{lay.tp} x {lay.cp} x {lay.pp} x {lay.dp}"
                                             + (f" ({', '.join(expert)})" if expert else "")),
                  ("schedule", f"{j.pp_schedule}, {lay.virtual_stages} virtual stage(s)"),
                  ("sequence x micro-batch", f"{lay.seq_len:,} x {lay.micro_batch}"),
                  ("global batch", f"{lay.sequences_per_step:,} sequences, {lay.tokens_per_step:,} tokens"),
                  ("micro-batches per DP rank", str(lay.micro_batches)),
                  ("ZeRO / recompute / precision", f"{j.zero} / {j.recompute} / {j.precision}"),
                  ("placement", j.placement), ("seed", str(spec.seed))], "layout")
    return Section("spec", "Spec", "What is simulated.", (cluster, model, layout), notes=tuple(spec.notes))


def step_section(ctx: Context) -> Section:
    r = ctx.result
    lay = r.layout
    # MFU against the bf16 peak, as every table shows it; an fp8 job's against its own peak too
    own = [(f"MFU ({r.precision} peak)", fmt_pct(r.mfu))] if r.precision != "bf16" else []
    from teton.engine.result import PREDICTION_MODES

    band = (f"{fmt_s(r.step_time_s_low)} - {fmt_s(r.step_time_s_high)} (p10-p90 of the fit's held-out errors)"
            if r.step_time_s_low is not None and r.step_time_s_high is not None else "none: nothing fitted behind it")
    rows = [("step time", fmt_s(r.step_time_s)), ("band", band),
            ("prediction", f"{PREDICTION_MODES.get(r.prediction_mode, r.prediction_mode)}, stack {r.software}"),
            ("MFU", fmt_pct(r.mfu_bf16)), *own,
            ("TFLOPs / GPU", f"{r.tflops_per_gpu:.0f}"), ("tokens / s", f"{r.tokens_per_s:,.0f}"),
            ("tokens / step", f"{r.tokens_per_step:,}"),
            ("layout", f"tp={lay['tp']} cp={lay['cp']} pp={lay['pp']} dp={lay['dp']}"
                       + (f" ep={lay['ep']}" if lay.get("ep", 1) > 1 else "")
                       + (f" etp={lay['etp']}" if lay.get("etp", lay["tp"]) != lay["tp"] else "") + f" v={lay['virtual_stages']}"),
            ("micro-batches / DP rank", str(r.micro_batches)),
            ("model", f"{r.fidelity} network, {r.placement} placement")]
    bd = Table(("category", "seconds", "share"),
               tuple((k, f"{v:.3f}", fmt_pct(v / r.step_time_s)) for k, v in r.breakdown.items()),
               "where the step time goes")
    short = ("" if r.fits_in_memory else
             f" It is TIGHT in memory ({-r.headroom_bytes / GIB:.1f} GiB over the usable HBM on the fullest GPU, within "
             "the fragmentation allowance, see Memory): it runs only if the allocator fragments less than assumed."
             if r.memory_verdict == "tight" else
             f" It DOES NOT FIT in memory ({-r.headroom_bytes / GIB:.1f} GiB short on the fullest GPU, see Memory): "
             "the time is of a job that cannot run.")
    warn = "".join(f" Warning: {w}" for w in r.warnings)
    return Section("step", "Step", f"One training step: {fmt_s(r.step_time_s)} at {fmt_pct(r.mfu_bf16)} MFU.{short}{warn}",
                   (_kv(rows, "key metrics"), bd), (("breakdown", plots.breakdown_bar(r.breakdown, r.step_time_s)),),
                   notes=tuple(r.notes),
                   data={"step_time_s": r.step_time_s, "step_time_s_low": r.step_time_s_low,
                         "step_time_s_high": r.step_time_s_high, "prediction_mode": r.prediction_mode,
                         "mfu": r.mfu, "mfu_bf16": r.mfu_bf16})


def memory_section(ctx: Context) -> Section:
    r = ctx.result
    fits = fit_text(r.memory_verdict, -r.headroom_bytes, r.memory_reserved.get("fragmentation", 0.0),
                    r.largest_memory_term)
    rows = tuple((k, f"{v / GIB:.2f}") for k, v in r.memory_breakdown.items())
    rows += (("total", f"{r.memory_per_gpu_bytes / GIB:.2f}"),)
    kept = tuple((f"kept free: {k.replace('_', ' ')}", f"{v / GIB:.2f}") for k, v in r.memory_reserved.items())
    rows += (*kept, ("usable HBM", f"{r.usable_hbm_bytes / GIB:.2f}"), ("HBM capacity", f"{r.hbm_bytes / GIB:.2f}"),
             ("headroom left", f"{r.headroom_bytes / GIB:.2f}"))
    room = headroom_text(r.memory_per_gpu_bytes, r.usable_hbm_bytes, r.hbm_bytes, r.memory_reserved)
    lead = f"Fullest GPU: {room}: {fits}."
    return Section("memory", "Memory per GPU", lead, (Table(("term", "GiB"), rows, "memory of the fullest pipeline rank"),),
                   (("memory", plots.memory_bar(r.memory_breakdown, r.hbm_bytes, usable_bytes=r.usable_hbm_bytes,
                                                 verdict=r.memory_verdict)),),
                   data={"fits_in_memory": r.fits_in_memory, "memory_verdict": r.memory_verdict,
                         "headroom_bytes": r.headroom_bytes,
                         "usable_hbm_bytes": r.usable_hbm_bytes})


def ops_section(ctx: Context) -> Section:
    """Each kind of transformer layer (``layer``; a MoE, hybrid or windowed model has several: dense
    and MoE layers, Mamba and attention layers), one micro-batch, op by op (the rows of ``teton ops``)."""
    from teton.engine.op_table import block_totals, op_rows

    rows = [r for r in op_rows(ctx.spec) if r["block"] not in ("embedding", "head")]
    kinds = list(dict.fromkeys(r["block"] for r in rows))
    several = len(kinds) > 1
    table = Table((*(("layer",) if several else ()), "pass", "op", "kind", "shape / group", "GFLOP", "% of peak", "ms",
                   "exposed ms"), tuple(
        (*((r["block"],) if several else ()), r["pass"], r["name"], r["kind"], r["shape"],
         f"{r['flops'] / 1e9:,.0f}" if r["flops"] else "", fmt_pct(r["fraction_of_peak"]) if r["fraction_of_peak"] else "",
         f"{r['time_s'] * 1e3:.3f}", f"{r['exposed_s'] * 1e3:.3f}") for r in rows),
                  "one layer of each kind, one micro-batch, one GPU")
    totals = block_totals(rows)
    layer_ms = {k: sum(sum(c.values()) for key, c in totals.items() if key.rsplit(".", 1)[0] == k) * 1e3
                for k in kinds}
    parts = []
    for k in kinds:
        gemm = [r for r in rows if r["block"] == k and r["kind"] == "gemm"]
        gemm_ms = sum(r["time_s"] for r in gemm) * 1e3
        parts.append(f"{'A ' + k.replace('_', ' ') if several else 'A layer'} takes {layer_ms[k]:.2f} ms per "
                     f"micro-batch on one GPU (forward and backward); GEMMs {gemm_ms:.2f} ms at "
                     f"{sum(r['flops'] for r in gemm) / max(gemm_ms, 1e-12) / 1e9:,.0f} TFLOP/s on average.")
    bars = [{**r, "name": f"{r['block']}: {r['name']}"} for r in rows] if several else rows
    return Section("ops", "Ops of one layer" + (" of each kind" if several else ""), " ".join(parts), (table,),
                   (("ops", plots.ops_bars(bars)),), data={"layer_ms": layer_ms})


def timeline_section(ctx: Context) -> Section:
    events = ctx.result.extra.get("timeline") or []
    if not events:
        return Section("timeline", "Pipeline timeline", notes=("the step simulator returned no timeline",))
    end = max(e["end_s"] for e in events)
    ranks = ctx.result.layout["pp"]
    lead = (f"{len(events):,} forward / backward ops of one pipeline ({ranks} rank{'s' if ranks != 1 else ''}, "
            f"{ctx.result.micro_batches} micro-batches); the last ends at {fmt_s(end)}. Every pipeline of "
            "the job runs the same schedule in this model; DP collectives and the optimizer step are not drawn.")
    return Section("timeline", "Pipeline timeline", lead, figures=(("timeline", plots.timeline_gantt(events)),),
                   data={"events": len(events)})


def placement_section(ctx: Context) -> Section:
    from teton.engine.step import simulate_step
    from teton.placement import POLICIES
    from teton.placement.compare import compare_policies

    rows = compare_policies(ctx.spec, ctx.occupancy, ctx.spec.seed, POLICIES, simulate=simulate_step)
    layers = [k for k in rows[0]["span"] if k != "hosts"][:-1]
    table = Table(("policy", "step time", "slowdown", "axis that pays", "hosts", *layers),
                  tuple((r["policy"], fmt_s(r["step_time_s"]), f"{r['slowdown']:.3f}", r["axis_pays"] or "-",
                         str(r["span"]["hosts"]), *(str(r["span"][k]) for k in layers)) for r in rows),
                  "slowdown vs topology-aware placement on an empty cluster")
    worst = max(rows, key=lambda r: r["slowdown"])
    lead = (f"The job placed by each policy while other jobs hold {fmt_pct(rows[0]['occupancy'], 0)} of the cluster. "
            f"Worst: {worst['policy']} ({worst['slowdown']:.2f}x"
            + (f", {worst['axis_pays']} communication pays)." if worst["axis_pays"] else ")."))
    return Section("placement", "Placement", lead, (table,), (("placement", plots.placement_bars(rows)),),
                   data={"rows": rows})


def checkpoint_section(ctx: Context) -> Section:
    from teton.storage.checkpoint import simulate_checkpoint

    try:
        s = simulate_checkpoint(ctx.spec).summary()
    except SpecError as err:
        return Section("checkpoint", "Checkpoint", notes=(f"not modelled for this spec: {err}",))
    rows = [("storage / mode / writers", f"{s['storage']} / {s['mode']} / {s['writer_policy']}"),
            ("checkpoint size (all ranks)", f"{s['total_bytes'] / GB:,.1f} GB"),
            ("per GPU written", f"{s['bytes_per_gpu_min'] / GB:.3f}-{s['bytes_per_gpu_max'] / GB:.3f} GB "
                                f"({s['writers']:,} writers, {s['files']:,} files)"),
            ("save, durable", fmt_s(s["checkpoint_save_s"])), ("GPUs blocked per save", fmt_s(s["checkpoint_blocking_s"])),
            ("restore", fmt_s(s["checkpoint_restore_s"])), ("save bottleneck", str(s["bottleneck"])),
            ("restore bottleneck", str(s["restore_bottleneck"])),
            ("delivered write bandwidth", f"{s['delivered_bw_bytes_s'] / 1e12:.2f} TB/s"),
            ("other jobs' share of the storage", f"{fmt_pct(s['storage_other_jobs_share'])} "
                                                 f"({s['storage_other_jobs_share_source']})"),
            ("write rate left for checkpoints", f"{s['storage_available_write_bytes_s'] / 1e12:.2f} TB/s "
                                                f"({s['storage_write_bound']})"),
            ("shortest sustainable interval", fmt_s(s["min_checkpoint_interval_s"]))]
    times = {"sync save": s["sync_save_s"], "async: GPUs blocked": s["async_blocking_s"],
             "async: durable": s["async_durable_s"], "restore, all read": s["checkpoint_restore_all_read_s"],
             "restore, read + broadcast": s["checkpoint_restore_broadcast_s"],
             "restore, shard + all-gather": s["checkpoint_restore_allgather_s"]}
    lead = (f"{s['bytes_per_gpu_max'] / GB:.2f} GB per GPU; save {fmt_s(s['checkpoint_save_s'])} "
            f"({s['mode']}, GPUs blocked {fmt_s(s['checkpoint_blocking_s'])}), restore "
            f"{fmt_s(s['checkpoint_restore_s'])}; the save is bound by {s['bottleneck']}.")
    return Section("checkpoint", "Checkpoint", lead, (_kv(rows),), (("checkpoint", plots.checkpoint_bars(times)),),
                   data=s)


def goodput_section(ctx: Context) -> Section:
    from teton.engine.step import simulate_step
    from teton.reliability import goodput

    # the step as `teton goodput` takes it (simulated: its source reads "teton.simulate", as there)
    kw = dict(runs=ctx.goodput_runs, simulate=simulate_step)
    try:
        # the figures and the interval as `teton goodput` gives them (the renewal model's
        # recommendation), beside the Monte Carlo sweep that the table and the figure show
        g = goodput(ctx.spec, **kw).to_dict()
        swept = goodput(ctx.spec, interval_sweep=True, **kw).to_dict()
    except SpecError as err:
        return Section("goodput", "Goodput", notes=(f"not modelled for this spec: {err}",))
    e = g["ettr_percentiles"]
    rows = [("ETTR mean (p5 / p95)", f"{fmt_pct(g['ettr'], 2)} ({fmt_pct(e['p5'], 2)} / {fmt_pct(e['p95'], 2)})"),
            ("goodput", fmt_pct(g["goodput"], 2)),
            ("unexpected interruptions", f"{g['unexpected_interruptions']:.1f}"
                                         + (f" (MTBI {g['mtbi_h']:.2f} h)" if g["mtbi_h"] else "")),
            ("checkpoint interval used", f"{fmt_s(g['checkpoint_interval_s'])} ({g['checkpoint_interval_source']})"),
            *_interval_rows(g["interval_recommendation"]),
            ("Young-Daly interval", fmt_s(g["young_daly_interval_s"]) if g["young_daly_interval_s"] else "-")]
    if g["time_to_train_days"] is not None:
        tt = g["time_to_train_percentiles"]
        rows += [("time to train p5 / p50 / p95", f"{tt['p5']:.1f} / {tt['p50']:.1f} / {tt['p95']:.1f} days"),
                 ("failure-free", f"{g['ideal_days']:.1f} days")]
        lead = f"ETTR {fmt_pct(g['ettr'])}; {g['tokens']:.3g} tokens in {g['time_to_train_days']:.1f} days (median)."
    else:
        rows.append((f"tokens trained in {g['days']:g} days (p50)", f"{g['tokens_trained']['p50']:.4g}"))
        lead = (f"ETTR {fmt_pct(g['ettr'])} over a {g['days']:g}-day run (the spec gives no token budget, so "
                "time-to-train is not defined; set reliability.tokens for it).")
    rows += [("energy (facility)", f"{g['energy_mwh']:,.0f} MWh"), ("cost", f"${g['cost_usd']:,.0f}")]
    rec, mc = g["interval_recommendation"], swept["interval_recommendation"]
    lo, hi = mc["flat_region_s"]
    sweep = Table(("interval", "steps", "ETTR mean", "p5", "p95", "writes", "storage use", "flat region"),
                  tuple((fmt_s(s["interval_s"]), f"{s['steps']:,}", fmt_pct(s["ettr_mean"], 2), fmt_pct(s["ettr_p5"], 2),
                         fmt_pct(s["ettr_p95"], 2), f"{s['write_bytes_s'] / GB:,.1f} GB/s",
                         "-" if s["storage_use"] is None else fmt_pct(s["storage_use"]),
                         "yes" if lo <= s["interval_s"] <= hi else "") for s in swept["interval_sweep"]),
                  "checkpoint interval sweep (Monte Carlo)")
    lead += "".join(f" Warning: {w}" for w in g["warnings"])
    notes = (*(s[0].upper() + s[1:] + "." for s in _recommendation_sentences(rec)),
             f"The sweep's own flat region, from {g['runs']} Monte Carlo runs per interval: {fmt_s(lo)} - {fmt_s(hi)} "
             f"(practical {fmt_s(mc['practical_interval_s'])}); the interval rows are the renewal model's, as "
             "teton goodput gives them",
             f"Monte Carlo: {g['runs']} runs per interval, seed {g['seed']} (teton goodput runs more)",
             *g["assumptions"])
    figs = ()
    if swept["interval_sweep"]:
        figs = (("interval-sweep", plots.interval_sweep(swept["interval_sweep"], g["checkpoint_interval_s"], mc)),)
    return Section("goodput", "Goodput", lead, (_kv(rows), sweep), figs, notes,
                   data={**g, "interval_sweep": swept["interval_sweep"], "sweep_recommendation": mc})


def _interval_rows(rec: dict) -> list[tuple[str, str]]:
    """The checkpoint recommendation's rows: practical interval, flat region, optimum, storage bound."""
    lo, hi = rec["flat_region_s"]
    return [("practical interval (recommended)", f"{fmt_s(rec['practical_interval_s'])} "
                                                 f"(ETTR {fmt_pct(rec['practical_ettr'], 2)})"),
            (f"flat region (within {rec['ettr_tolerance_pp']:g} pp of the best)",
             f"{fmt_s(lo)} - {fmt_s(hi)} ({rec['method']})"),
            ("optimum", f"{fmt_s(rec['optimal_interval_s'])} (ETTR {fmt_pct(rec['optimal_ettr'], 2)})"),
            ("shortest interval offered", f"{fmt_s(rec['min_interval_s'])} ({rec['min_interval_bound']})")]


def _recommendation_sentences(rec: dict) -> list[str]:
    """:meth:`teton.reliability.recommend.IntervalRecommendation.sentences` of its ``to_dict()``."""
    from teton.reliability.recommend import IntervalRecommendation

    return IntervalRecommendation(**{**rec, "flat_region_s": tuple(rec["flat_region_s"])}).sentences()


def validation_section(ctx: Context) -> Section:
    from teton.validation.cases import run_validation

    d = run_validation()

    def col(r: dict, which: str) -> str:
        return f"{r[which]:.4g} ({r[f'error_{which}'] * 100:+.1f} %)" if r.get("loo") is not None else ""

    table = Table(("#", "case", "metric", "published", "predicted", "error", "burst", "in-sample", "leave-one-out",
                   "band", "ok"),
                  tuple((str(i), r["case"], r["metric"], f"{r['published']:.4g}", f"{r['predicted']:.4g}",
                         f"{r['error'] * 100:+.1f} %", col(r, "burst"), col(r, "in_sample"), col(r, "loo"),
                         f"±{r['tolerance'] * 100:.0f} %", "yes" if r["within_tolerance"] else "no")
                        for i, r in enumerate(d["rows"], start=1)))
    notes = tuple(sorted({r["note"] for r in d["rows"] if r["note"]}))
    ts = d.get("training_set")
    if ts:
        notes += (f"training set: mean absolute error burst {fmt_pct(ts['mean_abs_error_burst'])}, in-sample "
                  f"{fmt_pct(ts['mean_abs_error_in_sample'])}, leave-one-out {fmt_pct(ts['mean_abs_error_loo'])}; "
                  "rows with a leave-one-out prediction are judged on it",)
    lead = (f"Bundled cases, independent of this spec: mean absolute error {fmt_pct(d['mean_abs_error'])}; "
            f"{d['within_tolerance']}/{d['total']} rows within their band (as teton validate prints them).")
    figs = (("errors", plots.validation_errors(d["rows"])),) if d["rows"] else ()
    return Section("validation", "Validation", lead, (table,), figs, notes, data=d)


def search_section(ctx: Context) -> Section:
    from teton.sweep.search import search_layouts

    d = search_layouts(ctx.spec)
    top = [r for r in d["rows"] if r["fits_in_memory"]][:SEARCH_TOP]
    moe = ctx.spec.model.experts > 1  # an MoE layout's EP, expert TP and rank order

    def expert(r: dict) -> tuple[str, ...]:
        return (str(r["ep"]), str(r["etp"]), "-".join(r["parallel_order"])) if moe else ()

    table = Table(("tp", "cp", "pp", "dp", *(("ep", "etp", "order") if moe else ()), "v", "micro-batch", "recompute",
                   "zero", "step time", "MFU", "memory"),
                  tuple((str(r["tp"]), str(r["cp"]), str(r["pp"]), str(r["dp"]), *expert(r), str(r["virtual_stages"]),
                         str(r["micro_batch"]), r["recompute"], str(r["zero"]), fmt_s(r["step_time_s"]),
                         fmt_pct(r["mfu_bf16"]), f"{r['memory_per_gpu_bytes'] / GIB:.1f} GiB") for r in top),
                  f"top {len(top)} layouts that fit")
    lead = (f"{d['evaluated']:,} layouts, {len(d['rows']):,} simulated ({d['dominated']:,} left out: the same degrees "
            f"fit, or miss the HBM by no more, with less recompute or a lower ZeRO stage), {d['fitting']:,} distinct ones fit in memory.")
    figs = (("top-layouts", plots.search_bars(top)),) if top else ()
    return Section("search", "Layout search", lead, (table,), figs, data={"evaluated": d["evaluated"]})


SECTIONS: dict[str, tuple[str, Callable[[Context], Section]]] = {
    "step": ("step", step_section),
    "memory": ("memory", memory_section),
    "ops": ("ops of one layer", ops_section),
    "timeline": ("pipeline timeline", timeline_section),
    "placement": ("placement policies", placement_section),
    "checkpoint": ("checkpoint", checkpoint_section),
    "goodput": ("goodput Monte Carlo", goodput_section),
    "validation": ("validation cases", validation_section),
    "search": ("layout search", search_section),
}
# asked for by name: search (~1.5 s on the 405B example, more on MoE models) and validation (the
# bundled cases with their held-out refits, ~20 s, the same for every spec: `teton validate`)
DEFAULT_SECTIONS = tuple(k for k in SECTIONS if k not in ("search", "validation"))


def parse_sections(text: str | None) -> tuple[str, ...]:
    """``step,memory,...`` -> the sections in report order; SpecError for an unknown name."""
    from teton.errors import closest

    if text is None or not text.strip():
        return DEFAULT_SECTIONS
    if text.strip() == "all":
        return tuple(SECTIONS)
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise SpecError("sections", text, f"name at least one of {', '.join(SECTIONS)} (or all)")
    for n in names:
        if n not in SECTIONS:
            raise SpecError("sections", n, closest(n, list(SECTIONS)))
    return tuple(k for k in SECTIONS if k in names)

