"""The LLM layer: content cache, counters, cost, keys and start-up checks (fake backends)."""

import pytest

from lab.config import LLMConfig
from lab.errors import ConfigError
from lab.caches import CallCache
from lab.models.backends import Completion
from lab.models.llm import LabLLM
from lab.models.resolve import LLMPlan, read_dotenv, resolve_llm

MSGS = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


class FakeBackend:
    def __init__(self, texts=("answer",)):
        self.texts = list(texts)
        self.calls = []

    def chat(self, messages, schema, temperature, seed, max_tokens=None):
        self.calls.append((messages, schema, temperature, seed))
        return Completion(self.texts[min(len(self.calls), len(self.texts)) - 1], 100, 20, 0.5, "stop")


def make(tmp_path, backend=None, **cfg):
    plan = LLMPlan(LLMConfig(**cfg), "generation", "model.gguf", "model.gguf:abc")
    return LabLLM(plan, CallCache(tmp_path / "llm.sqlite"), backend or FakeBackend())


def test_second_identical_call_comes_from_the_cache(tmp_path):
    llm = make(tmp_path)
    a = llm.chat(MSGS, "p-v1")
    b = llm.chat(MSGS, "p-v1")
    assert (a.text, a.cached, b.text, b.cached) == ("answer", False, "answer", True)
    assert len(llm.backend.calls) == 1
    u = llm.usage
    assert (u.calls, u.cached, u.prompt_tokens, u.completion_tokens, u.seconds) == (1, 1, 100, 20, 0.5)
    # a new process (new LabLLM, same file) still finds it
    again = make(tmp_path)
    assert again.chat(MSGS, "p-v1").cached and again.backend.calls == []


@pytest.mark.parametrize("change", [
    {"prompt_version": "p-v2"},
    {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u2"}]},
    {"schema": {"type": "object"}},
    {"temperature": 0.7},
    {"seed": 1},
])
def test_anything_that_changes_the_output_changes_the_key(tmp_path, change):
    llm = make(tmp_path)
    llm.chat(MSGS, "p-v1")
    args = {"messages": MSGS, "prompt_version": "p-v1", "schema": None, "temperature": None, "seed": None, **change}
    assert llm.chat(**args).cached is False and len(llm.backend.calls) == 2


def test_max_tokens_and_model_are_in_the_key(tmp_path):
    make(tmp_path).chat(MSGS, "p")
    assert make(tmp_path, max_tokens=64).chat(MSGS, "p").cached is False
    plan = LLMPlan(LLMConfig(), "generation", "other.gguf", "other.gguf:def")
    assert LabLLM(plan, CallCache(tmp_path / "llm.sqlite"), FakeBackend()).chat(MSGS, "p").cached is False


def test_stop_strings_are_in_the_key_only_when_given(tmp_path):
    import hashlib
    import json

    class Stops(FakeBackend):
        def chat(self, messages, schema, temperature, seed, max_tokens=None, stop=None):
            self.calls.append(stop)
            return Completion("{\"question\": \"Why", 100, 3, 0.5, "stop")

    llm = make(tmp_path, backend=Stops())
    body = {"model": "model.gguf:abc", "max_tokens": LLMConfig().max_tokens, "temperature": 0.0, "seed": 0,
            "prompt_version": "p", "messages": MSGS, "schema": None, "n_ctx": LLMConfig().n_ctx}
    # a call without stop strings keeps the key it always had (every cached reply still found)
    assert llm.key(MSGS, "p", None, 0.0, 0) == hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    assert llm.key(MSGS, "p", None, 0.0, 0, stop=["?"]) != llm.key(MSGS, "p", None, 0.0, 0)
    llm.chat(MSGS, "p", stop=["?"])
    llm.chat(MSGS, "p")  # not the reply stopped at "?"
    assert llm.backend.calls == [["?"], None]
    assert llm.chat(MSGS, "p", stop=["?"]).cached


def test_cost_of_priced_models_and_none_for_unknown_remote(tmp_path):
    plan = LLMPlan(LLMConfig(backend="openai", model="gpt-4.1-nano"), "judge", "gpt-4.1-nano", "openai:x")
    llm = LabLLM(plan, None, FakeBackend())
    llm.chat(MSGS, "p")
    assert llm.usage.cost_usd == pytest.approx((100 * 0.10 + 20 * 0.40) / 1e6)
    plan = LLMPlan(LLMConfig(backend="openai_compatible", model="llama3", base_url="http://127.0.0.1:1/v1"),
                   "judge", "llama3", "x")
    assert LabLLM(plan, None, FakeBackend()).usage.cost_usd is None
    assert make(tmp_path).usage.cost_usd == 0.0  # local: free


def test_openai_without_key_stops_with_a_clear_message(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError) as exc:
        resolve_llm(LLMConfig(backend="openai", model="gpt-4.1-nano"), "judge", tmp_path)
    msg = str(exc.value)
    assert "judge.llm: model 'gpt-4.1-nano' uses the OpenAI API, and OPENAI_API_KEY is not set" in msg
    assert "put it in .env" in msg


def test_key_from_dotenv_is_used_and_never_described(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (tmp_path / ".env").write_text("# keys\nexport OPENAI_API_KEY='sk-sentinel-123'\nOTHER=1\n")
    assert read_dotenv(tmp_path / ".env") == {"OPENAI_API_KEY": "sk-sentinel-123", "OTHER": "1"}
    plan = resolve_llm(LLMConfig(backend="openai", model="gpt-4.1-nano"), "generation", tmp_path)
    assert plan.key == "sk-sentinel-123"
    assert "sk-sentinel" not in repr(plan) and "sk-sentinel" not in str(plan.describe())


def test_backend_config_rules():
    with pytest.raises(ValueError, match="needs base_url"):
        LLMConfig(backend="openai_compatible", model="m")
    with pytest.raises(ValueError, match="runs a local GGUF"):
        LLMConfig(base_url="http://x")


def test_unreachable_compatible_server_stops_at_start_up(tmp_path):
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    cfg = LLMConfig(backend="openai_compatible", model="m", base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ConfigError) as exc:
        resolve_llm(cfg, "generation", tmp_path)
    assert f"generation.llm: the server at http://127.0.0.1:{port}/v1 does not answer" in str(exc.value)
    assert "ollama serve" in str(exc.value)


def test_a_failing_call_is_an_llm_call_error_without_the_key(tmp_path):
    from lab.models.llm import LLMCallError

    class Boom:
        def chat(self, *a, **k):
            raise RuntimeError("401 for key sk-sentinel-9 at server")

    plan = LLMPlan(LLMConfig(backend="openai", model="gpt-4.1-nano"), "judge", "gpt-4.1-nano", "x", key="sk-sentinel-9")
    llm = LabLLM(plan, None, Boom())
    with pytest.raises(LLMCallError) as exc:
        llm.chat(MSGS, "p")
    assert str(exc.value) == "judge LLM (gpt-4.1-nano) call failed after 5 retries: RuntimeError: 401 for key *** at server"
    assert llm.usage.failed == 1 and llm.usage.calls == 0
