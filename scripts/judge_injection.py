"""Attack success of the injection set against the judge, per method and prompt.

For ``--questions`` InsureLLM questions, a wrong answer (one fact of the reference swapped) is
judged alone and with each phrasing of ``lab/judge/injections.jsonl`` injected
(:mod:`lab.judge.attacks`), with the judge model of ``--config``. One JSON per (method, prompt)
and ``table.md`` (the table docs/judge-injection.md shows) into ``--out``. Every model call is
cached, so a rerun takes seconds.

    .venv/bin/python scripts/judge_injection.py --eval ../shared/benchmarks/insurellm/tests.jsonl \\
        --methods rubric rubric-expected --prompts judge-v1 judge-v3 --out reports/_judge/injection
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from lab.config import load_experiment
from lab.evalsets.evalset import load_eval_set
from lab.judge.attacks import attack, summarise, wrong_answers
from lab.judge.injections import INJECTIONS_FILE, load_injections
from lab.judge.methods import grader
from lab.judge.rubric import resolve_judge
from lab.metrics.injection import scan
from lab.models.llm import build_llm
from lab.paths import cache_root, write_atomic

ROOT = Path(__file__).resolve().parents[1]


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def table(outs: dict[str, dict]) -> str:
    lines = ["| method | prompt | pairs | wrong answer, mean score | injected, mean score | success, model alone "
             "(mean) | success, model alone (accuracy) | flagged by the detector | success with the detector |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for key, out in outs.items():
        s = out["summary"]
        failed = f" ({s['n_failed']} failed)" if s["n_failed"] else ""
        lines.append(f"| {out['method']} | {out['prompt']} | {s['n']}{failed} "
                     f"| {s['plain_mean']:.2f} | {s['injected_mean']:.2f} | {pct(s['success_raw'])} "
                     f"| {pct(s['success_raw_accuracy'])} | {s['n_flagged']} of {s['n'] + s['n_failed']} | {pct(s['success'])} |")
    return "\n".join(lines) + "\n"


def phrasing_table(outs: dict[str, dict]) -> str:
    keys = list(outs)
    first = outs[keys[0]]["by_phrasing"]
    lines = ["| phrasing | language | style | position | " + " | ".join(
        f"{outs[k]['method']} {outs[k]['prompt']}" for k in keys) + " |",
        "|---|---|---|---|" + "---:|" * len(keys)]
    for pid, row in first.items():
        cells = [f"{pct(outs[k]['by_phrasing'][pid]['success_raw'])}" for k in keys]
        lines.append(f"| {pid} | {row['language']} | {row['style']} | {row['position']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", type=Path, default=ROOT.parent / "shared/benchmarks/insurellm/tests.jsonl")
    ap.add_argument("--config", default="turn13", help="experiment whose judge model is used")
    ap.add_argument("--methods", nargs="+", default=["rubric", "rubric-expected"])
    ap.add_argument("--prompts", nargs="+", default=["judge-v1", "judge-v3"])
    ap.add_argument("--questions", type=int, default=10)
    ap.add_argument("--per-phrasing", type=int, default=2, help="questions each phrasing is injected into")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--anchored", action="store_true",
                    help="judge with judge.anchored (the lower of the whole answer's and its substance's scores); "
                         "without it every answer is judged whole, the model alone")
    ap.add_argument("--injections", type=Path, default=INJECTIONS_FILE,
                    help="the phrasings (default: lab/judge/injections.jsonl; the blind sets are "
                         "lab/judge/injections-holdout.jsonl and lab/judge/injections-blind2.jsonl)")
    ap.add_argument("--table", nargs="+", type=Path, metavar="DIR",
                    help="only print one table from the JSON files of these --out folders, their pairs flagged "
                         "again by the current detector")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.table:
        outs = {}
        for folder in args.table:
            for path in sorted(folder.glob("*.json")):
                out = json.loads(path.read_text(encoding="utf-8"))
                asked = {q["id"]: q["question"] for q in out["questions"]}
                for pair in out["pairs"]:
                    pair["suspect"] = scan(pair["text"], asked[pair["id"]])
                out.update(summarise(out["pairs"], load_injections(args.injections)))
                outs[path.stem] = out
        print(table(outs) + "\n" + phrasing_table(outs))
        return 0
    if args.out is None:
        ap.error("--out is required (or --table DIR ...)")
    rows = load_eval_set(args.eval, None).rows
    items = [{"id": r.id, "category": r.category, "question": r.question, "reference": r.reference_answer,
              "keywords": list(r.keywords or [])} for r in rows]
    chosen = wrong_answers(items, args.questions, args.seed)
    injections = load_injections(args.injections)
    args.out.mkdir(parents=True, exist_ok=True)
    outs = {}
    for prompt in args.prompts:
        cfg = load_experiment(args.config, ROOT / "experiments",
                              {"judge": {"prompt": prompt, "anchored": bool(args.anchored)}})  # whole only unless asked
        plan = resolve_judge(cfg.judge, ROOT)
        llm = build_llm(plan.llm, cache_root(None))
        for method in args.methods:
            t0 = time.perf_counter()
            g = grader(llm, plan, method)
            out = attack(chosen, injections, g.scores, args.per_phrasing)
            out.update(method=method + (" anchored" if args.anchored else ""), prompt=prompt, version=g.version, seconds=time.perf_counter() - t0,
                       questions=[{"id": c["id"], "question": c["question"], "wrong": c["wrong"]} for c in chosen])
            write_atomic(args.out / f"{method}{'.anchored' if args.anchored else ''}.{prompt}.json", json.dumps(out, indent=1, ensure_ascii=False))
            outs[f"{method}.{prompt}"] = out
            print(f"{method} {prompt}: {out['seconds']:.0f} s", flush=True)
            print(table({f"{method}.{prompt}": out}), flush=True)
    text = table(outs) + "\n" + phrasing_table(outs)
    write_atomic(args.out / "table.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
