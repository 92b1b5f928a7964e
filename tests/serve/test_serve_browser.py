"""lab serve in a real browser (Debian's chromium, Playwright) against a real server process:
the runs table sorts and picks, a comparison shows lab compare's numbers, two annotators label at
once in two browser contexts and a server killed mid-session loses no label, and HTML in
questions, answers and notes stays text."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from lab.judge.labels import LabelStore
from lab.report.compare import default_folder, load_runs, render_compare
from lab.runfiles import load_run
from lab.serve.labels import agreement
from report_fixtures import MRR_A, write_pair, write_run

pytestmark = pytest.mark.browser
RUN = "base/20261122-100000"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``lab serve`` as a process of its own."""

    def __init__(self, reports: Path, port: int, extra: tuple[str, ...] = ()):
        self.reports, self.port, self.proc, self.extra = reports, port, None, extra
        self.url = f"http://127.0.0.1:{port}"

    def start(self) -> "Server":
        self.proc = subprocess.Popen([sys.executable, "-m", "lab", "serve", "--reports", str(self.reports),
                                      "--port", str(self.port), *self.extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                urllib.request.urlopen(self.url + "/api/running", timeout=2).read()
                return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(self.proc.stdout.read())
                time.sleep(0.2)
        raise RuntimeError("lab serve did not start in 60 s")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)  # no clean shutdown: what was acknowledged must be on disk
        self.proc.wait()


@pytest.fixture
def served(tmp_path):
    write_pair(tmp_path)
    write_run(tmp_path, "elsewhere", "20261123-090000", MRR_A, [3] * 15, "C", eval_sha="f" * 64)
    server = Server(tmp_path, free_port()).start()
    yield server
    if server.proc.poll() is None:
        server.kill()


def watched(page) -> dict:
    """The page's dialogs, errors and requests that leave the server."""
    seen = {"dialogs": [], "errors": [], "elsewhere": []}
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
    page.on("request", lambda r: seen["elsewhere"].append(r.url) if not r.url.startswith("http://127.0.0.1") else None)
    return seen


def test_the_runs_table_sorts_and_two_picked_runs_open_lab_compares_numbers(chromium, served):
    page = chromium.new_page(viewport={"width": 1400, "height": 1000})
    seen = watched(page)
    page.goto(served.url + "/")
    group = page.locator("tr.run[data-key='base/20261122-100000']").get_attribute("data-group")
    table = page.locator(f"table.runs[data-group='{group}']")
    keys = lambda: table.locator("tr.run").evaluate_all("rows => rows.map(r => r.dataset.key)")  # noqa: E731
    table.locator("th[data-key='m_mrr']").click()  # ascending: base (0.58) before better (0.87)
    assert keys() == ["base/20261122-100000", "better/20261122-110000"]
    table.locator("th[data-key='m_mrr']").click()
    assert keys() == ["better/20261122-110000", "base/20261122-100000"]
    page.fill("#runs-filter", "better")
    assert page.locator("tr.run:not([hidden])").evaluate_all("rows => rows.map(r => r.dataset.key)") == [
        "better/20261122-110000"]
    page.fill("#runs-filter", "")
    assert page.locator("#compare-button").is_disabled()
    page.locator("tr.run[data-key='base/20261122-100000'] input.pick").check()
    # a run of another eval set cannot join the pick
    assert not page.locator("tr.run[data-key='elsewhere/20261123-090000'] input.pick").is_visible()
    page.locator("tr.run[data-key='better/20261122-110000'] input.pick").check()
    page.locator("#compare-button").click()
    page.wait_for_url(re.compile(r".*/compare\?run=.*"))
    runs = load_runs(["base", "better"], served.reports)
    on_disk = chromium.new_page()
    on_disk.goto(render_compare(runs, default_folder(runs, served.reports)).as_uri())
    for selector in ("#decision", "#runs", "table.stats"):
        assert page.locator(selector).first.inner_text() == on_disk.locator(selector).first.inner_text()
    assert "lab compare" in page.locator("#served-command").inner_text()
    assert seen == {"dialogs": [], "errors": [], "elsewhere": []}


def start_labelling(page, url: str, who: str) -> None:
    page.goto(f"{url}/runs/{RUN}/label")
    page.fill("#annotator-name", who)
    with page.expect_navigation():  # the form's GET: the queue's page, its script run before a label is given
        page.click("#who button")


def save(page, who: str, verdict: str) -> str:
    """Label the answer on ``page`` and go on to the next; return its id."""
    qid = page.locator("#item").get_attribute("data-id")
    page.click(f".choices button[data-label='{verdict}']")
    page.fill("#note", f"{who} on {qid}: <img src=x onerror=alert(1)>")
    with page.expect_navigation():
        page.click("#save")
    return qid


def test_two_annotators_label_at_once_through_a_restart_and_nothing_is_lost(chromium, served):
    order = LabelStore(served.reports).queue(RUN, [f"q{i + 1:02d}" for i in range(15)], "x")["order"]
    ana, ben = chromium.new_context().new_page(), chromium.new_context().new_page()  # two people, two browsers
    seen_a, seen_b = watched(ana), watched(ben)
    start_labelling(ana, served.url, "ana")
    start_labelling(ben, served.url, "ben")
    verdicts = {"ana": ["correct", "partly", "wrong", "correct", "correct", "wrong"],
                "ben": ["correct", "correct", "wrong", "partly", "correct", "wrong"]}
    done = {"ana": [], "ben": []}
    for i in range(6):  # both have the same answer open; each saves in turn
        if i == 3:  # killed with both pages open, started again: the open pages save to the new process
            served.kill()
            served.start()
        done["ana"].append(save(ana, "ana", verdicts["ana"][i]))
        done["ben"].append(save(ben, "ben", verdicts["ben"][i]))
    assert done["ana"] == done["ben"] == order[:6]  # one queue order: their overlap
    rows = LabelStore(served.reports).labels(RUN)
    assert {(r["annotator"], r["question_id"]): r["label"] for r in rows} == {
        (who, q): v for who in done for q, v in zip(done[who], verdicts[who])}
    ana.goto(f"{served.url}/runs/{RUN}/agreement")
    results, samples = load_run(served.reports / RUN)
    a = agreement(LabelStore(served.reports), results, samples, served.reports / RUN)
    kappa = a["between_annotators"][0]["kappa"]["value"]
    assert kappa is not None
    assert ana.locator("#between tr[data-pair='ana|ben'] td.kappa").inner_text() == f"{kappa:.3f}"
    assert ana.locator("#judge tr[data-who='all annotators'] td").nth(1).inner_text() == str(a["judge"]["all"]["n_pairs"])
    # the notes come back as text in the queue
    ana.goto(f"{served.url}/runs/{RUN}/label?annotator=ana&q={done['ana'][0]}")
    assert "<img src=x onerror=alert(1)>" in ana.locator("#note").input_value()
    for seen in (seen_a, seen_b):  # a request in flight at the kill, or sent while the server was down, is
        # refused, reset, closed or left unconnected: the kill's doing, not the page's (any other error still fails)
        seen["errors"] = [e for e in seen["errors"] if not re.search(
            r"net::ERR_(CONNECTION_(REFUSED|RESET|CLOSED)|SOCKET_NOT_CONNECTED|EMPTY_RESPONSE)", e)]
        assert seen == {"dialogs": [], "errors": [], "elsewhere": []}


def test_an_answer_is_labelled_by_keys_and_letters_typed_into_the_note_stay_its_text(chromium, served):
    page = chromium.new_page()
    seen = watched(page)
    start_labelling(page, served.url, "cy")
    qid = page.locator("#item").get_attribute("data-id")
    page.keyboard.press("w")
    assert page.locator(".choices button[data-label='wrong']").get_attribute("aria-pressed") == "true"
    page.click("#note")
    page.keyboard.type("cpw")  # the note's text, not verdicts
    assert page.locator(".choices button[data-label='wrong']").get_attribute("aria-pressed") == "true"
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("p")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator("#item").get_attribute("data-id") != qid
    assert page.locator("#keys").inner_text().startswith("keys: c correct · p partly correct · w wrong")
    assert [(r["question_id"], r["label"], r["note"]) for r in LabelStore(served.reports).labels(RUN)
            if r["annotator"] == "cy"] == [(qid, "partly", "cpw")]
    assert seen == {"dialogs": [], "errors": [], "elsewhere": []}


def test_html_in_questions_and_answers_is_text_in_the_served_pages(chromium, served):
    page = chromium.new_page()
    seen = watched(page)
    page.goto(f"{served.url}/runs/{RUN}/label?annotator=ana&q=q01")
    assert 'onerror="window.__pwned = 3"' in page.locator("#question").inner_text()
    assert "<script>" in page.locator("#answer").inner_text()
    page.goto(f"{served.url}/runs/{RUN}")
    page.locator("#questions tr.qrow[data-id='q01']").click()
    assert page.evaluate("window.__pwned") is None
    assert seen == {"dialogs": [], "errors": [], "elsewhere": []}
