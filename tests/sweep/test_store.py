"""The DuckDB results store: typed columns added as needed, scoped reads, batches as transactions."""

import duckdb
import pytest

from teton.errors import SpecError
from teton.sweep.store import ResultStore, sql_type, to_sql_value


def _row(key, **kw):
    return {"key": key, "status": "ok", "error": None, "point": "{}", **kw}


def test_sql_types_and_values():
    assert sql_type([1, 2]) == "BIGINT" and sql_type([1, 2.5]) == "DOUBLE" and sql_type([True, None]) == "BOOLEAN"
    assert sql_type(["a", 1]) == "VARCHAR" and sql_type([None]) == "VARCHAR"
    assert sql_type(x for x in [4, 10**23]) == "VARCHAR"  # past 64 bits: its digits, not a failed write
    with pytest.raises(ValueError):
        to_sql_value(10**23, "BIGINT")
    assert to_sql_value({"b": 1, "a": [2]}, "VARCHAR") == '{"a":[2],"b":1}'
    assert to_sql_value(3, "DOUBLE") == 3.0 and isinstance(to_sql_value(3, "DOUBLE"), float)
    with pytest.raises(ValueError):
        to_sql_value("x", "BIGINT")


def test_write_read_roundtrip_and_new_columns(tmp_path):
    with ResultStore(tmp_path / "r.duckdb") as store:
        store.write([_row("a", **{"job.tp": 4}, step_time_s=1.5, fits_in_memory=True),
                     _row("b", **{"job.tp": 8}, step_time_s=0.1 + 0.2, fits_in_memory=False)])
        store.write([{"key": "c", "status": "invalid", "error": "job.tp = 3: bad", "point": "{}", "job.tp": 3,
                      "cluster": {"base": "meta-roce-24k", "hosts": 16}}])
        cols = store.columns
        assert cols["job.tp"] == "BIGINT" and cols["cluster"] == "VARCHAR" and cols["step_time_s"] == "DOUBLE"
        rows = {r["key"]: r for r in store.rows()}
        assert rows["b"]["step_time_s"] == 0.1 + 0.2  # doubles stored exactly
        assert rows["c"]["cluster"] == '{"base":"meta-roce-24k","hosts":16}' and rows["c"]["step_time_s"] is None
        assert store.done_keys() == {"a", "b", "c"}
        assert [r["key"] for r in store.rows(order="best", only_ok=True)] == ["a", "b"]  # fitting first
        store.scope(["b", "c"])
        assert store.counts() == {"ok": 1, "invalid": 1, "failed": 0, "fitting": 0}
        assert store.done_keys() == {"b", "c"}
    with ResultStore(tmp_path / "r.duckdb") as store:  # reopened: same rows
        assert len(store.rows()) == 3


def test_a_failed_write_rolls_back_and_names_out(tmp_path):
    with ResultStore(tmp_path / "r.duckdb") as store:
        store.write([_row("a", **{"job.tp": 4})])
        with pytest.raises(SpecError, match="^db = "):
            store.write([_row("b", **{"job.tp": "eight"}, new_metric=1.0)])  # BIGINT column, text value
        with pytest.raises(SpecError, match="^db = "):
            store.write([_row("a", **{"job.tp": 4})])  # duplicate key
        assert [r["key"] for r in store.rows()] == ["a"] and "new_metric" not in store.columns


def test_parquet_export_of_the_scope(tmp_path):
    with ResultStore(tmp_path / "r.duckdb") as store:
        store.write([_row(k, step_time_s=float(i)) for i, k in enumerate("dcba")])
        store.scope(["a", "c"])
        store.export_parquet(tmp_path / "o.parquet")
        with pytest.raises(SpecError, match="^parquet = "):
            store.export_parquet(tmp_path / "no" / "o.parquet")
    assert duckdb.sql(f"SELECT key, step_time_s FROM '{tmp_path / 'o.parquet'}'").fetchall() == [("a", 3.0), ("c", 1.0)]


def test_a_second_writer_is_refused(tmp_path):
    import subprocess
    import sys

    with ResultStore(tmp_path / "r.duckdb"):
        code = ("import sys\nfrom teton.sweep.store import ResultStore\nfrom teton.errors import SpecError\n"
                f"try:\n    ResultStore({str(tmp_path / 'r.duckdb')!r})\nexcept SpecError as e:\n"
                "    print(e); sys.exit(2)\n")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "another process" in proc.stdout


def test_a_corrupt_store_is_named_corrupt_not_locked(tmp_path):
    """A damaged file (a checksum DuckDB cannot match in some block) is one error naming it corrupt,
    whether opening or reading finds it: not a traceback, nor 'in use by another process'
    because the message says 'block'."""
    path = tmp_path / "r.duckdb"
    with ResultStore(path) as store:
        store.write([_row(f"k{i}", note="x" * 400, step_time_s=float(i)) for i in range(4000)])
    data = bytearray(path.read_bytes())
    for at in range(16384, len(data) - 4096, 65536):
        data[at:at + 2048] = b"\xab" * 2048
    path.write_bytes(bytes(data))
    with pytest.raises(SpecError, match="^db = .*a corrupt DuckDB file") as err:
        with ResultStore(path) as store:
            store.rows()
    assert "another process" not in str(err.value)


def test_rows_of_other_code_are_discarded_within_the_scope(tmp_path):
    """Rows record the code that computed them: rows of another fingerprint, or of none (a store
    from before the column), are deleted for a resume to simulate again; other sweeps' rows stay."""
    path = tmp_path / "r.duckdb"
    con = duckdb.connect(str(path))  # a store an older teton wrote: no code column
    con.execute("CREATE TABLE results (key VARCHAR PRIMARY KEY, status VARCHAR, error VARCHAR, point VARCHAR)")
    con.execute("INSERT INTO results VALUES ('old', 'ok', NULL, '{}')")
    con.close()
    with ResultStore(path) as store:
        assert store.columns["code"] == "VARCHAR"
        store.write([_row("a", code="v1"), _row("b", code="v2"), _row("c", code="v2")])
        store.scope(["old", "a", "b"])
        assert store.discard_other_code("v2") == 2
        assert store.done_keys() == {"b"}
        store.scope(["c"])
        assert store.done_keys() == {"c"}


def test_a_parquet_csv_or_json_file_is_not_a_store(tmp_path):
    """`--db r.parquet` after `--parquet r.parquet` opened the export as a read-only view: every
    rerun evaluated everything again and stored nothing, exit 0."""
    import pytest

    from teton.errors import SpecError

    export = tmp_path / "r.parquet"
    export.write_bytes(b"PAR1" + b"\0" * 64)
    for path in (export, tmp_path / "new.csv", tmp_path / "r.json"):
        with pytest.raises(SpecError, match="not a DuckDB results file"):
            ResultStore(path)
    other = tmp_path / "notes.duckdb"
    other.write_text("hello, not a database\n")
    with pytest.raises(SpecError, match="not a DuckDB results file"):
        ResultStore(other)
    with ResultStore(tmp_path / "ok.duckdb"):
        pass
    with ResultStore(tmp_path / "ok.duckdb"):  # reopened: its own header
        pass
