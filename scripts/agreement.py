"""Does a generated eval set pick the same pipeline as a human-written one?

Runs retrieval-only experiments (the lab's own ``lab run``, nothing re-implemented) over one
knowledge base with two eval sets, then reports, per metric, each config's mean on both sets
and the rank agreement of the configs (Kendall's tau, Spearman's rho, 95% bootstrap intervals
over questions; :mod:`lab.metrics.agreement`).

    .venv/bin/python scripts/agreement.py \\
        --kb ../shared/benchmarks/insurellm/knowledge-base \\
        --human ../shared/benchmarks/insurellm/tests.jsonl --generated eval_sets/generated/insurellm.jsonl \\
        --out reports/_agreement/insurellm

Configs: the experiments named by ``--configs`` plus two chunk sizes of turn13 (``--sizes``),
written as ``extends: turn13`` configs into the output folder. Writes ``agreement.json`` and
``agreement.md`` (the table docs/own-documents.md shows) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from lab.metrics.agreement import rank_agreement

CONFIGS = ["turn13", "turn18", "fixed-token", "bm25", "hybrid", "hybrid-rrf", "keyword-rerank", "turn13-optimized"]
METRICS = ["mrr", "ndcg", "span_recall"]


def run(name: str, experiments: Path, kb: Path, eval_set: Path, reports: Path) -> list[dict]:
    """One retrieval-only run; its per-question samples, in eval-set order."""
    proc = subprocess.run([sys.executable, "-m", "lab", "run", name, "--retrieval-only", "--no-progress",
                           "--kb", str(kb), "--eval", str(eval_set), "--reports", str(reports),
                           "--experiments", str(experiments)], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"lab run {name} on {eval_set.name} failed:\n{proc.stderr[-2000:]}")
    base = reports / name
    run_dir = base / (base / "LATEST").read_text().strip()
    return [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines() if line.strip()]


def scored(runs: dict[str, list[dict]], metric: str) -> dict[str, list[float]]:
    """Per config, the values of the questions every config scored on ``metric`` (span
    metrics: the questions with golden spans); empty when no question has one."""
    keep = [i for i in range(len(next(iter(runs.values()))))
            if all(r[i]["metrics"].get(metric) is not None for r in runs.values())]
    return {n: [float(r[i]["metrics"][metric]) for i in keep] for n, r in runs.items()} if keep else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", type=Path, required=True)
    ap.add_argument("--human", type=Path, required=True)
    ap.add_argument("--generated", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--sizes", default="500,2000", help="turn13 chunk sizes added as configs")
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args()
    out = args.out.resolve()
    experiments = out / "experiments"
    experiments.mkdir(parents=True, exist_ok=True)
    for f in (ROOT / "experiments").glob("*.yaml"):
        shutil.copy(f, experiments / f.name)
    names = [c for c in args.configs.split(",") if c]
    for size in [int(s) for s in args.sizes.split(",") if s]:
        name = f"turn13-chunk{size}"
        (experiments / f"{name}.yaml").write_text(
            f"schema_version: 1\nextends: turn13\ndescription: turn13 with {size}-character chunks\n"
            f"chunker:\n  chunk_size: {size}\n  chunk_overlap: {size // 5}\n")
        names.append(name)
    per: dict[str, dict[str, list[dict]]] = {"human": {}, "generated": {}}
    for which, path in (("human", args.human), ("generated", args.generated)):
        for name in names:
            per[which][name] = run(name, experiments, args.kb.resolve(), path.resolve(), out / "reports" / which)
            mrr = [s["metrics"]["mrr"] for s in per[which][name] if s["metrics"].get("mrr") is not None]
            print(f"{which:9s} {name:18s} mrr {sum(mrr) / max(1, len(mrr)):.4f} over {len(mrr)} questions", flush=True)
    table: dict[str, dict] = {}
    for metric in METRICS:
        a, b = scored(per["human"], metric), scored(per["generated"], metric)
        if len(set(a) & set(b)) >= 3:
            table[metric] = rank_agreement(a, b, args.resamples)
    report = {"kb": str(args.kb), "human": str(args.human), "generated": str(args.generated), "configs": names,
              "agreement": table}
    (out / "agreement.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = ["| config | " + " | ".join(f"{m} human | {m} generated" for m in table) + " |",
             "|---|" + "---|---|" * len(table)]
    for n in names:
        lines.append(f"| {n} | " + " | ".join(f"{table[m]['mean_a'][n]:.4f} | {table[m]['mean_b'][n]:.4f}"
                                             for m in table) + " |")
    for m, t in table.items():
        ci, rci = t["kendall_tau_ci"], t["spearman_ci"]
        lines.append(f"\n{m}: Kendall tau {t['kendall_tau']:.2f} (95% CI {ci[0]:.2f} to {ci[1]:.2f}), "
                     f"Spearman {t['spearman']:.2f} ({rci[0]:.2f} to {rci[1]:.2f}); "
                     f"{t['n_a']} human and {t['n_b']} generated questions, {len(t['configs'])} configs")
    (out / "agreement.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
