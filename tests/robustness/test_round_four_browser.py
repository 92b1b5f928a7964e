"""Round four in a real browser (Debian's chromium): a status file's values stay text in the runs
page's polled table and no script of theirs runs, the pages' own scripts run under a policy that
runs no inline script, and the compare page shows every run's column of its per-category tables."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import uvicorn

from lab.report.compare import default_folder, load_runs, render_compare
from lab.serve.app import create_app
from report_fixtures import ACC_A, ACC_B, MRR_A, MRR_B, write_pair, write_run
from test_round_four_serve import XSS, status, write_status

pytestmark = pytest.mark.browser


@pytest.fixture
def served(tmp_path):
    """``lab serve``'s app over a reports folder, on a free port, in a thread of this process."""
    write_pair(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(tmp_path), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield tmp_path, f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def test_a_status_files_markup_stays_text_and_the_pages_scripts_run_under_the_policy(chromium, served):
    reports, url = served
    page = chromium.new_page()
    seen = {"dialogs": [], "errors": []}
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
    page.goto(url + "/")
    # after the page loaded: a run in progress (markup in its name and stage) and issue 43's status
    # file (markup where a number belongs); the poll brings them in
    write_status(reports, "marked", status(XSS, stage=XSS + " stage"), 11)
    write_status(reports, "damaged", status("damaged", done=XSS), 12)
    page.wait_for_selector("#running tbody tr", timeout=10000)
    cells = page.locator("#running tbody tr td").all_inner_texts()
    assert [c.strip() for c in cells[:3]] == [XSS, XSS + " stage", "3/10"]
    assert page.locator("#running tbody img").count() == 0
    assert page.locator("#running tbody tr").count() == 1  # the damaged one is left out
    # the page's own script runs: picking two runs enables the comparison
    page.locator(f"tr.run[data-key='base/20261122-100000'] input.pick").check()
    page.locator(f"tr.run[data-key='better/20261122-110000'] input.pick").check()
    assert page.locator("#compare-button").is_enabled()
    page.goto(url + "/runs/base/20261122-100000")
    page.locator("#questions tr.qrow[data-id='q01']").click()  # _table.js fills the details
    assert "window.__pwned = 1" in page.locator("#questions tr.qdetail").first.inner_text()
    assert page.evaluate("window.__pwned") is None
    assert seen == {"dialogs": [], "errors": []}


def test_the_compare_page_shows_the_fifth_runs_column_of_every_per_category_table(chromium, tmp_path):
    names = ["baseline-hybrid", "candidate-rerank", "turn18-semantic", "hybrid-tuned-both", "turn22-offline"]
    for i, name in enumerate(names):
        write_run(tmp_path, name, f"20261122-1{i}0000", [MRR_A, MRR_B][i % 2], [ACC_A, ACC_B][i % 2], "A")
    runs = load_runs(names, tmp_path)
    out = render_compare(runs, default_folder(runs, tmp_path))
    for width in (1400, 1000):
        page = chromium.new_page(viewport={"width": width, "height": 1000})
        page.goto(out.as_uri())
        tables = page.evaluate("""() => Array.from(document.querySelectorAll('table.bycat')).map(t => {
            const box = t.parentElement.getBoundingClientRect(), heads = t.rows[0].cells;
            return {metric: t.dataset.metric, cells: heads.length, last: heads[heads.length - 1].getBoundingClientRect().right,
                    right: box.right, scroll: t.parentElement.scrollWidth - t.parentElement.clientWidth};
        })""")
        assert len(tables) == 6
        for t in tables:  # category, n and the five runs, the last inside its box: nothing to scroll to
            assert t["cells"] == 7 and t["last"] <= t["right"] + 0.5 and t["scroll"] == 0, (width, t)
