"""A local model's reply depends on its prompt alone (its cache key), not on the calls before it:
every role but the judge starts each llama.cpp call from an empty KV cache, so `lab generate`
killed and rerun writes what an uninterrupted run writes (a reused prefix changed an excerpt's
end from 282 to 283), and its resume replays cached calls instead of diverging."""

from __future__ import annotations

import pytest

from lab.caches import CallCache
from lab.config import LLMConfig
from lab.models.backends import PREFIX_REUSE_ROLES, LlamaCppBackend
from lab.models.llm import LabLLM
from lab.models.resolve import LLMPlan

A = [{"role": "user", "content": "write a question about document A"}]
B = [{"role": "user", "content": "write a question about document B"}]


class StatefulLlama:
    """Stands in for ``llama_cpp.Llama``: its reply says how many tokens its KV cache held before
    the call, as the last bits of a real model's logits do when a prefix is reused."""

    def __init__(self):
        self.n_tokens = 0

    def reset(self):
        self.n_tokens = 0

    def create_chat_completion(self, messages, **kwargs):
        text = f"{messages[-1]['content']} ({self.n_tokens} tokens held before)"
        self.n_tokens += 10
        return {"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


def backend(role: str) -> LlamaCppBackend:
    b = LlamaCppBackend(LLMPlan(LLMConfig(model="m"), role, "m.gguf", "m.gguf:abc"))
    b._llm = StatefulLlama()  # the loaded model
    return b


@pytest.mark.parametrize("role", ["testset", "check", "generation", "query rewriting", "headers.summary"])
def test_a_reply_does_not_depend_on_the_call_before_it(role):
    alone = backend(role).chat(B, None, 0.0, 0).text
    after = backend(role)
    after.chat(A, None, 0.0, 0)
    assert after.chat(B, None, 0.0, 0).text == alone == "write a question about document B (0 tokens held before)"


def test_only_the_judge_reuses_prefixes():
    assert PREFIX_REUSE_ROLES == {"judge"}
    judge = backend("judge")
    judge.chat(A, None, 0.0, 0)
    assert judge.chat(B, None, 0.0, 0).text.endswith("(10 tokens held before)")


def test_a_resumed_generate_gets_what_an_uninterrupted_one_got(tmp_path):
    """An uninterrupted run asks A then B; a run killed after A resumes in a new process, where A
    comes from the cache and B is computed first: B is the same."""

    def llm(cache: str) -> LabLLM:
        b = backend("testset")
        return LabLLM(b.plan, CallCache(tmp_path / cache), b)

    whole = llm("whole.sqlite")
    whole_b = [whole.chat(m, "generate-qa-v1").text for m in (A, B)][1]
    killed = llm("resumed.sqlite")
    killed.chat(A, "generate-qa-v1")
    resumed = llm("resumed.sqlite")  # a new process on the same cache
    assert resumed.chat(A, "generate-qa-v1").cached
    assert resumed.chat(B, "generate-qa-v1").text == whole_b
