"""The served app through its HTTP interface (Starlette's test client): the runs table, the
comparison that is lab compare's page, runs in progress, labelling, and the security rules."""

import json
import os
import re
import time

import pytest
from starlette.testclient import TestClient

from lab.report.compare import default_folder, load_runs, render_compare
from lab.runfiles import load_run, values
from lab.serve.app import create_app
from lab.stats.paired import bootstrap_ci
from report_fixtures import MRR_A, write_pair, write_run

LOCAL = "http://127.0.0.1:8765"
TOKEN = "t0ken-t0ken-t0ken-t0ken"


@pytest.fixture
def reports(tmp_path):
    write_pair(tmp_path)
    # another eval set: its own group, never compared with the others
    write_run(tmp_path, "elsewhere", "20261123-090000", MRR_A, [3] * 15, "C", eval_sha="f" * 64)
    return tmp_path


@pytest.fixture
def client(reports):
    return TestClient(create_app(reports), base_url=LOCAL)


def test_the_runs_table_lists_every_run_grouped_by_eval_set_with_intervals(client, reports):
    page = client.get("/")
    assert page.status_code == 200
    html = page.text
    groups = re.findall(r'<section class="group" data-group="(g\d)">', html)
    assert len(groups) == 2
    keys = re.findall(r'<tr class="run" data-key="([^"]+)" data-group="(g\d)"', html)
    group = dict(keys)
    assert sorted(group) == ["base/20261122-100000", "better/20261122-110000", "elsewhere/20261123-090000"]
    assert group["base/20261122-100000"] == group["better/20261122-110000"] != group["elsewhere/20261123-090000"]
    runs = {r["key"]: r for r in client.get("/api/runs").json()["runs"]}
    _, samples = load_run(reports / "base" / "20261122-100000")
    base = runs["base/20261122-100000"]
    assert base["metrics"]["mrr"]["mean"] == pytest.approx(sum(MRR_A) / 15)
    assert base["metrics"]["mrr"]["ci"] == pytest.approx(list(bootstrap_ci(values(samples, "mrr"))))
    assert base["n"] == 15 and base["status"] == "full" and base["eval_sha"] == "e" * 10
    assert "qwen2.5-coder-1.5b-instruct (rubric)" == base["judge"]


def test_picking_two_runs_gives_the_page_lab_compare_writes(client, reports):
    runs = load_runs(["base", "better"], reports)
    on_disk = render_compare(runs, default_folder(runs, reports)).read_text(encoding="utf-8")
    served = client.get("/compare?run=base/20261122-100000&run=better/20261122-110000")
    assert served.status_code == 200
    assert "lab compare " in served.text and "20261122-100000" in served.text

    def same(html):
        html = re.sub(r'<nav class="served".*?</nav>', "", html)
        return re.sub(r'href="[^"]*"', 'href=""', html)

    assert same(served.text) == same(on_disk)


def test_a_run_page_is_the_report_with_the_apps_links(client, reports):
    page = client.get("/runs/base/20261122-100000")
    assert page.status_code == 200
    assert '<nav class="served"' in page.text and 'href="/runs/base/20261122-100000/label"' in page.text
    assert "Download labels" not in page.text  # labels go to the server, not the browser's storage
    assert (reports / "base" / "20261122-100000" / "report.html").exists() is False  # nothing written by serving


def test_a_run_in_progress_is_listed_with_its_stage_and_eta_and_a_dead_one_is_not(client, reports):
    (reports / "turn13").mkdir()
    status = {"name": "turn13", "pid": os.getpid(), "host": os.uname().nodename, "started_at": time.time(),
              "updated_at": time.time(), "stage": "generate", "done": 30, "total": 121, "elapsed_s": 60.0,
              "eta_s": 182.0, "n_questions": 121}
    (reports / "turn13" / f".running-{os.getpid()}.json").write_text(json.dumps(status))
    (reports / "turn13" / ".running-999999.json").write_text(json.dumps({**status, "pid": 999999}))
    running = client.get("/api/running").json()["running"]
    assert [(r["name"], r["stage"], r["done"], r["total"], r["eta_s"]) for r in running] == [
        ("turn13", "generate", 30, 121, 182.0)]
    assert "<td>generate</td><td>30/121</td>" in client.get("/").text


def test_labelling_through_the_api_and_the_queue(client, reports):
    page = client.get("/runs/base/20261122-100000/label?annotator=ana")
    first = re.search(r'<div class="qa" id="item" data-id="([^"]+)"', page.text).group(1)
    saved = client.post("/api/labels", json={"run": "base/20261122-100000", "id": first, "annotator": "ana",
                                             "label": "partly", "accuracy": 3, "note": "<img src=x onerror=alert(1)>"},
                        headers={"Origin": LOCAL})
    assert saved.status_code == 200, saved.text
    assert saved.json()["todo"] == 14 and saved.json()["next"] != first
    again = client.get(f"/runs/base/20261122-100000/label?annotator=ana&q={first}")
    assert "&lt;img src=x onerror=alert(1)&gt;" in again.text and "<img src=x" not in again.text
    bad = client.post("/api/labels", json={"run": "base/20261122-100000", "id": first, "annotator": "ana",
                                           "label": "maybe"})
    assert bad.status_code == 400 and "is not a label" in bad.json()["error"]
    assert client.post("/api/labels", json={"run": "base/nope", "id": first, "annotator": "ana",
                                            "label": "wrong"}).status_code == 404
    exported = client.get("/runs/base/20261122-100000/labels.json?annotator=ana").json()
    assert exported["labels"] == {first: {"label": "partly", "accuracy": 3}}


# -- security ---------------------------------------------------------------------------------


def test_bound_elsewhere_every_request_needs_the_token(reports):
    app = create_app(reports, token=TOKEN, local=False)
    client = TestClient(app, base_url="http://10.0.0.5:8765")
    assert client.get("/").status_code == 401
    assert client.get("/api/runs").status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer wrong-wrong-wrong-wrong"}).status_code == 401
    assert client.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    first = client.get(f"/?token={TOKEN}", follow_redirects=False)  # the printed link: a cookie, the token dropped
    assert first.status_code == 303 and first.headers["location"] == "/"
    assert client.get("/").status_code == 200  # the cookie now
    assert client.post("/api/labels", json={}, headers={"Authorization": "Bearer x"}).status_code == 401


def test_on_this_machine_only_a_host_naming_it_is_served(reports):
    client = TestClient(create_app(reports), base_url="http://evil.example:8765")
    assert client.get("/").status_code == 403  # DNS rebinding: another name for 127.0.0.1
    for ok in ("http://localhost:8765", "http://[::1]:8765", "http://127.0.0.2:8765"):
        assert TestClient(create_app(reports), base_url=ok).get("/").status_code == 200, ok


def test_behind_a_proxy_speaking_https_the_apps_own_pages_may_post(client):
    body = {"run": "base/20261122-100000", "id": "q01", "annotator": "ana", "label": "wrong"}
    assert client.post("/api/labels", json=body, headers={"Origin": "https://127.0.0.1:8765"}).status_code == 200
    assert client.post("/api/labels", json=body, headers={"Origin": "https://127.0.0.1:9999"}).status_code == 403


def test_a_cross_origin_post_is_refused(client):
    body = {"run": "base/20261122-100000", "id": "q01", "annotator": "ana", "label": "wrong"}
    assert client.post("/api/labels", json=body, headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.post("/api/labels", json=body, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    form = client.post("/api/labels", content="run=x", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert form.status_code == 415  # what a cross-site form can send without asking
    assert client.get("/api/runs").json()  # nothing was labelled by those
    assert client.get("/runs/base/20261122-100000/agreement").text.count('data-annotator=') == 0


@pytest.mark.parametrize("path", [
    "/runs/../../etc/passwd", "/runs/base/..%2F..%2Fetc", "/runs/%2e%2e/%2e%2e", "/runs/base/20261122-100000/files/..%2Fresults.json",
    "/runs/base/20261122-100000/files/%2e%2e%2f%2e%2e%2fx", "/runs/base/.20261122-100000.tmp-1",
    "/runs/base/20261122-100000/files/.hidden", "/runs/base/%2E%2E", "/runs/..%5C..%5Cwindows/x",
    "/compare?run=../base&run=base/20261122-100000", "/runs/base/20261122-100000/files/%252e%252e%252fx",
])
def test_traversal_in_any_encoding_is_not_found(client, reports, path):
    assert client.get(path).status_code == 404


def test_the_files_of_a_run_folder_are_served_and_nothing_else(client, reports):
    assert client.get("/runs/base/20261122-100000/files/results.json").json()["name"] == "base"
    (reports / "secret.txt").write_text("no")
    assert client.get("/runs/base/20261122-100000/files/secret.txt").status_code == 404


def test_pages_carry_a_content_security_policy_and_escape_what_they_show(client):
    page = client.get("/")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    run = client.get("/runs/base/20261122-100000").text
    assert '<img src=x onerror="window.__pwned = 3">' not in run
    assert "&lt;img src=x" in run or "\\u003cimg" in run
