"""Judge-human agreement of a run (``lab agree``): read and check a labels file against the run
folder, pair each label with the judge's accuracy, and compute what :mod:`lab.metrics.human`
defines. Nothing is written until every check has passed.

The labels file is what the run report's "Download labels" button writes::

    {"format": "lab-labels-v1", "run": "<name>/<run id>", "fingerprint": "<config fingerprint>",
     "labels": {"<question id>": {"label": "correct" | "partly" | "wrong", "accuracy": 1-5 | null}}}

A label of an answer whose judgement failed cannot be compared with the judge: it is left out
of every figure and listed with the reason, never dropped silently.
"""

from __future__ import annotations

import json
from pathlib import Path

from lab.errors import DataError, LabError
from lab.metrics.human import CLASSES, LABEL_SCORES, Pair, agreement, human_score, score_class
from lab.paths import write_atomic
from lab.registry import did_you_mean
from lab.runfiles import load_run

LABELS_FORMAT = "lab-labels-v1"
AGREEMENT_FORMAT = "lab-agreement-v1"
AGREEMENT_FILE = "agreement.json"
_FIX = "use the labels.json that the run report's \"Download labels\" button writes"


def run_label(results: dict) -> str:
    """How a labels file names its run: ``<name>/<run id>``, as the report's bar does."""
    return f"{results['name']}/{results['run_id']}"


def load_labels(path: Path, results: dict, question_ids: list[str]) -> tuple[dict[str, dict], list[str]]:
    """The labels of ``path`` checked against the run (``{id: {label, accuracy}}``) and any
    warnings. Errors name the file, the field and the fix."""
    if not path.is_file():
        raise DataError(f"labels file {path} does not exist",
                        hint="open the run's report.html, mark answers, press \"Download labels\" and pass that file")
    try:
        doc = json.loads(path.read_bytes().decode("utf-8").removeprefix("\ufeff"), object_pairs_hook=_once)
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8", hint=_FIX) from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})", hint=_FIX) from None
    except _Twice as exc:
        raise DataError(f"{path}: key {exc.args[0]!r} is written twice in one object (JSON would keep the last)",
                        hint="keep one of them: one label per question") from None
    except RecursionError:
        raise DataError(f"{path}: nested too deeply to be a labels file", hint=_FIX) from None
    if not isinstance(doc, dict):
        raise DataError(f"{path}: expected a JSON object, got {type(doc).__name__}", hint=_FIX)
    if doc.get("format") != LABELS_FORMAT:
        raise DataError(f"{path} field 'format': expected {LABELS_FORMAT!r}, got {doc.get('format')!r}", hint=_FIX)
    extra = sorted(set(doc) - {"format", "run", "fingerprint", "labels"})
    if extra:
        raise DataError(f"{path} field {extra[0]!r}: unknown field", hint="a labels file holds format, run, "
                                                                          "fingerprint and labels only")
    own = run_label(results)
    if doc.get("fingerprint") != results["config_fingerprint"]:
        raise DataError(f"{path} field 'fingerprint': {doc.get('fingerprint')!r} is not the config fingerprint of "
                        f"run {own} ({results['config_fingerprint']!r}): the labels are of another experiment",
                        hint=f"pass the run the labels were made on ({doc.get('run')!r})")
    warnings = []
    if doc.get("run") != own:
        warnings.append(f"the labels were made on run {doc.get('run')!r}, not {own!r} (the same config): "
                        "they apply only if its answers are the same")
    labels = doc.get("labels")
    if not isinstance(labels, dict):
        raise DataError(f"{path} field 'labels': expected an object of question id -> label, got "
                        f"{type(labels).__name__}", hint=_FIX)
    if not labels:
        raise DataError(f"{path} field 'labels': no answer is labelled",
                        hint="mark answers in the run's report.html before downloading")
    known = set(question_ids)
    out = {}
    for qid, entry in labels.items():
        field = f"{path} field 'labels.{qid}"
        if qid not in known:
            raise DataError(f"{field}': {qid!r} is not a question of run {own}",
                            hint=f"{did_you_mean(qid, question_ids)}label only the questions of this run")
        if not isinstance(entry, dict):
            raise DataError(f"{field}': expected an object {{label, accuracy}}, got {type(entry).__name__}", hint=_FIX)
        unknown = sorted(set(entry) - {"label", "accuracy"})
        if unknown:
            raise DataError(f"{field}.{unknown[0]}': unknown field", hint="a label holds label and accuracy only")
        label, acc = entry.get("label"), entry.get("accuracy")
        if label not in LABEL_SCORES:
            raise DataError(f"{field}.label': {label!r} is not a label",
                            hint=f"use {', '.join(map(repr, LABEL_SCORES))}")
        if acc is not None and (isinstance(acc, bool) or not isinstance(acc, int) or not 1 <= acc <= 5):
            raise DataError(f"{field}.accuracy': {acc!r} is not an accuracy score",
                            hint="an integer from 1 to 5, or null to score the label (correct 5, partly 3, wrong 1)")
        out[qid] = {"label": label, "accuracy": acc}
    return out, warnings


class _Twice(ValueError):
    """A key written twice in one JSON object."""


def _once(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object's pairs as a dict, refusing a key written twice."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _Twice(key)
        out[key] = value
    return out


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


def judge_agreement(run_dir: Path, labels_path: Path) -> dict:
    """The content of ``agreement.json`` for the labels at ``labels_path`` on the run in
    ``run_dir`` (reads only)."""
    results, samples = load_run(run_dir)
    check_judged(results, samples, run_dir)
    labels, warnings = load_labels(labels_path, results, [s["id"] for s in samples])
    return agreement_with(results, samples, {q: [human_score(x["label"], x["accuracy"])] for q, x in labels.items()},
                          str(labels_path), warnings)


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
