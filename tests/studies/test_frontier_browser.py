"""The frontier page opens in a real browser (headless Chromium driven by Playwright) with no
console errors and no request beyond the file itself (offline), and draws every chart: the limits'
loads, MFU, exposed DP, checkpoint times, ETTR and start-up. Marked ``browser``: it runs where
Playwright and a system Chromium are installed, and skips elsewhere."""

import pytest
from browser_page import CHROMIUM, chromium_page

pytestmark = pytest.mark.browser
FIGURES = ("verdict-loads", "step-mfu", "dp-exposed", "checkpoint-times", "failures-ettr", "startup-startup")


@pytest.mark.skipif(CHROMIUM is None, reason="no system Chromium (apt install chromium)")
def test_frontier_page_renders_every_chart_offline(frontier_page):
    sync_api = pytest.importorskip("playwright.sync_api")
    with chromium_page(sync_api) as (page, errors):
        requests = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(frontier_page.as_uri())
        for name in FIGURES:
            page.wait_for_selector(f"#fig-{name} .main-svg", timeout=20_000)
        traces = {name: page.locator(f"#fig-{name} .scatterlayer .trace, #fig-{name} .barlayer .trace").count()
                  for name in FIGURES}
        title = page.locator("#fig-failures-ettr .gtitle").text_content()
        lead = page.locator("#verdict .lead").text_content()
    assert errors == []
    assert [u for u in requests if not u.startswith("file:")] == []
    assert traces["verdict-loads"] == 8 and traces["dp-exposed"] == 2 and min(traces.values()) >= 2
    assert "ETTR at the Young/Daly interval" in title
    assert "h100: ETTR limits first" in lead and "gb200:" in lead
