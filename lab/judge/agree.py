"""Judge-human agreement of a run (``lab agree``): pair the labels people gave its answers, as
the labels store keeps them (:mod:`lab.judge.labels`), with the judge's accuracy, and compute what
:mod:`lab.metrics.human` defines. Nothing is written until every check has passed.

The run report's downloaded ``labels.json`` is imported into the store first
(:func:`from_file`), and its figures are read back from there: the agreement of the labels the
file holds, as the store keeps them, the same figures as the file's own.

A label of an answer whose judgement failed cannot be compared with the judge: it is left out
of every figure and listed with the reason, never dropped silently.
"""

from __future__ import annotations

import json
from pathlib import Path

from lab.errors import DataError, LabError
from lab.judge.labels import Imported, LabelStore, import_file, run_label, store_root
from lab.metrics.human import CLASSES, LABEL_SCORES, Pair, agreement, human_score, score_class
from lab.paths import write_atomic
from lab.runfiles import load_run

AGREEMENT_FORMAT = "lab-agreement-v1"
AGREEMENT_FILE = "agreement.json"


def judge_score(sample: dict) -> float | None:
    """The judge's accuracy of an answer (judge-v1's whole score, or the probability-weighted
    methods' score in [1, 5]), or None when it was not judged or the judgement failed."""
    j = sample.get("judgement") or {}
    acc = j.get("accuracy")
    if j.get("status") != "ok" or isinstance(acc, bool) or not isinstance(acc, (int, float)) or not 1 <= acc <= 5:
        return None
    return acc


def check_judged(results: dict, samples: list[dict], run_dir: Path) -> None:
    """Refuse a run whose answers were never judged: there is nothing to compare labels with."""
    if not any(s.get("judgement") for s in samples):
        raise LabError(f"run {run_label(results)} ({run_dir}) has no judge scores to compare labels with",
                       hint="label a run with answers and a judge (not --retrieval-only)")


def human_scores(rows: list[dict]) -> dict[str, list[int]]:
    """question id -> the human score (:func:`lab.metrics.human.human_score`) of each label of
    it in ``rows`` (the store's rows)."""
    out: dict[str, list[int]] = {}
    for r in rows:
        out.setdefault(r["question_id"], []).append(human_score(r["label"], r["accuracy"]))
    return out


def from_store(store: LabelStore, run_dir: Path, annotator: str | None = None) -> dict:
    """``agreement.json``'s content from the labels in ``store`` of the run in ``run_dir``: every
    annotator's (an answer several labelled counts as their mean), or ``annotator``'s only."""
    results, samples = load_run(run_dir)
    check_judged(results, samples, run_dir)
    run = run_label(results)
    rows = [r for r in store.labels(run) if annotator is None or r["annotator"] == annotator]
    if not rows:
        who = f"by {annotator} " if annotator else ""
        raise DataError(f"{store.path}: no labels {who}of run {run}",
                        hint=f"label its answers in lab serve (/runs/{run}/label), or import a labels.json "
                             "(lab agree RUN FILE [--import-as NAME])")
    names = sorted({r["annotator"] for r in rows})
    return agreement_with(results, samples, human_scores(rows), f"{store.path} ({', '.join(names)})")


def from_file(run_dir: Path, path: Path, annotator: str, reports_root: Path) -> tuple[dict, Imported]:
    """Import the ``labels.json`` at ``path`` into the store of the run's reports folder
    (:func:`lab.judge.labels.store_root`, ``reports_root`` for a run folder kept elsewhere) as
    ``annotator``'s, and return ``agreement.json``'s content for the labels the file holds, read
    back from the store, with what the import did."""
    results, samples = load_run(run_dir)
    check_judged(results, samples, run_dir)
    imported = import_file(path, results, samples, store_root(run_dir, results, reports_root), annotator)
    rows = [r for r in imported.store.labels(run_label(results))
            if r["annotator"] == imported.annotator and r["question_id"] in imported.ids]
    source = f"{imported.store.path} ({imported.annotator}: the labels of {path})"
    return agreement_with(results, samples, human_scores(rows), source, list(imported.warnings)), imported


def agreement_with(results: dict, samples: list[dict], scores: dict[str, list[int]], source: str,
                   warnings: list[str] = ()) -> dict:
    """``agreement.json``'s content for human ``scores`` (question id -> each labeller's human
    score, :func:`lab.metrics.human.human_score`; several labellers of one answer count as their
    mean) of the run's answers; ``source`` names where the labels came from."""
    pairs, unlabelled, left_out = [], [], []
    for s in samples:
        score, given = judge_score(s), scores.get(s["id"])
        if not given:
            if score is not None:
                unlabelled.append(score)
        elif score is None:
            left_out.append({"id": s["id"], "why": "judgement failed" if s.get("judgement") else "not judged"})
        else:
            human = given[0] if len(given) == 1 else sum(given) / len(given)
            pairs.append(Pair(s["id"], s["category"], human, score))
    judge = (results.get("models") or {}).get("judge") or {}
    return {
        "format": AGREEMENT_FORMAT,
        "run": run_label(results),
        "fingerprint": results["config_fingerprint"],
        "labels_file": source,
        "judge": {"model": judge.get("model"), "prompt_version": judge.get("prompt_version")},
        "mapping": {"label_score": LABEL_SCORES, "corrected_accuracy": "replaces the label's score when given",
                    "class": {c: [s for s in range(1, 6) if score_class(s) == c] for c in reversed(CLASSES)}},
        "n_answers": len(samples),
        "n_judged": len(pairs) + len(unlabelled),
        "n_labelled": sum(bool(v) for v in scores.values()),
        "n_pairs": len(pairs),
        "left_out": left_out,
        "warnings": list(warnings),
        **agreement(pairs, unlabelled, list(results["metrics"]["by_category"])),
    }


def write_agreement(run_dir: Path, result: dict) -> Path:
    out = run_dir / AGREEMENT_FILE
    write_atomic(out, json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return out
