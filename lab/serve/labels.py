"""People's labels of answers, kept in SQLite: ``<reports>/labels.sqlite``.

One row per (run, question, annotator): ``correct`` / ``partly`` / ``wrong``, an optional
corrected accuracy (1-5), a note, who and when, and where it came from (``served``: the annotation
queue of ``lab serve``; else the labels.json file it was imported from). Assignments say which
annotator labels which question; a question assigned to two annotators is their overlap, where
their agreement is measured.

The database runs in WAL mode (readers never wait for the writer) with a busy timeout, and every
label is one committed transaction: several annotators write at once and nothing is lost, and a
server stopped mid-session keeps every label it acknowledged. A connection is opened per call,
so the store is safe to share between the server's threads.

Agreement: between two annotators, the linear-weighted Cohen's kappa of their classes over the
questions both labelled (:func:`lab.metrics.human.weighted_kappa`); against the judge,
:func:`lab.judge.agree.agreement_with` (what ``lab agree`` reports), for each annotator and for
all of them (several labels of one answer count as their mean).
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from lab.errors import DataError
from lab.judge.agree import LABELS_FORMAT, agreement_with, check_judged, load_labels, run_label
from lab.runfiles import load_run
from lab.metrics.human import CLASSES, LABEL_SCORES, confusion, human_score, score_class, weighted_kappa

#: The database's file name in the reports folder.
DB_FILE = "labels.sqlite"
SCHEMA_VERSION = 1
#: Characters of a note kept.
NOTE_CHARS = 2000
#: An annotator's name: what a person types, shown escaped, at most this long.
NAME_CHARS = 40

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS labels (
    run TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    question_id TEXT NOT NULL,
    annotator TEXT NOT NULL,
    label TEXT NOT NULL CHECK (label IN ('correct', 'partly', 'wrong')),
    accuracy INTEGER CHECK (accuracy IS NULL OR accuracy BETWEEN 1 AND 5),
    note TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT 'served',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (run, question_id, annotator)
);
CREATE TABLE IF NOT EXISTS assignments (
    run TEXT NOT NULL,
    question_id TEXT NOT NULL,
    annotator TEXT NOT NULL,
    assigned_at TEXT NOT NULL,
    PRIMARY KEY (run, question_id, annotator)
);
"""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def check_annotator(name: object) -> str:
    """``name`` stripped, or the error that says what a name may be."""
    if not isinstance(name, str) or not name.strip():
        raise DataError("annotator: a name is needed", hint="give your name (letters, digits, spaces, . _ -)")
    name = name.strip()
    if len(name) > NAME_CHARS or any(not (c.isalnum() or c in " ._-@") for c in name):
        raise DataError(f"annotator {name[:NAME_CHARS]!r}: not a name",
                        hint=f"use letters, digits, spaces and . _ - @ (at most {NAME_CHARS} characters)")
    return name


def check_label(label: object, accuracy: object, note: object) -> tuple[str, int | None, str]:
    """A label as the store keeps it, or the error naming the field and the fix."""
    if label not in LABEL_SCORES:
        raise DataError(f"label {label!r} is not a label", hint=f"use {', '.join(map(repr, LABEL_SCORES))}")
    if accuracy in ("", None):
        accuracy = None
    elif isinstance(accuracy, str) and accuracy.isdigit():
        accuracy = int(accuracy)
    if accuracy is not None and (isinstance(accuracy, bool) or not isinstance(accuracy, int) or not 1 <= accuracy <= 5):
        raise DataError(f"accuracy {accuracy!r} is not an accuracy score",
                        hint="an integer from 1 to 5, or none to score the label (correct 5, partly 3, wrong 1)")
    if note is None:
        note = ""
    if not isinstance(note, str):
        raise DataError("note: not text", hint="write the note as text")
    return label, accuracy, note[:NOTE_CHARS]


def queue_order(run: str, ids: list[str]) -> list[str]:
    """The order a run's questions are labelled in: shuffled with a seed taken from the run, so
    every annotator meets the same answers first (their overlap) and the labelled answers are a
    random sample of the run's (what the prediction-powered mean needs)."""
    seed = int(hashlib.sha256(run.encode()).hexdigest()[:12], 16)
    order = list(ids)
    random.Random(seed).shuffle(order)
    return order


class LabelStore:
    """The labels database of a reports folder (see the module)."""

    def __init__(self, reports_root: Path):
        self.path = Path(reports_root) / DB_FILE
        with closing(self._connect()) as db, db:
            db.executescript(_SCHEMA)
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=30000")
        except sqlite3.DatabaseError as exc:
            raise DataError(f"{self.path}: not a labels database ({exc})",
                            hint=f"move it aside: a new {DB_FILE} is made where none is") from None
        return db

    # -- writing ---------------------------------------------------------------------------------
    def put(self, run: str, fingerprint: str, question_id: str, annotator: str, label: str,
            accuracy: int | None = None, note: str = "", source: str = "served") -> dict:
        """Keep one label (a label given again by the same annotator replaces theirs); return it."""
        annotator = check_annotator(annotator)
        label, accuracy, note = check_label(label, accuracy, note)
        now = _now()
        with closing(self._connect()) as db, db:
            db.execute(
                "INSERT INTO labels (run, fingerprint, question_id, annotator, label, accuracy, note, source, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run, question_id, annotator) DO UPDATE SET label = excluded.label, "
                "accuracy = excluded.accuracy, note = excluded.note, source = excluded.source, "
                "fingerprint = excluded.fingerprint, updated_at = excluded.updated_at",
                (run, fingerprint, question_id, annotator, label, accuracy, note, source, now, now))
        return {"run": run, "question_id": question_id, "annotator": annotator, "label": label,
                "accuracy": accuracy, "note": note, "updated_at": now}

    def assign(self, run: str, order: list[str], annotators: list[str], overlap: int) -> dict[str, int]:
        """Share the run's questions (in ``order``) among ``annotators``: the first ``overlap``
        to every one of them (where their agreement is measured), the rest in turn; return how
        many each has. Earlier assignments of the run are replaced; labels are kept."""
        names = [check_annotator(a) for a in annotators]
        if not names or len(set(names)) != len(names):
            raise DataError("assign: name each annotator once", hint="e.g. ana, ben")
        if not isinstance(overlap, int) or isinstance(overlap, bool) or overlap < 0:
            raise DataError(f"overlap {overlap!r}: not a number of questions", hint="0 or more")
        rows = [(run, q, a) for q in order[:overlap] for a in names]
        rows += [(run, q, names[i % len(names)]) for i, q in enumerate(order[overlap:])]
        now = _now()
        with closing(self._connect()) as db, db:
            db.execute("DELETE FROM assignments WHERE run = ?", (run,))
            db.executemany("INSERT INTO assignments VALUES (?, ?, ?, ?)", [(*r, now) for r in rows])
        return {a: sum(r[2] == a for r in rows) for a in names}

    def import_file(self, path: Path, results: dict, samples: list[dict], annotator: str) -> int:
        """The labels of a ``labels.json`` (the run page's "Download labels") into the store as
        ``annotator``'s; the file is checked whole first (:func:`lab.judge.agree.load_labels`),
        so a bad file imports nothing. Returns how many labels were imported."""
        labels, _ = load_labels(Path(path), results, [s["id"] for s in samples])
        annotator = check_annotator(annotator)
        run = run_label(results)
        for qid, x in labels.items():
            self.put(run, results["config_fingerprint"], qid, annotator, x["label"], x["accuracy"], "",
                     f"imported {Path(path).name}")
        return len(labels)

    # -- reading ---------------------------------------------------------------------------------
    def labels(self, run: str) -> list[dict]:
        """Every label of ``run``, oldest first."""
        with closing(self._connect()) as db:
            db.row_factory = sqlite3.Row
            return [dict(r) for r in db.execute(
                "SELECT * FROM labels WHERE run = ? ORDER BY created_at, annotator, question_id", (run,))]

    def assigned(self, run: str) -> dict[str, set[str]]:
        """annotator -> the question ids assigned to them (empty: the run has no assignments)."""
        out: dict[str, set[str]] = {}
        with closing(self._connect()) as db:
            for q, a in db.execute("SELECT question_id, annotator FROM assignments WHERE run = ?", (run,)):
                out.setdefault(a, set()).add(q)
        return out

    def counts(self) -> dict[str, int]:
        """run -> how many labels it has (the runs table's column)."""
        with closing(self._connect()) as db:
            return dict(db.execute("SELECT run, COUNT(*) FROM labels GROUP BY run"))

    def queue(self, run: str, ids: list[str], annotator: str) -> dict:
        """What ``annotator`` has to label in ``run`` (whose labellable questions are ``ids``):
        ``{order, done, todo, next, assigned, labels}``: their questions in the queue's order (the
        assigned ones where the run has assignments, else all), which they labelled, how many
        remain, the first they have not, and their labels of the run (question id -> label)."""
        annotator = check_annotator(annotator)
        assigned = self.assigned(run)
        mine = assigned.get(annotator) if assigned else None
        order = [q for q in queue_order(run, ids) if mine is None or q in mine]
        labels = {r["question_id"]: r for r in self.labels(run) if r["annotator"] == annotator}
        todo = [q for q in order if q not in labels]
        return {"order": order, "done": sorted(set(labels) & set(order)), "todo": len(todo),
                "next": todo[0] if todo else None, "assigned": mine is not None, "labels": labels}

    def agreement(self, results: dict, samples: list[dict], run_dir: Path) -> dict:
        """Agreement on ``run``: between each pair of annotators, and of each (and of all) with
        the judge (see the module). Runs without a judge get the annotators' part only."""
        run = run_label(results)
        rows = self.labels(run)
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
            source = f"{self.path} ({len(names)} annotator{'s' if len(names) != 1 else ''})"
            everyone: dict[str, list[int]] = {}
            for scores in by_annotator.values():
                for q, v in scores.items():
                    everyone.setdefault(q, []).append(v)
            judge = {"all": agreement_with(results, samples, everyone, source),
                     "by_annotator": {a: agreement_with(results, samples, {q: [v] for q, v in by_annotator[a].items()},
                                                        f"{self.path} ({a})") for a in names}}
        return {"format": "lab-annotation-agreement-v1", "run": run, "annotators": names,
                "n_labels": len(rows), "labelled": {a: len(v) for a, v in by_annotator.items()},
                "between_annotators": pairs, "judge": judge}

    def export(self, results: dict, annotator: str) -> dict:
        """``annotator``'s labels of a run as a ``labels.json`` (what ``lab agree RUN FILE`` reads)."""
        run = run_label(results)
        return {"format": LABELS_FORMAT, "run": run, "fingerprint": results["config_fingerprint"],
                "labels": {r["question_id"]: {"label": r["label"], "accuracy": r["accuracy"]}
                           for r in self.labels(run) if r["annotator"] == annotator}}


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


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
                        hint=f"label its answers in lab serve (/runs/{run}/label), or pass a labels.json "
                             "(lab agree RUN FILE [--import-as NAME])")
    scores: dict[str, list[int]] = {}
    for r in rows:
        scores.setdefault(r["question_id"], []).append(human_score(r["label"], r["accuracy"]))
    names = sorted({r["annotator"] for r in rows})
    return agreement_with(results, samples, scores, f"{store.path} ({', '.join(names)})")
