"""The answer of a plan: the Pareto front, the recommended plan, and why.

* **Front**: the plans no other plan beats on both time to train (p50) and cost.
* **Recommendation**: with ``--deadline-days``, the cheapest plan whose p90 meets the deadline
  (and the budget, if given); with only ``--budget-usd``, the fastest (p50) within it; with
  neither, the front's knee: the plan with the least ``days / fastest + cost / cheapest``.
* **Why**: the constraint that binds the choice (the deadline or the budget, memory, the storage
  sustained rate), and why more GPUs do not buy proportionally fewer days: the pipeline bubble at
  a fixed batch, exposed communication on the fabric layer the job spans, failures at scale.
"""

from __future__ import annotations

from typing import Any

from teton.errors import SpecError


def pareto_front(plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Plans not dominated on (days p50, cost), sorted by days."""
    ordered = sorted(plans, key=lambda p: (p["days_p50"], p["cost_usd"]))
    front, cheapest = [], float("inf")
    for p in ordered:
        if p["cost_usd"] < cheapest:
            front.append(p)
            cheapest = p["cost_usd"]
    return front


def layout_text(p: dict[str, Any]) -> str:
    """A plan's layout as the tables print it: ``tp8 cp1 pp16 dp128``; an MoE job's EP, its expert
    TP where it differs from tp, and its rank order where pp is pipelined (``tp2 cp1 pp4 dp16 ep32
    etp1 tp-cp-ep-dp-pp``)."""
    lay = p["layout"]
    text = f"tp{lay['tp']} cp{lay['cp']} pp{lay['pp']} dp{lay['dp']}" + (f" ep{lay['ep']}" if lay["ep"] > 1 else "")
    if lay.get("etp", lay["tp"]) != lay["tp"]:
        text += f" etp{lay['etp']}"
    if "parallel_order" in lay and lay["pp"] > 1:
        text += " " + "-".join(lay["parallel_order"])
    if lay.get("pp_split") == "balanced":  # the end stages sized to even out the ranks (job.pp_split)
        text += " balanced"
    return text


STORAGE_WORDS = {  # (sentence, table cell) templates of a plan's storage, by how it is priced
    "local": ("storage on the hosts' own drives", "local"),
    "dedicated": ("{servers} dedicated storage servers", "{servers} ded."),
    "share": ("{charged} of {servers} shared storage servers", "{charged} / {servers}"),
}


def storage_text(p: dict[str, Any], cell: bool = False) -> str:
    """The storage a plan uses: the servers it is charged for, of how many, in words (``3.2 of
    7,500 shared storage servers``) or as a table ``cell`` (``3.2 / 7,500``, ``4 ded.``, ``local``)."""
    kind = "local" if p["storage_servers_charged"] == 0 else p["storage_pricing"]
    return STORAGE_WORDS[kind][cell].format(servers=f"{p['storage_servers']:,}",
                                            charged=servers_figure(p["storage_servers_charged"]))


def usd(x: float) -> str:
    """Dollars in a table cell: $1.03M, $12.4k, $310, -."""
    if x == 0:
        return "-"
    return f"${x / 1e6:,.2f}M" if x >= 1e6 else f"${x / 1e3:,.1f}k" if x >= 1e3 else f"${x:,.0f}"


def servers_figure(x: float) -> str:
    """A (fractional) server count with the precision it needs: 3.2, 0.04, 1,200."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def describe(p: dict[str, Any]) -> str:
    """A plan in words: its GPUs, cluster, layout and storage."""
    return f"{p['gpus']:,} GPUs of {p['cluster']} ({layout_text(p)}, {storage_text(p)})"


PREFER_TEXT = {"fewer_gpus": "fewer GPUs", "cheaper": "the cheaper plan", "faster": "the faster plan"}
PREFERENCES = {  # what breaks a tie (plan.prefer): the key each ranks the tied plans by
    "fewer_gpus": lambda p: (p["gpus"], p["cost_usd"], p["days_p50"]),
    "cheaper": lambda p: (p["cost_usd"], p["days_p50"]),
    "faster": lambda p: (p["days_p50"], p["cost_usd"]),
}


# the figure a rule ranks by: (its key, its p10 and p90 keys, its name in words)
RANKED_BY = {"cost": ("cost_usd", "cost_p10_usd", "cost_p90_usd", "cost"),
             "days": ("days_p50", "days_p10", "days_p90", "days (p50)")}


def band_half_width(p: dict[str, Any], key: str) -> float:
    """Half the p10 - p90 width of a plan's ``cost`` or ``days`` band, relative to its value."""
    value, p10, p90, _ = RANKED_BY[key]
    return (p[p90] - p[p10]) / (2.0 * p[value]) if p[value] > 0 else 0.0


def break_tie(best: dict[str, Any], pool: list[dict[str, Any]], key: str, prefer: str) -> tuple[dict[str, Any], str]:
    """``best`` (the least ``cost_usd`` or ``days_p50`` of ``pool``), or, when other plans lie within
    its band on that figure, the one ``prefer`` ranks first among them, and a sentence saying so."""
    value, _, _, what = RANKED_BY[key]
    width = band_half_width(best, key)
    tied = [p for p in pool if p[value] <= best[value] * (1.0 + width)]
    if len(tied) < 2:
        return best, ""
    pick = min(tied, key=PREFERENCES[prefer])
    text = (f"; {len(tied)} plans lie within its {what} band (+-{width * 100:.0f} %), a tie, broken by the "
            f"preference for {PREFER_TEXT[prefer]} (plan.prefer)")
    if pick is not best:
        text += f": {describe(pick)} over {describe(best)}"
    return pick, text


def recommend(plans: list[dict[str, Any]], deadline_days: float | None, budget_usd: float | None,
              prefer: str = "fewer_gpus") -> tuple[dict[str, Any], str]:
    """The chosen plan and the rule that chose it; a one-line SpecError when nothing qualifies.
    Plans within the best's band on the rule's figure are a tie, broken by ``prefer``."""
    if not plans:
        raise SpecError("gpus", None, "no candidate has a plan (no layout fits, or none passes the job rules)")
    if budget_usd is not None and min(p["cost_usd"] for p in plans) > budget_usd:
        cheapest = min(plans, key=lambda p: p["cost_usd"])
        raise SpecError("budget_usd", budget_usd, f"below every plan; the cheapest, {describe(cheapest)}, "
                        f"costs ${cheapest['cost_usd']:,.0f}")
    within = [p for p in plans if budget_usd is None or p["cost_usd"] <= budget_usd]
    if deadline_days is not None:
        meets = [p for p in within if p["days_p90"] <= deadline_days]
        if not meets:
            fastest = min(within, key=lambda p: p["days_p90"])
            raise SpecError("deadline_days", deadline_days,
                            f"no plan{' within the budget' if budget_usd is not None else ''} meets it at p90; "
                            f"the fastest, {describe(fastest)}, takes {fastest['days_p90']:.1f} days (p90)")
        chosen, tie = break_tie(min(meets, key=lambda p: (p["cost_usd"], p["days_p90"])), meets, "cost", prefer)
        return chosen, f"the cheapest plan that meets the {deadline_days:g}-day deadline at p90{tie}"
    if budget_usd is not None:
        chosen, tie = break_tie(min(within, key=lambda p: (p["days_p50"], p["cost_usd"])), within, "days", prefer)
        return chosen, f"the fastest plan (p50) within the ${budget_usd:,.0f} budget{tie}"
    front = pareto_front(plans)
    fast, cheap = min(p["days_p50"] for p in front), min(p["cost_usd"] for p in front)
    return min(front, key=lambda p: p["days_p50"] / fast + p["cost_usd"] / cheap), \
        "the knee of the front (no deadline or budget given: least days / fastest + cost / cheapest)"


def distinct(a: float, b: float, scale: float = 100.0, unit: str = " %") -> tuple[str, str]:
    """``a`` and ``b`` (x ``scale``) printed with the fewest decimals (0 to 4) that tell them apart,
    so that a sentence never rounds two different values to the same figure."""
    for digits in range(5):
        sa, sb = f"{a * scale:,.{digits}f}", f"{b * scale:,.{digits}f}"
        if sa != sb or a == b:
            break
    return sa + unit, sb + unit


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def scaling_reason(chosen: dict[str, Any], plans: list[dict[str, Any]]) -> str | None:
    """How the chosen plan scales, against another GPU count on the same cluster and storage: the
    largest count when every larger one is at most twice the chosen, else the next larger one; the
    next smaller one when the chosen count is the largest. The head line compares the GPU ratio
    with the speed-up (days p50); the causes, largest first, are the growth of the pipeline
    bubble's and the exposed communication's share of the step, the fall in ETTR, or else the
    growth of GPU-time per step. None when no other count has a plan."""
    same = [p for p in plans if p["cluster"] == chosen["cluster"] and p["storage_request"] == chosen["storage_request"]]
    bigger = sorted((p for p in same if p["gpus"] > chosen["gpus"]), key=lambda p: p["gpus"])
    smaller = [p for p in same if p["gpus"] < chosen["gpus"]]
    if bigger:
        a, b = chosen, bigger[-1] if bigger[-1]["gpus"] <= 2 * chosen["gpus"] else bigger[0]
    elif smaller:
        a, b = max(smaller, key=lambda p: p["gpus"]), chosen
    else:
        return None
    ratio, speedup = b["gpus"] / a["gpus"], a["days_p50"] / b["days_p50"]
    causes = []
    d_bubble = b["bubble_fraction"] - a["bubble_fraction"]
    if d_bubble > 0.005:
        before, after = distinct(a["bubble_fraction"], b["bubble_fraction"])
        causes.append((d_bubble, f"the pipeline bubble grows from {before} to "
                       f"{after} of the step (micro-batches per DP rank {a['micro_batches']} -> "
                       f"{b['micro_batches']} at the {b['batch_tokens'] / 1e6:,.1f}M-token batch)"))
    d_comm = b["comm_fraction"] - a["comm_fraction"]
    if d_comm > 0.005:
        grew = max((k for k in b["breakdown"] if k.endswith("_comm")),
                   key=lambda k: b["breakdown"][k] / b["step_time_s"] - a["breakdown"].get(k, 0.0) / a["step_time_s"])
        before, after = distinct(a["comm_fraction"], b["comm_fraction"])
        causes.append((d_comm, f"exposed communication grows from {before} to "
                       f"{after} of the step, most in {grew} ({fabric_span(b)})"))
    d_ettr = a["ettr"] - b["ettr"]
    if d_ettr > 0.002:
        before, after = distinct(a["ettr"], b["ettr"])
        wait = next((w for w in b["goodput"].get("warnings") or () if "waiting for a spare host" in w), None)
        causes.append((d_ettr, f"ETTR falls from {before} to {after} (" + (
            f"failed hosts wait for spares: {wait.split(': ', 1)[1]}" if wait else
            f"failures at scale: an interruption every {b['goodput']['mtbi_h']:.1f} h") + ")"))
    d_step = (b["gpus"] * b["step_time_s"]) / (a["gpus"] * a["step_time_s"]) - 1.0
    if not causes and d_step > 0.005:
        causes.append((d_step, f"the step takes {d_step * 100:.0f} % more GPU-time ({layout_text(b)})"))
    head = (f"{a['gpus']:,} -> {b['gpus']:,} GPUs ({ratio:.2g}x) buys {speedup:.2f}x the speed"
            + (" (scaling is near-linear)" if speedup >= 0.97 * ratio else ""))
    if not causes:
        return head + "."
    return head + ": " + "; ".join(text for _, text in sorted(causes, reverse=True)) + "."


def fabric_span(p: dict[str, Any]) -> str:
    """The highest fabric layer the job spans more than one domain of, and its oversubscription."""
    multi = [f for f in p.get("fabric", []) if f["domains"] > 1]
    if not multi:
        return "the job sits under one switch domain"
    f = multi[-1]
    over = f" at 1:{f['oversubscription']:g} above them" if f["oversubscription"] > 1 else ""
    return f"the job spans {f['domains']} {f['layer']} domains of {f['span_gpus']:,} GPUs{over}"


def unplanned_counts(counts: list[dict[str, Any]], cluster: str) -> list[str]:
    """The GPU counts of ``cluster`` that have no plan, by reason (memory, layout, storage), in words."""
    out = []
    for kind in ("memory", "layout", "storage"):
        no_fit = [c for c in counts if not c["plans"] and c["cluster"] == cluster and c["reason"].startswith(kind)]
        if no_fit:
            out.append(f"{no_fit[0]['reason']} at {', '.join(format(c['gpus'], ',') for c in no_fit)} GPUs "
                       f"on {cluster}")
    return out


def binding_constraints(chosen: dict[str, Any], plans: list[dict[str, Any]], counts: list[dict[str, Any]],
                        deadline_days: float | None, budget_usd: float | None) -> list[str]:
    """The constraints that shape the choice, in words."""
    out = []
    cheaper = [p for p in plans if p["cost_usd"] < chosen["cost_usd"]]
    if deadline_days is not None and cheaper:
        c = min(cheaper, key=lambda p: p["days_p90"])
        out.append(f"the deadline: the cheaper plans miss it, the closest being {describe(c)} at "
                   f"{c['days_p90']:.1f} days p90 for ${chosen['cost_usd'] - c['cost_usd']:,.0f} less")
    faster = [p for p in plans if p["days_p50"] < chosen["days_p50"]]
    if budget_usd is not None and deadline_days is None and faster:
        out.append(f"the budget: every faster plan costs more than ${budget_usd:,.0f}")
    out += unplanned_counts(counts, chosen["cluster"])
    same = [p for p in plans if p["cluster"] == chosen["cluster"] and p["gpus"] == chosen["gpus"]]
    bound = [p for p in same if p["checkpoint_interval_source"] == "storage sustained write rate"]
    if bound:
        worst = min(bound, key=lambda p: p["storage_servers"])
        out.append(f"the storage sustained write rate: on {worst['storage_servers']:,} servers it sets the "
                   f"checkpoint interval ({worst['checkpoint_interval_s']:,.0f} s) and ETTR falls to "
                   f"{_pct(worst['ettr'])}" + ("" if chosen in bound else
                                                f"; {chosen['storage_servers']:,} servers lift that limit"))
    return out


def why(chosen: dict[str, Any], rule: str, plans: list[dict[str, Any]], counts: list[dict[str, Any]],
        deadline_days: float | None, budget_usd: float | None) -> str:
    """One paragraph: what was chosen, by which rule, what binds it, and how it scales."""
    text = (f"{describe(chosen)}: {chosen['days_p50']:.1f} days p50 ({chosen['days_p90']:.1f} p90), "
            f"${chosen['cost_usd']:,.0f}, {chosen['energy_mwh']:,.0f} MWh; {rule}.")
    binds = binding_constraints(chosen, plans, counts, deadline_days, budget_usd)
    if binds:
        text += " Binding: " + "; ".join(binds) + "."
    scale = scaling_reason(chosen, plans)
    if scale:
        text += " Scaling: " + scale
    return text
