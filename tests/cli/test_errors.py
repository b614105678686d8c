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


# --- library errors name parameters; the CLI says them as its flags -------------------------

def test_as_flags_translates_a_parameter_and_an_override_for_a_verb_that_has_them():
    from teton.cli._common import as_flags
    from teton.errors import SpecError

    flags = {"--set", "--workers", "--budget-usd", "--step-time", "--measure"}
    assert str(as_flags(SpecError("workers", 0, "must be a positive integer"), flags)) == \
        "--workers = 0: must be a positive integer"
    assert str(as_flags(SpecError("budget_usd", 1.0, "below every plan"), flags)).startswith("--budget-usd = 1.0")
    assert str(as_flags(SpecError("step_time_s", 0.0, "too short"), flags)).startswith("--step-time = 0.0")
    assert str(as_flags(SpecError("directory", "/x", "not there"), flags)).startswith("--measure = '/x'")
    blamed = SpecError("job.tp", 3, "must divide heads", where="override job.tp=3 override job.cp=2")
    assert str(as_flags(blamed, flags)) == "--set job.tp=3 --set job.cp=2: job.tp = 3: must divide heads"
    # not a flag of this verb, or a spec field: the error stays as the library wrote it
    assert str(as_flags(SpecError("executor", "x", "unknown"), flags)) == "executor = 'x': unknown"
    assert str(as_flags(SpecError("job.workers", 0, "bad"), flags)) == "job.workers = 0: bad"


@pytest.mark.parametrize("args, line", [
    (("report", "EXAMPLE", "--sections", "nope"), "error: --sections = 'nope': unknown"),
    (("run", "EXAMPLE", "--set", "bogus.key=1"), "error: --set bogus.key=1: --set = 'bogus.key': the first key must be one of"),
    (("placement", "EXAMPLE", "--occupancy", "2"), "error: --occupancy = 2.0: must be in [0, 1)"),
    (("goodput", "EXAMPLE", "--step-time", "1e-9"), "error: --step-time = 1e-09: must be at least"),
])
def test_library_errors_reach_the_user_as_the_verbs_flags(cli, example_spec, args, line):
    code, _, err = cli(*(example_spec if a == "EXAMPLE" else a for a in args))
    assert code == 2 and err.startswith(line) and len(err.strip().splitlines()) == 1, err
