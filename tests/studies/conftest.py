import pytest


@pytest.fixture(scope="session")
def frontier():
    """The frontier study at its default scales and systems, with few Monte Carlo runs (seconds)."""
    from teton.studies.frontier import frontier_study

    return frontier_study(runs=4)


@pytest.fixture(scope="session")
def frontier_page(frontier, tmp_path_factory):
    """The study's page, written once: its path."""
    from teton.report.frontier_page import write_frontier_page

    out = tmp_path_factory.mktemp("frontier") / "frontier.html"
    write_frontier_page(frontier, out)
    return out
