"""The synthesizer: prompt layout, citations, history, refusals and failures (fake LLMs)."""

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from lab.config import GenerationConfig, LLMConfig
from lab.rag.generation import REFUSAL, LabSynthesizer, is_refusal, parse_citations
from lab.models.backends import Completion
from lab.models.llm import LabLLM
from lab.models.resolve import LLMPlan


@pytest.mark.parametrize("text, n, expected", [
    ("In Boise [1].", 3, [1]),
    ("A [2] and B [1, 3]; again [2].", 3, [2, 1, 3]),   # first mention order, no repeats
    ("See [4] and [0].", 3, []),                        # outside 1..n
    ("Both [1;2].", 2, [1, 2]),
    ("No citation.", 2, []),
])
def test_parse_citations(text, n, expected):
    assert parse_citations(text, n) == expected


def test_refusal_detection():
    assert is_refusal(REFUSAL) and is_refusal("The passages do not contain enough information.")
    assert not is_refusal("It has enough range for 40 acres.")


class Echo:
    def __init__(self, text="In Boise [2].", fail=False):
        self.text, self.fail, self.seen = text, fail, []

    def chat(self, messages, schema, temperature, seed, max_tokens=None):
        self.seen.append(messages)
        if self.fail:
            raise TimeoutError("read timed out")
        return Completion(self.text, 120, 6, 0.4, "stop")


def synth(backend):
    plan = LLMPlan(LLMConfig(), "generation", "m.gguf", "m:1")
    return LabSynthesizer(LabLLM(plan, None, backend), GenerationConfig())


def nodes():
    return [NodeWithScore(node=TextNode(text=t, id_=i, metadata={"source": s}), score=0.5)
            for t, i, s in (("HQ text", "a", "company/about.md"), ("Boise text", "b", "company/history.md"))]


def test_answer_record_prompt_and_cited_sources():
    backend = Echo()
    record, ctx = synth(backend).answer("Where is it?", nodes())
    assert record["status"] == "ok" and record["text"] == "In Boise [2]."
    assert record["citations"] == [2] and record["cited_sources"] == ["company/history.md"]
    assert (record["prompt_tokens"], record["completion_tokens"], record["refused"]) == (120, 6, False)
    system, user = backend.seen[0]
    assert system["role"] == "system" and "only the numbered context passages" in system["content"]
    assert user["content"] == ("Context:\n[1] (source: company/about.md)\nHQ text\n\n"
                               "[2] (source: company/history.md)\nBoise text\n\nQuestion: Where is it?")
    assert ctx.n_candidates == 2 and record["prompt_version"] == "answer-grounded-v1"


def test_history_goes_between_the_system_prompt_and_the_question():
    backend = Echo()
    history = [{"role": "user", "content": "Who founded it?"}, {"role": "assistant", "content": "Odile."}]
    synth(backend).answer("And where?", nodes(), history)
    roles = [m["role"] for m in backend.seen[0]]
    assert roles == ["system", "user", "assistant", "user"] and backend.seen[0][1]["content"] == "Who founded it?"


def test_no_context_refuses_without_a_call_and_a_failed_call_is_recorded():
    backend = Echo()
    record, _ = synth(backend).answer("Q?", [])
    assert record["text"] == REFUSAL and record["no_context"] and backend.seen == []
    record, _ = synth(Echo(fail=True)).answer("Q?", nodes())
    assert record["status"] == "failed" and record["text"] == ""
    assert record["error"] == "generation LLM (qwen2.5-coder-1.5b-instruct) call failed: TimeoutError: read timed out"


def test_synthesize_returns_a_llamaindex_response_with_the_sources_used():
    response = synth(Echo()).synthesize("Where is it?", nodes())
    assert str(response) == "In Boise [2]." and [n.node.node_id for n in response.source_nodes] == ["a", "b"]
    assert response.metadata["answer"]["citations"] == [2] and response.metadata["context"]["n_passages"] == 2
