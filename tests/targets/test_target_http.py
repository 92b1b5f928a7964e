"""An ``http`` target against a local test server (``target_server.py``, 127.0.0.1 only): the
failure matrix (timeouts, 500s, malformed JSON, huge bodies, missing fields, slow replies: each
in this process, and a mix of them through ``lab run``), the
bound on calls in flight, the version read from a header, a secret header that appears in no
output, a killed run that resumes with no repeated call, and an unreachable URL refused at
start-up in seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.config import TargetConfig
from lab.targets.contract import TargetCallError
from lab.targets.http import HttpTarget
from runs import lab, lab_env, latest, load
from target_server import Server

SECRET = "Bearer s3cr3t-7f3a9c"

CONFIG = """schema_version: 1
data:
  knowledge_base: kb
  eval_set: eval.jsonl
target:
  http: {url}
{extra}judge: null
"""


def _write(project: Path, url: str, extra: str = "") -> None:
    (project / "experiments" / "svc.yaml").write_text(CONFIG.format(url=url, extra=extra))


def test_contract_failures_in_process():
    """Each failure is one TargetCallError naming what broke; the server counts each try."""
    with Server() as server:
        server.modes.update(a="badjson", b="noanswer", c="notlist", d="huge", e="500", f="flaky", g="slow")
        server.huge_mb = 1.0
        t = HttpTarget(TargetConfig(http=server.url, timeout_s=0.5, retries=1, backoff_s=0.01, max_response_mb=0.25))
        assert t.probe() is None  # any status will do: the GET answers 405
        expected = {"a": "the reply is not JSON", "b": "the reply has no 'answer' (the answer)",
                    "c": "'contexts' is a string, not a list", "d": "bytes, over max_response_mb (0.25 MB)",
                    "e": "HTTP 500 Internal Server Error: internal error (after 2 tries)",
                    "g": "timed out after 0.5 s (after 2 tries)"}
        for qid, message in expected.items():
            with pytest.raises(TargetCallError) as err:
                t.ask("q", [], qid)
            assert message in err.value.message, (qid, err.value.message)
        reply = t.ask("q", [], "f")  # a 500, then an answer: retried once
        assert reply["answer"] == "The Ember 90 costs 8,400 euros [1]." and len(reply["contexts"]) == 2
        assert reply["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.001}
        # retried: the timeout, the 500s and the flaky one; never the malformed replies
        assert server.calls == {"a": 1, "b": 1, "c": 1, "d": 1, "e": 2, "f": 2, "g": 2}


@pytest.mark.slow
def test_matrix_end_to_end_concurrency_version_and_secret(project):
    with Server(version="v7", delay=0.5) as server:  # every answer takes 0.5 s: two overlap
        server.modes.update(f2="echo500", f3="huge", f4="flaky", f5="notlist")
        server.huge_mb = 1.0
        _write(project, server.url, "  version_header: X-Rag-Version\n  headers:\n    Authorization: RAG_TOKEN\n"
                                    "  timeout_s: 5\n  retries: 1\n  backoff_s: 0.05\n  concurrency: 2\n"
                                    "  max_response_mb: 0.5\n")
        proc = lab(project, "run", "svc", "--no-progress", RAG_TOKEN=SECRET)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert server.max_inflight == 2  # the bound, reached and never passed
        assert all(h.get("Authorization") == SECRET for h in server.headers)
        assert server.calls == {"f1": 1, "f2": 2, "f3": 1, "f4": 2, "f5": 1, "f6": 1}
    run = latest(project, "svc")
    results, samples = load(run)
    t = results["target"]
    assert (t["version"], t["version_from"], t["failed_ids"]) == ("v7", "X-Rag-Version", ["f2", "f3", "f5"])
    assert t["errors"]["f2"] == "HTTP 500 Internal Server Error: bad request from *** (after 2 tries)"
    assert "over max_response_mb (0.5 MB)" in t["errors"]["f3"]
    assert t["errors"]["f5"].startswith("'contexts' is a string, not a list")
    assert "version: v7" in (run / "config.yaml").read_text()
    ok = {s["id"]: s for s in samples}["f6"]
    assert ok["answer"]["prompt_tokens"] == 10 and results["llm_usage"]["target"]["cost_usd"] == pytest.approx(0.003)
    # the secret is in no file the run or the cache wrote, nor in what it printed
    for path in project.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_killed_run_resumes_without_a_repeated_call(project):
    with Server() as server:
        server.modes["f4"] = "hold"  # in flight when the run is killed
        _write(project, server.url, "  version: '1'\n  concurrency: 1\n")
        proc = subprocess.Popen([sys.executable, "-m", "lab", "run", "svc", "--retrieval-only", "--no-progress"],
                                cwd=project, env=lab_env(project), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 120
        while "f4" not in server.calls and time.monotonic() < deadline:
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert server.calls == {"f1": 1, "f2": 1, "f3": 1, "f4": 1}
        server.modes.clear()
        server.release.set()
        done = lab(project, "run", "svc", "--retrieval-only", "--no-progress")
        assert done.returncode == 0, done.stderr[-3000:]
        # the replies stored before the kill are not asked for again; the one in flight is
        assert server.calls == {"f1": 1, "f2": 1, "f3": 1, "f4": 2, "f5": 1, "f6": 1}
    t = load(latest(project, "svc"))[0]["target"]
    assert (t["cached"], t["called"], t["failed"]) == (3, 3, 0)


def test_unreachable_url_fails_at_start_up(project):
    _write(project, "http://127.0.0.1:9/rag")  # port 9 (discard): nothing listens
    t0 = time.monotonic()
    proc = lab(project, "run", "svc", "--retrieval-only", "--no-progress")
    assert proc.returncode == 2
    assert "field 'target.http': http://127.0.0.1:9/rag cannot be reached (connection refused" in proc.stderr
    assert "fix: start the service" in proc.stderr and "Traceback" not in proc.stderr
    assert time.monotonic() - t0 < 60  # the interpreter's start included; the check itself is bounded at 5 s
    assert not (project / "reports" / "svc").exists()
