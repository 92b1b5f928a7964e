"""Repeatability of judgements: judge repeats at a sampling temperature, answer repeats, and
what lands in the record (the arithmetic itself is tested in test_repeatability.py)."""

import json

from lab.config import JudgeConfig, LLMConfig
from lab.judge.rubric import JUDGE_FIELDS, JudgePlan
from lab.judge.methods import grader
from lab.judge.repeats import REPEAT_TEMPERATURE, repeat_judgements
from lab.models.backends import Completion
from lab.models.llm import LabLLM
from lab.models.resolve import LLMPlan
from lab.prompts import load_prompt


class BySeed:
    """A judge whose accuracy is the seed's parity (seed 1 -> 4, seed 2 -> 5, ...), and whose
    other two scores never change: the flip rate is known by construction."""

    def __init__(self):
        self.calls = []

    def chat(self, messages, schema, temperature, seed, max_tokens=None):
        self.calls.append((temperature, seed, max_tokens))
        acc = 4 if seed % 2 else 5
        return Completion(f'{{"accuracy": {acc}, "completeness": 3, "relevance": 5, "feedback": "x"}}', 50, 10, 0.1,
                          "stop")


class Writer:
    """A generator answering with the seed in the text."""

    def __init__(self):
        self.calls = []

    def chat(self, messages, schema, temperature, seed, max_tokens=None):
        self.calls.append((temperature, seed))
        return Completion(f"answer {seed}", 50, 3, 0.1, "stop")


class Synth:
    def __init__(self, llm):
        self.lab_llm = llm
        self.prompt = load_prompt("answer-grounded-v1", {"context", "question"})

    def messages(self, question, context):
        return self.prompt.messages(context=context, question=question)


def _setup(repeats):
    cfg = JudgeConfig(repeats=repeats, method="rubric")
    plan = JudgePlan(cfg, LLMPlan(cfg.llm, "judge", "m.gguf", "m:1"), load_prompt("judge-v1", JUDGE_FIELDS))
    judge = LabLLM(plan.llm, None, BySeed())
    samples = [{"id": f"q{i}", "question": f"Q{i}?", "reference_answer": f"R{i}.", "category": "c",
                "answer": {"status": "ok", "text": f"A{i}."}, "context": {"text": f"ctx {i}"}} for i in range(3)]
    samples.append({"id": "q9", "question": "Q9?", "reference_answer": "R9.", "category": "c",
                    "answer": {"status": "failed", "text": ""}, "context": {"text": "x"}})
    return plan, judge, samples


def _serial(fn, keys):
    return [fn(k) for k in keys]


def test_judge_repeats_sample_at_the_repeat_temperature_with_seeds_1_to_k():
    plan, judge, samples = _setup(3)
    out = repeat_judgements(samples, judge, plan, None, None, grader(judge, plan), _serial)
    # 3 answered questions x 3 repeats; the failed answer is not judged
    assert judge.backend.calls == [(REPEAT_TEMPERATURE, s, 32) for _ in range(3) for s in (1, 2, 3)]
    assert (out["judge_repeats"], out["answer_repeats"], out["n_questions"], out["deterministic"]) == (3, 1, 3, False)
    acc, comp = out["by_dimension"]["accuracy"], out["by_dimension"]["completeness"]
    # every answer scored 4, 5, 4: all three flip; pairs (4,5) (4,4) (5,4) -> 2 of 3 disagree
    assert acc["flip_rate"] == 1.0 and abs(acc["pairwise_disagreement"] - 2 / 3) < 1e-12
    assert comp["flip_rate"] == 0.0 and "variance_components" not in acc
    json.dumps(out, allow_nan=False)  # results.json-ready


def test_answer_repeats_regenerate_from_the_same_context_and_split_the_variance():
    plan, judge, samples = _setup(2)
    writer = LabLLM(LLMPlan(LLMConfig(), "generation", "g.gguf", "g:1"), None, Writer())
    out = repeat_judgements(samples, judge, plan, Synth(writer), 2, grader(judge, plan), _serial)
    assert writer.backend.calls == [(REPEAT_TEMPERATURE, s) for _ in range(3) for s in (1, 2)]
    assert (out["judge_repeats"], out["answer_repeats"]) == (2, 2)
    assert len(judge.backend.calls) == 3 * 2 * 2
    vc = out["by_dimension"]["accuracy"]["variance_components"]
    # scores differ only between judge repeats (4 then 5 for every answer): all variance is the judge's
    assert vc["components"]["judge"]["share"] == 1.0
    assert vc["components"]["answer"]["variance"] == 0.0 and vc["components"]["question"]["variance"] == 0.0


def test_probability_weighted_methods_are_deterministic_so_only_answers_repeat():
    cfg = JudgeConfig(repeats=3, method="rubric-expected")
    plan = JudgePlan(cfg, LLMPlan(cfg.llm, "judge", "m.gguf", "m:1"), load_prompt("judge-v1", JUDGE_FIELDS))

    class Probs:
        def choice_logprobs(self, messages, prefix, choices):
            return Completion(json.dumps({c: (-0.1 if c == "4" else -5.0) for c in choices}), 10, 0, 0.01, "logprobs")

    judge = LabLLM(plan.llm, None, Probs())
    _, _, samples = _setup(3)
    out = repeat_judgements(samples, judge, plan, None, None, grader(judge, plan), _serial)
    assert (out["judge_repeats"], out["deterministic"], out["method"]) == (1, True, "rubric-expected")
    assert out["by_dimension"]["accuracy"]["n_left_out"] == 3  # one judgement per answer: nothing to compare
