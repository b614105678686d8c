"""Every verb's flags follow the one vocabulary of ``teton.cli.conventions`` (docs/cli.md): a flag
spelled the same has the same type and default everywhere, and --help shows the table's label."""

from pathlib import Path

import pytest

from teton.cli import command
from teton.cli.conventions import ARGUMENTS, FLAGS, SWITCH, TYPES, markdown_table

ROOT = Path(__file__).resolve().parents[2]
CMD = command()
VERBS = sorted(CMD.commands)


def _options(verb):
    return [p for p in CMD.commands[verb].params if p.param_type_name == "option"]


def _long(param) -> str:
    return next(o for o in param.opts if o.startswith("--"))


def _type_name(param) -> str:
    ann = param.type_descriptor.annotation
    return "list[str]" if str(ann).startswith("list") else getattr(ann, "__name__", str(ann))


@pytest.mark.parametrize("verb", VERBS)
def test_every_flag_is_in_the_table_with_its_type_and_default(verb):
    for p in _options(verb):
        flag = FLAGS.get(_long(p))
        assert flag is not None, f"teton {verb} {_long(p)} is not in teton.cli.conventions.FLAGS"
        assert _type_name(p) in TYPES[flag.type], f"teton {verb} {_long(p)}: {_type_name(p)} is not a {flag.type}"
        want = flag.default_for(verb)
        got = str(p.default) if isinstance(p.default, Path) else p.default
        assert got == want, f"teton {verb} {_long(p)} defaults to {got!r}, the table says {want!r}"
        short = [o for o in p.opts if not o.startswith("--")]
        assert short == ([flag.short] if flag.short else []), f"teton {verb} {_long(p)}: short form {short}"


@pytest.mark.parametrize("verb", VERBS)
def test_arguments_use_the_conventional_names(verb):
    for p in CMD.commands[verb].params:
        if p.param_type_name == "argument":
            assert p.name in ARGUMENTS and p.metavar == ARGUMENTS[p.name], (verb, p.name, p.metavar)


def test_no_stale_rows():
    used = {_long(p) for v in VERBS for p in _options(v)} | {"--help"}
    assert set(FLAGS) <= used, f"rows no verb has: {sorted(set(FLAGS) - used)}"


@pytest.mark.parametrize("verb", VERBS)
def test_help_shows_the_table_labels_and_no_python_types(cli, verb):
    code, out, _ = cli(verb, "--help")
    assert code == 0
    assert "<bool>" not in out and "<path>" not in out and "<str>" not in out and "list[str]" not in out
    for p in _options(verb):
        label = FLAGS[_long(p)].type
        line = next(ln for ln in out.splitlines() if ln.lstrip("│ *").startswith(f"{_long(p)} "))
        assert (label in line) if label != SWITCH else not any(t in line for t in ("INT", "FILE", "NAME"))


def test_the_docs_table_is_the_conventions_table():
    text = (ROOT / "docs" / "cli.md").read_text()
    assert markdown_table() in text, "docs/cli.md is stale: paste teton.cli.conventions.markdown_table()"
