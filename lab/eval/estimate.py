"""What a run will cost before its first model call: LLM calls per role, and the time they take
on this machine.

Every finished run records, per LLM role and model (and, for the judge, its method and prompt),
how many calls a unit of its work took and how many seconds a computed call took, in
``$LAB_CACHE/throughput.json`` (:func:`record`). The next run of that role and model is estimated
from it (:func:`estimate`): units x calls per unit x seconds per call. Every call a run makes is
counted (:func:`units`): a role's unit is a question, except the judge's, a text it grades (each
answer, repeats included; with calibration, the reference and a mismatched reference of every
question; each perturbation of the checked questions), and the paraphraser's, a checked question
(the generator rewording its reference for the paraphrase check). Before anything was
measured here, a local llama.cpp model is estimated from the figures measured on a 2-core machine
(:data:`PRIOR`: 17.3 s an answer, 0.53 s a judge call, 3.4 calls a graded text); a
remote model is counted in calls only. Cached calls cost nothing, so a repeated run is faster than
its estimate: the estimate is an upper bound for a run whose calls are partly cached.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from lab.config import ExperimentConfig
from lab.judge.checks import DEFAULT_CHECKS
from lab.judge.perturb import KINDS
from lab.judge.rubric import JudgePlan
from lab.models.resolve import LLMPlan
from lab.paths import write_atomic
from lab.progress import duration

if TYPE_CHECKING:
    from lab.models.llm import LabLLM

log = logging.getLogger(__name__)

THROUGHPUT_FILE = "throughput.json"
#: Seconds per computed call and calls per question of a local GGUF model on 2 CPU cores, before
#: this machine has measured its own (Qwen2.5-Coder-1.5B Q4_K_M; docs/judge.md).
#: ``testset`` is ``lab generate --mode abstractive``'s writer: 52 s an accepted question on npm's
#: documentation, its support checks included (docs/own-documents.md; 77 s before excerpts were
#: held); ``questions`` the extractive mode's (the default), a question to a sentence chosen by
#: rule, no check call (``generate-q-v2``: the sentence alone, the reply stopped at its ``?``),
#: its local round trip on: about 3.2 candidates an accepted question (restic's manual: 436 for
#: 150, twice; Bottle's documentation: 158 for 45) at about 3.0 s a call (2.9 s on restic's
#: manual on an idle machine, 2.5-4.5 s on other days; docs/own-documents.md#first-hour-5);
#: ``questions-checked`` adds ``--answer-check``'s call a question that passes the rules, of which
#: it keeps about half, about 7.5 calls an accepted question (Bottle: 260 writer and 80 check calls
#: for 45; Peewee: 242 and 89) at about 3.5 s a call (a check call takes about 1.7 times a
#: writer's: 6.6 s against 3.9 s on both sets).
#: ``judge``: a graded text, with the default method for a local judge (``rubric-expected``: a
#: score read from one step's probabilities, the rubric's head evaluated once) 3.4 calls at 0.53 s
#: (turn13's 10-question sample of our eval set: 324 calls for 90 texts, 0.531 s a computed call;
#: hybrid's 5 of a generated set of Babel's documentation: 141 for 45, 0.513 s; the 4.0 s of the
#: written verdicts before it made a 10-question sample's estimate 22 min 45 s for a 6 min 29 s run);
#: ``paraphrase``: a checked question (1.8 calls with its retries: 9 for 5 questions of turn13,
#: 6.2 s each, measured here).
PRIOR = {"generation": (17.3, 1.0), "judge": (0.53, 3.4), "query": (2.0, 1.0), "testset": (17.4, 3.0),
         "questions": (3.0, 3.2), "questions-checked": (3.5, 7.5), "paraphrase": (6.2, 1.8)}
#: The extractive roles' calls a candidate sentence: its question, and with ``--answer-check`` the
#: check of the third or so that pass the rules (Bottle 80 checks for 260 questions, Peewee 89 for
#: 242, aiohttp 66 for 210, Whoosh 92 for 239, Lark 33 for 113): when a run's candidates are fewer
#: than its questions need (a small knowledge base, a low ``--max-candidates``), they bound its
#: calls (Lark's documentation: 113 candidates, 146 calls, where 45 questions at 7.5 make 338).
CALLS_PER_CANDIDATE = {"questions": 1.0, "questions-checked": 1.33}
#: Fewer computed calls than this do not replace an earlier measurement.
MIN_CALLS = 3


@dataclass(frozen=True)
class RoleCost:
    """One LLM role of a run: its model, the calls it will make and their time (None: unknown)."""

    role: str
    model: str
    calls: int
    seconds: float | None
    source: str  # "measured here", "2-core prior", "no measurement (remote)"


def role_key(plan: LLMPlan, judge: JudgePlan | None = None, role: str | None = None) -> str:
    """The throughput file's key of a role: role (``role``, else the plan's), backend and model; the
    judge's method and prompt."""
    key = f"{role or plan.role}|{plan.cfg.backend}|{plan.cfg.model}"
    if judge is not None:
        key += f"|{judge.cfg.method or 'rubric'}|{judge.cfg.prompt}"
    return key


def _load(cache_root: Path) -> dict:
    path = cache_root / THROUGHPUT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet, or damaged: measured again by the next run
        return {}
    return data if isinstance(data, dict) else {}


def _checks(cfg: ExperimentConfig) -> int:
    return 0 if cfg.judge is None else DEFAULT_CHECKS if cfg.judge.checks is None else cfg.judge.checks


def units(role: str, cfg: ExperimentConfig, n_questions: int) -> float:
    """The units of ``role``'s work in a run of ``cfg`` over ``n_questions`` (the module's
    docstring): what its calls per unit multiply."""
    if role == "generation" and cfg.generation is not None:
        return n_questions * (cfg.generation.repeats or 1)
    if role == "judge" and cfg.judge is not None:
        per_answer = (cfg.generation.repeats or 1) if cfg.generation is not None else 1
        graded = n_questions * per_answer * (cfg.judge.repeats or 1)
        calibration = 2 * n_questions if cfg.judge.calibration else 0
        return graded + calibration + min(_checks(cfg), n_questions) * len(KINDS)
    if role == "paraphrase":
        return min(_checks(cfg), n_questions) if cfg.generation is not None else 0
    return n_questions


def _roles(cfg: ExperimentConfig, generation: LLMPlan | None, query: LLMPlan | None,
           judge: JudgePlan | None) -> list[tuple[str, LLMPlan, JudgePlan | None]]:
    out = []
    if query is not None:
        out.append(("query", query, None))
    if generation is not None and cfg.generation is not None:
        out.append(("generation", generation, None))
    if judge is not None:
        out.append(("judge", judge.llm, judge))
        if generation is not None and cfg.generation is not None and _checks(cfg):
            out.append(("paraphrase", generation, None))  # the generator rewords the checked references
    return out


def role_cost(role: str, plan: LLMPlan, n_items: float, cache_root: Path, judge: JudgePlan | None = None,
              known: dict | None = None, candidates: int | None = None) -> RoleCost:
    """One role's calls and seconds for ``n_items`` units of its work (see the module docstring);
    an extractive role's no more than ``candidates`` allow (:data:`CALLS_PER_CANDIDATE`)."""
    rec = (known if known is not None else _load(cache_root)).get(role_key(plan, judge, role))
    per_unit = rec.get("calls_per_unit", rec.get("calls_per_question")) if isinstance(rec, dict) else None
    if role == "judge" and isinstance(rec, dict) and "calls_per_unit" not in rec:
        per_unit = None  # measured per question, checks and calibration inside: not a judged text's
    if isinstance(rec, dict) and rec.get("s_per_call") is not None and per_unit is not None:
        s_call, per_q, source = float(rec["s_per_call"]), float(per_unit), "measured here"
    elif plan.cfg.backend == "llama_cpp" and role in PRIOR:
        (s_call, per_q), source = PRIOR[role], "2-core prior"
    else:
        s_call, per_q, source = None, PRIOR.get(role, (None, 1.0))[1], "no measurement yet"
    calls = round(n_items * per_q)
    if candidates is not None and role in CALLS_PER_CANDIDATE:
        calls = min(calls, round(candidates * CALLS_PER_CANDIDATE[role]))
    return RoleCost(role, plan.cfg.model, calls, None if s_call is None else calls * s_call, source)


def estimate(cfg: ExperimentConfig, n_questions: int, generation: LLMPlan | None, query: LLMPlan | None,
             judge: JudgePlan | None, cache_root: Path) -> list[RoleCost]:
    """Each LLM role of a run of ``n_questions``: calls and seconds (see the module docstring)."""
    known = _load(cache_root)
    return [role_cost(role, plan, units(role, cfg, n_questions), cache_root, jp, known)
            for role, plan, jp in _roles(cfg, generation, query, judge)]


def describe(costs: Iterable[RoleCost], n_questions: int, what: str = "questions") -> list[str]:
    """The lines printed before the first call (and by ``--dry-run``)."""
    costs = list(costs)
    if not costs:
        return [f"{n_questions} {what}, retrieval only: no LLM call"]
    lines = [f"{n_questions} {what}; LLM calls (a call already cached takes no time):"]
    for c in costs:
        t = f"about {duration(c.seconds)}" if c.seconds is not None else "time unknown"
        lines.append(f"  {c.role:<10} {c.model}: ~{c.calls} calls, {t} ({c.source})")
    known = [c.seconds for c in costs if c.seconds is not None]
    if known:
        where = "on this machine" if all(c.source == "measured here" for c in costs) else \
            "(from the 2-core prior where this machine has no measurement yet; a run measures it)"
        lines.append(f"  estimated total: about {duration(sum(known))} {where}")
    return lines


def record(cache_root: Path, usage: dict[str, dict], n_questions: int, plans: dict[str, tuple[LLMPlan, Any]],
           cfg: ExperimentConfig | None = None) -> None:
    """Store what this run measured: per role in ``plans`` (role -> (plan, judge plan or None)),
    seconds per computed call and calls per unit of its work (:func:`units` of ``cfg``; a question
    without it), from its ``llm_usage`` counters. Roles with fewer than :data:`MIN_CALLS` computed
    calls keep their earlier figures."""
    if n_questions < 1:
        return
    known = _load(cache_root)
    changed = False
    for role, (plan, jp) in plans.items():
        u = usage.get(role)
        if not u or u.get("calls", 0) < MIN_CALLS or not u.get("seconds"):
            continue
        n_units = units(role, cfg, n_questions) if cfg is not None else n_questions
        if n_units <= 0:
            continue
        known[role_key(plan, jp, role)] = {"s_per_call": round(u["seconds"] / u["calls"], 3),
                                          "calls_per_unit": round((u["calls"] + u.get("cached", 0)) / n_units, 3)}
        changed = True
    if changed:
        try:
            write_atomic(cache_root / THROUGHPUT_FILE, json.dumps(known, indent=1, sort_keys=True))
        except OSError as exc:  # an estimate is a courtesy: a read-only cache must not fail the run
            log.warning("could not store the measured LLM throughput in %s: %s", cache_root / THROUGHPUT_FILE, exc)


def checked_hint(plan: LLMPlan, n: int, tried: int, cache_root: Path, held_out: str, pool: int | None = None,
                 out: str | None = None, accepted: int | None = None) -> str:
    """After a ``lab generate`` of ``n`` questions in the default extractive mode, which wrote
    ``tried`` questions (now cached): what ``--answer-check`` would add, in calls and time
    (the ``questions-checked`` role's cost less the calls already cached), and ``held_out``, what
    it did on documentation held out from its rules (the CLI's figures, which its help gives too).
    ``pool``: the candidate sentences in the documents, which bound its candidates (when every one
    was tried here, it adds the checks alone and keeps fewer than the ``accepted`` questions);
    ``out``: the set written, whose sibling ``<stem>-checked`` the command names, so that this one
    is kept to compare and the command is not refused for an existing file."""
    budget = 8 * n if pool is None else min(8 * n, pool)
    cost = role_cost("questions-checked", plan, n, cache_root, candidates=budget)
    more = max(0, cost.calls - tried)
    when = f", about {duration(cost.seconds * more / cost.calls)}" if cost.seconds is not None and cost.calls else ""
    written = f"the {tried} questions written here are cached" if tried != 1 else "the question written here is cached"
    target = ""
    if out is not None:
        path = Path(out)
        target = f" --out {path.with_name(f'{path.stem}-checked{path.suffix}')}"
    spent = (f"; every candidate sentence was tried here, so it checks these questions and keeps fewer than the "
             f"{accepted} accepted here" if pool is not None and tried >= pool and accepted is not None else "")
    return (f"next: a set less often wrong, the same command with --answer-check --max-candidates {budget}{target} (on "
            f"{held_out}; docs/own-documents.md#passage-check): {written}, ~{more} calls more{when} ({cost.source}){spent}")


def audit_hint(out: str, kb: str, rows: int) -> str:
    """After a default ``lab generate`` of ``rows`` questions: the cheaper way to the rows most
    likely wrong, ``lab audit --check`` (one answer check a row: a generated row's reference is its
    span's own words, asked no yes/no verdict) and then the review queue, which shows them first;
    what the check's doubt is worth is docs/own-documents.md#audit-answer-check's, held out on eight
    sets' 314 rows (docs/own-documents.md#genshi)."""
    from lab.evalsets.answercheck import CALL_SECONDS

    return (f"next, to read the rows most likely wrong first: lab audit {out} --kb {kb} --check (~{rows} "
            f"call{'s' * (rows != 1)}, about {duration(rows * CALL_SECONDS)}, 2-core prior: of the rows it doubted "
            f"on eight held-out sets, 47% were bad, of the rest 20%), then lab serve --review {out} shows them first")


def cached_questions(llm: LabLLM, docs: dict[str, str], seed: int, cost: RoleCost, cut: dict[str, list],
                     found: dict[str, list] | None = None) -> tuple[RoleCost, int]:
    """``cost`` (an extractive role's, from :func:`role_cost`) less the question calls already in
    ``llm``'s cache, and how many they are: those of the candidates it will try (the first, in the
    order a run tries them) that an earlier run of the same documents and seed asked (the order
    depends on neither the model nor what was accepted). A call cached takes no time; the check
    calls of ``--answer-check`` are counted as they were (their questions are not known yet).
    ``cut`` and ``found``: each document's blocks and candidates, as the caller counted them."""
    from lab.evalsets.questions import PROMPT, coverage_order, question_cached
    from lab.prompts import load_prompt

    limit = round(cost.calls / CALLS_PER_CANDIDATE[cost.role])  # the question calls among them
    if llm.cache is None or limit <= 0:
        return cost, 0
    prompt, n = load_prompt(PROMPT), 0
    for i, c in enumerate(coverage_order(docs, seed, cut, found)):
        if i >= limit:
            break
        n += question_cached(llm, prompt, c, seed)
    left = cost.calls - n
    return replace(cost, calls=left, seconds=None if cost.seconds is None else cost.seconds * left / cost.calls), n
