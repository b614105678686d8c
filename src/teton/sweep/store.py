"""The results store: one DuckDB table, one row per point, written only by the driver.

Table ``results``: ``key`` (the point's hash, primary key), ``status`` (``ok`` | ``invalid``: the
spec failed validation, ``error`` holds the one-line reason | ``failed``: the simulator raised,
retried on resume), ``error``, ``point`` (canonical JSON of the varied values), one column per
swept key (named by the dotted key, e.g. ``"job.tp"``), then the result's scalar metrics
(``step_time_s``, ``mfu``, ... , ``breakdown_<category>_s``, ``memory_<term>_bytes``,
``layout_<axis>``). ``mfu`` is against the dense peak of the point's ``precision`` and
``mfu_bf16`` against the bf16 peak whatever the precision (what the tables show as "MFU");
a store written before ``mfu_bf16`` existed gets the column when opened, and a resume simulates
its rows again (:meth:`ResultStore.discard_outdated`). ``code`` is the fingerprint of the teton
code that computed the row (``teton.sweep.code_version``): a run under other code deletes the
rows it is about to need and simulates them again (:meth:`ResultStore.discard_other_code`), since
teton's version string outlives many changes to its models; a store written before the column
existed gets it when opened, empty, so its rows are simulated again too. Columns are added as new keys or metrics appear, so one file can hold
several sweeps; each batch is one transaction, so a killed sweep loses at most the batches
still in flight. Parquet export goes through DuckDB's own ``COPY ... (FORMAT parquet)``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from teton.atomic import atomic_path
from teton.errors import SpecError

TABLE = "results"
FIXED_COLUMNS = (("key", "VARCHAR PRIMARY KEY"), ("status", "VARCHAR"), ("error", "VARCHAR"), ("point", "VARCHAR"))
METRIC_COLUMNS = (("step_time_s", "DOUBLE"), ("mfu", "DOUBLE"), ("tflops_per_gpu", "DOUBLE"),
                  ("tokens_per_s", "DOUBLE"), ("memory_per_gpu_bytes", "DOUBLE"), ("fits_in_memory", "BOOLEAN"),
                  ("mfu_bf16", "DOUBLE"), ("precision", "VARCHAR"))
# an ok row without it was stored by a teton before it existed: simulated again on resume
CURRENT_COLUMN = "mfu_bf16"
CODE_COLUMN = "code"  # the fingerprint of the code that computed a row (ResultStore.discard_other_code)


_NATIVE = {"VARCHAR": {str, type(None)}, "DOUBLE": {float, type(None)}, "BIGINT": {int, type(None)},
           "BOOLEAN": {bool, type(None)}}


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def sql_type(values: Iterable[Any]) -> str:
    """The DuckDB type that holds every value: BOOLEAN, BIGINT, DOUBLE, else VARCHAR."""
    values = list(values)
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return "VARCHAR"
    if kinds == {bool}:
        return "BOOLEAN"
    if kinds & {int} and any(isinstance(v, int) and not INT64_MIN <= v <= INT64_MAX for v in values):
        return "VARCHAR"  # an integer past 64 bits (a point that is invalid anyway) is kept as its digits
    if kinds == {int}:
        return "BIGINT"
    if kinds <= {int, float}:
        return "DOUBLE"
    return "VARCHAR"


def to_sql_value(value: Any, typ: str) -> Any:
    """``value`` as the Python type of a column of type ``typ`` (mappings, lists -> canonical JSON text)."""
    if value is None:
        return None
    typ = typ.split()[0]
    if typ == "VARCHAR":
        if isinstance(value, str):
            return value
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    if typ == "DOUBLE" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if typ == "BIGINT" and isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX:
        return int(value)
    if typ == "BOOLEAN" and isinstance(value, bool):
        return value
    raise ValueError(f"{value!r} does not fit a {typ} column")


@contextmanager
def _sigint_deferred():
    """Hold Ctrl-C until the block ends, so a batch is committed whole or not at all (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _corrupt(message: str) -> bool:
    """Whether a DuckDB error says its file is damaged (a checksum or block it cannot read)."""
    low = message.lower()
    return "corrupt" in low or "checksum" in low


def _corrupt_error(path, message: str) -> SpecError:
    return SpecError("db", str(path), f"a corrupt DuckDB file ({message}); move it aside or use another store file")


FOREIGN_SUFFIXES = (".parquet", ".csv", ".json", ".jsonl", ".tsv")
DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of a DuckDB database file's header


def _foreign_file(path: Path) -> bool:
    """Whether ``path`` is a non-empty file that is not a DuckDB database (its header lacks the
    magic bytes)."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    return len(head) > 0 and head[8:12] != DUCKDB_MAGIC


class ResultStore:
    """A DuckDB results file. Open it, ``write`` batches, read rows back; ``close`` when done."""

    def __init__(self, path: str | Path):
        import duckdb

        self.path = Path(path)
        if os.path.isdir(self.path):  # os.path: False, not OSError, for a name too long
            raise SpecError("db", str(path), "is a directory; give a .duckdb file path")
        if not os.path.isdir(self.path.parent):
            raise SpecError("db", str(path), f"directory {self.path.parent} does not exist")
        if self.path.suffix.lower() in FOREIGN_SUFFIXES or _foreign_file(self.path):
            # DuckDB opens a Parquet, CSV or JSON file as a read-only view: nothing would be stored
            raise SpecError("db", str(path), "not a DuckDB results file (a .parquet, .csv or .json export?); give a "
                            ".duckdb path (--parquet writes the Parquet export)")
        try:
            self.con = duckdb.connect(str(self.path))
            self._execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} ("
                + ", ".join(f"{_quote(n)} {t}" for n, t in FIXED_COLUMNS + METRIC_COLUMNS)
                + f", {_quote(CODE_COLUMN)} VARCHAR)")
        except duckdb.Error as err:
            msg = str(err).splitlines()[0]
            if _corrupt(msg):
                raise _corrupt_error(path, msg) from None
            if re.search(r"\block\b", msg.lower()):  # "Could not set lock", not a damaged "block"
                why = "in use by another process (one DuckDB writer at a time)"
            elif "not a valid duckdb" in msg.lower() or "database file" in msg.lower():
                why = f"not a DuckDB results file ({msg})"
            else:
                why = f"cannot open or write it ({msg})"
            raise SpecError("db", str(path), why) from None
        self._columns = self._read_columns()
        missing = [n for n, _ in FIXED_COLUMNS if n not in self._columns]
        if missing:  # a DuckDB file of someone else's with a table of the same name
            self.con.close()
            raise SpecError("db", str(path), f"its {TABLE!r} table is not a teton sweep's (it lacks "
                            f"{', '.join(missing)}); use another store file")
        self._ensure({n: t for n, t in (*METRIC_COLUMNS, (CODE_COLUMN, "VARCHAR"))
                      if n not in self._columns})  # a store of an older teton
        self._scope: tuple[str, ...] | None = None

    # -------------------------------------------------------------- schema

    def _execute(self, sql: str, params: Any = None):
        """``con.execute``; DuckDB turns Ctrl-C during a query into an error: make it a KeyboardInterrupt again."""
        import duckdb

        try:
            return self.con.execute(sql) if params is None else self.con.execute(sql, params)
        except (duckdb.InterruptException, RuntimeError) as err:
            if isinstance(err, duckdb.InterruptException) or "interrupted" in str(err).lower():
                raise KeyboardInterrupt from None
            raise
        except duckdb.Error as err:
            if _corrupt(str(err)):
                raise _corrupt_error(self.path, str(err).splitlines()[0]) from None
            raise

    def _read_columns(self) -> dict[str, str]:
        rows = self._execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
            [TABLE]).fetchall()
        return {name: typ for name, typ in rows}

    @property
    def columns(self) -> dict[str, str]:
        return dict(self._columns)

    def _ensure(self, wanted: dict[str, str]) -> None:
        for name, typ in wanted.items():
            if name not in self._columns:
                self._execute(f"ALTER TABLE {TABLE} ADD COLUMN {_quote(name)} {typ}")
                self._columns[name] = typ

    # -------------------------------------------------------------- writes

    def done_keys(self) -> set[str]:
        """Keys (within the scope) stored with a final status, ``ok`` or ``invalid``: resume skips these."""
        where = self._where().replace("WHERE", "AND")
        return {k for (k,) in self._execute(f"SELECT key FROM {TABLE} WHERE status <> 'failed' {where}").fetchall()}

    def discard_failed(self) -> int:
        """Delete the scoped rows whose simulation raised (status ``failed``) so they are evaluated again."""
        where = self._where().replace("WHERE", "AND")
        n = self._execute(f"SELECT count(*) FROM {TABLE} WHERE status = 'failed' {where}").fetchone()[0]
        if n:
            self._execute(f"DELETE FROM {TABLE} WHERE status = 'failed' {where}")
        return int(n)

    def discard_outdated(self) -> int:
        """Delete the scoped ``ok`` rows an older teton stored without ``mfu_bf16`` (NULL there), so a
        resume simulates them again rather than show a column it cannot fill."""
        where = self._where().replace("WHERE", "AND")
        sql = f"FROM {TABLE} WHERE status = 'ok' AND {_quote(CURRENT_COLUMN)} IS NULL {where}"
        n = self._execute(f"SELECT count(*) {sql}").fetchone()[0]
        if n:
            self._execute(f"DELETE {sql}")
        return int(n)

    def discard_other_code(self, code: str) -> int:
        """Delete the scoped rows that code of another fingerprint computed (``code`` is this
        code's; a row without one predates the column), so a resume simulates them again rather
        than read back what older code computed."""
        where = self._where().replace("WHERE", "AND")
        sql = f"FROM {TABLE} WHERE {_quote(CODE_COLUMN)} IS DISTINCT FROM ? {where}"
        n = self._execute(f"SELECT count(*) {sql}", [code]).fetchone()[0]
        if n:
            self._execute(f"DELETE {sql}", [code])
        return int(n)

    @staticmethod
    def _arrays(rows: Sequence[dict[str, Any]], cols: list[str], columns: dict[str, str]) -> dict[str, Any]:
        """One numpy object array per column, every value of its column's Python type."""
        import numpy as np

        arrays = {}
        for i, n in enumerate(cols):
            values = [r.get(n) for r in rows]
            typ = columns[n].split()[0]
            if not {type(v) for v in values} <= _NATIVE.get(typ, set()):  # the common case needs no conversion
                values = [to_sql_value(v, typ) for v in values]
            arr = np.empty(len(rows), dtype=object)
            arr[:] = values
            arrays[f"c{i}"] = arr
        return arrays

    def write(self, rows: Sequence[dict[str, Any]], types: dict[str, str] | None = None) -> None:
        """Insert ``rows`` (new keys) in one transaction. ``types`` fixes column types where known.

        The batch goes to DuckDB as a dict of numpy object arrays (a zero-copy scan; binding
        Python lists as parameters was 3-5x slower), each value converted to its column's type.
        """
        if not rows:
            return

        names: dict[str, None] = {}
        for row in rows:
            names.update(dict.fromkeys(row))
        wanted = {}
        for name in names:
            if name not in self._columns:
                wanted[name] = (types or {}).get(name) or sql_type(r.get(name) for r in rows)
        columns = {**self._columns, **wanted}
        cols = list(names)
        try:
            arrays = self._arrays(rows, cols, columns)
        except ValueError as err:
            raise SpecError("db", str(self.path), f"cannot store this sweep's rows ({err}); use another store file") from None
        select = ", ".join(f"CAST(c{i} AS {columns[n].split()[0]})" for i, n in enumerate(cols))
        sql = f"INSERT INTO {TABLE} ({', '.join(map(_quote, cols))}) SELECT {select} FROM _batch"
        with _sigint_deferred():
            self._commit(sql, arrays, wanted)

    def _commit(self, sql: str, arrays: dict[str, Any], wanted: dict[str, str]) -> None:
        import duckdb

        try:
            self._execute("BEGIN TRANSACTION")
            self._ensure(wanted)
            self.con.register("_batch", arrays)
            self._execute(sql)
            self._execute("COMMIT")
        except (duckdb.Error, ValueError, TypeError) as err:
            self._execute("ROLLBACK")
            if "KeyboardInterrupt" in str(err):  # Ctrl-C inside DuckDB's scan of the batch
                raise KeyboardInterrupt from None
            self._columns = self._read_columns()
            raise SpecError("db", str(self.path),
                            f"cannot store this sweep's rows ({str(err).splitlines()[0]}); use another store file") from None
        finally:
            self.con.unregister("_batch")

    def fill_points(self, values: dict[str, dict[str, Any]], types: dict[str, str]) -> None:
        """Give stored rows this sweep's swept-key values where their columns are empty.

        A point's key hashes its merged spec, not the keys that produced it, so a row stored by
        another sweep (or an earlier version of this sweep file) can be this sweep's point while
        its column for a key only this sweep varies is NULL or absent. ``values``: key -> the
        point's ``{dotted key: value}``; ``types``: the column type of every swept key. The
        columns are created if missing, so reading this sweep's rows never names an absent column.
        Nothing is written when ``values`` is empty (no stored row to fill).
        """
        import duckdb

        cols = list(types)
        if not values:
            return
        with _sigint_deferred():
            try:
                self._execute("BEGIN TRANSACTION")
                self._ensure({c: types[c] for c in cols if c not in self._columns})
                if cols:
                    rows = [{"key": k, **v} for k, v in values.items()]
                    arrays = self._arrays(rows, ["key", *cols], {"key": "VARCHAR", **self._columns})
                    self.con.register("_fill", arrays)
                    sets = ", ".join(f"{_quote(c)} = COALESCE({TABLE}.{_quote(c)}, "
                                     f"CAST(_fill.c{i + 1} AS {self._columns[c].split()[0]}))"
                                     for i, c in enumerate(cols))
                    self._execute(f"UPDATE {TABLE} SET {sets} FROM _fill WHERE {TABLE}.key = _fill.c0")
                self._execute("COMMIT")
            except (duckdb.Error, ValueError, TypeError) as err:  # e.g. a value that does not fit another sweep's column
                self._execute("ROLLBACK")
                self._columns = self._read_columns()
                raise SpecError("db", str(self.path), f"cannot store this sweep's rows ({str(err).splitlines()[0]}); "
                                "use another store file") from None
            finally:
                try:
                    self.con.unregister("_fill")
                except Exception:  # noqa: BLE001 - never registered
                    pass

    # -------------------------------------------------------------- reads

    def scope(self, keys: Sequence[str]) -> None:
        """Restrict ``count`` / ``rows`` / ``export_parquet`` to these keys (one sweep's points)."""
        import numpy as np

        arr = np.empty(len(keys), dtype=object)
        arr[:] = list(keys)
        self.con.register("_scope_keys", {"key": arr})
        try:
            self._execute("CREATE OR REPLACE TEMP TABLE _scope AS SELECT CAST(key AS VARCHAR) AS key FROM _scope_keys")
        finally:
            self.con.unregister("_scope_keys")
        self._scope = tuple(keys)

    def _where(self) -> str:
        return "WHERE key IN (SELECT key FROM _scope)" if self._scope is not None else ""

    def counts(self) -> dict[str, int]:
        """Rows by status (within the scope), and ``fitting``: ok rows that fit in memory."""
        rows = self._execute(f"SELECT status, count(*), count(*) FILTER (WHERE fits_in_memory) FROM {TABLE} "
                                f"{self._where()} GROUP BY status").fetchall()
        out = {"ok": 0, "invalid": 0, "failed": 0, "fitting": 0}
        for status, n, fit in rows:
            out[status] = int(n)
            if status == "ok":
                out["fitting"] = int(fit)
        return out

    def _select(self, columns: Sequence[str] | None) -> str:
        return "*" if columns is None else ", ".join(_quote(c) for c in columns)

    def rows(self, order: str = "key", limit: int | None = None, columns: Sequence[str] | None = None,
             only_ok: bool = False) -> list[dict[str, Any]]:
        """Rows as dicts. ``order``: ``key`` (deterministic) or ``best`` (fitting first, then the
        shortest time-to-train when the points modelled a whole run, then the fastest step)."""
        clauses = [c for c in (self._where(), "status = 'ok'" if only_ok else "") if c]
        where = ""
        if clauses:
            where = "WHERE " + " AND ".join(c.removeprefix("WHERE ") for c in clauses)
        run = "time_to_train_days ASC NULLS LAST, " if "time_to_train_days" in self._columns else ""
        by = "key" if order == "key" else f"fits_in_memory DESC NULLS LAST, {run}step_time_s ASC NULLS LAST, key"
        sql = f"SELECT {self._select(columns)} FROM {TABLE} {where} ORDER BY {by}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        cur = self._execute(sql)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def export_parquet(self, path: str | Path, columns: Sequence[str] | None = None) -> None:
        """Write the scoped rows, ordered by key, to a Parquet file (DuckDB's own writer)."""
        import duckdb

        target = Path(path)
        if not os.path.isdir(target.parent):
            raise SpecError("parquet", str(path), f"directory {target.parent} does not exist")
        try:
            with atomic_path(target) as tmp:  # a whole Parquet file or none
                literal = "'" + str(tmp).replace("'", "''") + "'"
                self._execute(f"COPY (SELECT {self._select(columns)} FROM {TABLE} {self._where()} ORDER BY key) "
                              f"TO {literal} (FORMAT parquet)")
        except duckdb.Error as err:
            raise SpecError("parquet", str(path), f"cannot write it ({str(err).splitlines()[0]})") from None
        except OSError as err:  # the temporary file next to it
            raise SpecError("parquet", str(path), f"cannot write it ({err.strerror})") from None

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
