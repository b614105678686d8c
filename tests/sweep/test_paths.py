"""File paths in sweeps: read relative to the file that names them, as ``teton run`` reads them,
whatever the working directory; every file a point's spec names is in its key."""

import pytest
import yaml

from teton.engine.step import simulate_step
from teton.spec import load_spec
from teton.sweep.grid import parse_sweep
from teton.sweep.named_files import named_files
from teton.sweep.run import evaluate_batch

SLOW_GPU = "base: h100-sxm\nname: slow-gpu\npeak_tflops: {bf16: 400}\n"
FAST_GPU = "base: h100-sxm\nname: fast-gpu\npeak_tflops: {bf16: 2000}\n"


def _tree(tmp_path, base_spec):
    """``st/``: a base spec whose cluster names ``hardware/gpu.yaml`` and whose storage names
    ``stor.yaml``, both relative to it, and a sweep over it; ``cwd/``: decoys of the same names."""
    st, cwd = tmp_path / "st", tmp_path / "cwd"
    for d in (st / "hardware", cwd / "hardware"):
        d.mkdir(parents=True)
    (st / "hardware" / "gpu.yaml").write_text(SLOW_GPU)
    (st / "stor.yaml").write_text("preset: tectonic-llama3\nservers: 16\n")
    (cwd / "hardware" / "gpu.yaml").write_text(FAST_GPU)
    (cwd / "stor.yaml").write_text("preset: tectonic-llama3\nservers: 1000\n")
    base = {**base_spec, "cluster": {"base": "dgx-h100-superpod", "gpu": "hardware/gpu.yaml"}, "storage": "stor.yaml"}
    (st / "base.yaml").write_text(yaml.safe_dump(base))
    (st / "sw.yaml").write_text("base: base.yaml\ngrid: {job.tp: [2, 4]}\n")
    return st, cwd


def test_files_named_in_the_base_spec_are_read_beside_it_not_in_the_working_directory(tmp_path, base_spec,
                                                                                      monkeypatch):
    st, cwd = _tree(tmp_path, base_spec)
    monkeypatch.chdir(cwd)  # holds hardware/gpu.yaml and stor.yaml of other numbers
    points, _ = parse_sweep(st / "sw.yaml").points()
    rows = evaluate_batch([(p.key, p.spec) for p in points])
    assert [r["status"] for r in rows] == ["ok", "ok"], rows
    monkeypatch.chdir(st)  # what teton run reads for the same spec
    for p, row in zip(points, rows, strict=True):
        want = load_spec(st / "base.yaml", [f"job.tp={p.values['job.tp']}"])
        got = load_spec(p.spec)
        assert got.cluster.gpu.name == "slow-gpu" and got.cluster == want.cluster
        assert got.storage == want.storage and got.storage.system().servers == 16
        assert row["step_time_s"] == simulate_step(want).step_time_s


def test_an_edited_file_named_in_the_base_spec_is_a_new_point(tmp_path, base_spec, monkeypatch):
    st, cwd = _tree(tmp_path, base_spec)
    monkeypatch.chdir(cwd)
    before, _ = parse_sweep(st / "sw.yaml").points()
    assert named_files(before[0].spec) == {str(st / "hardware" / "gpu.yaml"), str(st / "stor.yaml")}
    (cwd / "stor.yaml").write_text("preset: tectonic-llama3\nservers: 7\n")  # not the sweep's: same keys
    assert [p.key for p in parse_sweep(st / "sw.yaml").points()[0]] == [p.key for p in before]
    for name, text in (("stor.yaml", "preset: tectonic-llama3\nservers: 8\n"), ("hardware/gpu.yaml", FAST_GPU)):
        keys = {p.key for p in parse_sweep(st / "sw.yaml").points()[0]}
        (st / name).write_text(text)
        after = {p.key for p in parse_sweep(st / "sw.yaml").points()[0]}
        assert not keys & after, name


@pytest.mark.parametrize("axes", ["zip", "grid"])
def test_files_given_as_swept_values_are_the_sweep_files(tmp_path, base_spec, monkeypatch, axes):
    """A cluster file and a GPU file as values of a zip group (or the grid): relative to the sweep
    file, wherever the sweep runs from."""
    (tmp_path / "sw" / "hw").mkdir(parents=True)
    (tmp_path / "sw" / "hw" / "gpu.yaml").write_text(SLOW_GPU)
    (tmp_path / "sw" / "c1.yaml").write_text("base: dgx-h100-superpod\nhosts: 8\n")
    (tmp_path / "sw" / "c2.yaml").write_text("base: dgx-h100-superpod\nhosts: 16\n")
    keys = {"cluster": ["c1.yaml", "c2.yaml"], "cluster.gpu": ["hw/gpu.yaml", "h100-sxm"]}
    sweep = {"base": base_spec, **({"zip": [keys]} if axes == "zip" else {"grid": keys})}
    (tmp_path / "sw" / "s.yaml").write_text(yaml.safe_dump(sweep))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    points, _ = parse_sweep(tmp_path / "sw" / "s.yaml").points()
    assert len(points) == (2 if axes == "zip" else 4)
    rows = evaluate_batch([(p.key, p.spec) for p in points])
    assert all(r["status"] == "ok" for r in rows), rows
    hosts = {(p.values["cluster"].rsplit("/", 1)[-1], load_spec(p.spec).cluster.hosts) for p in points}
    assert hosts == {("c1.yaml", 8), ("c2.yaml", 16)}
    gpu = {p.values["cluster.gpu"].rsplit("/", 1)[-1]: load_spec(p.spec).cluster.gpu for p in points}
    gpus = {k: getattr(g, "name", g) for k, g in gpu.items()}  # a catalog GPU by its name
    assert gpus == {"gpu.yaml": "slow-gpu", "h100-sxm": "h100-sxm"}


def test_a_file_named_without_an_extension_is_absolute_and_in_the_key(tmp_path, base_spec, monkeypatch):
    """``cluster: ./c1noext`` is a path to the loader (it holds a ``/``): made absolute like the
    others, and its contents hashed, so an edit makes new points rather than reuse stale rows."""
    (tmp_path / "sw").mkdir()
    (tmp_path / "sw" / "c1noext").write_text("base: dgx-h100-superpod\nhosts: 8\n")
    (tmp_path / "sw" / "s.yaml").write_text(yaml.safe_dump({"base": {**base_spec, "cluster": "./c1noext"},
                                                             "grid": {"job.tp": [2, 4]}}))
    monkeypatch.chdir(tmp_path)
    before, _ = parse_sweep(tmp_path / "sw" / "s.yaml").points()
    assert before[0].spec["cluster"] == str(tmp_path / "sw" / "c1noext")
    assert named_files(before[0].spec) == {str(tmp_path / "sw" / "c1noext")}
    assert evaluate_batch([(before[0].key, before[0].spec)])[0]["status"] == "ok"
    (tmp_path / "sw" / "c1noext").write_text("base: dgx-h100-superpod\nhosts: 16\n")
    after, _ = parse_sweep(tmp_path / "sw" / "s.yaml").points()
    assert not {p.key for p in before} & {p.key for p in after}
