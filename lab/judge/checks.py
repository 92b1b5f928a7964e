"""Perturbation checks of the judge: does it score controlled corruptions of known-good
answers as it should? No human needed.

For a seeded, category-stratified sample of questions, the reference answer is judged as the
answer, and so is each of its perturbations (:mod:`lab.judge.perturb`). The shares in
:mod:`lab.metrics.perturbation` (sensitivity, specificity, invariance) say how far the judge's
scores can be trusted, per rubric dimension. A judged run does this on
:data:`DEFAULT_CHECKS` questions (``judge.checks``); ``lab judge-check RUN`` on more, and with
another ``--method``, also re-judging the run's real answers to compare with its judge.
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from typing import Callable, Sequence

from lab.judge.rubric import DIMENSIONS, JudgePlan, Scores, judge_item
from lab.judge.methods import grader
from lab.metrics.injection import scan
from lab.judge.perturb import KEEPS, KINDS, TARGETS, fact_pool, perturb
from lab.metrics.perturbation import summarize
from lab.models.llm import LabLLM, LLMCallError
from lab.runfiles import load_run

DEFAULT_CHECKS = 20
#: Characters of a perturbed answer kept in results.json (enough to read what was judged).
TEXT_CHARS = 400



def stratified(items: Sequence[dict], n: int, seed: int) -> list[int]:
    """Indices of ``n`` items, categories in proportion: each category shuffled (seeded), then
    the items taken in order of their position within their category relative to its size."""
    by_cat: dict[str, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        by_cat[it.get("category") or ""].append(i)
    keyed = []
    for cat, idx in sorted(by_cat.items()):
        random.Random(f"{seed}:{cat}").shuffle(idx)
        keyed += [((k + 0.5) / len(idx), cat, i) for k, i in enumerate(idx)]
    return sorted(i for _, _, i in sorted(keyed)[:n])


def scorer(llm: LabLLM, plan: JudgePlan, method: str | None) -> Callable[[dict, str], Scores | None]:
    """``score(item, answer)``: the judge's scores of ``answer`` to the item's question, by
    ``method`` (None: the plan's own). judge-v1 stops after the scores (the calibration calls'
    cache entries are reused). A run passes its own grader's :meth:`~lab.judge.methods.Grader.scores`."""
    return grader(llm, plan, method).scores


def run_checks(items: Sequence[dict], n: int, seed: int, score: Callable[[dict, str], Scores | None],
               paraphraser: Callable[[str, int], str] | None, pool_texts: Sequence[str],
               runner: Callable[..., list]) -> dict:
    """Perturb and judge ``n`` sampled items {id, question, reference, keywords, category}.
    Returns {n, seed, summary, items: [{id, category, reference, perturbed, texts, suspect}]}:
    ``suspect`` holds the detector's reasons for the injected answer (a run would leave its
    judgement out of the means, so a flagged injection is no success)."""
    chosen = stratified(items, n, seed)
    pool = fact_pool([*pool_texts, *(it["reference"] for it in items)])

    def one(i: int) -> dict:
        item = {**items[i], "context": ""}  # the corruptions were not written from the run's context
        others = [o["reference"] for o in items if o["id"] != item["id"]]
        made = perturb(item, pool, others, seed, paraphraser)
        rec = {"id": item["id"], "category": item.get("category"), "reference": score(item, item["reference"]),
               "perturbed": {}, "texts": {}}
        for kind in KINDS:
            p = made[kind]
            if "text" in p:
                rec["perturbed"][kind] = score(item, p["text"])
                if kind == "injection":  # what the run would do with it: a flagged judgement is suspect
                    rec["suspect"] = {kind: scan(p["text"], item["question"])}
                rec["texts"][kind] = {"text": p["text"][:TEXT_CHARS], **({"detail": p["detail"]} if p["detail"] else {})}
            else:
                rec["perturbed"][kind] = None
                rec["texts"][kind] = {"skipped": p["skipped"]}
        return rec

    records = runner(one, chosen)
    summary = summarize(records, TARGETS, KEEPS, DIMENSIONS)
    skipped: dict[str, dict[str, int]] = {}
    for r in records:
        for kind, t in r["texts"].items():
            if "skipped" in t:
                skipped.setdefault(kind, {}).setdefault(t["skipped"], 0)
                skipped[kind][t["skipped"]] += 1
    summary["skipped"] = skipped
    return {"n": len(chosen), "seed": seed, "summary": summary, "items": records}


def paraphraser_for(generator: LabLLM | None) -> Callable[[str, int], str] | None:
    """The generator rewording a reference answer (prompt ``paraphrase-v1``); None without one.
    Its calls are counted apart from the answers' (``rewrite.lab_llm``, the same model)."""
    if generator is None:
        return None
    from lab.prompts import load_prompt

    prompt = load_prompt("paraphrase-v1", {"reference"}, where="judge checks")
    llm = LabLLM(generator.plan, generator.cache, generator.backend)

    def rewrite(reference: str, attempt: int = 0) -> str:
        """The first attempt at the generator's own settings; a retry sampled (0.7, seed + attempt)."""
        sampled = {"temperature": 0.7, "seed": llm.plan.cfg.seed + attempt} if attempt else {}
        try:
            return llm.chat(prompt.messages(reference=reference.strip()), prompt.version, max_tokens=200,
                            **sampled).text.strip()
        except LLMCallError:  # an empty paraphrase is skipped and counted
            return ""

    rewrite.lab_llm = llm  # type: ignore[attr-defined]
    return rewrite


def check_run(run_dir: Path, n: int, method: str | None, project_root: Path | None, cache_root: Path | None,
              show_progress: bool, seed: int | None = None) -> dict:
    """``lab judge-check``: the perturbation checks of a judged run's judge on ``n`` questions,
    by ``method`` (None: the run's own), and that method's scores of the run's real answers
    for those questions beside the run's judgement (agreement; completeness vs relevance).
    Seconds per judged answer are the model's, cache hits excluded."""
    import json
    import time

    from scipy.stats import spearmanr

    from lab.config import ExperimentConfig
    from lab.errors import LabError
    from lab.judge.rubric import resolve_judge
    from lab.metrics.perturbation import differs
    from lab.models.llm import build_llm
    from lab.models.resolve import resolve_llm
    from lab.progress import run_all

    results, samples = load_run(run_dir)
    config = json.loads(json.dumps(results["config"]))
    if (config.get("judge") or {}).get("method", "") is None:  # written before methods had a default
        del config["judge"]["method"]
    cfg = ExperimentConfig.model_validate(config)
    if cfg.judge is None or not any(s.get("judgement") for s in samples):
        raise LabError(f"{run_dir}: this run has no judge, so there is nothing to check",
                       hint="run an experiment with a judge section (turn13 has one), then `lab judge-check` it")
    plan = resolve_judge(cfg.judge, project_root)
    assert plan is not None
    llm = build_llm(plan.llm, cache_root)
    gen = build_llm(resolve_llm(cfg.generation.llm, "generation", project_root), cache_root) if cfg.generation else None
    items = [judge_item(s) for s in samples]
    seed = results["sample"]["seed"] if seed is None else seed

    def runner(fn: Callable, keys: list) -> list:
        return run_all(fn, keys, "judge check", show_progress, llm.concurrency)

    run_method = (results["config"].get("judge") or {}).get("method") or "rubric"  # runs before methods: rubric
    method = method or run_method
    score = scorer(llm, plan, method)
    t0, calls0 = time.perf_counter(), llm.usage.calls
    out = run_checks(items, min(n, len(items)), seed, score, paraphraser_for(gen), [], runner)
    wall = time.perf_counter() - t0
    judged = sum(1 + sum(1 for v in r["perturbed"].values() if v is not None) for r in out["items"])
    chosen = {r["id"] for r in out["items"]}
    real = [it for it in items if it["id"] in chosen and it["answer"] and (it["judgement"] or {}).get("status") == "ok"]
    mine = runner(lambda it: score(it, it["answer"]), real)
    pairs = [(it["judgement"], m) for it, m in zip(real, mine) if m is not None]
    agreement = {}
    for d in DIMENSIONS:
        a, b = [p[0][d] for p in pairs], [p[1][d] for p in pairs]
        rho = spearmanr(a, b).statistic if len(pairs) > 2 and len(set(a)) > 1 and len(set(b)) > 1 else None
        agreement[d] = {"n": len(pairs), "spearman": None if rho is None else float(rho),
                        "mean_abs_diff": sum(abs(x - y) for x, y in zip(a, b)) / len(pairs) if pairs else None}
    return {**out, "method": method, "run_method": run_method, "run": results.get("run_id"),
            "judge_model": plan.llm.describe().get("model"),
            "differs": differs([m for m in mine if m is not None]), "agreement_with_run_judge": agreement,
            "real": [{"id": it["id"], "run_judge": {d: it["judgement"][d] for d in DIMENSIONS},
                      "method": None if m is None else {d: m[d] for d in DIMENSIONS}} for it, m in zip(real, mine)],
            "seconds": {"wall": wall, "model": llm.usage.seconds, "answers_judged": judged + len(real),
                        "calls": llm.usage.calls - calls0, "cached": llm.usage.cached,
                        "per_answer": llm.usage.seconds / max(1, judged + len(real))}}
