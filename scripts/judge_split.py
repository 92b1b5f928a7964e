"""Does the judge measure accuracy apart from completeness? The perturbed set of lab.judge.probe,
judged by each method named.

For ``--n`` questions of ``--eval`` (those whose reference can be cut short first), the reference
answer and its corruptions (wrong fact, cut short, partial, padded, refusal) are judged with the
judge model of ``--config`` (anchored as the config says: on by default). Writes ``set.jsonl``
(the perturbed set), one ``<method>.json`` per method (every row's scores, the pairs, the cost)
and ``table.md`` into ``--out``. Every model call is cached: a rerun takes seconds.

    .venv/bin/python scripts/judge_split.py --eval eval_sets/company.jsonl --n 20 \\
        --methods rubric-expected split --out reports/_judge/split-dev
    .venv/bin/python scripts/judge_split.py --table reports/_judge/split-dev
    .venv/bin/python scripts/judge_split.py --rejudge reports/turn13/RUN --out reports/_judge/rejudge
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from lab.config import load_experiment
from lab.evalsets.evalset import load_eval_set
from lab.judge.methods import grader
from lab.judge.probe import build, measure, table
from lab.judge.rubric import resolve_judge
from lab.models.llm import build_llm
from lab.paths import cache_root, write_atomic

ROOT = Path(__file__).resolve().parents[1]


def cost_lines(outs: dict[str, dict]) -> str:
    lines = ["| method | judgements | model calls per judgement | prompt tokens evaluated per judgement "
             "| model s per judgement |", "|---|---:|---:|---:|---:|"]
    for m, out in outs.items():
        c = out["cost"]
        if c["calls"]:
            lines.append(f"| {m} | {c['judgements']} | {c['calls'] / c['judgements']:.2f} "
                         f"| {c['prompt_tokens'] / c['judgements']:.0f} | {c['seconds'] / c['judgements']:.2f} |")
        else:
            lines.append(f"| {m} | {c['judgements']} | all cached | | |")
    return "\n".join(lines) + "\n"


def rejudge(run: Path, methods: list[str], config: str, out: Path) -> dict:
    """A run's real answers judged again by each method (anchored as ``config`` says, no
    calibration, no checks): per question and the means overall and per category."""
    from collections import defaultdict

    from lab.judge.rubric import judge_item
    from lab.runfiles import load_run

    _, samples = load_run(run)
    items = [judge_item(s) for s in samples if (s.get("answer") or {}).get("status") == "ok"]
    cfg = load_experiment(config, ROOT / "experiments")
    plan = resolve_judge(cfg.judge, ROOT)
    llm = build_llm(plan.llm, cache_root(None))
    result: dict = {"run": str(run), "n": len(items), "methods": {}}
    for method in methods:
        g = grader(llm, plan, method)
        u0 = (llm.usage.calls, llm.usage.prompt_tokens, llm.usage.seconds)
        per = {}
        for it in items:
            rec = g(it, it["answer"])
            per[it["id"]] = {"category": it["category"], "status": rec["status"],
                             **{d: rec.get(d) for d in ("accuracy", "completeness", "relevance")}}
            print(f"{method} {it['id']}: " + " / ".join(f"{per[it['id']][d] or 0:.2f}" for d in
                                                      ("accuracy", "completeness", "relevance")), flush=True)
        ok = [x for x in per.values() if x["status"] == "ok"]
        cats = defaultdict(list)
        for x in ok:
            cats[x["category"]].append(x)

        def means(xs: list[dict]) -> dict:
            return {"n": len(xs), **{d: sum(x[d] for x in xs) / len(xs) for d in ("accuracy", "completeness", "relevance")}}

        result["methods"][method] = {"version": g.version, "overall": means(ok), "by_category": {c: means(v) for c, v in sorted(cats.items())},
                                     "per_question": per, "cost": {"calls": llm.usage.calls - u0[0],
                                                                   "prompt_tokens": llm.usage.prompt_tokens - u0[1],
                                                                   "seconds": llm.usage.seconds - u0[2]}}
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "rejudge.json", json.dumps(result, indent=1))
    return result


def rejudge_table(result: dict) -> str:
    methods = list(result["methods"])
    lines = ["| category | n | " + " | ".join(f"{m} accuracy | {m} completeness" for m in methods) + " |",
             "|---|---:|" + "---:|---:|" * len(methods)]
    first = result["methods"][methods[0]]
    for cat in ["overall", *first["by_category"]]:
        cells = []
        for m in methods:
            row = result["methods"][m]["overall"] if cat == "overall" else result["methods"][m]["by_category"][cat]
            cells += [f"{row['accuracy']:.2f}", f"{row['completeness']:.2f}"]
        n = first["overall"]["n"] if cat == "overall" else first["by_category"][cat]["n"]
        lines.append(f"| {cat} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", type=Path, default=ROOT.parent / "shared/benchmarks/insurellm/tests.jsonl")
    ap.add_argument("--config", default="turn13", help="experiment whose judge model is used")
    ap.add_argument("--methods", nargs="+", default=["rubric-expected", "split"])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--whole", action="store_true", help="judge.anchored off: every answer judged whole only")
    ap.add_argument("--table", nargs="+", type=Path, metavar="DIR", help="only print the table of earlier --out folders")
    ap.add_argument("--rejudge", type=Path, metavar="RUN", help="judge a run folder's real answers again by each "
                    "method instead (writes rejudge.json into --out)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.rejudge and args.out:
        print(rejudge_table(rejudge(args.rejudge, args.methods, args.config, args.out)))
        return 0
    if args.table:
        outs = {}
        for folder in args.table:
            for path in sorted(folder.glob("*.json")):
                out = json.loads(path.read_text(encoding="utf-8"))
                outs[f"{out['method']} ({folder.name})"] = out
        print(table({k: v["result"] for k, v in outs.items()}) + "\n" + cost_lines(outs))
        return 0
    if args.out is None:
        ap.error("--out is required (or --table DIR ...)")
    rows = load_eval_set(args.eval, None).rows
    items = [{"id": r.id, "category": r.category, "question": r.question, "reference": r.reference_answer,
              "keywords": list(r.keywords or [])} for r in rows]
    made = build(items, args.n, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out / "set.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in made))
    overrides = {"judge": {"anchored": False}} if args.whole else None
    cfg = load_experiment(args.config, ROOT / "experiments", overrides)
    plan = resolve_judge(cfg.judge, ROOT)
    llm = build_llm(plan.llm, cache_root(None))
    outs = {}
    for method in args.methods:
        g = grader(llm, plan, method)
        u0 = (llm.usage.calls, llm.usage.prompt_tokens, llm.usage.seconds)
        t0 = time.perf_counter()
        scored = []
        for r in made:
            item = {"id": r["id"], "category": r["category"], "question": r["question"], "reference": r["reference"],
                    "keywords": r["keywords"], "context": ""}
            rec = g(item, r["text"], scores_only=True)
            scored.append({**r, "judgement": rec})
            print(f"{method} {r['id']} {r['kind']}: " + ("failed" if rec["status"] != "ok" else
                  " / ".join(f"{rec[d]:.2f}" for d in ("accuracy", "completeness", "relevance"))), flush=True)
        by_key = {(s["id"], s["kind"]): s["judgement"] for s in scored}

        def scores(row: dict) -> dict | None:
            j = by_key[(row["id"], row["kind"])]
            return None if j["status"] != "ok" else {d: j[d] for d in ("accuracy", "completeness", "relevance")}

        result = measure(made, scores)
        cost = {"judgements": len(made), "calls": llm.usage.calls - u0[0], "prompt_tokens": llm.usage.prompt_tokens - u0[1],
                "seconds": llm.usage.seconds - u0[2], "wall": time.perf_counter() - t0}
        out = {"method": method, "version": g.version, "anchored": plan.cfg.is_anchored, "eval": str(args.eval),
               "n": args.n, "seed": args.seed, "result": result, "cost": cost, "rows": scored}
        write_atomic(args.out / f"{method}.json", json.dumps(out, indent=1, ensure_ascii=False))
        outs[method] = out
    text = table({m: o["result"] for m, o in outs.items()}) + "\n" + cost_lines(outs)
    write_atomic(args.out / "table.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
