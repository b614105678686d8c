"""Errors of the command line itself (no verb, unknown options, an option without its value): one
line, exit 2, no stray progress-bar line."""

import pytest


def test_teton_alone_prints_its_help_and_no_empty_error(cli):
    code, out, err = cli()
    assert "Usage" in out + err and "run" in out + err
    assert "error: teton:" not in err


def test_set_without_a_value_keeps_the_verb_prefix(cli, example_spec):
    code, _, err = cli("run", str(example_spec), "--set")
    assert code == 2 and err.strip() == "error: teton run: Option '--set' requires an argument."


def test_unknown_option_is_one_line(example_spec, cli):
    code, _, err = cli("run", example_spec, "--frobnicate")
    assert code == 2 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [
    ("collective", "--op", "foo"),
    ("placement", "EXAMPLE", "--occupancy", "2"),
    ("validate", "--case", "nope"),
    ("goodput", "EXAMPLE", "--tokens", "abc"),
])
def test_errors_of_verbs_with_progress_bars_are_exactly_one_line(cli, example_spec, args):
    code, out, err = cli(*(example_spec if a == "EXAMPLE" else a for a in args))
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1, repr(err)  # no stray progress-bar line
