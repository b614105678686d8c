"""The plan page opens in a real browser (headless Chromium driven by Playwright) with no console
errors and shows the Pareto plot. Marked ``browser``: it runs where Playwright and a system
Chromium (/usr/bin/chromium, Debian's ``chromium`` package) are installed, and skips elsewhere."""

import pytest
import yaml
from browser_page import CHROMIUM, chromium_page

pytestmark = pytest.mark.browser


@pytest.mark.skipif(CHROMIUM is None, reason="no system Chromium (apt install chromium)")
def test_plan_page_renders_the_pareto_plot_without_console_errors(cli, tmp_path, small_dict, plan_args):
    sync_api = pytest.importorskip("playwright.sync_api")
    spec = tmp_path / "small.yaml"
    spec.write_text(yaml.safe_dump(small_dict))
    page_path = tmp_path / "plan.html"
    code, _, err = cli("plan", spec, *plan_args, "--out", page_path)
    assert code == 0, err
    with chromium_page(sync_api) as (page, errors):
        page.goto(page_path.as_uri())
        page.wait_for_selector("#fig-front-pareto .main-svg", timeout=20_000)
        points = page.locator("#fig-front-pareto .scatterlayer .point").count()
        title = page.locator("#fig-front-pareto .gtitle").text_content()
    assert errors == []
    assert points >= 6 and "time to train vs cost" in title
