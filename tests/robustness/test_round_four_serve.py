"""Round four, the served app (docs/robustness.md): no script a run's files carry ever runs, a
damaged run or status file is listed with its error while the rest of the app works (the readers
fuzzed with every field, every type), a claim from the future keeps no run "in progress", and a
read-only reports folder is served."""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lab.serve.app import create_app
from report_fixtures import MRR_A, write_pair, write_run

LOCAL = "http://127.0.0.1:8765"
RUN = "base/20261122-100000"
XSS = "<img src=x onerror=alert(1)>"
#: A value of every JSON type, and the ones JSON's readers let through (NaN, Infinity).
VALUES = [None, True, 0, -7, 2.5, float("nan"), float("inf"), "", XSS, [], [1, "a"], {}, {"a": {"b": 1}}]
#: Every field of results.json the runs table reads (lab.serve.runs.summarise).
RESULTS_FIELDS = ["name", "run_id", "created_at", "description", "config_fingerprint", "data", "data.eval_set",
                  "data.eval_sha256", "data.knowledge_base", "data.corpus_sha256", "sample", "sample.n_questions",
                  "sample.n_total", "sample.is_sample", "models", "models.judge", "models.judge.model",
                  "metrics.overall", "metrics.overall.mrr", "metrics.overall.mrr.mean", "metrics.overall.mrr.n",
                  "timings", "timings.total_s", "judge_checks", "judge_checks.method", "config", "config.judge",
                  "config.judge.method", "sequential"]
#: Every field of a status file (lab.runfiles.Running).
STATUS_FIELDS = ["name", "pid", "host", "started_at", "updated_at", "stage", "done", "total", "elapsed_s", "eta_s"]


def strict_json(text: str) -> object:
    """JSON as a browser's JSON.parse reads it: NaN and Infinity are errors."""
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


def put(doc: dict, path: str, value: object) -> None:
    keys = path.split(".")
    for k in keys[:-1]:
        if not isinstance(doc.get(k), dict):
            doc[k] = {}
        doc = doc[k]
    doc[keys[-1]] = value


def status(name: str, **fields) -> dict:
    """A live run's status (this process, this host) as lab.eval.status writes it."""
    now = time.time()
    return {"name": name, "pid": os.getpid(), "host": socket.gethostname(), "started_at": now - 30,
            "updated_at": now, "stage": "answer", "done": 3, "total": 10, "elapsed_s": 30.0, "eta_s": 70.0,
            "n_questions": 10, **fields}


def write_status(reports: Path, name: str, doc: dict, pid: int) -> Path:
    folder = reports / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f".running-{pid}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.fixture
def reports(tmp_path):
    write_pair(tmp_path)
    return tmp_path


def test_every_field_of_results_json_of_every_type_is_a_row_or_listed_with_its_error(reports):
    base = json.loads((reports / RUN / "results.json").read_text())
    samples = (reports / RUN / "samples.jsonl").read_text()
    made = {}
    for i, field in enumerate(RESULTS_FIELDS):
        for j, value in enumerate(VALUES):
            doc = json.loads(json.dumps(base))
            put(doc, field, value)
            folder = reports / f"f{i}-{j}" / "20261122-100000"
            folder.mkdir(parents=True)
            (folder / "results.json").write_text(json.dumps(doc))  # NaN and Infinity as Python writes them
            (folder / "samples.jsonl").write_text(samples)
            made[f"f{i}-{j}/20261122-100000"] = (field, value)
    for j, value in enumerate(VALUES[1:]):  # a question's metrics of another type
        folder = reports / f"s{j}" / "20261122-100000"
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps(base))
        rows = [json.loads(line) for line in samples.splitlines()]
        rows[3]["metrics"] = value if not isinstance(value, dict) else {"mrr": value}
        (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        made[f"s{j}/20261122-100000"] = ("metrics", value)
    client = TestClient(create_app(reports), base_url=LOCAL)
    page, api = client.get("/"), client.get("/api/runs")
    assert page.status_code == 200 and api.status_code == 200
    doc = strict_json(api.text)
    listed = {r["key"] for r in doc["runs"]}
    broken = {b["key"]: b["why"] for b in doc["broken"]}
    assert {RUN, "better/20261122-110000"} <= listed  # the sound runs are still there
    for key, (field, value) in made.items():
        assert (key in listed) != (key in broken), (key, field, value)
        if key in broken:
            said = "samples.jsonl (question 4): metrics is " if key.startswith("s") else f"results.json: {field}"
            assert said in broken[key], (field, value, broken[key])
    for r in doc["runs"]:  # a row is strings and numbers, whatever the file held
        assert isinstance(r["name"], str) and isinstance(r["eval_set"], str) and isinstance(r["n"], int)
        assert all(isinstance(m["mean"], (int, float)) and math.isfinite(m["mean"]) for m in r["metrics"].values())
    assert XSS not in page.text  # every value is text on the page
    # a wrong type is named: the field, what it is and what it should be
    key = next(k for k, (f, v) in made.items() if f == "data" and v == [])
    assert "20261122-100000/results.json: data is a list, not an object\n  fix: " in broken[key]
    key = next(k for k, (f, v) in made.items() if f == "metrics.overall.mrr.mean" and isinstance(v, float)
               and math.isnan(v))
    assert "metrics.overall.mrr.mean is a number that is not finite, not a whole number or a number" in broken[key]
    assert re.search(r'<li data-key="f5-9/20261122-100000">', page.text)  # listed on the page, with why


def test_every_field_of_a_status_file_of_every_type_leaves_the_runs_in_progress_working(reports):
    made = {}
    for i, field in enumerate(STATUS_FIELDS):
        for j, value in enumerate(VALUES + [10 ** 30, -1]):
            doc = status(f"r{i}-{j}")
            doc[field] = value
            made[f"r{i}-{j}"] = (field, value)
            write_status(reports, f"r{i}-{j}", doc, 1000 + 100 * i + j)
    write_status(reports, "sound", status("sound"), 1)
    client = TestClient(create_app(reports), base_url=LOCAL)
    api, page = client.get("/api/running"), client.get("/")
    assert api.status_code == 200 and page.status_code == 200
    doc = strict_json(api.text)
    running = {r["name"]: r for r in doc["running"]}
    broken = {b["key"].split("/")[0]: b["why"] for b in doc["broken"]}
    assert "sound" in running
    for name, (field, value) in made.items():
        assert not (name in running and name in broken), name
        if name in running:  # shown: then every value is of its type
            r = running[name]
            assert isinstance(r["done"], (int, type(None))) and isinstance(r["stage"], (str, type(None)))
            assert r["pid"] == os.getpid() or field != "pid"
    assert "pid 1000000000000000000000000000000 is not a process id" in broken["r1-13"]  # a huge pid
    assert "pid -1 is not a process id" in broken["r1-14"]  # -1 would mean every process
    assert ".running-1608.json: done is a string, not a whole number" in broken["r6-8"]  # issue 43's stored XSS
    assert "remove the file if no run is going" in broken["r6-8"]
    assert XSS not in page.text and "r6-8" in page.text


def test_a_status_file_from_the_future_keeps_no_run_in_progress(reports):
    now = time.time()
    old = write_status(reports, "future", status("future", host="another-host", updated_at=now + 10 * 365 * 86400), 7)
    os.utime(old, (now - 700, now - 700))  # not replaced for 700 s: the run is gone
    fresh = write_status(reports, "elsewhere", status("elsewhere", host="another-host"), 8)
    os.utime(fresh, (now - 20, now - 20))
    running = TestClient(create_app(reports), base_url=LOCAL).get("/api/running").json()["running"]
    assert [r["name"] for r in running] == ["elsewhere"]


def scripts(html: str) -> list[str]:
    return re.findall(r"<script\b([^>]*)>", html)


def test_no_inline_script_runs_and_each_page_script_is_a_file_of_the_templates(reports):
    write_run(reports, "elsewhere", "20261123-090000", MRR_A, [3] * 15, "C", eval_sha="f" * 64)
    client = TestClient(create_app(reports), base_url=LOCAL)
    csp = client.get("/").headers["content-security-policy"]
    script_src = re.search(r"script-src ([^;]*)", csp).group(1)
    assert script_src.strip() == "'self'" and "unsafe-inline" not in script_src
    pages = ["/", f"/runs/{RUN}", f"/runs/{RUN}/label?annotator=ana", f"/runs/{RUN}/agreement",
             f"/compare?run={RUN}&run=better/20261122-110000"]
    linked = set()
    for url in pages:
        page = client.get(url)
        assert page.status_code == 200, url
        for attrs in scripts(page.text):
            src = re.search(r'src="(/static/[^"]+)"', attrs)
            assert src or 'type="application/json"' in attrs, (url, attrs)  # data is never run
            if src:
                linked.add(src.group(1))
    assert linked == {"/static/serve_runs.js", "/static/_table.js", "/static/serve_label.js", "/static/_queue_keys.js",
                      "/static/serve_agreement.js"}
    for src in linked:
        js = client.get(src)
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
        assert "innerHTML" not in js.text or src == "/static/_table.js"  # the run page's details: see below
    for other in ("/static/run.html", "/static/_style.css", "/static/..%2Fhtml.py", "/static/%2E%2E%2Fcompare.py",
                  "/static/nothing.js"):
        assert client.get(other).status_code == 404, other


def test_the_run_pages_details_are_markup_the_template_escaped(reports):
    # _table.js fills a detail row from the page's JSON: markup the template rendered, every value of
    # the run escaped in it (a chunk holding a script shows as text)
    page = TestClient(create_app(reports), base_url=LOCAL).get(f"/runs/{RUN}").text
    details = json.loads(re.search(r'<script type="application/json" id="q-details"[^>]*>(.*?)</script>', page,
                                   re.S).group(1))
    assert "&lt;script&gt;window.__pwned = 1" in details[0] and "<script>window" not in details[0]


@pytest.fixture
def read_only(tmp_path):
    """A reports folder with runs on a file system mounted read-only (root, whom permissions do
    not stop), or a folder without write permission (any other user)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        write_pair(folder)
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs")
    try:
        write_pair(folder)
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True, capture_output=True)
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_a_read_only_reports_folder_is_served_and_labelling_says_why_not(read_only):
    client = TestClient(create_app(read_only), base_url=LOCAL)
    home = client.get("/")
    assert home.status_code == 200 and RUN in home.text
    assert f"{read_only} is read-only" in home.text and "not a labels database" not in home.text
    assert client.get(f"/runs/{RUN}").status_code == 200
    assert client.get(f"/compare?run={RUN}&run=better/20261122-110000").status_code == 200
    label = client.get(f"/runs/{RUN}/label?annotator=ana")
    assert label.status_code == 200 and "is read-only" in label.text
    saved = client.post("/api/labels", json={"run": RUN, "id": "q01", "annotator": "ana", "label": "correct"})
    assert saved.status_code == 400 and "is read-only" in saved.json()["error"]
    assert not (read_only / "labels.sqlite").exists()


def test_an_app_that_never_served_leaves_nothing_in_the_reports_folder(reports):
    # lab serve makes its app before it binds: a port in use then left a labels.sqlite behind
    before = sorted(p.name for p in reports.iterdir())
    create_app(reports)
    assert sorted(p.name for p in reports.iterdir()) == before
    TestClient(create_app(reports), base_url=LOCAL).get("/")  # the first page that counts labels makes it
    assert (reports / "labels.sqlite").is_file()
