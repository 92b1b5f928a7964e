"""Which judging method should be the default? Perturbation checks of each candidate.

For a category-stratified sample of an eval set's questions, every candidate method judges
each reference answer and its perturbations (wrong fact, partial, padded, paraphrase, refusal;
:mod:`lab.eval.perturb`), with the judge and generator of an experiment config (turn13's local
Qwen2.5-Coder-1.5B by default). Writes one ``<method>.json`` per candidate and ``table.md``
(sensitivity, specificity, invariance, goals met, model seconds per judged answer) into --out.
Everything is cached by content: a rerun takes seconds. ``--table DIR ...`` prints one table
merged from several such folders (the README's).

    .venv/bin/python scripts/judge_candidates.py --eval ../shared/benchmarks/insurellm/tests.jsonl \\
        --n 60 --methods rubric rubric-expected --out reports/_judge/insurellm
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from lab.config import load_experiment  # noqa: E402
from lab.eval.evalset import load_eval_set  # noqa: E402
from lab.eval.judge import resolve_judge  # noqa: E402
from lab.eval.judge_checks import paraphraser_for, run_checks, scorer  # noqa: E402
from lab.eval.judge_methods import METHODS  # noqa: E402
from lab.models.llm import build_llm  # noqa: E402
from lab.models.resolve import resolve_llm  # noqa: E402
from lab.paths import cache_dir  # noqa: E402
from lab.progress import run_all  # noqa: E402

ROWS = [("wrong_fact", "sensitivity", "accuracy"), ("wrong_fact", "specificity", "relevance"),
        ("partial", "sensitivity", "completeness"), ("partial", "specificity", "accuracy"),
        ("padded", "sensitivity", "relevance"), ("padded", "specificity", "accuracy"),
        ("padded", "specificity", "completeness"), ("refusal", "sensitivity", "accuracy"),
        ("refusal", "sensitivity", "completeness"), ("paraphrase", "invariance", "accuracy"),
        ("paraphrase", "invariance", "completeness"), ("paraphrase", "invariance", "relevance")]


def table(outs: dict[str, dict]) -> str:
    methods = list(outs)
    lines = ["| perturbation | measure | dimension | " + " | ".join(methods) + " |",
             "|---|---|---|" + "---:|" * len(methods)]
    for kind, measure, dim in ROWS:
        cells = []
        for m in methods:
            k = outs[m]["summary"]["kinds"][kind]
            share = k.get(measure, {}).get(dim)
            cells.append("-" if share is None else f"{share:.0%} of {k['n']}")
        lines.append(f"| {kind} | {measure} | {dim} | " + " | ".join(cells) + " |")
    lines.append("| goals met | | | " + " | ".join(
        f"{sum(bool(g['met']) for g in outs[m]['summary']['goals'])} of {len(outs[m]['summary']['goals'])}"
        for m in methods) + " |")
    lines.append("| model s per judged answer, this pass (cache hits cost 0) | | | " + " | ".join(
        f"{outs[m]['seconds']['per_answer']:.2f}" for m in methods) + " |")
    return "\n".join(lines) + "\n"


def merged(folders: list[Path]) -> str:
    """One table from the ``<method>.json`` files of several --out folders (other prompts, sizes)."""
    outs = {}
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            out = json.loads(path.read_text(encoding="utf-8"))
            outs[f"{out['method']} ({out.get('prompt') or 'judge-v1'}, n={out['n']})"] = out
    return table(outs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", nargs="+", type=Path, help="only print one table merged from these --out folders")
    ap.add_argument("--eval", type=Path, help="eval set (JSONL)")
    ap.add_argument("--config", default="turn13", help="experiment whose judge and generator are used")
    ap.add_argument("--n", type=int, default=60, help="questions sampled (stratified by category)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--prompt", default=None, help="judge prompt (default: the config's, judge-v1)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.table:
        print(merged(args.table))
        return 0
    if args.eval is None or args.out is None:
        ap.error("--eval and --out are needed to run the checks")
    cfg = load_experiment(args.config, ROOT / "experiments",
                          {"judge": {"prompt": args.prompt}} if args.prompt else None)
    plan = resolve_judge(cfg.judge, ROOT)
    assert plan is not None and cfg.generation is not None
    cache = cache_dir()
    llm = build_llm(plan.llm, cache)
    gen = build_llm(resolve_llm(cfg.generation.llm, "generation", ROOT), cache)
    rows = load_eval_set(args.eval, None).rows
    items = [{"id": r.id, "category": r.category, "question": r.question, "reference": r.reference_answer,
              "keywords": list(r.keywords or [])} for r in rows]
    args.out.mkdir(parents=True, exist_ok=True)
    outs = {}
    for method in args.methods:
        seconds0, calls0, t0 = llm.usage.seconds, llm.usage.calls, time.perf_counter()
        out = run_checks(items, args.n, args.seed, scorer(llm, plan, method), paraphraser_for(gen), [],
                         lambda fn, keys: run_all(fn, keys, f"judge {method}", True, 1))
        judged = sum(1 + sum(v is not None for v in r["perturbed"].values()) for r in out["items"])
        out["method"] = method
        out["prompt"] = plan.prompt.version
        out["seconds"] = {"wall": time.perf_counter() - t0, "model": llm.usage.seconds - seconds0,
                          "calls": llm.usage.calls - calls0, "answers_judged": judged,
                          "per_answer": (llm.usage.seconds - seconds0) / max(1, judged)}
        (args.out / f"{method}.json").write_text(json.dumps(out, indent=1), encoding="utf-8")
        outs[method] = out
        print(f"{method}: {out['seconds']['wall']:.0f} s", flush=True)
    (args.out / "table.md").write_text(table(outs), encoding="utf-8")
    print(table(outs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
