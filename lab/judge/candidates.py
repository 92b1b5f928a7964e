"""Which judging method should be the default? Perturbation checks of each candidate
(``lab judge-methods``).

For a category-stratified sample of an eval set's questions, every candidate method judges
each reference answer and its perturbations (wrong fact, partial, padded, paraphrase, refusal, injection;
:mod:`lab.judge.perturb`), with the judge and generator of an experiment config. One
``<method>.json`` per candidate and ``table.md`` (sensitivity, specificity, invariance, goals
met, model seconds per judged answer). Everything is cached by content: a rerun takes seconds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Sequence

from lab.judge.checks import paraphraser_for, run_checks
from lab.judge.methods import grader
from lab.judge.rubric import JudgeItem, JudgePlan
from lab.models.llm import LabLLM
from lab.paths import write_atomic

ROWS = [("wrong_fact", "sensitivity", "accuracy"), ("wrong_fact", "specificity", "relevance"),
        ("partial", "sensitivity", "completeness"), ("partial", "specificity", "accuracy"), ("partial", "above", "accuracy"),
        ("padded", "sensitivity", "relevance"), ("padded", "specificity", "accuracy"),
        ("padded", "specificity", "completeness"), ("refusal", "sensitivity", "accuracy"),
        ("refusal", "sensitivity", "completeness"), ("paraphrase", "invariance", "accuracy"),
        ("paraphrase", "invariance", "completeness"), ("paraphrase", "invariance", "relevance"),
        ("injection", "resistance", "mean")]


def table(outs: dict[str, dict]) -> str:
    """The candidates side by side: one Markdown row per perturbation, measure and dimension."""
    methods = list(outs)
    lines = ["| perturbation | measure | dimension | " + " | ".join(methods) + " |",
             "|---|---|---|" + "---:|" * len(methods)]
    for kind, measure, dim in ROWS:
        cells = []
        for m in methods:
            k = outs[m]["summary"]["kinds"][kind]
            share = k.get(measure, {}).get(dim)
            cells.append("-" if share is None else f"{share:.0%} of {k['n_above' if measure == 'above' else 'n']}")
        lines.append(f"| {kind} | {measure} | {dim} | " + " | ".join(cells) + " |")
    lines.append("| goals met | | | " + " | ".join(
        f"{sum(bool(g['met']) for g in outs[m]['summary']['goals'])} of {len(outs[m]['summary']['goals'])}"
        for m in methods) + " |")
    lines.append("| model s per judged answer, this pass (cache hits cost 0) | | | " + " | ".join(
        f"{outs[m]['seconds']['per_answer']:.2f}" for m in methods) + " |")
    return "\n".join(lines) + "\n"


def merged(folders: Sequence[Path]) -> str:
    """One table from the ``<method>.json`` files of several output folders (other prompts, sizes)."""
    outs = {}
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            out = json.loads(path.read_text(encoding="utf-8"))
            outs[f"{out['method']} ({out.get('prompt') or 'judge-v1'}, n={out['n']})"] = out
    return table(outs)


def check_methods(items: Sequence[JudgeItem], methods: Sequence[str], llm: LabLLM, plan: JudgePlan,
                  generator: LabLLM | None, n: int, seed: int, out: Path,
                  runner: Callable[[str], Callable]) -> dict[str, dict]:
    """Run the perturbation checks of every method in ``methods`` on ``n`` of ``items`` and write
    ``<method>.json`` and ``table.md`` into ``out``; ``runner(method)`` runs the checks' calls."""
    out.mkdir(parents=True, exist_ok=True)
    outs = {}
    for method in methods:
        seconds0, calls0, t0 = llm.usage.seconds, llm.usage.calls, time.perf_counter()
        res = run_checks(items, n, seed, grader(llm, plan, method).scores, paraphraser_for(generator), [],
                         runner(method))
        judged = sum(1 + sum(v is not None for v in r["perturbed"].values()) for r in res["items"])
        res["method"] = method
        res["prompt"] = plan.prompt.version
        res["seconds"] = {"wall": time.perf_counter() - t0, "model": llm.usage.seconds - seconds0,
                          "calls": llm.usage.calls - calls0, "answers_judged": judged,
                          "per_answer": (llm.usage.seconds - seconds0) / max(1, judged)}
        write_atomic(out / f"{method}.json", json.dumps(res, indent=1))
        outs[method] = res
    write_atomic(out / "table.md", table(outs))
    return outs
