"""The frontier study (teton.studies.frontier): what users read off it holds at every scale, the
verdict follows its stated rule, and bad scales or systems are one-line errors."""

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from teton.errors import SpecError
from teton.studies.frontier import LIMIT_KEYS, LIMITS, frontier_study, parse_scales, verdicts
from teton.studies.frontier_specs import GB200_JOB, H100_JOB, SYSTEMS, job_gpus

ROOT = Path(__file__).resolve().parents[2]


def _rows(result, system):
    return sorted((r for r in result.rows if r.system == system), key=lambda r: r.gpus)


def test_one_row_per_system_and_scale_every_job_fits(frontier):
    assert [(r.system, r.scale) for r in frontier.rows] == [
        (s, n) for s in ("h100", "gb200") for n in (16384, 65536, 131072, 350000)]
    assert all(r.fits_in_memory for r in frontier.rows)


@pytest.mark.parametrize("system", ["h100", "gb200"])
def test_mfu_does_not_rise_with_scale_at_fixed_work_per_gpu(frontier, system):
    rows = _rows(frontier, system)
    assert len({r.tokens_per_step // r.gpus for r in rows}) == 1  # the batch grows with dp
    assert len({(r.layout["tp"], r.layout["pp"]) for r in rows}) == 1
    mfu = [r.mfu_bf16 for r in rows]
    assert all(b <= a + 1e-12 for a, b in zip(mfu, mfu[1:], strict=False)), mfu
    assert all(b.step_time_s >= a.step_time_s - 1e-12 for a, b in zip(rows, rows[1:], strict=False))


@pytest.mark.parametrize("system", ["h100", "gb200"])
def test_interruptions_rise_and_ettr_falls_with_scale(frontier, system):
    rows = _rows(frontier, system)
    assert all(b.unexpected_per_day > a.unexpected_per_day for a, b in zip(rows, rows[1:], strict=False))
    assert all(b.ettr < a.ettr for a, b in zip(rows, rows[1:], strict=False))
    assert rows[0].ettr > 0.9 > rows[-1].ettr  # Llama 3's scale keeps 90 %; 350K does not


def test_gb200_runs_whole_nvl72_domains_fewer_domains_more_trays(frontier):
    for h, g in zip(_rows(frontier, "h100"), _rows(frontier, "gb200"), strict=True):
        assert g.gpus % 72 == 0 and g.nvlink_domains == g.gpus // 72
        assert g.nvlink_domains < h.nvlink_domains  # 72-GPU scale-up domains against 8-GPU hosts
        assert g.hosts == g.gpus // 4 and h.hosts == h.gpus // 8  # a GB200 tray holds 4 GPUs
        assert abs(g.gpus - g.scale) <= SYSTEMS["gb200"].unit_gpus // 2


def test_rounding_is_to_whole_units_and_said(frontier):
    assert job_gpus(SYSTEMS["h100"], 350_000) == 349_952 and job_gpus(SYSTEMS["gb200"], 16_384) == 16_128
    assert SYSTEMS["gb200"].unit_gpus == 1008 and SYSTEMS["h100"].unit_gpus == 128
    rounded = [r for r in frontier.rows if r.gpus != r.scale]
    assert len(frontier.notes) == len(rounded) == 5


def test_cross_building_dp_is_zero_in_one_building_and_grows_on_rings(frontier):
    for system in ("h100", "gb200"):
        rows = _rows(frontier, system)
        assert rows[0].buildings == 1 and rows[0].dp_cross_building_s == 0.0
        assert all(r.dp_cross_building_s <= r.dp_exposed_s for r in rows)
    # H100 on Meta's 2024 stack runs ring reduce-scatters: n - 1 round trips across the boundary
    cross = [r.dp_cross_building_s for r in _rows(frontier, "h100")[1:]]
    assert all(0 < a < b for a, b in zip(cross, cross[1:], strict=False))
    # GB200's stack has NCCL's PAT: log2 n steps, the boundary costs under 0.1 % of the step
    assert all(0 < r.dp_cross_building_s < 1e-3 * r.step_time_s for r in _rows(frontier, "gb200")[1:])


def test_checkpoint_interval_is_young_daly_on_whole_steps_and_sustainable(frontier):
    for r in frontier.rows:
        steps = r.checkpoint_interval_s / r.step_time_s
        assert steps == pytest.approx(round(steps)) and steps >= 1
        assert r.checkpoint_interval_s >= r.checkpoint_sustained_write_s - 1e-9  # the storage keeps up
        assert r.checkpoint_bytes > 5e12 and r.storage_capacity_bytes == pytest.approx(2 * r.checkpoint_bytes)
        assert 0 < r.storage_servers_needed <= 7500


def test_startup_stock_grows_with_ranks_optimized_is_used(frontier):
    rows = _rows(frontier, "h100")
    assert all(r.startup_s == r.startup_optimized_s <= r.startup_stock_s for r in rows)
    assert rows[-1].startup_stock_s / rows[0].startup_stock_s > 10


def test_each_verdict_names_a_limit_first_crossed_at_the_smallest_scale(frontier):
    assert [v.system for v in frontier.verdicts] == ["h100", "gb200"]
    for v in frontier.verdicts:
        assert v.limit in LIMIT_KEYS
        assert f"{next(x.label for x in LIMITS if x.key == v.limit)} limits first" in v.text
        firsts = [b["first_scale"] for b in v.by_limit.values() if b["first_scale"] is not None]
        assert v.first_scale == min(firsts)
        rows = [r for r in frontier.rows if r.system == v.system]
        crossed_at = next(r for r in rows if r.gpus == v.first_scale)
        assert crossed_at.loads[v.limit] > 1
        assert all(r.loads[v.limit] <= 1 for r in rows if r.gpus < v.first_scale)


def test_verdict_rule_breaks_ties_by_where_the_load_passes_one(frontier):
    rows = _rows(frontier, "h100")
    loads = ({"ettr": 0.5, "dp_exposed": 0.95, "checkpoint": 0.1, "startup": 0.1},
             {"ettr": 1.5, "dp_exposed": 1.1, "checkpoint": 0.1, "startup": 0.1},
             {"ettr": 3.0, "dp_exposed": 2.0, "checkpoint": 0.1, "startup": 0.1},
             {"ettr": 4.0, "dp_exposed": 3.0, "checkpoint": 0.1, "startup": 0.1})
    (v,) = verdicts([replace(r, loads=x) for r, x in zip(rows, loads, strict=True)])
    assert v.limit == "dp_exposed" and v.first_scale == 65536  # both cross there; DP passes 1 sooner
    assert v.by_limit["dp_exposed"]["crossing_gpus"] < v.by_limit["ettr"]["crossing_gpus"] < 65536
    quiet = [replace(r, loads=dict.fromkeys(LIMIT_KEYS, 0.5)) for r in rows]
    (none,) = verdicts(quiet)
    assert none.limit is None and "no limit crossed" in none.text


def test_job_templates_are_the_bundled_examples():
    for name, job in (("llama3-405b-16k.yaml", H100_JOB), ("llama3-405b-gb200-nvl72.yaml", GB200_JOB)):
        assert yaml.safe_load((ROOT / "examples" / name).read_text())["job"] == dict(job)


@pytest.mark.parametrize("kwargs, field", [
    (dict(scales="16384,x"), "gpus"), (dict(scales=[512]), "gpus"), (dict(scales="0"), "gpus"),
    (dict(systems="h100,b300"), "systems"), (dict(systems=""), "systems"), (dict(pg_init="fast"), "pg_init")])
def test_bad_scales_systems_are_one_line_errors(kwargs, field):
    with pytest.raises(SpecError) as err:
        frontier_study(**{"scales": "16384", **kwargs})
    assert err.value.field == field and "\n" not in str(err.value)


def test_parse_scales_takes_teton_counts():
    assert parse_scales("16384,65536") == (16384, 65536)
    assert parse_scales([350000, 16384]) == (16384, 350000)
