"""``teton import CONFIG``: a Megatron-LM argument list, a NeMo recipe, a torchtitan TOML or a
MaxText YAML as a teton spec, with a table of what mapped, what was defaulted and what has no
meaning in teton (docs/import.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from teton.cli._common import JsonFlag, SetOverrides, print_json
from teton.errors import SpecError, not_a_file


def _gpus(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        n = int(str(text).strip())
    except ValueError:
        n = 0
    if n <= 0:
        raise SpecError("--gpus", text, "one positive GPU count, like 128")
    return n


def _spec_text(spec: dict[str, Any], report, out: Path | None) -> str:
    """The spec as YAML, headed by what the import left out (so the file says it too)."""
    import yaml

    if out is not None and isinstance(spec.get("cluster"), str) and os.path.isabs(spec["cluster"]):
        spec = {**spec, "cluster": os.path.relpath(spec["cluster"], os.path.dirname(os.path.abspath(out)))}
    head = [f"# teton spec imported from {report.source} ({report.framework}) by teton import."]
    head += [f"# no meaning in teton: {r.key} = {_short(r.value)} ({r.why})" for r in report.no_meaning]
    return "\n".join(head) + "\n" + yaml.safe_dump(spec, sort_keys=False, allow_unicode=True)


def _short(value: Any, n: int = 60) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _print(report, spec_text: str, written: Path | None) -> None:
    from rich.markup import escape
    from rich.table import Table

    from teton.cli._common import console as output_console

    def table(title: str, cols: tuple[str, ...], rows, width: int) -> Table:
        t = Table(title=title)
        for col in cols:
            t.add_column(col)
        for row in rows:
            t.add_row(*(escape(_short(x, width)) for x in row))
        return t

    tables = [
        table(f"mapped ({report.framework}: {report.source})", ("their key", "value", "teton field", "teton value",
              "note"), [(r.key, r.value, r.field, r.teton, r.note) for r in report.mapped], 60),
        table("defaulted (teton fields the config did not give)", ("teton field", "value used", "from"),
              [(r.field, r.value, r.why) for r in report.defaulted], 90),
        table("no meaning in teton", ("their key", "value", "why"),
              [(r.key, r.value, r.why) for r in report.no_meaning], 90)]
    console = output_console(*tables)
    for t in tables:
        console.print(t)
    if written is None:
        console.print("spec (--spec-out FILE writes it):")
        console.print(escape(spec_text), highlight=False)
    else:
        console.print(f"wrote {escape(str(written))}: teton run {escape(str(written))}")


def register(app: typer.Typer) -> None:
    @app.command("import")
    def import_(
        config: Annotated[Path, typer.Argument(metavar="CONFIG", help="a Megatron-LM argument list or launch "
                                               "script, a NeMo recipe (2.0 dump or 1.0 YAML), a torchtitan TOML "
                                               "or a MaxText YAML")],
        framework: Annotated[str, typer.Option("--framework", help="auto | megatron | nemo | torchtitan | "
                                               "maxtext")] = "auto",
        cluster: Annotated[str | None, typer.Option("--cluster", help="cluster preset or cluster file (default: "
                                                    "meta-roce-24k)")] = None,
        gpus: Annotated[str | None, typer.Option("--gpus", help="the GPU count, where the config leaves it to "
                                                 "the launcher")] = None,
        set_: SetOverrides = None,
        out: Annotated[Path | None, typer.Option("--spec-out", help="write the spec (YAML) here")] = None,
        json_: JsonFlag = False,
    ) -> None:
        """A framework's job config as a teton spec, with what mapped, what was defaulted and what has no meaning."""
        from teton.atomic import write_text
        from teton.report.html import check_writable_file
        from teton.spec.frameworks import import_config

        if out is not None:
            check_writable_file(out, "--spec-out")
        if (why := not_a_file(config)) is not None:
            raise SpecError("CONFIG", str(config), why)
        spec, report = import_config(config, framework, cluster=cluster, gpus=_gpus(gpus), overrides=set_)
        text = _spec_text(spec, report, out)
        if out is not None:
            try:
                write_text(out, text)
            except OSError as err:
                raise SpecError("--spec-out", str(out), f"cannot be written ({err.strerror})") from None
        if json_:
            print_json({**report.as_dict(), "spec": spec, "spec_out": None if out is None else str(out)})
            return
        _print(report, text, out)
