"""Human labels in a real browser (Debian's chromium driven by Playwright): mark answers in a run
report, reload and find the marks, download labels.json, and feed it to `lab agree`; the marks
belong to their run, not to every report on the machine."""

from __future__ import annotations

import json

import pytest

from lab.cli import main
from lab.report.html import render_run
from pages import Page
from report_fixtures import ACC_A, ACC_B, MRR_A, MRR_B, write_run
from report_fixtures import KAPPA, LABELS

pytestmark = pytest.mark.browser


@pytest.fixture
def runs(tmp_path):
    a = write_run(tmp_path / "reports", "base", "20261122-100000", MRR_A, ACC_A, "A")
    b = write_run(tmp_path / "reports", "better", "20261122-110000", MRR_B, ACC_B, "B")
    return render_run(a), render_run(b)


def row_index(qid: str) -> int:
    return int(qid[1:]) - 1


def panel(page, qid: str):
    """The detail panel of question ``qid``, opened (it is built on first opening)."""
    detail = page.locator("#questions tr.qdetail").nth(row_index(qid))
    if detail.is_hidden():
        page.locator("#questions tr.qrow").nth(row_index(qid)).click()
    return detail.locator(".hl")


def pressed(box) -> list[str]:
    return box.locator("button[aria-pressed=true]").evaluate_all("bs => bs.map(b => b.dataset.label)")


def test_mark_reload_download_and_agree(chromium, runs, tmp_path, capsys):
    page = Page(chromium, runs[0])
    count = page.locator("#labels-count")
    assert count.inner_text() == "0 of 15 answers labelled"
    assert page.locator("#labels-download").is_disabled()
    first = panel(page, "q01")
    assert pressed(first) == [] and first.locator("input").is_disabled()  # no accuracy before a label

    for qid, mark in LABELS.items():
        box = panel(page, qid)
        box.locator(f"button[data-label={mark['label']}]").click()
        assert pressed(box) == [mark["label"]]
    assert count.inner_text() == "8 of 15 answers labelled"

    q13 = panel(page, "q13").locator("input")
    q13.fill("7")  # out of range: flagged, not kept
    assert q13.evaluate("i => i.validity.valid") is False
    q13.fill("4")
    assert q13.evaluate("i => i.validity.valid") is True

    q06 = panel(page, "q06")  # a mark taken back: choosing the same label again
    q06.locator("button[data-label=wrong]").click()
    assert count.inner_text() == "9 of 15 answers labelled"
    q06.locator("button[data-label=wrong]").click()
    assert pressed(q06) == [] and count.inner_text() == "8 of 15 answers labelled"
    q04 = panel(page, "q04")  # changing one's mind: one label at a time
    q04.locator("button[data-label=partly]").click()
    q04.locator("button[data-label=wrong]").click()
    assert pressed(q04) == ["wrong"]

    page.reload()
    assert count.inner_text() == "8 of 15 answers labelled"
    assert page.locator("#questions .hl:not(:empty)").count() == 0  # panels closed, nothing built
    assert pressed(panel(page, "q13")) == ["correct"] and panel(page, "q13").locator("input").input_value() == "4"
    assert pressed(panel(page, "q02")) == ["partly"] and panel(page, "q02").locator("input").input_value() == ""
    page.click("#questions th[data-key=mrr]")  # sorted rows: the marks go with their questions
    assert pressed(page.locator('#questions .hl[data-qid="q13"]')) == ["correct"]

    with page.expect_download() as download:
        page.click("#labels-download")
    assert download.value.suggested_filename == "labels.json"
    saved = tmp_path / "labels.json"
    download.value.save_as(saved)
    doc = json.loads(saved.read_text())
    assert doc == {"format": "lab-labels-v1", "run": "base/20261122-100000", "fingerprint": "basebase",
                   "labels": LABELS}
    assert list(doc["labels"]) == sorted(LABELS)  # in the table's order, whatever the sorting

    other = Page(chromium, runs[1])  # another run's page in another window: none of these marks
    assert other.locator("#labels-count").inner_text() == "0 of 15 answers labelled"
    page.goto(runs[1].resolve().as_uri())  # ... nor in the same browser storage
    assert page.locator("#labels-count").inner_text() == "0 of 15 answers labelled"
    page.go_back()
    assert page.locator("#labels-count").inner_text() == "8 of 15 answers labelled"

    assert main(["agree", str(runs[0].parent), str(saved)]) == 0
    out = capsys.readouterr().out
    agreement = json.loads((runs[0].parent / "agreement.json").read_text())
    assert agreement["n_pairs"] == 7 and agreement["overall"]["kappa"]["value"] == pytest.approx(KAPPA)
    assert "0.696" in out and "left out: q05 (judgement failed)" in out
    for p in (page, other):
        assert p.errors == [] and [u for u in p.requests if not u.startswith(("file://", "blob:"))] == []
