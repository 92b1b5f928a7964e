"""The review queue of eval rows: a person reads each generated row against its span, in its
document, and keeps it, fixes it (the question, the reference answer, the span moved by selecting
text) or drops it.

Verdicts are kept in the reports folder's labels database (``labels.sqlite``, table ``reviews``),
one per (eval set, row id): the verdict, who gave it and when, the fixed fields, a note, the
seconds the row was on screen before its verdict (the page counts them, paused while the tab is
hidden; a verdict given again on the same row adds its time) and the row as it was read (its
hash: a row changed since, by a resumed or forced ``lab generate``, is unreviewed again, and its
time starts anew). Every verdict rewrites the set's **reviewed copy** beside it, never the set
itself: ``<set>.reviewed.jsonl`` holds every row but the dropped ones, a reviewed row with its
``review`` (verdict, by, at, note) and its fixes, an unreviewed row as it is; its sidecar
``<set>.reviewed.json`` counts them and the reading time (``reading``). ``lab audit`` and ``lab
run`` read the copy like any eval set, and the audit says how many of its rows a person read and
how long that took.

The queue's order: the rows the generator's rules doubt first, then the others in file order.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import statistics
import tempfile
import time
import unicodedata
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import DataError
from lab.evidence.text import fold
from lab.judge.labels import DB_FILE, NOTE_CHARS, check_annotator

VERDICTS = ("keep", "fix", "drop")
#: Characters of a document shown on each side of a row's span.
CONTEXT_CHARS = 1500
COPY_FORMAT = "lab-reviewed-eval-set-v1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reviews (
    eval_set TEXT NOT NULL,
    row_id TEXT NOT NULL,
    row_sha TEXT NOT NULL,
    reviewer TEXT NOT NULL,
    verdict TEXT NOT NULL CHECK (verdict IN ('keep', 'fix', 'drop')),
    fixed TEXT NOT NULL DEFAULT '{}',
    note TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    seconds REAL,
    PRIMARY KEY (eval_set, row_id)
);
"""
# A verdict given again on the same row adds its reading time to the row's (the time a row took is
# every look at it); on a row changed since (another hash) the time starts anew.
_UPSERT = (
    "INSERT INTO reviews (eval_set, row_id, row_sha, reviewer, verdict, fixed, note, created_at, updated_at, seconds) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (eval_set, row_id) DO UPDATE SET row_sha = excluded.row_sha, "
    "reviewer = excluded.reviewer, verdict = excluded.verdict, fixed = excluded.fixed, note = excluded.note, "
    "updated_at = excluded.updated_at, seconds = CASE WHEN reviews.row_sha != excluded.row_sha THEN excluded.seconds "
    "WHEN excluded.seconds IS NULL THEN reviews.seconds ELSE COALESCE(reviews.seconds, 0) + excluded.seconds END")
#: The longest reading time one verdict may report (a page left open overnight is not reading).
MAX_SECONDS = 3600.0


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def row_sha(row: dict) -> str:
    """A row's identity as it was read: the hash of its JSON (keys sorted)."""
    return hashlib.sha256(json.dumps(row, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def copy_paths(path: Path) -> tuple[Path, Path]:
    """Where the reviewed copy of the eval set ``path`` and its sidecar are written."""
    return path.with_name(path.stem + ".reviewed.jsonl"), path.with_name(path.stem + ".reviewed.json")


@dataclass
class ReviewSet:
    """An eval set offered for review: its rows as written (dicts with ids, in file order), the
    knowledge base's documents ({source: text}, as the loader reads them) and the rules' notes on
    each row ({id: [why]})."""
    key: str
    path: Path
    rows: list[dict]
    documents: dict[str, str]
    notes: dict[str, list[str]] = field(default_factory=dict)

    def order(self) -> list[str]:
        doubted = [r["id"] for r in self.rows if self.notes.get(r["id"])]
        return doubted + [r["id"] for r in self.rows if not self.notes.get(r["id"])]

    def row(self, row_id: str) -> dict | None:
        return next((r for r in self.rows if r["id"] == row_id), None)


class ReviewStore:
    """Verdicts on eval rows in ``<reports>/labels.sqlite`` (WAL, one transaction a verdict, a
    connection a call, as :class:`lab.judge.labels.LabelStore`)."""

    def __init__(self, root: Path):
        self.path = Path(root) / DB_FILE

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=30)
        con.row_factory = sqlite3.Row
        con.execute("PRAGMA journal_mode=WAL")
        con.executescript(_SCHEMA)
        if "seconds" not in {c["name"] for c in con.execute("PRAGMA table_info(reviews)")}:  # a database from before
            try:
                con.execute("ALTER TABLE reviews ADD COLUMN seconds REAL")
            except sqlite3.OperationalError as exc:  # another connection added it first
                if "duplicate column" not in str(exc):
                    raise
        return con

    def put(self, eval_set: str, row_id: str, sha: str, reviewer: str, verdict: str, fixed: dict, note: str,
            seconds: float | None = None) -> dict:
        now = _now()
        with closing(self._connect()) as con, con:
            con.execute(_UPSERT, (eval_set, row_id, sha, reviewer, verdict, json.dumps(fixed, ensure_ascii=False),
                                  note, now, now, seconds))
        return {"id": row_id, "reviewer": reviewer, "verdict": verdict, "at": now}

    def verdicts(self, eval_set: str) -> dict[str, dict]:
        """{row id: its verdict} of one eval set (its resolved path)."""
        if not self.path.exists():
            return {}
        with closing(self._connect()) as con:
            rows = con.execute("SELECT * FROM reviews WHERE eval_set = ?", (eval_set,)).fetchall()
        return {r["row_id"]: {**dict(r), "fixed": json.loads(r["fixed"])} for r in rows}


def current(review_set: ReviewSet, verdicts: dict[str, dict]) -> dict[str, dict]:
    """The verdicts that still apply: those on rows unchanged since they were read."""
    shas = {r["id"]: row_sha(r) for r in review_set.rows}
    return {k: v for k, v in verdicts.items() if shas.get(k) == v["row_sha"]}


def _visible(text: object) -> bool:
    return isinstance(text, str) and any(not c.isspace() and unicodedata.category(c) != "Cf" for c in text)


def _locate(document: str, start: int, end: int, text: str) -> tuple[int, int]:
    """The span of ``text`` in ``document`` nearest to ``start`` (a browser's offsets can be off
    where the page showed a document's line ends differently)."""
    if document[start:end] == text:
        return start, end
    hits, at = [], document.find(text)
    while at != -1:
        hits.append(at)
        at = document.find(text, at + 1)
    if not hits:
        raise DataError("span: the selected text is not in the document",
                        hint="select the text in the document shown, not in the question or the reference")
    best = min(hits, key=lambda h: abs(h - start))
    return best, best + len(text)


def check_fix(row: dict, doc: dict, documents: dict[str, str]) -> dict:
    """The fields a fix changes, checked: ``question`` and ``reference_answer`` (text that shows
    something), ``span`` ({source, start, end, text}: the selected text, found in the document
    nearest to the offsets). Returns {field: new value} for the fields that changed."""
    fixed: dict = {}
    for name in ("question", "reference_answer"):
        if name in doc and doc[name] is not None:
            if not _visible(doc[name]):
                raise DataError(f"{name}: empty", hint=f"write the {name.replace('_', ' ')}, or keep the row as it is")
            if doc[name].strip() != row.get(name):
                fixed[name] = doc[name].strip()
    span = doc.get("span")
    if span is not None:
        if not isinstance(span, dict):
            raise DataError("span: not an object", hint="{source, start, end, text}")
        source, text = span.get("source"), span.get("text")
        if source not in documents:
            raise DataError(f"span: no document {source!r} in the knowledge base", hint="select text in the document shown")
        if not _visible(text):
            raise DataError("span: nothing selected", hint="select the words that answer the question")
        try:
            start, end = int(span.get("start")), int(span.get("end"))
        except (TypeError, ValueError):
            raise DataError("span: start and end are not offsets", hint="select the text again") from None
        start, end = _locate(documents[source], start, end, text)
        refs = row.get("references") or []
        old = refs[0] if refs else {}
        if (old.get("source"), old.get("start_index"), old.get("end_index")) != (source, start, end):
            content = documents[source][start:end]
            fixed["references"] = [{"source": source, "content": content, "start_index": start, "end_index": end}] \
                + list(refs[1:])
            if row.get("keywords"):  # the keywords the new span still holds; none: the span's metrics alone
                held = " ".join(fold(r["content"], "case") for r in fixed["references"])
                fixed["keywords"] = [k for k in row["keywords"] if fold(k, "case") in held] or None
    return fixed


def check_seconds(value: object) -> float | None:
    """The reading time a verdict reports (seconds the row was on screen before it, as the page
    counts them): a number from 0 to :data:`MAX_SECONDS`, or None when the client sent none (a
    verdict given through the API by a script is not a reading)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise DataError(f"seconds: {value!r} is not a reading time", hint="seconds the row was shown, a number >= 0; "
                                                                          "or leave it out")
    return round(min(float(value), MAX_SECONDS), 1)


def reading(verdicts: dict[str, dict]) -> dict:
    """How long the verdicts that still apply took to read: the rows timed, their seconds in all
    and the median a row (verdicts given without a time, by a script, are not counted)."""
    times = sorted(v["seconds"] for v in verdicts.values() if v.get("seconds") is not None)
    return {"n_timed": len(times), "seconds": round(sum(times), 1),
            "median_seconds": round(statistics.median(times), 1) if times else None}


def review_row(store: ReviewStore, review_set: ReviewSet, doc: dict) -> dict:
    """One verdict from the page's JSON ({id, reviewer, verdict, note, and for ``fix``: question,
    reference_answer, span}), stored, and the reviewed copy written anew."""
    row = review_set.row(str(doc.get("id")))
    if row is None:
        raise LookupError(doc.get("id"))
    reviewer = check_annotator(doc.get("reviewer"))
    verdict = doc.get("verdict")
    if verdict not in VERDICTS:
        raise DataError(f"verdict {verdict!r} is not a verdict", hint=f"use {', '.join(VERDICTS)}")
    note = doc.get("note") or ""
    if not isinstance(note, str):
        raise DataError("note: not text", hint="write the note as text")
    fixed = check_fix(row, doc, review_set.documents) if verdict == "fix" else {}
    if verdict == "fix" and not fixed:
        raise DataError("fix: nothing changed", hint="edit the question or the reference answer, or select a new "
                                                     "span; or keep the row")
    saved = store.put(str(review_set.path), row["id"], row_sha(row), reviewer, verdict, fixed, note[:NOTE_CHARS],
                      check_seconds(doc.get("seconds")))
    write_copy(review_set, current(review_set, store.verdicts(str(review_set.path))))
    return saved


def reviewed_rows(review_set: ReviewSet, verdicts: dict[str, dict]) -> tuple[list[dict], dict]:
    """The reviewed copy's rows (file order, dropped rows left out) and its counts."""
    out, counts = [], {"kept": 0, "fixed": 0, "dropped": 0, "unreviewed": 0}
    for row in review_set.rows:
        v = verdicts.get(row["id"])
        if v is None:
            counts["unreviewed"] += 1
            out.append(row)
            continue
        counts[{"keep": "kept", "fix": "fixed", "drop": "dropped"}[v["verdict"]]] += 1
        if v["verdict"] == "drop":
            continue
        review = {"verdict": v["verdict"], "by": v["reviewer"], "at": v["updated_at"]}
        if v["note"]:
            review["note"] = v["note"]
        fixed = {**row, **v["fixed"], "review": review}
        out.append({k: x for k, x in fixed.items() if x is not None})
    return out, counts


def _write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_copy(review_set: ReviewSet, verdicts: dict[str, dict]) -> dict:
    """Write ``<set>.reviewed.jsonl`` and its sidecar (each atomically); return the sidecar."""
    rows, counts = reviewed_rows(review_set, verdicts)
    copy, sidecar = copy_paths(review_set.path)
    _write(copy, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    meta = {"format": COPY_FORMAT, "source": str(review_set.path),
            "source_sha256": hashlib.sha256(review_set.path.read_bytes()).hexdigest(),
            "n_source_rows": len(review_set.rows), "n_rows": len(rows),
            "n_reviewed": counts["kept"] + counts["fixed"] + counts["dropped"], **counts,
            "reviewers": sorted({v["reviewer"] for v in verdicts.values()}), "reading": reading(verdicts),
            "updated_at": _now()}
    _write(sidecar, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return meta


def queue(review_set: ReviewSet, verdicts: dict[str, dict], asked: str | None) -> dict:
    """The page's view: the row asked for (or the next unreviewed one in queue order), its span in
    its document's context, its notes and verdict, and the counts."""
    order = review_set.order()
    todo = [i for i in order if i not in verdicts]
    qid = asked if asked in order else (todo[0] if todo else None)
    _, counts = reviewed_rows(review_set, verdicts)
    item = None
    if qid is not None:
        row = review_set.row(qid)
        refs = row.get("references") or []
        ref = refs[0] if refs else None
        text = review_set.documents.get(ref["source"]) if ref else None
        context = None
        if ref and text is not None:
            lo = max(0, ref["start_index"] - CONTEXT_CHARS)
            hi = min(len(text), ref["end_index"] + CONTEXT_CHARS)
            context = {"source": ref["source"], "base": lo, "before": text[lo:ref["start_index"]],
                       "span": text[ref["start_index"]:ref["end_index"]], "after": text[ref["end_index"]:hi],
                       "cut_before": lo > 0, "cut_after": hi < len(text)}
        item = {"row": row, "context": context, "notes": review_set.notes.get(qid, []),
                "verdict": verdicts.get(qid), "position": order.index(qid) + 1}
    return {"order": order, "todo": len(todo), "counts": counts, "item": item,
            "n_doubted": sum(1 for i in order if review_set.notes.get(i))}
