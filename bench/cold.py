"""A whole cold retrieval-only run, as a user waits for it, against a plain script doing the same work.

    .venv/bin/python bench/cold.py [--kb DIR] [--eval FILE] [--rounds N] [--chunk-tokens 250] [--top-k 5] [--smoke]

Each side runs as its own process, started cold: interpreter start, imports, model load, chunking,
embedding, search, metrics, and on the lab's side everything a user gets besides (the index in
LanceDB, the content-keyed caches, results.json, samples.jsonl, report.html).

- lab: ``python -m lab run cold --retrieval-only`` on a config written here (fixed-token chunks of
  ``--chunk-tokens`` tokens without overlap, all-MiniLM-L6-v2, vector top ``--top-k``), with an
  empty cache and reports folder each round;
- plain: ``bench/cold_plain.py``, the same chunks (tiktoken windows), sentence-transformers
  encoding, a numpy dot-product search and the same keyword metrics, nothing written but a JSON.

Rounds alternate which side goes first, so that drift in machine speed hits both; the figures are
medians of wall and CPU (user + system) seconds. Both sides must find the same chunk count and
the same per-question MRR, or the bench exits 1. Defaults to the InsureLLM benchmark beside the
project and 3 rounds; writes bench/cold.json. ``--smoke``: the test fixture, one round, the JSON
only where ``--out`` says (``tests/bench/test_bench_cold.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSURELLM = ROOT.parent / "shared" / "benchmarks" / "insurellm"
FIXTURES = ROOT / "tests" / "fixtures"

CONFIG = """\
schema_version: 1
description: fixed-token chunks ({tokens} tokens, no overlap) + all-MiniLM-L6-v2, vector top {top_k} (cold-run bench)
data:
  knowledge_base: {kb}
  eval_set: {eval}
loader:
  name: folder
  extensions: [".md", ".txt"]
chunker:
  name: fixed_token
  chunk_tokens: {tokens}
  overlap_tokens: 0
embedding:
  model: sentence-transformers/all-MiniLM-L6-v2
  embed_metadata: false
retriever:
  name: vector
  top_k: {top_k}
metrics:
  k: 10
"""


def timed(cmd: list[str], env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall and CPU seconds (user + system, the child and its children) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}... exited {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}")
    return wall, cpu, proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kb", type=Path, default=None, help="knowledge base (default: InsureLLM; --smoke: the fixture)")
    ap.add_argument("--eval", type=Path, default=None, help="eval set (default: InsureLLM; --smoke: the fixture)")
    ap.add_argument("--rounds", type=int, default=None, help="runs per side (default 3; --smoke: 1)")
    ap.add_argument("--chunk-tokens", type=int, default=250)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="figures as JSON (default bench/cold.json; --smoke: none)")
    ap.add_argument("--smoke", action="store_true", help="one round on the test fixture: checks, and --out if given")
    args = ap.parse_args()
    if args.smoke:
        kb, eval_path, rounds = args.kb or FIXTURES / "kb", args.eval or FIXTURES / "eval.jsonl", args.rounds or 1
    else:
        kb = args.kb or INSURELLM / "knowledge-base"
        eval_path, rounds = args.eval or INSURELLM / "tests.jsonl", args.rounds or 3
    kb, eval_path = kb.resolve(), eval_path.resolve()

    from lab.models.resolve import resolve_hf_model

    model = resolve_hf_model("sentence-transformers/all-MiniLM-L6-v2", "embedding model").location
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("LAB_CACHE", None)
    lab_side, plain_side, failures = [], [], []
    with tempfile.TemporaryDirectory(prefix="lab-cold-") as tmp:
        tmp = Path(tmp)
        (tmp / "experiments").mkdir()
        (tmp / "experiments" / "cold.yaml").write_text(
            CONFIG.format(tokens=args.chunk_tokens, top_k=args.top_k, kb=json.dumps(str(kb)), eval=json.dumps(str(eval_path))))

        def lab_run(i: int):
            cmd = [sys.executable, "-m", "lab", "run", "cold", "--experiments", str(tmp / "experiments"),
                   "--retrieval-only", "--no-progress", "--cache", str(tmp / f"cache{i}"),
                   "--reports", str(tmp / f"reports{i}")]
            wall, cpu, _ = timed(cmd, env)
            (run,) = (tmp / f"reports{i}" / "cold").glob("2*/")
            samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
            results = json.loads((run / "results.json").read_text())
            return wall, cpu, {"n_chunks": results["index"]["n_chunks"],
                               "mrr": [s["metrics"]["mrr"] for s in samples],
                               "timings": results["timings"]}

        def plain_run(i: int):
            out = tmp / f"plain{i}.json"
            cmd = [sys.executable, str(ROOT / "bench" / "cold_plain.py"), "--kb", str(kb), "--eval", str(eval_path),
                   "--out", str(out), "--model", model, "--chunk-tokens", str(args.chunk_tokens),
                   "--top-k", str(args.top_k)]
            wall, cpu, _ = timed(cmd, env)
            return wall, cpu, json.loads(out.read_text())

        for i in range(rounds):
            sides = [(lab_side, lab_run), (plain_side, plain_run)]
            for store, fn in (sides if i % 2 == 0 else sides[::-1]):
                store.append(fn(i))
            (lw, lc, lo), (pw, pc, po) = lab_side[-1], plain_side[-1]
            print(f"round {i + 1}/{rounds}: lab {lw:6.1f} s wall {lc:6.1f} s CPU   plain {pw:6.1f} s wall "
                  f"{pc:6.1f} s CPU   ratio {lw / pw:.2f} / {lc / pc:.2f}", flush=True)
            if lo["n_chunks"] != po["n_chunks"]:
                failures.append(f"round {i + 1}: lab {lo['n_chunks']} chunks, plain {po['n_chunks']}")
            if lo["mrr"] != po["mrr"]:
                differ = sum(a != b for a, b in zip(lo["mrr"], po["mrr"]))
                failures.append(f"round {i + 1}: MRR differs on {differ} of {len(po['mrr'])} questions")

    med = {side: {k: statistics.median(r[j] for r in runs) for j, k in ((0, "wall_s"), (1, "cpu_s"))}
           for side, runs in (("lab", lab_side), ("plain", plain_side))}
    ratio = {k: med["lab"][k] / med["plain"][k] for k in ("wall_s", "cpu_s")}
    last_lab, last_plain = lab_side[-1][2], plain_side[-1][2]
    print(f"median of {rounds}: lab {med['lab']['wall_s']:.1f} s wall, {med['lab']['cpu_s']:.1f} s CPU; plain "
          f"{med['plain']['wall_s']:.1f} s wall, {med['plain']['cpu_s']:.1f} s CPU; ratio wall {ratio['wall_s']:.2f}, "
          f"CPU {ratio['cpu_s']:.2f} ({last_plain['n_chunks']} chunks, {last_plain['n_questions']} questions, "
          f"MRR {last_plain['mean']['mrr']:.4f})")
    out = args.out or (None if args.smoke else ROOT / "bench" / "cold.json")
    if out:
        out.write_text(json.dumps({
            "cpu_count": os.cpu_count(), "kb": str(kb), "eval": str(eval_path), "rounds": rounds,
            "chunk_tokens": args.chunk_tokens, "top_k": args.top_k, "n_chunks": last_plain["n_chunks"],
            "n_questions": last_plain["n_questions"], "mrr": last_plain["mean"]["mrr"], "median": med, "ratio": ratio,
            "runs": {"lab": [r[:2] for r in lab_side], "plain": [r[:2] for r in plain_side]},
            "lab_timings": [r[2]["timings"] for r in lab_side],
            "plain_timings": [{k: r[2][k] for k in ("import_s", "encode_s", "total_s")} for r in plain_side],
        }, indent=2))
        print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    for f in failures:
        print(f"FAILED {f}", file=sys.stderr)
    if args.smoke and not failures:
        print("smoke: ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
