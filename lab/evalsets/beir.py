"""`lab import beir`: a BEIR dataset folder as a knowledge base and an eval set with graded qrels.

A BEIR folder holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
``text``) and its qrels: ``query-id<TAB>corpus-id<TAB>score`` lines in ``qrels/test.tsv`` (or a
top-level ``qrels.tsv``). The source is the folder, which imports its test split, or one of its
qrels files (``scifact/qrels/train.tsv``), which imports that split. BEIR labels whole documents
and has no answers, so:

- every corpus document is written to ``kb_out`` as ``<id>.txt`` (title, blank line, text; the
  text alone without a title), an id unsafe as a file name under a safe name with a hash;
- each query with a qrel score above 0 becomes a row with ``reference_answer`` ``""``, its qrels
  kept whole in ``qrels`` (document id -> score, scores of 0 included: judged not relevant), so
  the document-level metrics (:mod:`lab.metrics.qrels`: nDCG@10, Recall@100, MRR@10, MAP) score
  it as trec_eval would; a document whose file name is not its id is keyed by its file name;
- and, as imports have always written, golden spans that cover each relevant document whole
  (``references``), so the span metrics and the loss funnel count document hits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.errors import DataError
from lab.evalsets.bounds import jsonl_objects, read_text, text_field
from lab.paths import safe_name

#: Where a BEIR folder's qrels are, first found first.
QRELS = ("qrels/test.tsv", "qrels.tsv")


def _layout(source: Path) -> tuple[Path, Path]:
    """(the BEIR folder, its qrels file) of a folder or of a qrels file inside one."""
    if source.is_file() and source.suffix == ".tsv":
        root = source.parent.parent if source.parent.name == "qrels" else source.parent
        return root, source
    if not source.is_dir():
        raise DataError(f"{source} is not a folder",
                        hint="pass a BEIR dataset folder (corpus.jsonl, queries.jsonl, qrels/), or one of its qrels "
                             "files (qrels/train.tsv) to import that split")
    qrels = next((source / q for q in QRELS if (source / q).is_file()), None)
    if qrels is None:
        splits = sorted(p.name for p in (source / "qrels").glob("*.tsv")) if (source / "qrels").is_dir() else []
        raise DataError(f"{source}: no qrels file ({' or '.join(QRELS)})",
                        hint=(f"qrels/ holds {', '.join(splits)}: pass the split's file to import it, e.g. "
                              f"{source / 'qrels' / splits[0]}" if splits
                              else "BEIR's qrels are 'query-id<TAB>corpus-id<TAB>score' lines in qrels/test.tsv"))
    return source, qrels


def _corpus(root: Path) -> dict[str, tuple[str, str]]:
    """id -> (file name, text) of every corpus document."""
    docs: dict[str, tuple[str, str]] = {}
    taken: dict[str, str] = {}  # casefolded file name -> id (case-insensitive file systems)
    for where, data in jsonl_objects(root / "corpus.jsonl"):
        doc_id = text_field(where, data, "_id")
        title, body = text_field(where, data, "title", default=""), text_field(where, data, "text")
        name = safe_name(doc_id) + ".txt"
        if doc_id in docs or name.casefold() in taken:
            other = doc_id if doc_id in docs else taken[name.casefold()]
            raise DataError(f"{where}: field '_id': {doc_id!r} maps to the file name {name}, as {other!r} does",
                            hint="give every document a distinct id (ids differing only in case collide too)")
        taken[name.casefold()] = doc_id
        docs[doc_id] = (name, f"{title}\n\n{body}" if title.strip() else body)
    return docs


def _qrels(qrels: Path, queries: dict[str, tuple[str, str]],
           docs: dict[str, tuple[str, str]]) -> dict[str, dict[str, int]]:
    """query id -> {document id: score}, in the file's order, every line checked."""
    graded: dict[str, dict[str, int]] = {}
    for n, line in enumerate(read_text(qrels).split("\n"), start=1):
        cells = line.rstrip("\r").split("\t")
        if not line.strip() or (n == 1 and cells[0] == "query-id"):  # BEIR's header line
            continue
        where = f"{qrels} line {n}"
        if len(cells) != 3 or not cells[2].strip().lstrip("-").isdigit():
            raise DataError(f"{where}: expected 'query-id<TAB>corpus-id<TAB>score' with a whole-number score",
                            hint="one qrel per line, separated by tabs")
        query_id, doc_id, score = cells[0], cells[1], int(cells[2])
        if query_id not in queries or doc_id not in docs:
            what = (f"query-id {query_id!r} is not in queries.jsonl" if doc_id in docs
                    else f"corpus-id {doc_id!r} is not in corpus.jsonl")
            raise DataError(f"{where}: {what}", hint="add it there, or drop the qrel")
        if score > 0 and not docs[doc_id][1].strip():
            raise DataError(f"{where}: corpus-id {doc_id!r} has no title or text", hint="a relevant document needs text")
        grades = graded.setdefault(query_id, {})
        if doc_id in grades and grades[doc_id] != score:
            raise DataError(f"{where}: query-id {query_id!r} grades corpus-id {doc_id!r} {score}, and {grades[doc_id]} "
                            "on an earlier line", hint="grade each (query, document) pair once")
        grades[doc_id] = score
    return graded


def from_beir(source: Path, category: str, kb_out: Path | None) -> tuple[list, dict[str, Any], dict[Path, str]]:
    """The rows, the summary counts and the corpus files of a BEIR import (see the module docstring)."""
    if kb_out is None:
        raise DataError(f"{source}: BEIR labels whole documents, with no answers or spans",
                        hint="pass --kb-out FOLDER: the import writes the corpus there as a knowledge base, and "
                             "each query's qrels name its documents")
    root, qrels = _layout(source)
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (root / name).is_file():
            raise DataError(f"{root}: {name} missing", hint="a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/")
    docs = _corpus(root)
    queries: dict[str, tuple[str, str]] = {}  # id -> (where, text)
    for where, data in jsonl_objects(root / "queries.jsonl"):
        query_id = text_field(where, data, "_id")
        if query_id in queries:
            raise DataError(f"{where}: field '_id': {query_id!r} already used ({queries[query_id][0]})",
                            hint="give every query a distinct id")
        queries[query_id] = (where, text_field(where, data, "text"))
    graded = _qrels(qrels, queries, docs)

    def key(doc_id: str) -> str:  # the id where it is the file's stem, else the file name
        name = docs[doc_id][0]
        return doc_id if name == doc_id + ".txt" else name

    rows = []
    for query_id, (where, question) in queries.items():
        relevant = [d for d, score in graded.get(query_id, {}).items() if score > 0]
        if relevant:
            rows.append((where, {
                "id": query_id, "question": question, "reference_answer": "", "category": category,
                "references": [{"source": docs[d][0], "content": docs[d][1], "start_index": 0,
                                "end_index": len(docs[d][1])} for d in relevant],
                "qrels": {key(d): score for d, score in graded[query_id].items()}}))
    files = {kb_out / name: text for name, text in docs.values() if text.strip()}
    n_qrels = sum(len(g) for g in graded.values())
    return rows, {"documents_written": len(files), "documents_empty": len(docs) - len(files),
                  "qrels_dropped": sum(score <= 0 for g in graded.values() for score in g.values()),
                  "qrels_kept": sum(len(r[1]["qrels"]) for r in rows), "qrels_read": n_qrels,
                  "queries_without_qrels": len(queries) - len(rows), "split": qrels.stem}, files
