"""The ``teton`` command's typer app: each verb lives in its own module of ``teton.cli`` and
exposes ``register(app)``; modules are discovered here, so adding a verb never edits this file.
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
    package = importlib.import_module("teton.cli")
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"teton.cli.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


_register_verbs()


def _show_no_type_for_switches() -> None:
    """typer >= 0.20 prints a Python type after every parameter, ``<bool>`` even after ``--help``
    and ``<path>`` or ``<str>`` after ``SPEC``. A switch takes no value and an argument's name
    (``SPEC``) says what it is, so both show none; the options' labels come from
    :mod:`teton.cli.conventions`."""
    from typer.core import TyperArgument, TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "_teton", False):
        return

    def display_type_rich(self, ctx):
        return None if self.is_flag else shown(self, ctx)

    display_type_rich._teton = True
    TyperOption.display_type_rich = display_type_rich
    TyperArgument.display_type_rich = lambda self, ctx: None


def command():
    """The click command of ``teton``, with the conventional type label on every flag."""
    from teton.cli.conventions import apply as apply_conventions

    _show_no_type_for_switches()
    cmd = typer.main.get_command(app)
    apply_conventions(cmd)
    return cmd


def _invoked(cmd):
    """The verb's click command the command line runs (None before one is named)."""
    verb = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    return cmd.commands.get(verb) if verb else None


def main() -> None:
    """Console entry point: one-line errors with exit code 2 for bad input; Ctrl-C exits 130."""
    from teton.cli._interrupt import exit_interrupted, ignore_further, install, is_interrupt

    install()
    cmd = command()
    try:
        code = cmd.main(prog_name="teton", standalone_mode=False)
        ignore_further()  # the work is over: a Ctrl-C from now on (exit, shutdown) changes nothing
        if code == 130:  # typer turns a KeyboardInterrupt into this code
            exit_interrupted()
        if isinstance(code, int) and code:
            sys.exit(code)
    except SpecError as err:
        from teton.cli._common import as_flags, verb_flags

        print(f"error: {as_flags(err, verb_flags(_invoked(cmd)))}", file=sys.stderr)
        sys.exit(2)
    except typer.Exit as err:
        sys.exit(err.exit_code)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        exit_interrupted()
    except Exception as err:  # click usage errors and the like
        if is_interrupt(err):  # e.g. numba's SystemError around a KeyboardInterrupt
            exit_interrupted()
        from teton.cli._common import click_error_exit

        click_error_exit(err, {c.name or c.callback.__name__ for c in app.registered_commands})
    finally:  # done, failed or interrupted: a late Ctrl-C must not turn the exit into a traceback
        ignore_further()
