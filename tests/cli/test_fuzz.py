"""Fuzz every verb of ``teton`` (issue 13): random specs, ``--set`` overrides and option values.

Each case must exit 0 or 2, print no traceback, end an exit-2 run with one ``error:`` line and,
under ``--json`` with exit 0, print one strict JSON document. The cases come from
``tests/cli/fuzz_cases.py``; here with a fixed seed and a small budget per verb (a failure prints
the command line and the files it read), ``benchmarks/bench_fuzz.py`` runs 10,000 of them.
"""

import sys

import pytest
from fuzz_cases import Case, Outcome, cases, cleanup, describe, problems, run_case, verbs
from hypothesis import HealthCheck, given, settings

EXAMPLES = 15
FEWER = {"plan": 4}  # a valid plan searches layouts and runs the Monte Carlo per GPU count: seconds


def fuzz(verb: str, scratch, examples: int = EXAMPLES, also=None) -> None:
    """Run ``examples`` cases of ``verb`` (a fixed seed), each in a fresh ``scratch`` directory;
    ``also(case, outcome)`` adds problems of its own."""

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(case=cases(verb))
    def check(case: Case) -> None:
        try:
            outcome = run_case(case, scratch)
        finally:
            cleanup(scratch)
        bad = problems(case, outcome) + (also(case, outcome) if also else [])
        assert not bad, describe(case, outcome, bad)

    check()


@pytest.mark.parametrize("verb", verbs())
def test_every_verb_survives_random_input(verb, tmp_path):
    fuzz(verb, tmp_path / "case", FEWER.get(verb, EXAMPLES))


def test_flops_without_torch_survives_random_input(tmp_path, monkeypatch):
    """PyTorch is an optional extra: without it ``teton flops`` is a one-line error, whatever else is wrong."""
    monkeypatch.setitem(sys.modules, "torch", None)  # ``import torch`` raises ImportError

    def exits_2(case: Case, outcome: Outcome) -> list[str]:
        return [] if outcome.code == 2 or "--help" in case.argv else ["exit 0 without torch"]

    fuzz("flops", tmp_path / "case", also=exits_2)


def test_the_fuzz_covers_every_verb():
    """A new verb is fuzzed without editing the case generator: its arguments come from click."""
    from teton.cli import command

    assert set(verbs()) == set(command().commands)


def test_an_invalid_input_accepted_is_a_problem():
    """A case whose input no spec accepts (fuzz_hostile: NaN, 10^50, a duplicate key) must not exit 0;
    and --json given as an option's value asks no JSON."""
    case = Case("run", ["run", "f1.yaml", "--json"], invalid=True)
    assert "invalid input accepted (exit 0)" in problems(case, Outcome(0, "{}", ""))
    assert problems(case, Outcome(2, "", "error: job.tp = nan: must be an integer in 1..10,000,000\n")) == []
    timeline = Case("run", ["run", "f1.yaml", "--timeline", "--json"])
    assert problems(timeline, Outcome(0, "a table", "")) == []
