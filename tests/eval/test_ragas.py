"""lab.eval.ragas: ragas metrics with a rule-following fake judge, so every value is hand arithmetic.

The fake LLM answers ragas' own prompts (recognised by their instructions) by string rules on the
input JSON at the end of each prompt: statements are the answer's sentences, a statement or
sentence is supported when the context contains it verbatim.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback

from lab.errors import ConfigError, DataError
from lab.eval.ragas import RAGAS_METRICS, evaluate_ragas

PROMPT_KINDS = {  # the first words of each ragas 0.4.3 prompt's instruction
    "Given a question and an answer, analyze the complexity": "statements",
    "Your task is to judge the faithfulness": "nli",
    "Generate a question for the given answer": "question",
    "Given question, answer and context verify": "precision",
    "Given a context, and an answer, analyze each sentence": "recall",
    "The output string did not satisfy": "fix",
}


def sentences(text: str) -> list[str]:
    return [s.strip() for s in text.split(".") if s.strip()]


def supported(sentence: str, context: str) -> int:
    return int(sentence.lower() in context.lower())


RULES = {
    "statements": lambda i: {"statements": [s + "." for s in sentences(i["answer"])]},
    "nli": lambda i: {
        "statements": [
            {"statement": s, "reason": "rule", "verdict": supported(s.rstrip("."), i["context"])}
            for s in i["statements"]
        ]
    },
    "question": lambda i: {"question": GENERATED[i["response"]], "noncommittal": int("don't know" in i["response"])},
    "precision": lambda i: {"reason": "rule", "verdict": max(supported(s, i["context"]) for s in sentences(i["answer"]))},
    "recall": lambda i: {
        "classifications": [
            {"statement": s, "reason": "rule", "attributed": supported(s, i["context"])} for s in sentences(i["answer"])
        ]
    },
}


class RuleJudge(CustomLLM):
    """Answers ragas' prompts by RULES; ``outputs``/``raises`` replace a prompt kind's answer."""

    outputs: dict = Field(default_factory=dict)
    raises: dict = Field(default_factory=dict)
    _calls: list = PrivateAttr(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="rule-judge")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs) -> CompletionResponse:
        kind = next(k for start, k in PROMPT_KINDS.items() if prompt.startswith(start))
        self._calls.append(kind)
        if kind in self.raises:
            raise RuntimeError(self.raises[kind])
        if kind in self.outputs:
            return CompletionResponse(text=self.outputs[kind])
        data = json.loads(prompt.rsplit("\ninput: ", 1)[1].rsplit("\nOutput: ", 1)[0])
        return CompletionResponse(text="```json\n" + json.dumps(RULES[kind](data)) + "\n```")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs):
        raise NotImplementedError


C1 = "The Ember 90 kiln holds 90 litres. It costs 4,200 euros."
C2 = "Brightwater Kilns was founded in Lyon."
Q1 = "How much does the Ember 90 hold?"
A1 = "The Ember 90 kiln holds 90 litres. The Ember 90 ships in red."
Q2 = "What is the capacity of the Ember 90?"
A2 = "The Ember 90 kiln holds 90 litres."
GENERATED = {A1: "What does the Ember 90 hold?", A2: Q2, "I don't know.": "What is the Ember 90?"}
VECTORS = {Q1: [1.0, 0.0], "What does the Ember 90 hold?": [1.0, 1.0], Q2: [0.0, 3.0], "What is the Ember 90?": [1.0, 0.0]}


class TableEmbedding(BaseEmbedding):
    """Vectors from VECTORS; an unexpected text fails the test."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return VECTORS[query]

    def _get_text_embedding(self, text: str) -> list[float]:
        return VECTORS[text]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return VECTORS[query]


ROWS = [
    {"id": "q1", "question": Q1, "answer": A1, "contexts": [C2, C1], "reference": "The Ember 90 kiln holds 90 litres. It weighs 80 kg."},
    {"id": "q2", "question": Q2, "answer": A2, "contexts": [C1, C2], "reference": A2},
]
EXPECTED = {
    # faithfulness: 1 of 2 statements in the contexts; answer relevancy: cos([1,0],[1,1]) = 1/sqrt(2);
    # context precision: verdicts [0, 1], AP = (1/2 * 1) / 1; context recall: 1 of 2 reference sentences
    "q1": {"faithfulness": 0.5, "answer_relevancy": 1 / math.sqrt(2), "context_precision": 0.5, "context_recall": 0.5},
    # 1 of 1 statement; generated question == question, cos 1; verdicts [1, 0], AP = 1; 1 of 1 sentence
    "q2": {"faithfulness": 1.0, "answer_relevancy": 1.0, "context_precision": 1.0, "context_recall": 1.0},
}


@pytest.fixture
def ragas():
    return pytest.importorskip("ragas")


@pytest.fixture
def offline(monkeypatch):
    """Fail on any OpenAI client; record (and refuse) any DNS lookup or connection attempt.
    (Without RAGAS_DO_NOT_TRACK ragas would look up its analytics host on every prompt.)"""
    openai = pytest.importorskip("openai")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    attempts = []

    def no_client(self, *args, **kwargs):
        raise AssertionError("an OpenAI client was constructed")

    def no_connect(self, address):
        attempts.append(address)
        raise OSError("network is off in tests")

    def no_lookup(host, *args, **kwargs):
        attempts.append(host)
        raise OSError("network is off in tests")

    monkeypatch.setattr(openai.OpenAI, "__init__", no_client)
    monkeypatch.setattr(openai.AsyncOpenAI, "__init__", no_client)
    monkeypatch.setattr(socket.socket, "connect", no_connect)
    monkeypatch.setattr(socket, "getaddrinfo", no_lookup)
    return attempts


def approx(result: dict) -> dict:
    return {k: pytest.approx(v, abs=1e-9) for k, v in result.items()}


def test_values_are_the_hand_arithmetic_and_nothing_reaches_openai(ragas, offline):
    judge = RuleJudge()
    out = evaluate_ragas(ROWS, judge, TableEmbedding())
    assert [r["id"] for r in out] == ["q1", "q2"]
    for row in out:
        assert {m: row[m] for m in RAGAS_METRICS} == approx(EXPECTED[row["id"]])
        assert row["errors"] == {}
        assert set(row["seconds"]) == set(RAGAS_METRICS)
    # per row: 2 faithfulness calls, 1 question, 1 precision verdict per context, 1 recall; no fixes
    assert judge._calls == ["statements", "nli", "question", "precision", "precision", "recall"] * 2
    assert offline == []


def test_a_malformed_output_is_none_with_its_message_and_the_others_still_count(ragas, offline):
    judge = RuleJudge(outputs={"nli": "Sorry, I cannot judge that.", "fix": "Still sorry."})
    out = evaluate_ragas(ROWS[:1], judge, TableEmbedding())
    row = out[0]
    assert row["faithfulness"] is None
    assert "RagasOutputParserException" in row["errors"]["faithfulness"]
    assert "Still sorry." in row["errors"]["faithfulness"]  # the last thing the LLM wrote
    assert list(row["errors"]) == ["faithfulness"]
    others = {m: row[m] for m in RAGAS_METRICS if m != "faithfulness"}
    assert others == approx({m: v for m, v in EXPECTED["q1"].items() if m != "faithfulness"})
    # ragas asks the LLM to fix the format 3 times, then gives up
    assert judge._calls[:5] == ["statements", "nli", "fix", "fix", "fix"]
    assert offline == []


def test_an_llm_exception_is_recorded_once_without_retries(ragas, offline):
    judge = RuleJudge(raises={"recall": "llama.cpp: context window exceeded"})
    row = evaluate_ragas(ROWS[1:], judge, TableEmbedding(), metrics=("context_recall", "faithfulness"))[0]
    assert row["context_recall"] is None
    assert row["errors"] == {"context_recall": "RuntimeError: llama.cpp: context window exceeded"}
    assert row["faithfulness"] == 1.0
    assert judge._calls.count("recall") == 1
    assert "answer_relevancy" not in row


def test_nan_from_ragas_becomes_none_with_a_reason(ragas, offline):
    judge = RuleJudge(outputs={"statements": '{"statements": []}'})
    row = evaluate_ragas(ROWS[1:], judge, TableEmbedding(), metrics=("faithfulness",))[0]
    assert row["faithfulness"] is None and "NaN" in row["errors"]["faithfulness"]


def test_missing_inputs_are_reported_without_asking_the_llm(ragas, offline):
    judge = RuleJudge()
    rows = [{"id": 7, "question": "Is it hot?", "answer": "I don't know.", "contexts": [C1], "reference": ""}]
    VECTORS["Is it hot?"] = [0.0, 1.0]
    try:
        row = evaluate_ragas(rows, judge, TableEmbedding())[0]
    finally:
        del VECTORS["Is it hot?"]
    assert row["context_precision"] is None and row["context_recall"] is None
    assert row["errors"] == {
        "context_precision": "not computed: the row has no reference answer",
        "context_recall": "not computed: the row has no reference answer",
    }
    assert row["faithfulness"] == 0.0  # "I don't know" is not in the context
    assert row["answer_relevancy"] == 0.0  # noncommittal
    assert "precision" not in judge._calls and "recall" not in judge._calls


def test_unknown_metric_and_bad_rows_fail_before_any_work():
    with pytest.raises(ConfigError, match="unknown ragas metric 'faithfullness'.*\n.*did you mean 'faithfulness'"):
        evaluate_ragas(ROWS, RuleJudge(), TableEmbedding(), metrics=("faithfullness",))
    bad = [ROWS[0], {k: v for k, v in ROWS[1].items() if k != "reference"}]
    with pytest.raises(DataError, match=r"ragas row 1 \(id 'q2'\): missing 'reference'"):
        evaluate_ragas(bad, RuleJudge(), TableEmbedding())
    with pytest.raises(DataError, match="'contexts' must be a list of strings"):
        evaluate_ragas([{**ROWS[0], "contexts": C1}], RuleJudge(), TableEmbedding())


def test_importing_the_module_imports_nothing_heavy():
    code = (
        "import sys, lab.eval.ragas; "
        "heavy = [m for m in ('ragas', 'langchain_core', 'langchain_community', 'openai', 'tiktoken') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_offline_env_points_tiktoken_at_the_bundled_cache(monkeypatch):
    from lab.eval.ragas import offline_env

    for name in ("TIKTOKEN_CACHE_DIR", "RAGAS_DO_NOT_TRACK", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, "")  # so that monkeypatch restores them afterwards
        monkeypatch.delenv(name)
    offline_env()
    cache = Path(os.environ["TIKTOKEN_CACHE_DIR"])
    assert cache.parts[-3:] == ("core", "_static", "tiktoken_cache") and any(cache.iterdir())
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["RAGAS_DO_NOT_TRACK"] == "true"
