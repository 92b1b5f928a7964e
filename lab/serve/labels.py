"""The served side of people's labels (kept in the one labels store, :mod:`lab.judge.labels`):
what the agreement page shows, and the JSON the app sends.

Agreement: between two annotators, the linear-weighted Cohen's kappa of their classes over the
questions both labelled (:func:`lab.metrics.human.weighted_kappa`); against the judge,
:func:`lab.judge.agree.agreement_with` (what ``lab agree`` reports), for each annotator and for
all of them (several labels of one answer count as their mean).
"""

from __future__ import annotations

import json
from pathlib import Path

from lab.judge.agree import agreement_with, check_judged, human_scores
from lab.judge.labels import LabelStore, run_label
from lab.metrics.human import CLASSES, confusion, human_score, score_class, weighted_kappa


def agreement(store: LabelStore, results: dict, samples: list[dict], run_dir: Path) -> dict:
    """Agreement on a run from its labels in ``store``: between each pair of annotators, and of
    each (and of all) with the judge (see the module). Runs without a judge get the annotators'
    part only."""
    run = run_label(results)
    rows = store.labels(run)
    by_annotator: dict[str, dict[str, int]] = {}
    for r in rows:
        by_annotator.setdefault(r["annotator"], {})[r["question_id"]] = human_score(r["label"], r["accuracy"])
    names = sorted(by_annotator)
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            both = sorted(set(by_annotator[a]) & set(by_annotator[b]))
            ca = [score_class(by_annotator[a][q]) for q in both]
            cb = [score_class(by_annotator[b][q]) for q in both]
            table = confusion(ca, cb)
            kappa, why = weighted_kappa(table, (f"{a}'s labels", f"{b}'s labels"))
            pairs.append({"a": a, "b": b, "n": len(both), "same_class": sum(x == y for x, y in zip(ca, cb)),
                          "kappa": {"value": kappa, "why": why},
                          "confusion": {h: dict(zip(CLASSES, row)) for h, row in zip(CLASSES, table)},
                          "differ": [q for q, x, y in zip(both, ca, cb) if x != y]})
    judge = None
    if any(s.get("judgement") for s in samples) and rows:
        check_judged(results, samples, run_dir)
        source = f"{store.path} ({len(names)} annotator{'s' if len(names) != 1 else ''})"
        judge = {"all": agreement_with(results, samples, human_scores(rows), source),
                 "by_annotator": {a: agreement_with(results, samples, {q: [v] for q, v in by_annotator[a].items()},
                                                    f"{store.path} ({a})") for a in names}}
    return {"format": "lab-annotation-agreement-v1", "run": run, "annotators": names,
            "n_labels": len(rows), "labelled": {a: len(v) for a, v in by_annotator.items()},
            "between_annotators": pairs, "judge": judge}


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
