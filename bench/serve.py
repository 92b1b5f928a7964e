"""Speed of ``lab serve``: the runs table over many runs, and a comparison of two large runs.

    .venv/bin/python bench/serve.py [--runs 1000] [--questions 50] [--big 2000] [--smoke]

Made here, in a temporary reports folder: ``--runs`` runs of ``--questions`` questions each (the
run files' schema, judged, three categories) and two runs of ``--big`` questions. A real server
(uvicorn in a thread, on 127.0.0.1) answers real HTTP requests; times are to the first byte of the
response body, from a client in this process:

- the runs table (``/``): cold, the first request after start (every run's ``results.json`` and
  ``samples.jsonl`` read once, for the headline means and their intervals); warm, a later request
  (a ``stat`` per run); against the floor of the work, ``json.load`` of every ``results.json``
  (ratio warm / floor); goal: warm under 1 s at 1,000 runs;
- a comparison of the two big runs (``/compare?run=...&run=...``): the first request, against
  ``lab compare``'s own renderer writing the same page to a file (ratio); goal: under 3 s at
  2,000 questions. A second request is served from the page cache.

``--smoke``: 20 runs of 10 questions and two of 60, for ``make test``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from lab.metrics.aggregate import by_category, mean_table
from lab.report.compare import Run, compare_html, labelled
from lab.runfiles import load_run
from lab.serve.app import create_app

CATEGORIES = ("direct_fact", "spanning", "temporal")


def sample(i: int, rng: random.Random) -> dict:
    mrr = rng.choice([0, 0.25, 1 / 3, 0.5, 1, 1, 1])
    acc = rng.choice([1, 2, 3, 4, 4, 5, 5])
    text = f"Policy {i} covers item {i}. " * 12
    judgement = {"status": "ok", "accuracy": acc, "completeness": acc, "relevance": 5, "feedback": "ok",
                 "prompt_version": "judge-v3"}
    return {
        "id": f"q{i:05d}", "question": f"What does policy {i} cover?", "category": CATEGORIES[i % 3],
        "keywords": ["policy", f"item {i}"], "reference_answer": f"Policy {i} covers item {i}.",
        "keyword_ranks": {"policy": 1, f"item {i}": 1 if mrr == 1 else None},
        "metrics": {"mrr": mrr, "ndcg": mrr, "coverage": 1.0 if mrr else 0.5, "context_chars": 4 * len(text),
                    "accuracy": acc, "completeness": acc, "relevance": 5, "judge_failed": 0},
        "retrieved": [{"rank": r, "id": f"doc{i}.md#{r}", "source": f"doc{i}.md", "page": None, "doc_type": "docs",
                       "score": 0.5, "first_stage_rank": r, "first_stage_score": 0.5, "start_char_idx": 0,
                       "end_char_idx": len(text), "text": text} for r in range(1, 5)],
        "first_stage": None, "timings": {"retrieve_s": 0.001},
        "context": {"builder": "top_n", "chars": len(text), "n_passages": 4, "text": text},
        "answer": {"status": "ok", "text": f"Item {i} [1]", "refused": False, "citations": [1]},
        "judgement": judgement, "calibration": {"reference": dict(judgement, accuracy=5)},
    }


def write_run(root: Path, name: str, run_id: str, n: int, seed: int) -> None:
    rng = random.Random(seed)
    samples = [sample(i, rng) for i in range(n)]
    names = ["mrr", "ndcg", "coverage", "context_chars", "accuracy", "completeness", "relevance"]
    rows = [{"category": s["category"], **s["metrics"]} for s in samples]
    results = {
        "schema_version": 1, "name": name, "run_id": run_id, "created_at": f"2026-11-26T{seed % 24:02d}:00:00Z",
        "description": f"{name}: bench run", "config": {"name": name}, "config_fingerprint": f"{seed:016x}",
        "sample": {"is_sample": False, "n_questions": n, "n_total": n, "limit": None, "seed": 13},
        "data": {"knowledge_base": "/kb/knowledge-base", "corpus_sha256": "c" * 64, "n_documents": 59,
                 "n_chars": 100000, "skipped_files": [], "eval_set": "/kb/eval.jsonl", "eval_sha256": f"{n:064x}",
                 "categories": list(CATEGORIES)},
        "index": {"key": "k", "path": "/idx", "reused": True, "n_chunks": 500},
        "models": {"embedding": {"name": "all-MiniLM-L6-v2"}, "reranker": None,
                   "generation": {"model": "qwen2.5-coder-1.5b-instruct"},
                   "judge": {"backend": "llama_cpp", "model": "qwen2.5-coder-1.5b-instruct", "fingerprint": "f",
                             "temperature": 0.0, "max_tokens": 160, "prompt_version": "judge-v3", "prompt_sha256": "j"}},
        "metrics": {"k": 10, "overall": mean_table(rows, names), "by_category": by_category(rows, names, list(CATEGORIES))},
        "answers": {"n": n, "failed": 0}, "judge": {"n_judged": n, "n_failed": 0, "failed_ids": []},
        "counters": {}, "llm_usage": {}, "cost_usd": 0.0, "timings": {"total_s": 60.0}, "environment": {},
    }
    folder = root / name / run_id
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(results))
    (folder / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))


def first_byte(port: int, path: str) -> tuple[float, int, int]:
    """Seconds to the first byte of the body of GET ``path``, the status and the body's size."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    t0 = time.perf_counter()
    conn.request("GET", path)
    resp = conn.getresponse()
    first = resp.read(1)
    t = time.perf_counter() - t0
    rest = resp.read()
    conn.close()
    return t, resp.status, len(first) + len(rest)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="example: .venv/bin/python bench/serve.py --runs 1000 --big 2000")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--big", type=int, default=2000)
    ap.add_argument("--smoke", action="store_true", help="20 small runs and two of 60 questions: for make test")
    args = ap.parse_args()
    if args.smoke:
        args.runs, args.questions, args.big = 20, 10, 60

    import uvicorn

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "reports"
        t0 = time.perf_counter()
        for k in range(args.runs):
            write_run(root, f"exp{k % 40:02d}", f"20261126-{k:06d}", args.questions, k)
        write_run(root, "big-a", "20261126-a", args.big, 1)
        write_run(root, "big-b", "20261126-b", args.big, 2)
        made = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        print(f"made {args.runs} runs of {args.questions} questions and two of {args.big} in {made:.1f} s "
              f"({size / 1e6:.1f} MB)")

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(create_app(root), host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)

        cold, status, body = first_byte(port, "/")
        assert status == 200, status
        warm = min(first_byte(port, "/")[0] for _ in range(5))
        t0 = time.perf_counter()
        for p in root.glob("*/*/results.json"):
            json.loads(p.read_text())
        floor = time.perf_counter() - t0
        n_rows = args.runs + 2
        print(f"runs table ({n_rows} runs)   cold {cold:.3f} s   warm {warm:.3f} s   floor (json.load of every "
              f"results.json) {floor:.3f} s   ratio warm/floor {warm / floor:.2f}   page {body / 1e6:.2f} MB")

        path = "/compare?run=big-a/20261126-a&run=big-b/20261126-b"
        served, status, body = first_byte(port, path)
        assert status == 200, status
        again = first_byte(port, path)[0]
        t0 = time.perf_counter()
        runs = labelled([Run(f, *load_run(f)) for f in (root / "big-a" / "20261126-a", root / "big-b" / "20261126-b")])
        html = compare_html(runs, {r.label: "#" for r in runs})
        direct = time.perf_counter() - t0
        print(f"compare ({args.big} questions each)   served {served:.3f} s   lab compare's renderer {direct:.3f} s   "
              f"ratio {served / direct:.2f}   cached {again:.3f} s   page {body / 1e6:.2f} MB (file {len(html) / 1e6:.2f} MB)")
        server.should_exit = True
        thread.join(timeout=10)
    if args.smoke:
        print("smoke: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
