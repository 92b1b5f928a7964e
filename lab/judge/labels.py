"""People's labels of answers, in one store: SQLite, ``<reports>/labels.sqlite``.

One row per (run, question, annotator): ``correct`` / ``partly`` / ``wrong``, an optional
corrected accuracy (1-5), a note, who and when, and where it came from (``served``: the annotation
queue of ``lab serve``; ``imported labels.json``: a file imported by ``lab agree RUN FILE``).
Assignments say which annotator labels which question; a question assigned to two annotators is
their overlap, where their agreement is measured. A run's labels are kept by the reports folder
that holds the run (``<reports>/<name>/<run id>``).

The run report's "Download labels" button writes a ``labels.json`` (the marks one reader made in
one browser); it is an import into this store, never read on its own::

    {"format": "lab-labels-v1", "run": "<name>/<run id>", "fingerprint": "<config fingerprint>",
     "labels": {"<question id>": {"label": "correct" | "partly" | "wrong", "accuracy": 1-5 | null}}}

The file is checked whole before the store is opened (a bad file imports nothing), and its labels
are written as one annotator's in one transaction: a label that is already there, the same, is
left as it is, so importing a file again changes nothing.

The database runs in WAL mode (readers never wait for the writer) with a busy timeout, and every
label is one committed transaction: several annotators write at once and nothing is lost, and a
server stopped mid-session keeps every label it acknowledged. A connection is opened per call,
so the store is safe to share between the server's threads.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import random
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from lab.errors import DataError
from lab.metrics.human import LABEL_SCORES
from lab.registry import did_you_mean

#: The database's file name in the reports folder.
DB_FILE = "labels.sqlite"
SCHEMA_VERSION = 1
#: The format of the run report's downloaded labels file.
LABELS_FORMAT = "lab-labels-v1"
#: Characters of a note kept.
NOTE_CHARS = 2000
#: An annotator's name: what a person types, shown escaped, at most this long.
NAME_CHARS = 40
_FIX = "use the labels.json that the run report's \"Download labels\" button writes"

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
#: One label written: a label given again by the same annotator replaces theirs.
_UPSERT = (
    "INSERT INTO labels (run, fingerprint, question_id, annotator, label, accuracy, note, source, created_at, "
    "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run, question_id, annotator) DO UPDATE SET label = excluded.label, "
    "accuracy = excluded.accuracy, note = excluded.note, source = excluded.source, "
    "fingerprint = excluded.fingerprint, updated_at = excluded.updated_at")


def run_label(results: dict) -> str:
    """How the store and a labels file name a run: ``<name>/<run id>``, as the report's bar does."""
    return f"{results['name']}/{results['run_id']}"


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


def login_name() -> str:
    """Who an imported labels file is credited to when nobody is named: the login name, or the
    error that asks for a name."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError, ImportError):  # no login name in the environment nor the user database
        name = ""
    try:
        return check_annotator(name)
    except DataError:
        raise DataError(f"the labels need an annotator's name, and the login name {name!r} is not one",
                        hint="name who made them: --import-as NAME") from None


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


def store_root(run_dir: Path, results: dict, default: Path) -> Path:
    """The reports folder whose store keeps a run's labels: the one that holds the run folder
    (``<reports>/<name>/<run id>``); ``default`` for a run folder kept elsewhere."""
    run_dir = Path(run_dir)
    if run_dir.name == results["run_id"] and run_dir.parent.name == results["name"]:
        return run_dir.parent.parent
    return Path(default)


# -- the downloaded file -----------------------------------------------------------------------------
def load_labels(path: Path, results: dict, question_ids: list[str]) -> tuple[dict[str, dict], list[str]]:
    """The labels of the file at ``path`` checked against the run (``{id: {label, accuracy}}``)
    and any warnings. Errors name the file, the field and the fix."""
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


# -- the store ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Imported:
    """What an import did: the store, whose labels they became, the questions the file labels,
    how many labels were new, how many replaced another of the annotator's, and the file's
    warnings. ``len(ids) - new - changed`` were there already, the same."""

    store: LabelStore
    annotator: str
    ids: frozenset[str]
    new: int
    changed: int
    warnings: tuple[str, ...]


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
            if not os.access(self.path.parent, os.W_OK):  # a read-only folder: the file may not even exist
                raise DataError(f"{self.path.parent} is read-only: people's labels ({DB_FILE}) cannot be kept "
                                f"there ({exc})", hint="make the reports folder writable, or work on a copy of it "
                                                       "that is") from None
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
            db.execute(_UPSERT, (run, fingerprint, question_id, annotator, label, accuracy, note, source, now, now))
        return {"run": run, "question_id": question_id, "annotator": annotator, "label": label,
                "accuracy": accuracy, "note": note, "updated_at": now}

    def add(self, results: dict, labels: dict[str, dict], annotator: str, source: str,
            warnings: list[str] = ()) -> Imported:
        """Keep ``labels`` (question id -> ``{label, accuracy}``, as :func:`load_labels` returns
        them) of the run as ``annotator``'s, from ``source``, in one transaction. A label the
        annotator already has, with the same label and accuracy, is left as it is (its note, its
        source and its times too); another replaces theirs, without a note."""
        annotator = check_annotator(annotator)
        checked = {q: check_label(x["label"], x["accuracy"], "") for q, x in labels.items()}
        run, fingerprint, now = run_label(results), results["config_fingerprint"], _now()
        with closing(self._connect()) as db, db:
            db.execute("BEGIN IMMEDIATE")  # what is there and what is written: one writer's view
            had = {q: (label, acc, fp) for q, label, acc, fp in db.execute(
                "SELECT question_id, label, accuracy, fingerprint FROM labels WHERE run = ? AND annotator = ?",
                (run, annotator))}
            rows = [(run, fingerprint, q, annotator, label, acc, note, source, now, now)
                    for q, (label, acc, note) in checked.items() if had.get(q) != (label, acc, fingerprint)]
            db.executemany(_UPSERT, rows)
        new = sum(r[2] not in had for r in rows)
        return Imported(self, annotator, frozenset(checked), new, len(rows) - new, tuple(warnings))

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

    def export(self, results: dict, annotator: str) -> dict:
        """``annotator``'s labels of a run as a ``labels.json`` (what ``lab agree RUN FILE`` imports)."""
        run = run_label(results)
        return {"format": LABELS_FORMAT, "run": run, "fingerprint": results["config_fingerprint"],
                "labels": {r["question_id"]: {"label": r["label"], "accuracy": r["accuracy"]}
                           for r in self.labels(run) if r["annotator"] == annotator}}


def import_file(path: Path, results: dict, samples: list[dict], reports_root: Path, annotator: str) -> Imported:
    """The labels of a ``labels.json`` (the run page's "Download labels") into the store of
    ``reports_root`` as ``annotator``'s (see :meth:`LabelStore.add`). The file is checked whole
    before the store is opened: a bad file imports nothing and makes no database."""
    path = Path(path)
    labels, warnings = load_labels(path, results, [s["id"] for s in samples])
    annotator = check_annotator(annotator)
    return LabelStore(reports_root).add(results, labels, annotator, f"imported {path.name}", warnings)
