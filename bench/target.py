"""What the lab adds around a target: its time per question against calling the target directly.

    .venv/bin/python bench/target.py [--delay 0.1] [--smoke]

Four targets, each asked every question of the project's eval set (121 questions, its knowledge
base) by a retrieval-only run (``lab.eval.runner.evaluate``, judge off, an empty reply cache in a
temporary folder, one question at a time) and by a plain loop:

- a no-op callable returning a fixed reply, and the same callable sleeping ``--delay`` seconds;
- a local HTTP server (127.0.0.1, ``tests/targets/target_server.py``) returning a fixed body at
  once, and after ``--delay`` seconds; the plain loop POSTs with ``http.client`` and reads the JSON.

Per target: the plain loop's seconds per question, the lab's (asking through the cache, then
locating and scoring the contexts: ``target_s + score_s`` of the run's timings), the ratio, the
absolute overhead per question in milliseconds, and the run's one-off start-up (knowledge base
loaded, target opened) apart. Goal: ratio <= 1.05 for a ``--delay`` of 100 ms.

``--smoke``: the fixture project's 6 questions and a 20 ms delay, for ``make test``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "targets"))

from lab.config import DEFAULT_CATEGORIES, ExperimentConfig  # noqa: E402
from lab.eval.runner import RunOptions, evaluate  # noqa: E402
from lab.evalsets.evalset import load_eval_set  # noqa: E402
from target_server import FIXED, Server  # noqa: E402


def callable_target(delay: float):
    def rag(question: str, history: list) -> dict:
        if delay:
            time.sleep(delay)
        return FIXED

    return rag


def direct_http(url: str, questions: list[str]) -> float:
    """A plain client: one POST per question, the JSON read; seconds in all."""
    u = urllib.parse.urlsplit(url)
    t0 = time.perf_counter()
    for i, q in enumerate(questions):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("POST", u.path, body=json.dumps({"question": q, "history": [], "id": str(i)}),
                     headers={"Content-Type": "application/json"})
        json.loads(conn.getresponse().read())
        conn.close()
    return time.perf_counter() - t0


def lab_run(kb: Path, eval_set: Path, target: dict, obj, cache: Path) -> dict:
    cfg = ExperimentConfig.model_validate({
        "name": "bench-target", "data": {"knowledge_base": str(kb), "eval_set": str(eval_set)},
        "target": {**target, "concurrency": 1}, "generation": None, "judge": None, "ragas": None})
    opts = RunOptions(project_root=ROOT, reports_root=cache / "reports", cache_root=cache, show_progress=False,
                      target_object=obj)
    results, _ = evaluate(cfg, opts, quiet=True)
    assert results["target"]["failed"] == 0 and results["target"]["called"] == results["target"]["n"]
    return results["timings"]


def line(label: str, n: int, direct_s: float, timings: dict) -> float:
    lab_s = timings["target_s"] + timings["score_s"]
    ratio = lab_s / direct_s if direct_s > 0 else float("inf")
    start = timings["total_s"] - lab_s
    print(f"{label:<22} {n} questions  direct {direct_s / n * 1000:.3f} ms/q  lab {lab_s / n * 1000:.3f} ms/q  "
          f"overhead {(lab_s - direct_s) / n * 1000:.3f} ms/q  ratio {ratio:.3f}  start-up {start:.2f} s")
    return ratio


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delay", type=float, default=0.1, help="seconds the slow targets take per question (default 0.1)")
    ap.add_argument("--smoke", action="store_true", help="the fixture's 6 questions, a 20 ms delay: for make test")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if args.smoke:
        kb, eval_set, delay = ROOT / "tests" / "fixtures" / "kb", ROOT / "tests" / "fixtures" / "eval.jsonl", 0.02
    else:
        kb, eval_set, delay = ROOT / "knowledge-base", ROOT / "eval_sets" / "company.jsonl", args.delay
    questions = [r.question for r in load_eval_set(eval_set, DEFAULT_CATEGORIES).rows]
    n = len(questions)
    ratios = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, d in (("no-op callable", 0.0), (f"callable {delay * 1000:g} ms", delay)):
            fn = callable_target(d)
            t0 = time.perf_counter()
            for q in questions:
                fn(q, [])
            direct = time.perf_counter() - t0
            timings = lab_run(kb, eval_set, {"python": "bench:rag", "version": label}, fn, Path(tmp) / label)
            ratios[label] = line(label, n, direct, timings)
        for label, d in (("http fixed body", 0.0), (f"http {delay * 1000:g} ms", delay)):
            with Server(delay=d) as server:
                direct = direct_http(server.url, questions)
                timings = lab_run(kb, eval_set, {"http": server.url, "version": label}, None, Path(tmp) / label)
            ratios[label] = line(label, n, direct, timings)
    slow = [ratios[k] for k in ratios if k.endswith(" ms")]
    print(f"ratio at {delay * 1000:g} ms: callable {slow[0]:.3f}, http {slow[1]:.3f} (goal <= 1.05)")
    if args.smoke:
        print("smoke: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
