"""The ``teton`` command.

Each verb lives in its own module of this package and exposes ``register(app)``; modules are
discovered here, so adding a verb never edits this file.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

from teton.errors import SpecError

app = typer.Typer(
    name="teton",
    help="A digital twin of GenAI training clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from teton import __version__

        print(f"teton {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """A digital twin of GenAI training clusters."""


def _register_verbs() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


_register_verbs()


def main() -> None:
    """Console entry point: one-line errors with exit code 2 for bad input."""
    try:
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except SpecError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except typer.Exit as err:
        sys.exit(err.exit_code)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as err:  # click usage errors and the like
        from teton.cli._common import click_error_exit

        click_error_exit(err)
