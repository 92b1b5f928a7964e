"""Judge: an LLM grades each answer against the reference answer, and is itself calibrated.

A judgement scores accuracy, completeness and relevance from 1 to 5 with one sentence of
feedback, following the InsureLLM exercise's rubric (``lab/prompts/judge-v1.txt``). Output is
a :class:`Judgement` (pydantic); local models decode under a grammar built from its JSON
schema, remote ones get it as ``response_format``. Output that still fails to parse is retried
(attempt k > 1 samples at temperature 0.7 with seed + k), then recorded as a failed judgement:
``status: "failed"`` with the error and the raw text, counted in results and reports, and
left out of the means *with* that count beside them, never silently.

Calibration (on by default): each question's reference answer is judged as if it were the
generated one (it should score high) and so is a reference answer of another question (it
should score 1). :func:`calibration_summary` reports both means and the share of questions
where the reference outscored the mismatched answer (ties count as not separated).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypedDict

from pydantic import BaseModel, Field, ValidationError

from lab.config import JudgeConfig
from lab.metrics.injection import neutralise, suspect_reasons
from lab.models.llm import LabLLM, LLMCallError
from lab.models.resolve import LLMPlan, named_llm, resolve_llm
from lab.prompts import Prompt, load_prompt

JUDGE_FIELDS = {"question", "reference", "answer"}
DIMENSIONS = ("accuracy", "completeness", "relevance")
FEEDBACK_MAX_CHARS = 160
RETRY_TEMPERATURE = 0.7
#: {dimension: score}: what the checks and repeats compare.
Scores = dict


class JudgeItem(TypedDict, total=False):
    """What the judge sees of one question: the question, its reference answer and the answer to
    grade, with what the checks use (category, keywords), the run's own judgement (checks of a
    finished run) and the context the answer was written from (the ``split`` method's rules hold
    an answer's fact true when the context states it). Built from a sample by :func:`judge_item` only."""

    id: str
    category: str
    question: str
    reference: str
    keywords: list[str]
    answer: str
    answer_error: str | None
    judgement: dict | None
    context: str


def judge_item(sample: Mapping[str, Any]) -> JudgeItem:
    """The judge's input for one ``samples.jsonl`` row (or a sample being built)."""
    answer = sample.get("answer") or {}
    return JudgeItem(id=sample["id"], category=sample["category"], question=sample["question"],
                     reference=sample["reference_answer"], keywords=sample.get("keywords") or [],
                     answer=answer.get("text") or "", answer_error=answer.get("error"),
                     judgement=sample.get("judgement"), context=(sample.get("context") or {}).get("text") or "")


@dataclass(frozen=True)
class JudgePlan:
    """The judge, resolved at start-up: its config, its LLM (model found, key set) and its prompt,
    loaded once and used for every judgement and in the run's record."""

    cfg: JudgeConfig
    llm: LLMPlan
    prompt: Prompt


def resolve_judge(cfg: JudgeConfig | None, project_root: Path | None, *, models: bool = True) -> JudgePlan | None:
    """Check the judge at start-up (its prompt, its model or key), before any work. With
    ``models=False`` its model is only named (:func:`~lab.models.resolve.named_llm`): for estimates."""
    if cfg is None:
        return None
    prompt = load_prompt(cfg.prompt, JUDGE_FIELDS, where="judge.prompt")
    llm = resolve_llm(cfg.llm, "judge", project_root) if models else named_llm(cfg.llm, "judge")
    return JudgePlan(cfg, llm, prompt)


class Judgement(BaseModel):
    accuracy: int = Field(ge=1, le=5)
    completeness: int = Field(ge=1, le=5)
    relevance: int = Field(ge=1, le=5)
    feedback: str = Field(max_length=FEEDBACK_MAX_CHARS * 2)


#: The schema the decoder is held to: the three integer scores, then short feedback. Scores come
#: first so that a calibration judgement can stop right after them (see :func:`judge_one`).
SCHEMA = {
    "type": "object",
    "properties": {
        **{d: {"type": "integer", "enum": [1, 2, 3, 4, 5]} for d in DIMENSIONS},
        "feedback": {"type": "string", "maxLength": FEEDBACK_MAX_CHARS},
    },
    "required": [*DIMENSIONS, "feedback"],
    "additionalProperties": False,
}
#: Output tokens that hold ``{"accuracy": 5, "completeness": 5, "relevance": 5, "feedback": "``.
SCORES_MAX_TOKENS = 32
_SCORES_RE = re.compile(
    r'^\s*\{\s*"accuracy"\s*:\s*([1-5])\s*,\s*"completeness"\s*:\s*([1-5])\s*,\s*"relevance"\s*:\s*([1-5])\s*,'
    r'\s*"feedback"\s*:\s*"(.*)$', re.S)


def parse_judgement(text: str) -> Judgement:
    """The first JSON object in ``text`` (code fences allowed), validated."""
    body = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", body, re.S)
    if fenced:
        body = fenced.group(1)
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the output")
    try:
        data = json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg}") from None
    try:
        return Judgement.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ValueError(f"field '{'.'.join(map(str, err['loc']))}': {err['msg']}") from None


def parse_scores(text: str) -> Judgement:
    """Scores from output cut after them (``{"accuracy": 5, ..., "feedback": "...``)."""
    m = _SCORES_RE.match(text)
    if not m:
        return parse_judgement(text)
    feedback = m.group(4)
    return Judgement(accuracy=int(m.group(1)), completeness=int(m.group(2)), relevance=int(m.group(3)),
                     feedback=feedback[:-2] if feedback.endswith('"}') else feedback + "...")


def data_values(question: str, reference: str, answer: str) -> dict[str, str]:
    """The judge prompt's placeholders: each text stripped and :func:`~lab.metrics.injection.neutralise`-d,
    so no answer can close the tag a delimited prompt (judge-v3) puts it in."""
    return {"question": neutralise(question.strip()), "reference": neutralise(reference.strip()),
            "answer": neutralise(answer.strip())}


def judge_one(llm: LabLLM, prompt: Prompt, question: str, reference: str, answer: str, max_attempts: int,
              scores_only: bool = False, temperature: float | None = None, seed: int | None = None) -> dict:
    """One judgement record: ``status`` ok (scores, feedback) or failed (error, raw).

    ``temperature``/``seed`` (repeats) replace the config's on the first attempt.
    ``scores_only`` (calibration, local models): decoding stops after the scores. The grammar
    makes the scores come first and decoding is deterministic for a given seed, so they are the
    very scores the full judgement would give; only the feedback is cut short.
    """
    messages = prompt.messages(**data_values(question, reference, answer))
    errors, raw = [], ""
    tokens = {"prompt_tokens": 0, "completion_tokens": 0}
    cached = True
    short = scores_only and llm.plan.cfg.backend == "llama_cpp"
    parse = parse_scores if short else parse_judgement
    for attempt in range(1, max_attempts + 1):
        retry = attempt > 1
        try:
            out = llm.chat(
                messages, prompt.version, schema=SCHEMA,
                temperature=RETRY_TEMPERATURE if retry else temperature,
                seed=((seed if seed is not None else llm.plan.cfg.seed) + attempt - 1) if retry else seed,
                max_tokens=SCORES_MAX_TOKENS if short else None,
            )
        except LLMCallError as exc:
            errors.append(f"attempt {attempt}: {exc.message}")
            cached = False
            continue
        raw = out.text
        cached = cached and out.cached
        tokens["prompt_tokens"] += out.prompt_tokens
        tokens["completion_tokens"] += out.completion_tokens
        try:
            j = parse(out.text)
        except ValueError as exc:
            errors.append(f"attempt {attempt}: {exc}" + (" (output cut at max_tokens)" if out.finish_reason == "length" else ""))
            continue
        return {"status": "ok", **j.model_dump(), "attempts": attempt, "cached": cached, **tokens}
    return {"status": "failed", "error": "; ".join(errors), "raw": raw[:2000], "attempts": max_attempts,
            "cached": cached, **{d: None for d in DIMENSIONS}, "feedback": None, **tokens}


def mismatch_partners(ids: Sequence[str], categories: Sequence[str], seed: int) -> list[int]:
    """For each question, the index of another question whose reference answer it is judged
    against: a seeded derangement, preferring a different category."""
    n = len(ids)
    if n < 2:
        return [-1] * n
    rng = random.Random(seed)
    out = []
    for i in range(n):
        others = [j for j in range(n) if j != i and categories[j] != categories[i]] or [j for j in range(n) if j != i]
        out.append(rng.choice(others))
    return out


def judge_questions(items: Sequence[dict], llm: LabLLM, prompt: Prompt, max_attempts: int, calibration: bool,
                    seed: int, runner: Callable[..., list], grade: Callable[..., dict] | None = None) -> list[dict]:
    """Judge every item {id, question, reference, answer, category}.

    Returns per item {"judgement": ..., "calibration": {...} | None}. A judgement of a question,
    reference or answer that speaks to its evaluator (:func:`lab.metrics.injection.scan`) carries
    ``suspect``: the reasons. The three judgements of
    one question run back to back, so a local model reuses the prompt prefix they share.
    ``grade(item, answer, scores_only)`` is another judging method
    (:func:`lab.judge.methods.grader`); None is judge-v1.
    """
    partners = mismatch_partners([i["id"] for i in items], [i["category"] for i in items], seed)
    if grade is None:
        def grade(it: dict, answer: str, scores_only: bool = False) -> dict:
            return judge_one(llm, prompt, it["question"], it["reference"], answer, max_attempts, scores_only)

    def one(k: int) -> dict:
        it = items[k]
        if it.get("answer_error"):  # nothing to grade: the answer itself failed
            judgement = {"status": "failed", "error": f"no answer to judge: {it['answer_error']}", "raw": "",
                         "attempts": 0, "cached": True, "feedback": None, "prompt_tokens": 0,
                         "completion_tokens": 0, **{d: None for d in DIMENSIONS}}
        else:
            judgement = grade(it, it["answer"])
            suspect = suspect_reasons(question=it["question"], reference=it["reference"], answer=it["answer"])
            if suspect:  # judged all the same; the run leaves it out of the means and counts it
                judgement = {**judgement, "suspect": suspect}
        rec = {"judgement": judgement, "calibration": None}
        if calibration and partners[k] >= 0:
            other = items[partners[k]]
            rec["calibration"] = {
                "reference": grade(it, it["reference"], True),
                "mismatched": grade(it, other["reference"], True),
                "mismatched_id": other["id"],
            }
        return rec

    return runner(one, list(range(len(items))))


def calibration_summary(records: Sequence[dict]) -> dict | None:
    """Means of reference-as-answer and mismatched-answer scores, and how often they separate.

    ``separated``: share of questions whose reference judgement scored strictly higher than the
    mismatched one, per dimension and on the mean of the three; pairs with a failed judgement
    are left out and counted in ``n_failed``.
    """
    pairs = [r["calibration"] for r in records if r.get("calibration")]
    if not pairs:
        return None
    ok = [p for p in pairs if p["reference"]["status"] == "ok" and p["mismatched"]["status"] == "ok"]
    out: dict[str, Any] = {"n_pairs": len(ok), "n_failed": len(pairs) - len(ok)}
    if not ok:
        return out

    def mean(xs: Sequence[float]) -> float:
        return sum(xs) / len(xs)

    for d in (*DIMENSIONS, "mean"):
        get: Callable[[dict], float] = (lambda j: mean([j[x] for x in DIMENSIONS])) if d == "mean" else (lambda j, d=d: j[d])
        ref = [get(p["reference"]) for p in ok]
        mis = [get(p["mismatched"]) for p in ok]
        out[d] = {
            "reference_mean": mean(ref),
            "mismatched_mean": mean(mis),
            "separated": mean([1.0 if a > b else 0.0 for a, b in zip(ref, mis)]),
            "tied": mean([1.0 if a == b else 0.0 for a, b in zip(ref, mis)]),
        }
    return out
