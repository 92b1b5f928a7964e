"""The loss funnel on the pages, in a real browser: the run page's panel (a segment lists its
questions, a question shows where it was lost and why), and the compare page's funnels and stage
tests. The fixture runs predate the funnel, so their funnels are derived from their files."""

import pytest

from lab.report.compare import default_folder, load_runs, render_compare
from lab.report.html import render_run
from pages import Page, browser
from report_fixtures import MRR_A, write_pair

pytestmark = pytest.mark.browser

#: base's questions whose second keyword ("item N") was not retrieved (MRR below 1); the others
#: reached the model, whose answer "Item N [1]" leaves out the first keyword ("policy").
LOST_IN_RETRIEVAL = [f"q{i + 1:02d}" for i, m in enumerate(MRR_A) if m != 1]


@pytest.fixture(scope="module")
def chromium():
    with browser() as b:
        yield b


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    root = tmp_path_factory.mktemp("reports")
    a, _ = write_pair(root)
    runs = load_runs(["base", "better"], root)
    return render_run(a), render_compare(runs, default_folder(runs, root))


def test_the_funnel_panel_lists_a_stages_questions_and_each_shows_its_evidence(chromium, pages):
    page = Page(chromium, pages[0])
    segs = page.locator("#funnel-chart rect.seg")
    # all questions: retrieval 9, generation 6; direct_fact and temporal split the same 15
    assert segs.count() == 2 + 2 + 2
    first = page.locator("#funnel-chart rect.seg[data-stage=retrieval]").first
    assert first.get_attribute("data-category") == ""
    assert "before the final list" in page.locator("#funnel-unseen").inner_text()
    table = page.locator("#funnel-table tr[data-stage=retrieval] td")
    assert table.nth(1).inner_text() == f"{len(LOST_IN_RETRIEVAL)} 60%"
    first.click()
    shown = page.eval_on_selector_all("#questions tr.qrow:not([hidden])", "rows => rows.map(r => r.dataset.id)")
    assert shown == LOST_IN_RETRIEVAL
    assert page.locator("#q-count").inner_text() == f"{len(LOST_IN_RETRIEVAL)} of 15 questions"
    page.locator("#questions tr.qrow[data-id=q03]").click()
    detail = page.locator("#questions tr.qrow[data-id=q03] + tr.qdetail .funnel-evidence").inner_text()
    assert "Lost at: retrieval (stage not recorded)" in detail
    assert "keyword item 3: lost at retrieval (stage not recorded)" in detail
    # a question that reached the model: lost at the generation, the answer excerpt as evidence
    page.select_option("#q-filters [name=lost]", "generation")
    assert page.eval_on_selector_all("#questions tr.qrow:not([hidden])", "rows => rows.length") == 15 - 9
    page.locator("#questions tr.qrow[data-id=q02]").click()
    detail = page.locator("#questions tr.qrow[data-id=q02] + tr.qdetail .funnel-evidence").inner_text()
    assert "Lost at: generation" in detail and "Item 2 [1]" in detail and "states 50% of the gold" in detail
    assert page.locator("#questions tr.qrow[data-id=q02] td.lost").inner_text() == "generation"
    assert page.errors == [] and page.dialogs == []


def test_the_compare_page_shows_both_funnels_the_movers_and_the_stage_tests(chromium, pages):
    page = Page(chromium, pages[1])
    assert page.locator(".funnel-run").count() == 2
    pair = page.locator(".funnel-pair")
    # q01, q03, q04, q08, q14 now reach the model (and lose the gold there, as base's others did: not newly)
    assert pair.locator("h3").inner_text() == "base -> better: 5 recovered at retrieval (stage not recorded)"
    rows = pair.locator("tr[data-stage]")
    assert [rows.nth(i).get_attribute("data-stage") for i in range(rows.count())] == ["retrieval"]
    assert rows.nth(0).locator("td").nth(8).inner_text() == "5 / 0"
    assert page.errors == [] and page.dialogs == []
