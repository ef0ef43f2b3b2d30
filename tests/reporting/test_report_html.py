"""report.html read in a real browser: a small real project (WordLlama, BM25 and their fusion over the
mini pydocs data, built by `dvc repro`), its page opened offline in headless system Chromium at
1280x800. Nothing is loaded from anywhere and nothing fails; the conclusion and the difference plot
are on the first screen, the verdict table has a row per configuration, every plot is drawn, the
per-query view shows both lists of a query with grades, and the sealed holdout never appears.
Screenshots of the first screen and of the per-query view are saved to the test's folder (their
paths printed) for a person to look at."""

from __future__ import annotations

import re

import pytest

from releval.reporting import plots
from support.audited_project import BASELINE, CONFIGS, make_audited_project
from support.browser import CHROMIUM, CHROMIUM_FLAGS, needs_chromium
from support.pydocs_mini import mini_queries

pytestmark = [pytest.mark.slow, needs_chromium("report.html's check opens it in a browser")]
SCREEN = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return make_audited_project(tmp_path_factory.mktemp("report-html") / "project")


def test_report_html_reads_offline_in_a_browser(project, tmp_path):
    from playwright.sync_api import sync_playwright

    page_file = project / "reports" / "report.html"
    html = page_file.read_text(encoding="utf-8")
    requested, failed, errors = [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport=SCREEN)
            page.on("request", lambda request: requested.append(request.url))
            page.on("requestfailed", lambda request: failed.append(request.url))
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(page_file.as_uri(), wait_until="load")

            # the first screen: the conclusion and, beside it, the paired difference from the baseline
            conclusion = page.locator("#conclusion")
            assert conclusion.inner_text().startswith("Conclusion (ndcg@10,")
            assert "Best:" in conclusion.inner_text() and conclusion.bounding_box()["y"] < SCREEN["height"]
            difference = page.locator("#figure-difference_ci img")
            assert difference.evaluate("image => image.complete && image.naturalWidth > 300")
            assert difference.bounding_box()["y"] < SCREEN["height"] / 2
            assert "difference from " + BASELINE in difference.get_attribute("alt")
            page.screenshot(path=str(tmp_path / "first-screen.png"))

            # the verdict table: the baseline, then one row per configuration with its verdict
            rows = page.locator("#baseline table").first.locator("tbody tr").all_inner_texts()
            assert len(rows) == len(CONFIGS) and rows[0].startswith(f"{BASELINE} (baseline)")
            for config_id in CONFIGS:
                assert any(row.startswith(config_id) for row in rows), config_id
            assert all(re.search(r"improvement|regression|inconclusive|coverage-confounded", r) for r in rows[1:])

            # every plot drawn, with a title in words
            for name in plots.PLOTS:
                image = page.locator(f"#figure-{name} img")
                assert image.evaluate("image => image.complete && image.naturalWidth > 0"), name
                assert name not in image.get_attribute("alt"), name

            # the per-query view: the first comparison open, both lists of each query with grades
            view = page.locator("#per-query")
            opened = view.locator("details[open]").first
            contrasts = opened.locator(".contrast")
            assert contrasts.count() >= 1
            first = contrasts.first
            assert first.locator("thead th").all_inner_texts()[1:] in (
                [BASELINE, cid] for cid in CONFIGS if cid != BASELINE
            )
            assert first.locator("tbody tr").count() >= 1
            assert first.locator("b.g0, b.g1, b.g2, b.g3, b.unjudged").count() >= 2
            page.evaluate("document.querySelector('#per-query').scrollIntoView()")
            page.screenshot(path=str(tmp_path / "per-query.png"))
            closed = view.locator("details:not([open]) > summary").first
            if closed.count():  # a fold opens on a click, without a script
                closed.click()
                assert view.locator("details[open]").count() >= 2

            words = view.inner_text()
        finally:
            browser.close()
    assert not errors, errors
    assert not failed, failed
    assert all(url.startswith(("file:", "data:")) for url in requested), requested
    assert "<script" not in html and not re.search(r"""(src|href)=["']?https?:""", html)
    for query_id in mini_queries("holdout"):  # the sealed holdout is never shown
        assert not re.search(rf"\b{query_id}\b", words), query_id
    print(f"screenshots: {tmp_path / 'first-screen.png'} {tmp_path / 'per-query.png'}")
