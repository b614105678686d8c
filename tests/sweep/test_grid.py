"""Sweep files: cartesian grid, zip groups, filters, stable point keys, one-line errors."""

import pytest
import yaml

from teton.errors import SpecError
from teton.sweep.grid import parse_sweep, point_key


def test_grid_is_the_cartesian_product_first_key_slowest(small_sweep):
    sweep = parse_sweep(small_sweep)
    points, filtered = sweep.points()
    assert sweep.size == 12 and len(points) == 12 and filtered == 0
    assert [p.values["job.tp"] for p in points[:4]] == [2, 2, 2, 2]
    assert [p.values["job.precision"] for p in points[:2]] == ["bf16", "fp8"]
    assert {(p.values["job.tp"], p.values["job.pp"], p.values["job.precision"]) for p in points} == {
        (t, p, q) for t in (2, 3, 8) for p in (1, 2) for q in ("bf16", "fp8")}
    p0 = points[0]
    assert p0.spec["job"]["tp"] == 2 and p0.spec["job"]["gpus"] == 64 and p0.spec["cluster"] == "dgx-h100-superpod"
    assert small_sweep["base"]["job"].get("tp") is None  # the base mapping is not mutated


def test_zip_groups_vary_together(small_sweep):
    small_sweep["zip"] = [{"job.seq_len": [2048, 8192], "job.global_batch": [128, 32]}]
    points, _ = parse_sweep(small_sweep).points()
    assert len(points) == 24
    assert {(p.spec["job"]["seq_len"], p.spec["job"]["global_batch"]) for p in points} == {(2048, 128), (8192, 32)}


def test_filter_drops_points_and_reads_the_base(small_sweep):
    small_sweep["filter"] = ["job.tp * job.pp <= 8", "job.gpus == 64 and job.precision in ('bf16', 'fp8')"]
    points, filtered = parse_sweep(small_sweep).points()
    assert filtered == 2 and len(points) == 10  # tp=8, pp=2 out, both precisions
    assert all(p.values["job.tp"] * p.values["job.pp"] <= 8 for p in points)


def test_keys_are_stable_and_name_the_whole_spec(small_sweep):
    a, _ = parse_sweep(small_sweep).points()
    reordered = dict(small_sweep, grid=dict(reversed(list(small_sweep["grid"].items()))))
    b, _ = parse_sweep(reordered).points()
    assert {p.key for p in a} == {p.key for p in b} and len({p.key for p in a}) == 12
    assert a[0].key == point_key(a[0].spec)
    small_sweep["base"]["job"]["seq_len"] = 8192
    c, _ = parse_sweep(small_sweep).points()
    assert not {p.key for p in a} & {p.key for p in c}


def test_sub_keys_of_a_preset_section(base_spec):
    sweep = parse_sweep({"base": base_spec, "grid": {"cluster": ["dgx-h100-superpod", "meta-roce-24k"],
                                                      "cluster.hosts": [8, 16]}})
    points, _ = sweep.points()
    assert {p.spec["cluster"]["base"] for p in points} == {"dgx-h100-superpod", "meta-roce-24k"}
    assert {p.spec["cluster"]["hosts"] for p in points} == {8, 16}


def test_base_path_is_relative_to_the_sweep_file(tmp_path, base_spec):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "base.yaml").write_text(yaml.safe_dump(base_spec))
    (tmp_path / "sweep.yaml").write_text("base: specs/base.yaml\ngrid: {job.tp: [2, 4]}\n")
    points, _ = parse_sweep(tmp_path / "sweep.yaml").points()
    assert [p.spec["job"]["tp"] for p in points] == [2, 4] and points[0].spec["model"] == "llama3-8b"


def test_an_edited_cluster_file_is_a_new_point(tmp_path, base_spec):
    """A resumed sweep must not reuse rows of a cluster (or model) file edited since: the key holds
    the named files' contents."""
    (tmp_path / "cl.yaml").write_text("base: meta-roce-24k\ngpu: h100-sxm\n")
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({"base": {**base_spec, "cluster": "cl.yaml"},
                                                         "grid": {"job.tp": [2, 4]}}))
    before, _ = parse_sweep(tmp_path / "sweep.yaml").points()
    again, _ = parse_sweep(tmp_path / "sweep.yaml").points()
    (tmp_path / "cl.yaml").write_text("base: meta-roce-24k\ngpu: h200\n")
    after, _ = parse_sweep(tmp_path / "sweep.yaml").points()
    assert [p.key for p in before] == [p.key for p in again]
    assert not {p.key for p in before} & {p.key for p in after}


def test_an_edited_file_a_named_file_names_is_a_new_point(tmp_path, base_spec):
    """The GPU file a cluster file names (relative to the cluster file's folder) is part of the
    key too: a sweep resumed after editing it must not read back the old GPU's rows."""
    (tmp_path / "hw").mkdir()
    (tmp_path / "hw" / "gpu.yaml").write_text("base: h100-sxm\nname: my-gpu\n")
    (tmp_path / "hw" / "cl.yaml").write_text("base: meta-roce-24k\ngpu: gpu.yaml\n")
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({"base": {**base_spec, "cluster": "hw/cl.yaml"},
                                                         "grid": {"job.tp": [2, 4]}}))
    before, _ = parse_sweep(tmp_path / "sweep.yaml").points()
    (tmp_path / "hw" / "gpu.yaml").write_text("base: h100-sxm\nname: my-gpu\nhbm_bytes: 96.0e+9\n")
    after, _ = parse_sweep(tmp_path / "sweep.yaml").points()
    assert not {p.key for p in before} & {p.key for p in after}


@pytest.mark.parametrize("change, field", [
    ({"grid": {"job.tpp": [1]}}, "grid"),
    ({"grid": {"jobs.tp": [1]}}, "grid"),
    ({"grid": {"cluster.hostz": [1]}}, "grid"),
    ({"grid": {}}, "grid"),
    ({"grid": {"job.tp": 4}}, "grid.job.tp"),
    ({"grid": {"job.tp": []}}, "grid.job.tp"),
    ({"grid": {"job.tp": [1]}, "zip": [{"job.tp": [2]}]}, "grid"),
    ({"zip": [{"job.pp": [1, 2], "job.dp": [4]}]}, "zip[0]"),
    ({"filter": ["job.tq > 1"]}, "filter"),
    ({"filter": ["__import__('os').system('true')"]}, "filter"),
    ({"filter": ["[x for x in job.tp]"]}, "filter"),
    ({"filter": ["job.tp >"]}, "filter"),
    ({"grd": 1}, "grd"),
    ({"grid": {"software.nam": ["x"]}}, "grid"),  # was a KeyError traceback
])
def test_bad_sweeps_are_one_line_spec_errors(small_sweep, change, field):
    with pytest.raises(SpecError) as err:
        parse_sweep({**small_sweep, **change})
    assert err.value.field == field and "\n" not in str(err.value)


def test_missing_base_and_bad_base(small_sweep):
    with pytest.raises(SpecError, match="base"):
        parse_sweep({"grid": small_sweep["grid"]})
    with pytest.raises(SpecError, match="no such spec file"):
        parse_sweep({"base": "missing.yaml", "grid": small_sweep["grid"]})


def test_a_huge_power_in_a_filter_is_an_error_not_a_hang(small_sweep):
    small_sweep["filter"] = ["job.tp < 10 ** 10 ** 10"]
    with pytest.raises(SpecError, match="exponent 10000000000 is too large"):
        parse_sweep(small_sweep).points()
    small_sweep["filter"] = ["job.tp ** 2 <= 16"]
    points, filtered = parse_sweep(small_sweep).points()
    assert filtered == 4 and len(points) == 8


@pytest.mark.parametrize("expr", ["((10 ** 1000) ** 1000) ** 1000 > job.tp",  # hung: 10^(10^9)
                                  "len('x' * 10 ** 15) > job.tp", "'x' * 10 ** 15 == job.tp"])
def test_a_filter_result_past_the_bound_is_an_error_not_a_hang(small_sweep, expr):
    small_sweep["filter"] = [expr]
    with pytest.raises(SpecError, match="filter"):
        parse_sweep(small_sweep).points()


def test_a_grid_of_too_many_points_is_refused_up_front(small_sweep):
    """10 keys of 10 values (10^10 points) hung building the points before the first simulation."""
    small_sweep["grid"] = {f"job.{k}": list(range(1, 11)) for k in ("tp", "pp", "cp", "ep", "dp", "micro_batch")}
    with pytest.raises(SpecError, match="at most 100,000 points before filtering"):
        parse_sweep(small_sweep)


@pytest.mark.parametrize("key, allowed", [
    ("storage.serverz", "storage field unknown; did you mean servers"),
    ("storage.checkpoint.mod", "storage.checkpoint field unknown; did you mean mode"),
    ("reliability.tokenz", "reliability field unknown; did you mean tokens"),
    ("reliability.rates_per_hour.faulty_gpus", "reliability.rates_per_hour field unknown; did you mean faulty_gpu"),
])
def test_storage_and_reliability_typos_fail_up_front(small_sweep, key, allowed):
    """A misspelt storage / reliability key is one error when the sweep is read, as a job key is,
    not a sweep of invalid points."""
    small_sweep["base"] = {**small_sweep["base"], "storage": {"preset": "tectonic-llama3"},
                           "reliability": {"tokens": 2e11}}
    with pytest.raises(SpecError) as err:
        parse_sweep({**small_sweep, "grid": {key: [60, 7500]}})
    assert err.value.field == "grid" and err.value.value == key and allowed in str(err.value)


def test_correct_storage_and_reliability_keys_pass(small_sweep):
    keys = ("storage.servers", "storage.checkpoint.mode", "storage.preset", "reliability.tokens",
            "reliability.rates_per_hour.faulty_gpu", "reliability.infant_mortality.weibull_shape")
    sweep = parse_sweep({**small_sweep, "zip": [{k: [1] for k in keys}]})
    assert set(keys) <= set(sweep.keys)
