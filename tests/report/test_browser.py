"""The report pages in a real headless browser (Debian's chromium driven by Playwright):
they load with no console error, draw their charts, filter, sort and expand, and show
HTML and scripts from documents and answers as text without running them."""

import pytest

from lab.report.compare import default_folder, load_runs, render_compare
from lab.report.html import render_run
from pages import Page, browser, screenshots
from report_fixtures import write_pair

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def chromium():
    with browser() as b:
        yield b


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    root = tmp_path_factory.mktemp("reports")
    a, b = write_pair(root)
    runs = load_runs(["base", "better"], root)
    return render_run(a), render_compare(runs, default_folder(runs, root))


def visible_ids(page) -> list[str]:
    return page.eval_on_selector_all("#questions tr.qrow:not([hidden])", "rows => rows.map(r => r.dataset.id)")


def test_run_page_loads_clean_with_charts(chromium, pages):
    page = Page(chromium, pages[0])
    assert page.title() == "base · 20261122-100000 · lab report"
    assert page.locator("#cards .card").count() == 9
    assert page.locator("svg.chart").count() == 4
    assert page.locator("svg.chart[data-metric=mrr] rect.bar").count() == 2  # one bar per category
    assert page.locator("svg.chart rect.bar").first.bounding_box()["width"] > 10
    assert page.locator("#q-count").inner_text() == "15 of 15 questions"
    assert [u for u in page.requests if not u.startswith("file://")] == []
    assert page.errors == []


def test_filters_narrow_the_question_table(chromium, pages):
    page = Page(chromium, pages[0])
    page.select_option("#q-filters [name=category]", "temporal")
    assert visible_ids(page) == ["q13", "q14", "q15"]
    assert page.locator("#q-count").inner_text() == "3 of 15 questions"
    page.select_option("#q-filters [name=category]", "")
    page.select_option("#q-filters [name=metric]", "mrr")
    page.fill("#q-filters [name=value]", "0")
    assert visible_ids(page) == ["q05", "q11", "q15"]  # MRR <= 0
    page.select_option("#q-filters [name=op]", "ge")
    page.fill("#q-filters [name=value]", "1")
    assert len(visible_ids(page)) == 6  # MRR 1: q02 q06 q07 q10 q12 q13
    page.fill("#q-filters [name=value]", "")
    page.select_option("#q-filters [name=failure]", "judge")
    assert visible_ids(page) == ["q05"]
    page.select_option("#q-filters [name=failure]", "miss")
    assert visible_ids(page) == ["q05", "q11", "q15"]
    page.select_option("#q-filters [name=failure]", "")
    page.fill("#q-filters [name=text]", "policy 7 ")
    assert visible_ids(page) == ["q07"]
    assert page.errors == []


def test_sorting_and_row_expansion(chromium, pages):
    page = Page(chromium, pages[0])
    page.click("#questions th[data-key=mrr]")
    assert visible_ids(page)[:3] == ["q05", "q11", "q15"] and visible_ids(page)[-1] == "q13"
    page.click("#questions th[data-key=mrr]")
    assert visible_ids(page)[0] in {"q02", "q06", "q07", "q10", "q12", "q13"}
    page.click("#questions th[data-key=id]")
    assert visible_ids(page) == [f"q{i:02d}" for i in range(1, 16)]
    detail = page.locator("#questions tr.qdetail").nth(2)
    assert detail.is_hidden()
    page.locator("#questions tr.qrow").nth(2).click()
    assert detail.is_visible()
    text = detail.inner_text()
    assert "Reference answer: Policy 3 covers item 3." in text and "accuracy 3 · completeness 3" in text
    page.locator("#questions tr.qrow").nth(2).click()
    assert detail.is_hidden()


def test_html_in_documents_and_answers_is_text_not_code(chromium, pages):
    for path in pages:
        page = Page(chromium, path)
        assert page.evaluate("window.__pwned") is None
        assert "pwned" not in page.title()
        assert page.locator("img[src=x]").count() == 0
    page = Page(chromium, pages[0])
    page.locator("#questions tr.qrow").first.click()
    detail = page.locator("#questions tr.qdetail").first.inner_text()
    assert '<script>window.__pwned = 1; document.title = "pwned"</script>' in detail
    assert "<script>window.__pwned = 4</script> An answer" in detail
    assert page.locator("#questions tr.qrow").first.inner_text().startswith('q01')
    assert 'Is <img src=x onerror="window.__pwned = 3"> escaped?' in page.locator("#questions tr.qrow").first.inner_text()
    assert page.evaluate("window.__pwned") is None and page.errors == []


def test_compare_page_loads_clean_and_movers_open(chromium, pages):
    page = Page(chromium, pages[1])
    assert page.errors == [] and [u for u in page.requests if not u.startswith("file://")] == []
    assert page.locator("svg.chart").count() == 7  # 5 metrics per run + MRR and accuracy by category
    story = page.locator("#story tr[data-metric=mrr]").inner_text()
    assert "0.5833" in story and "0.8333" in story and "▲ +0.2500" in story
    row = page.locator("table.stats tr.overall[data-metric=mrr]").inner_text()
    assert "+0.2500" in row and "8 / 0 / 7" in row and "better better" in row
    mover = page.locator("details.mover[data-metric=mrr]").first
    assert not mover.locator(".sides").is_visible()
    mover.locator("summary").click()
    assert mover.locator(".sides").is_visible()
    assert "<script>window.__pwned = 1" in mover.inner_text()
    assert page.evaluate("window.__pwned") is None


@pytest.mark.slow
def test_a_real_run_report_in_the_browser(chromium, project):
    """A report the pipeline wrote (the fixture knowledge base holds a document with a
    ``<script>alert("kb")</script>``): it loads clean, no dialog opens, the script shows as text."""
    from runs import lab, latest

    assert lab(project, "run", "small-retrieval", "--no-progress").returncode == 0
    page = Page(chromium, latest(project, "small-retrieval") / "report.html")
    # charts: MRR and nDCG (keywords), and MRR (spans): the fixture's rows have golden spans
    assert page.locator("#questions tr.qrow").count() == 6 and page.locator("svg.chart").count() == 3
    for i in range(6):
        page.locator("#questions tr.qrow").nth(i).click()
    assert '<script>alert("kb")</script>' in page.locator("#questions").inner_text()
    assert page.dialogs == [] and page.errors == []


def test_screenshots_are_real_pictures(chromium, tmp_path, pages):
    run_dir = pages[0].parent
    shots = screenshots(run_dir, pages[1], tmp_path, chromium)
    assert [p.name for p in shots] == ["report.png", "report-question.png", "compare.png", "compare-paired.png"]
    for p in shots:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_a_report_of_10000_questions_stays_usable(chromium, tmp_path):
    """10,000 questions: the page loads, filters, sorts and opens a question's details, each
    checked for its result; the seconds each took are printed (speed lives in benches, not in
    assertions)."""
    import copy
    import json
    import time

    from lab.report.html import render_run
    from report_fixtures import _sample, results_for

    n = 10_000
    base = [_sample(i, 1.0 if i % 3 else 0.0, 4, "A") for i in range(15)]
    samples = []
    for i in range(n):
        s = copy.deepcopy(base[1 + i % 14])
        s["id"] = f"x{i:05d}"
        s["question"] = f"What does policy {i} cover?"
        s["metrics"]["mrr"] = round((i * 7919 % n) / n, 4)  # a permutation of 0 .. 0.9999
        samples.append(s)
    folder = tmp_path / "big" / "20261123-000000"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(results_for("big", "20261123-000000", samples)))
    (folder / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    t0 = time.perf_counter()
    page_file = render_run(folder)
    rendered = time.perf_counter() - t0
    t0 = time.perf_counter()
    page = Page(chromium, page_file)
    page.wait_for_load_state("load")
    loaded = time.perf_counter() - t0
    assert page.locator("#q-count").inner_text() == f"{n} of {n} questions"
    assert page.locator("#questions tr.qdetail td:not(:empty)").count() == 0  # no details built yet
    t0 = time.perf_counter()
    page.fill("#q-filters [name=text]", "policy 999")  # 999, 9990-9999
    filtered = time.perf_counter() - t0
    assert page.locator("#q-count").inner_text() == f"11 of {n} questions"
    page.fill("#q-filters [name=text]", "")
    t0 = time.perf_counter()
    page.click("#questions th[data-key=mrr]")
    sorted_s = time.perf_counter() - t0
    first = page.eval_on_selector_all("#questions tr.qrow", "rows => rows.slice(0, 3).map(r => r.dataset.mrr)")
    assert [float(x) for x in first] == [0.0, 0.0001, 0.0002]
    page.locator("#questions tr.qrow").first.click()
    assert "Reference answer:" in page.locator("#questions tr.qdetail").first.inner_text()
    assert len(visible_ids(page)) == 500 and page.locator("#q-limit").inner_text() == "500"  # a page at a time
    page.click("#q-more-button")
    shown = page.eval_on_selector_all("#questions tr.qrow:not([hidden])", "rows => rows.map(r => Number(r.dataset.mrr))")
    assert len(shown) == 1000 and shown == sorted(shown) and shown[-1] == 0.0999  # the next 500, in order
    page.fill("#q-filters [name=text]", "policy 99")  # 99, 990-999, 9900-9999: 111 matches, one page
    assert len(visible_ids(page)) == 111 and page.locator("#q-more").is_hidden()
    assert page.errors == []
    size = page_file.stat().st_size / 1e6
    print(f"\n10,000 questions: page {size:.1f} MB rendered in {rendered:.1f} s; chromium load {loaded:.2f} s, "
          f"filter {filtered:.2f} s, sort {sorted_s:.2f} s")
