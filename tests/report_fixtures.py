"""Hand-made run folders for the report tests: per-question numbers chosen so that every mean,
delta and p-value the pages show can be worked out by hand (see the tests for the sums).

Run A and run B share 15 questions: 12 direct_fact, 3 temporal (a small category). B improves
MRR on 7 questions by 0.5 or 0.25 and worsens none. One chunk, one question and one answer
carry HTML and a script, which every page must show as text.
"""

from __future__ import annotations

import json
from pathlib import Path

from lab.judge.rubric import calibration_summary
from lab.metrics.aggregate import by_category, mean_table

SCRIPT_CHUNK = ('Claims desk <b>bold</b> <script>window.__pwned = 1; document.title = "pwned"</script> '
                '& "quoted" <img src=x onerror="window.__pwned = 2">')
HTML_QUESTION = 'Is <img src=x onerror="window.__pwned = 3"> escaped?'

CATEGORIES = ["direct_fact"] * 12 + ["temporal"] * 3
MRR_A = [0.5, 1, 0.5, 0.5, 0, 1, 1, 0.5, 0.25, 1, 0, 1, 1, 0.5, 0]
MRR_B = [1, 1, 1, 1, 0.5, 1, 1, 1, 0.5, 1, 0.5, 1, 1, 1, 0]
#: Judge accuracy per question; None = a failed judgement (q05 in A).
ACC_A = [4, 4, 3, 3, None, 5, 4, 3, 2, 5, 1, 4, 4, 3, 1]
ACC_B = [4, 4, 4, 4, 2, 5, 4, 4, 3, 5, 2, 4, 4, 4, 1]


def _judgement(acc):
    """judge-v1's judgement of every dimension at ``acc`` (None: a failed judgement)."""
    if acc is None:
        return {"status": "failed", "accuracy": None, "completeness": None, "relevance": None,
                "error": "judge output is not valid JSON", "raw": "{not json <b>", "attempts": 3}
    return {"status": "ok", "accuracy": acc, "completeness": acc, "relevance": acc,
            "feedback": f"scored {acc}", "attempts": 1, "cached": False, "prompt_tokens": 300,
            "completion_tokens": 50, "prompt_version": "judge-v1"}


def _sample(i: int, mrr: float, acc, tag: str, ref=5, extra: dict | None = None) -> dict:
    """Question ``i``: its MRR (nDCG the same, coverage 1 where MRR > 0, else 0.5), judge scores
    ``acc``, the reference answer judged as the answer at ``ref`` (None: that calibration failed)
    and ``extra`` metrics (span recall, IoU)."""
    qid = f"q{i + 1:02d}"
    question = HTML_QUESTION if i == 0 else f"What does policy {i + 1} cover?"
    text = SCRIPT_CHUNK if i == 0 else f"Policy {i + 1} covers item {i + 1}. Run {tag}."
    chunk = {"rank": 1, "id": f"doc{i + 1}.md#0", "source": f"doc{i + 1}.md", "doc_type": "docs", "score": 0.5,
             "first_stage_rank": 1, "first_stage_score": 0.5, "start_char_idx": 0, "end_char_idx": len(text),
             "text": text}
    answer_text = "<script>window.__pwned = 4</script> An answer [1]" if i == 0 else f"Item {i + 1} [1]"
    judgement = _judgement(acc)
    return {
        "id": qid,
        "question": question,
        "category": CATEGORIES[i],
        "keywords": ["policy", f"item {i + 1}"],
        "reference_answer": f"Policy {i + 1} covers item {i + 1}.",
        "keyword_ranks": {"policy": 1, f"item {i + 1}": 1 if mrr == 1 else None},
        "metrics": {"mrr": mrr, "ndcg": mrr, "coverage": 1.0 if mrr else 0.5, "context_chars": len(text),
                    "answer_chars": len(answer_text), "sent_context_chars": len(text),
                    "accuracy": judgement["accuracy"], "completeness": judgement["completeness"],
                    "relevance": judgement["relevance"], "judge_failed": int(acc is None), **(extra or {})},
        "retrieved": [chunk],
        "first_stage": None,
        "timings": {"retrieve_s": 0.001, "rerank_s": None, "generate_s": 1.5},
        "context": {"builder": "top_n", "chars": len(text), "n_passages": 1, "n_candidates": 1,
                    "passages": [], "text": f"[1] (source: doc{i + 1}.md)\n{text}"},
        "answer": {"status": "ok", "prompt_version": "answer-grounded-v1", "prompt_sha256": "abc", "text": answer_text,
                   "citations": [1], "cited_sources": [f"doc{i + 1}.md"], "refused": False, "prompt_tokens": 100,
                   "completion_tokens": 10, "seconds": 1.5, "finish_reason": "stop", "cached": False},
        "judgement": judgement,
        "calibration": {"reference": _judgement(ref), "mismatched": _judgement(1), "mismatched_id": "q02"},
    }


def results_for(name: str, run_id: str, samples: list[dict], thresholds: dict | None = None,
                eval_sha: str = "e" * 64) -> dict:
    metric_names = ["mrr", "ndcg", "coverage", "context_chars", "answer_chars", "sent_context_chars",
                    "accuracy", "completeness", "relevance"]
    metric_names += [m for m in SPAN_METRICS if any(m in s["metrics"] for s in samples)]
    rows = [{"category": s["category"], **s["metrics"]} for s in samples]
    per_cat = by_category(rows, metric_names, ["direct_fact", "temporal"])
    for cat, row in per_cat.items():
        row["judge_failed"] = sum(s["metrics"]["judge_failed"] for s in samples if s["category"] == cat)
    failed = [s["id"] for s in samples if s["judgement"]["status"] == "failed"]
    judge = {"backend": "llama_cpp", "model": "qwen2.5-coder-1.5b-instruct", "fingerprint": "f", "temperature": 0.0,
             "max_tokens": 160, "prompt_version": "judge-v1", "prompt_sha256": "j", "calibration": True,
             "max_attempts": 3}
    return {
        "schema_version": 1, "name": name, "run_id": run_id, "created_at": "2026-11-22T10:00:00Z",
        "description": f"{name} <fixture>",
        "config": {"name": name, "report": {"thresholds": thresholds or {}}},
        "config_fingerprint": name * 2,
        "sample": {"is_sample": False, "n_questions": len(samples), "n_total": len(samples), "limit": None, "seed": 13},
        "data": {"knowledge_base": "/kb/knowledge-base", "corpus_sha256": "c" * 64, "n_documents": 15, "n_chars": 900,
                 "skipped_files": [], "eval_set": "/kb/eval.jsonl", "eval_sha256": eval_sha,
                 "categories": ["direct_fact", "temporal"]},
        "index": {"key": "k" * 20, "path": "/idx", "reused": True, "n_chunks": 15, "chunk_chars_mean": 60,
                  "texts_embedded": 0},
        "models": {"embedding": {"name": "sentence-transformers/all-MiniLM-L6-v2", "location": "/m", "source": "package",
                                 "fingerprint": "e"},
                   "reranker": None,
                   "generation": {"backend": "llama_cpp", "model": "qwen2.5-coder-1.5b-instruct", "temperature": 0.0,
                                  "max_tokens": 256, "prompt_version": "answer-grounded-v1", "prompt_sha256": "abc",
                                  "context_builder": {"name": "top_n"}},
                   "judge": judge},
        "metrics": {"k": 10, "overall": mean_table(rows, metric_names), "by_category": per_cat},
        "answers": {"n": len(samples), "failed": 0, "failed_ids": [], "refused": 0, "no_context": 0,
                    "with_citation": len(samples), "cut_at_max_tokens": 0},
        "judge": {"n_judged": len(samples) - len(failed), "n_failed": len(failed), "failed_ids": failed},
        "calibration": calibration_summary(samples),
        "counters": {"embeddings_computed": 0},
        "llm_usage": {"generation": {"calls": 15, "cached": 0, "failed": 0, "prompt_tokens": 1500,
                                     "completion_tokens": 150, "seconds": 22.5, "cost_usd": 0.0}},
        "cost_usd": 0.0,
        "timings": {"retrieve_s": 0.02, "generate_s": 22.5, "judge_s": 30.0, "total_s": 55.0},
        "environment": {"lab": "0.1.0", "python": "3.11.7", "platform": "linux", "cpu_count": 2,
                        "packages": {"lancedb": "0.40.0"}, "git_commit": "0" * 40, "git_dirty": False},
    }


def write_run(root: Path, name: str, run_id: str, mrr: list, acc: list, tag: str, refs: list | None = None,
              spans: dict[str, list] | None = None, gate: dict | None = None, **kw) -> Path:
    """A run of ``len(mrr)`` questions (see :func:`_sample`): ``refs`` the reference answers' judged
    scores (5 each by default), ``spans`` per-question span metrics ({name: values}), ``gate`` the
    stored config's ``gate.metrics``."""
    refs = refs or [5] * len(mrr)
    samples = [_sample(i, m, a, tag, r, {k: v[i] for k, v in (spans or {}).items()})
               for i, (m, a, r) in enumerate(zip(mrr, acc, refs))]
    folder = root / name / run_id
    folder.mkdir(parents=True)
    results = results_for(name, run_id, samples, **kw)
    if gate:
        results["config"]["gate"] = {"baseline": None, "metrics": gate, "alpha": 0.05}
    (folder / "results.json").write_text(json.dumps(results), encoding="utf-8")
    with open(folder / "samples.jsonl", "w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps(s) + "\n")
    (root / name / "LATEST").write_text(run_id + "\n")
    return folder


#: Span recall and IoU of two runs whose keyword and judge metrics are the same (MRR_A, ACC_A):
#: B's recall gains 0.5 on q01-q10 (deltas: ten 0.5, five 0: mean 1/3, sd sqrt(30/36/14), so
#: 1.37 sd), its IoU 0.25 on q01-q12 (twelve 0.25, three 0: mean 0.2, sd sqrt(0.15/14): 1.93 sd).
SPAN_METRICS = ("span_recall", "span_iou")
SPANS_A = {"span_recall": [0.5] * 15, "span_iou": [0.25] * 15}
SPANS_B = {"span_recall": [1.0] * 10 + [0.5] * 5, "span_iou": [0.5] * 12 + [0.25] * 3}


def write_span_pair(root: Path) -> tuple[Path, Path]:
    """Runs ``spans-a`` and ``spans-b``: only span recall and IoU differ."""
    return (write_run(root, "spans-a", "20261126-100000", MRR_A, ACC_A, "A", spans=SPANS_A),
            write_run(root, "spans-b", "20261126-110000", MRR_A, ACC_A, "A", spans=SPANS_B))


def write_pair(root: Path, **kw) -> tuple[Path, Path]:
    """Runs ``base`` (A) and ``better`` (B) under ``root`` (a reports folder)."""
    a = write_run(root, "base", "20261122-100000", MRR_A, ACC_A, "A", **kw)
    b = write_run(root, "better", "20261122-110000", MRR_B, ACC_B, "B")
    return a, b


#: Labels of run A's answers (people's verdicts) and the weighted kappa they give against its judge,
#: worked out by hand in tests/metrics/test_human.py.
LABELS = {
    "q01": {"label": "correct", "accuracy": None},  # 5 vs 4: correct / correct
    "q02": {"label": "partly", "accuracy": None},  # 3 vs 4: partly / correct
    "q03": {"label": "partly", "accuracy": None},  # 3 vs 3: partly / partly
    "q04": {"label": "wrong", "accuracy": None},  # 1 vs 3: wrong / partly
    "q05": {"label": "correct", "accuracy": None},  # the judgement failed: left out
    "q11": {"label": "wrong", "accuracy": None},  # 1 vs 1
    "q13": {"label": "correct", "accuracy": 4},  # temporal, 4 vs 4
    "q15": {"label": "wrong", "accuracy": None},  # temporal, 1 vs 1
}
# 7 pairs; rows human w/p/c, columns judge: [[2, 1, 0], [0, 1, 1], [0, 0, 2]]; rows 3 2 2, columns 2 2 3.
# observed: 0.5 + 0.5 = 1; chance: [0.5*3*2 + 1*3*3 + 0.5*2*2 + 0.5*2*3 + 1*2*2 + 0.5*2*2] / 7 = 23/7
# kappa = 1 - 7/23 = 16/23. direct_fact (q01-q04, q11): [[1,1,0],[0,1,1],[0,0,1]], rows 2 2 1, cols 1 2 2:
# observed 1, chance (0.5*2*2 + 1*2*2 + 0.5*2*1 + 0.5*2*2 + 1*1*1 + 0.5*1*2) / 5 = 11/5: kappa 6/11.
KAPPA, KAPPA_DIRECT = 16 / 23, 6 / 11


#: A judge with float scores whose reference answers score under 5: each answer's accuracy (every
#: dimension alike) and the judge's score of the same question's reference answer (None: that
#: calibration failed, q07). Against the reference: q01 0.41 under (amber; red on the fixed
#: thresholds), q02 level, q03 0.22 under, q04 1 under, q06 above, q07 against the run's mean
#: 64.28 / 14 = 4.59 (0.59 under), q08 0.75 under (amber, the edge), q09 0.25 under (green, the edge).
ACC_SCALED = [3.91, 4, 4.1, 3, None, 5, 4, 3.57, 4.07, 5, 1, 4, 4, 3, 1]
REFS_SCALED = [4.32, 4, 4.32, 4, 5, 4, None, 4.32, 4.32, 5, 5, 5, 5, 5, 5]


def write_scaled_run(root: Path, **kw) -> Path:
    """Run ``scaled``: :data:`ACC_SCALED` judged, the references at :data:`REFS_SCALED`."""
    return write_run(root, "scaled", "20261126-120000", MRR_A, ACC_SCALED, "A", refs=REFS_SCALED, **kw)
