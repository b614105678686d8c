"""The report's goodput plot opens in a real browser (headless Chromium driven by Playwright) with
no console errors and shows ETTR against the checkpoint interval with the flat region shaded and
the practical interval marked. Marked ``browser``: it runs where Playwright and a system Chromium
are installed, and skips elsewhere."""

import pytest
from browser_page import CHROMIUM, chromium_page

pytestmark = pytest.mark.browser


@pytest.mark.skipif(CHROMIUM is None, reason="no system Chromium (apt install chromium)")
def test_report_plots_ettr_against_interval_with_the_flat_region(small_report):
    sync_api = pytest.importorskip("playwright.sync_api")
    page_path, _ = small_report
    with chromium_page(sync_api) as (page, errors):
        page.goto(page_path.as_uri())
        fig = "#fig-goodput-interval-sweep"
        page.wait_for_selector(f"{fig} .main-svg", timeout=20_000)
        points = page.locator(f"{fig} .scatterlayer .point").count()
        title = page.locator(f"{fig} .gtitle").text_content()
        notes = [t.strip() for t in page.locator(f"{fig} .annotation-text").all_text_contents()]
        shaded = page.locator(f"{fig} .shapelayer path").count()
    assert errors == []
    assert points >= 10 and "ETTR vs checkpoint interval: practical" in title
    assert {"practical", "optimum"} <= set(notes)
    assert shaded >= 3  # the flat region, the tolerance line and the interval marks
