"""A real run seen through the served app while it works: listed in progress with its stage,
then, once written, in the runs table with its page (the real packaged embedding model)."""

import subprocess
import sys
import time

import pytest
from starlette.testclient import TestClient

from lab.serve.app import create_app
from runs import lab_env

pytestmark = pytest.mark.slow


def test_a_run_in_progress_is_listed_and_its_page_appears_when_it_ends(project):
    reports = project / "reports"
    reports.mkdir()
    client = TestClient(create_app(reports), base_url="http://127.0.0.1:8765")
    assert client.get("/api/runs").json()["runs"] == []
    proc = subprocess.Popen([sys.executable, "-m", "lab", "run", "small-retrieval", "--retrieval-only",
                             "--no-progress"], cwd=project, env=lab_env(project), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    seen = []
    while proc.poll() is None:
        for x in client.get("/api/running").json()["running"]:
            seen.append((x["name"], x["stage"], x["total"]))
        time.sleep(0.05)
    out = proc.stdout.read()
    assert proc.returncode == 0, out
    assert seen and {name for name, _, _ in seen} == {"small-retrieval"}
    stages = {stage for _, stage, total in seen if total}
    assert stages & {"index", "retrieve"}, seen  # the tickers' own names, with their totals
    assert client.get("/api/running").json()["running"] == []
    assert not list((reports / "small-retrieval").glob(".running-*"))
    (run,) = client.get("/api/runs").json()["runs"]
    assert run["name"] == "small-retrieval" and run["n"] == 6 and run["status"] == "full"
    page = client.get(f"/runs/small-retrieval/{run['run_id']}")
    assert page.status_code == 200 and "small-retrieval" in page.text
