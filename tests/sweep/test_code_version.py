"""The code fingerprint in every point key: rows that other teton code computed are simulated
again, rows of the same code are reused (resume)."""

from pathlib import Path

from teton.sweep.code_version import code_fingerprint, tree_fingerprint


def test_the_fingerprint_follows_modules_and_data_files_not_compiled_caches(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__pycache__").mkdir()
    (pkg / "model.py").write_text("PEAK = 989\n")
    (pkg / "data" / "table.csv").write_text("gpu,peak\nh100,989\n")
    first = tree_fingerprint(str(pkg))
    (pkg / "__pycache__" / "model.cpython-312.pyc").write_bytes(b"\x00compiled")
    (pkg / ".model.py.swp").write_bytes(b"editor state")
    assert tree_fingerprint(str(pkg)) == first
    seen = {first}
    for path, text in ((pkg / "model.py", "PEAK = 990\n"), (pkg / "data" / "table.csv", "gpu,peak\nh100,990\n"),
                       (pkg / "data" / "new.yaml", "a: 1\n")):
        path.write_text(text)
        now = tree_fingerprint(str(pkg))
        assert now not in seen, path.name
        seen.add(now)
    (pkg / "data" / "new.yaml").rename(pkg / "data" / "renamed.yaml")
    assert tree_fingerprint(str(pkg)) not in seen


def test_the_fingerprint_is_of_the_installed_package():
    import teton

    assert code_fingerprint() == tree_fingerprint(str(Path(teton.__file__).resolve().parent))
