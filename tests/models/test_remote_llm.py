"""Remote backends against a local fake OpenAI-compatible server on 127.0.0.1."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lab.config import LLMConfig
from lab.models.llm import LabLLM
from lab.models.resolve import resolve_llm

from remote_server import SENTINEL_KEY, FakeServer, remote, server  # noqa: F401,E402  (server: the fixture)


def test_openai_compatible_answers_counts_tokens_and_cost(server, tmp_path, monkeypatch):
    s = server()
    llm = remote(s.url, tmp_path, monkeypatch)
    out = llm.chat([{"role": "user", "content": "hello"}], "p-v1")
    assert out.text == "echo: hello" and (out.prompt_tokens, out.completion_tokens) == (11, 3)
    req = s.requests[0]
    assert req["auth"] == f"Bearer {SENTINEL_KEY}" and req["body"]["model"] == "tiny"
    assert req["body"]["temperature"] == 0.0 and req["body"]["max_tokens"] == 256
    assert llm.usage.cost_usd == pytest.approx((11 * 1.0 + 3 * 2.0) / 1e6)
    assert llm.chat([{"role": "user", "content": "hello"}], "p-v1").cached and len(s.requests) == 1


def test_429_and_500_are_retried_with_backoff(server, tmp_path, monkeypatch):
    s = server(script=[429, 500])
    llm = remote(s.url, tmp_path, monkeypatch, max_retries=3)
    assert llm.chat([{"role": "user", "content": "q"}], "p").text == "echo: q"
    assert len(s.requests) == 3 and llm.usage.calls == 1


def test_retries_exhausted_raise_without_the_key(server, tmp_path, monkeypatch):
    s = server(script=[500, 500, 500])
    llm = remote(s.url, tmp_path, monkeypatch, max_retries=1)
    with pytest.raises(Exception) as exc:
        llm.chat([{"role": "user", "content": "q"}], "p")
    assert len(s.requests) == 2 and SENTINEL_KEY not in str(exc.value) and SENTINEL_KEY not in repr(exc.value)


def test_remote_calls_run_concurrently(server, tmp_path, monkeypatch):
    from lab.progress import run_all

    s = server(delay=0.3)
    llm = remote(s.url, tmp_path, monkeypatch, concurrency=4)
    outs = run_all(lambda i: llm.chat([{"role": "user", "content": f"q{i}"}], "p").text, list(range(8)),
                   "generate", False, llm.concurrency)
    assert outs == [f"echo: q{i}" for i in range(8)]  # input order kept
    assert 3 <= s.max_in_flight <= 4  # the server saw the calls overlap, never more than the limit


def test_a_run_against_a_failing_server_records_failures_and_finishes(tmp_path):
    """End to end through the CLI: one question's answer fails after retries (HTTP 500); it is
    recorded as a failed answer and a failed judgement, counted, and the run finishes."""
    import shutil
    from pathlib import Path

    from runs import lab, latest

    s = FakeServer()
    judge_json = '{"accuracy": 4, "completeness": 3, "relevance": 5, "feedback": "Close."}'
    handler = s.httpd.RequestHandlerClass

    def do_post(self):
        length = int(self.headers["Content-Length"])
        raw = self.rfile.read(length)
        body = json.loads(raw)
        user = body["messages"][-1]["content"]
        if "Question: How much does the Ember 90 cost?" in user and "Reference answer:" not in user:
            self.send_response(500)
            self.end_headers()
            return
        content = judge_json if "Reference answer:" in user else "An answer [1]."
        data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": content}}],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    handler.do_POST = do_post
    try:
        project = tmp_path / "project"
        shutil.copytree(Path(__file__).parents[1] / "fixtures", project)
        llm = (f"    backend: openai_compatible\n    base_url: {s.url}\n    model: fake\n"
               f"    api_key_env: LAB_TEST_KEY\n    max_retries: 1\n")
        (project / "experiments" / "remote.yaml").write_text(
            f"schema_version: 1\nextends: small\ngeneration:\n  llm:\n{llm}judge:\n  llm:\n{llm}")
        p = lab(project, "run", "remote", "--no-progress", LAB_TEST_KEY=SENTINEL_KEY)
        assert p.returncode == 0, p.stderr
        run = latest(project, "remote")
        results = json.loads((run / "results.json").read_text())
        samples = {json.loads(x)["id"]: json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()}
        f2 = samples["f2"]  # "How much does the Ember 90 cost?"
        assert f2["answer"]["status"] == "failed" and "HTTP" not in f2["answer"]["text"]
        assert "call failed after 1 retries" in f2["answer"]["error"]
        assert f2["judgement"]["status"] == "failed" and f2["judgement"]["error"].startswith("no answer to judge")
        assert results["answers"]["failed_ids"] == ["f2"] and results["judge"]["failed_ids"] == ["f2"]
        assert results["metrics"]["overall"]["accuracy"] == {"mean": 4.0, "n": 5}
        assert results["llm_usage"]["generation"]["failed"] == 1
        for path in run.iterdir():
            assert SENTINEL_KEY.encode() not in path.read_bytes()
        assert SENTINEL_KEY not in p.stdout + p.stderr
        assert "1 failed answer" in (run / "report.html").read_text()
    finally:
        s.close()


def test_openai_backend_goes_through_llamaindex_openai_with_its_price(server, tmp_path, monkeypatch):
    s = server()
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL_KEY)
    cfg = LLMConfig(backend="openai", model="gpt-4.1-nano", base_url=s.url)
    plan = resolve_llm(cfg, "judge", tmp_path)
    llm = LabLLM(plan, None)
    out = llm.chat([{"role": "user", "content": "hi"}], "p", schema={"type": "object"})
    assert out.text == "echo: hi" and type(llm.backend._llm).__name__ == "OpenAI"
    body = s.requests[0]["body"]
    assert body["response_format"]["type"] == "json_schema" and body["model"] == "gpt-4.1-nano"
    assert llm.usage.cost_usd == pytest.approx((11 * 0.10 + 3 * 0.40) / 1e6)


def test_workers_of_a_parallel_run_share_one_concurrency_limit(server, tmp_path, monkeypatch):
    """Each of N workers keeps concurrency // N requests in flight ($LAB_LLM_SHARE, set by
    lab.eval.parallel), so together they stay within the config's limit."""
    import threading

    from lab.models.llm import SHARE_ENV
    from lab.progress import run_all

    s = server(delay=0.2)
    llm = remote(s.url, tmp_path, monkeypatch, concurrency=4)
    assert llm.concurrency == 4
    monkeypatch.setenv(SHARE_ENV, "2")
    assert llm.concurrency == 2
    monkeypatch.setenv(SHARE_ENV, "8")
    assert llm.concurrency == 1  # never below one request
    monkeypatch.setenv(SHARE_ENV, "2")
    workers = [remote(s.url, tmp_path / f"w{i}", monkeypatch, concurrency=4) for i in range(2)]
    threads = [threading.Thread(target=run_all, args=(
        lambda i, w=w, n=n: w.chat([{"role": "user", "content": f"w{n} q{i}"}], "p").text, list(range(6)),
        "generate", False, w.concurrency)) for n, w in enumerate(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(s.requests) == 12 and 2 <= s.max_in_flight <= 4
