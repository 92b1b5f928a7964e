"""Remote LLM faults from a fake OpenAI-compatible server on 127.0.0.1: timeouts, 429, 500,
malformed JSON and empty answers are retried with backoff, then recorded as failures."""

import pytest

from lab.models.llm import LLMCallError
from remote_server import SENTINEL_KEY, remote, server  # noqa: F401  (the fixture)

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize("fault", ["timeout", 429, 500, "badjson", "empty"])
def test_one_fault_then_an_answer(server, tmp_path, monkeypatch, fault):  # noqa: F811
    s = server([fault])
    llm = remote(s.url, tmp_path, monkeypatch, max_retries=2, timeout_s=1.0)
    out = llm.chat(MESSAGES, "p-v1")
    assert out.text == "echo: hello" and len(s.requests) == 2
    assert llm.usage.calls == 1 and llm.usage.failed == 0


@pytest.mark.parametrize("fault, says", [
    ("timeout", "Timeout"), (500, "InternalServerError"), ("badjson", "call failed"),
    ("empty", "empty answer")])
def test_persistent_faults_become_failures_without_the_key(server, tmp_path, monkeypatch, fault, says):  # noqa: F811
    s = server([fault] * 10)
    llm = remote(s.url, tmp_path, monkeypatch, max_retries=2, timeout_s=1.0)
    with pytest.raises(LLMCallError, match=says) as exc:
        llm.chat(MESSAGES, "p-v1")
    assert "after 2 retries" in str(exc.value) and SENTINEL_KEY not in str(exc.value)
    assert len(s.requests) == 3  # the call and 2 retries
    assert llm.usage.failed == 1 and llm.cache.get(llm.key(MESSAGES, "p-v1", None, 0.0, 0, None)) is None
