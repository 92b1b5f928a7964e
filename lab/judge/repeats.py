"""Repeatability: the same answer judged k times, and the same question answered g times.

``judge.repeats: k`` judges every answer k more times with seeds 1..k at a sampling
temperature (``judge.repeat_temperature``, 0.7 by default) and reports, per dimension, the flip
rate and the intra-class correlation (:mod:`lab.metrics.repeatability`). With
``generation.repeats: g`` every question is answered g times (seeds 1..g at the same
temperature, from the same context) and each answer judged k times (once without judge
repeats), so the variance of a score splits into question, answer and judge parts: how much
of the noise comes from the generator and how much from the judge.

Probability-weighted methods (``rubric-expected``, ``per-dimension``, ``claims``) read a
distribution instead of sampling one: their repeats are identical by construction, so only
answer repeats are run for them, and the record says so.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from lab.judge.rubric import DIMENSIONS, JudgePlan, judge_item, judge_one
from lab.metrics.repeatability import summary
from lab.models.llm import LabLLM, LLMCallError

REPEAT_TEMPERATURE = 0.7


def repeat_judgements(samples: Sequence[dict], judge_llm: LabLLM, plan: JudgePlan, generator: Any,
                      answer_repeats: int | None, grade: Callable[..., dict], runner: Callable[..., list]) -> dict:
    """Judge (and, with ``answer_repeats``, regenerate) every answered sample; the summary for
    results.json: {judge_repeats, answer_repeats, temperature, deterministic, by_dimension}."""
    cfg = plan.cfg
    method = getattr(grade, "method", "rubric")
    deterministic = method != "rubric"
    k = 1 if deterministic else (cfg.repeats or 1)
    g = answer_repeats or 1
    temperature = cfg.repeat_temperature or REPEAT_TEMPERATURE
    base = judge_llm.plan.cfg.seed
    todo = [i for i, s in enumerate(samples) if s.get("answer", {}).get("status") == "ok" and s.get("context")]

    def answers(s: dict) -> list[str]:
        if g == 1:
            return [s["answer"]["text"]]
        out = []
        messages = generator.messages(s["question"], s["context"]["text"])
        for r in range(1, g + 1):
            try:
                out.append(generator.lab_llm.chat(messages, generator.prompt.version, temperature=temperature,
                                                  seed=generator.lab_llm.plan.cfg.seed + r).text.strip())
            except LLMCallError:
                out.append(None)
        return out

    def one(i: int) -> list[list[dict | None]]:
        s = samples[i]
        item = judge_item(s)
        grid = []
        for text in answers(s):
            if text is None:
                grid.append([None] * k)
                continue
            if k == 1:
                recs = [grade(item, text)]
            else:
                recs = [judge_one(judge_llm, plan.prompt, s["question"], s["reference_answer"], text,
                                  cfg.max_attempts, scores_only=True, temperature=temperature, seed=base + r)
                        for r in range(1, k + 1)]
            grid.append([{d: rec[d] for d in DIMENSIONS} if rec["status"] == "ok" else None for rec in recs])
        return grid

    grids = runner(one, todo)
    per_dim = {d: [[[None if j is None else j[d] for j in answer] for answer in grid] for grid in grids]
               for d in DIMENSIONS}
    return {"judge_repeats": k, "answer_repeats": g, "temperature": temperature, "method": method,
            "deterministic": deterministic, "n_questions": len(todo), "by_dimension": summary(per_dim)}
