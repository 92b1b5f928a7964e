"""Eval sets in and out of other tools' formats.

:func:`import_set` writes a lab eval set (:mod:`lab.evalsets.evalset`) from one of:

- **ragas**: ``EvaluationDataset`` rows, as JSONL (``to_jsonl``) or a JSON list (``to_list``).
  ``user_input`` is the question, ``reference`` the reference answer (ragas' older names
  ``question`` and ``ground_truth`` are read too), and each of ``reference_contexts`` becomes a
  golden span where it occurs verbatim in a ``.md``/``.txt`` document of the knowledge base
  ``kb`` (the first by path when several hold it); a context found nowhere is counted, not kept.
  Keywords are never invented: a row needs a located context or its own ``keywords``. The
  category is the row's ``category`` or ragas' testset ``synthesizer_name``, else ``category``.
  ``retrieved_contexts``, ``response`` and the other sample fields describe a run, not the
  question: they are ignored, and listed in the summary.
- **beir**: a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv`` or
  ``qrels.tsv``), or one of its qrels files for that split (:mod:`lab.evalsets.beir`). Every
  corpus document is written to ``kb_out`` as ``<id>.txt`` (title, blank line, text), and each
  query with a qrel score above 0 becomes a row that keeps its graded qrels (``qrels``: document
  id -> score, for the document-level metrics) and golden spans covering its relevant documents
  whole (the span metrics then count document hits); ``reference_answer`` is ``""``.
- **csv**: a header row, then ``question``, ``reference_answer`` (or ``answer``), ``keywords``
  (``;``-separated) and optional ``category`` and ``id``. CSV has no spans: every row needs
  keywords, every row has a cell per column (an empty one is two commas), and a ``category`` is
  one of ``categories`` (the lab's own by default); :mod:`lab.evalsets.csvfile` reads the cells
  (quotes closed, each cell bounded).

:func:`export_ragas` writes ragas' ``EvaluationDataset`` JSONL: ``user_input``, ``reference``
and, for a row with spans, ``reference_contexts`` (their contents), then the lab's own ``id``,
``category`` and, where a row has them, ``keywords``: ragas reads its ``SingleTurnSample``
fields and ignores these, and :func:`import_set` reads them back, so a set survives the round
trip (a keyword-only row included).

All input is checked before anything is written: an error names the file, line and field, says
how to fix it, and leaves no output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import ValidationError

from lab.config import DEFAULT_CATEGORIES
from lab.errors import DataError
from lab.evalsets.beir import from_beir
from lab.evalsets.bounds import bounded, jsonl_objects, read_text, text_field
from lab.evalsets.csvfile import csv_rows
from lab.evalsets.evalset import EvalRow, check_references, load_eval_set
from lab.paths import check_output, write_atomic
from lab.registry import Registry, did_you_mean

KB_SUFFIXES = (".md", ".txt")
RAGAS_READ = ("id", "user_input", "question", "reference", "ground_truth", "reference_contexts", "keywords",
              "category", "synthesizer_name")
CSV_COLUMNS = ("id", "question", "reference_answer", "answer", "keywords", "category")

Record = tuple[str, dict[str, Any]]  # (where in the input, e.g. "set.jsonl line 3"; an eval row)
Imported = tuple[list[Record], dict[str, Any], dict[Path, str]]  # (rows, summary counts, files to write)


def kb_documents(kb: Path) -> dict[str, str]:
    """The ``.md``/``.txt`` documents under ``kb`` by POSIX path, read as the loader reads them
    (UTF-8, byte-order mark dropped, line ends kept), so offsets found here hold there."""
    if not kb.is_dir():
        raise DataError(f"knowledge base {kb} is not a folder", hint="pass the knowledge base's folder")
    docs = {}
    for path in sorted(kb.rglob("*")):
        rel = path.relative_to(kb)
        if path.is_file() and path.suffix.lower() in KB_SUFFIXES and not any(p.startswith(".") for p in rel.parts):
            docs[rel.as_posix()] = read_text(path)
    if not docs:
        raise DataError(f"knowledge base {kb} has no .md or .txt files", hint="pass the folder holding the documents")
    return docs


def _locate(context: str, documents: dict[str, str]) -> tuple[dict[str, Any] | None, int]:
    """A span for ``context`` (or, failing that, its stripped text) in the first document by path
    that holds it, and how many documents hold it."""
    for needle in dict.fromkeys((context, context.strip())):
        if not needle.strip():
            continue
        hits = [(source, text.find(needle)) for source, text in documents.items() if needle in text]
        if hits:
            source, start = hits[0]
            ref = {"source": source, "content": needle, "start_index": start, "end_index": start + len(needle)}
            return ref, len(hits)
    return None, 0


def _from_ragas(source: Path, category: str, kb: Path | None) -> Imported:
    text = read_text(source)
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"{source} line {exc.lineno}: invalid JSON ({exc.msg} at column {exc.colno})",
                            hint="give a JSON list of ragas samples, or one sample per line (JSONL)") from None
        records = [(f"{source} item {i}", item) for i, item in enumerate(items, start=1)]
    else:
        records = list(jsonl_objects(source, text))
    documents = kb_documents(kb) if kb is not None else {}
    counts = {"contexts_located": 0, "contexts_not_located": 0, "contexts_in_several_documents": 0}
    ignored: set[str] = set()
    rows = []
    for where, data in records:
        if not isinstance(data, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(data).__name__}",
                            hint="each sample is an object")
        ignored.update(set(data) - set(RAGAS_READ))
        if isinstance(data.get("user_input"), list):
            raise DataError(f"{where}: field 'user_input': a multi-turn conversation",
                            hint="only single-turn samples (user_input is a string) make eval rows")
        question = text_field(where, data, "user_input", "question")
        answer = text_field(where, data, "reference", "ground_truth")
        contexts = data.get("reference_contexts") or []
        if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
            raise DataError(f"{where}: field 'reference_contexts': expected a list of strings",
                            hint="reference_contexts lists the passages that hold the answer")
        for context in contexts:
            bounded(where, "reference_contexts", context)
        refs: list[dict[str, Any]] = []
        for context in contexts:
            ref, n_docs = _locate(context, documents)
            counts["contexts_in_several_documents"] += n_docs > 1
            counts["contexts_located" if ref else "contexts_not_located"] += 1
            if ref and ref not in refs:
                refs.append(ref)
        if not refs and data.get("keywords") is None:
            keywords = "add 'keywords' (words a retrieved chunk must hold) to the row"
            if not contexts:
                raise DataError(f"{where}: the row has neither reference_contexts nor keywords",
                                hint=f"{keywords}; a set exported by an older `lab export` lacks them: export it again")
            found = (f"none of its {len(contexts)} reference contexts occurs verbatim in {kb}" if kb is not None
                     else "no knowledge base to find its reference contexts in")
            raise DataError(f"{where}: field 'reference_contexts': {found}, and the row has no keywords",
                            hint=f"check that --kb is the folder the contexts were copied from (they must occur "
                                 f"there verbatim), or {keywords}" if kb is not None else
                            f"pass the knowledge base (--kb) so reference contexts become golden spans, or {keywords}")
        rows.append((where, {"id": data.get("id"), "question": question, "keywords": data.get("keywords"),
                             "reference_answer": answer, "references": refs or None,
                             "category": text_field(where, data, "category", "synthesizer_name", default=category)}))
    return rows, {**counts, "ignored_fields": sorted(ignored)}, {}


def _from_csv(source: Path, category: str) -> Imported:
    rows_read = csv_rows(source, read_text(source))
    header = [cell.strip() for cell in next(rows_read, (1, []))[1]]
    allowed = f"allowed: {', '.join(CSV_COLUMNS)}"
    if not any(header):
        raise DataError(f"{source} line 1: no header row", hint=f"the first line names the columns ({allowed})")
    unknown = [c for c in header if c not in CSV_COLUMNS]
    if unknown:
        raise DataError(f"{source} line 1: unknown column(s) {', '.join(map(repr, unknown))}",
                        hint=f"rename or remove them ({allowed})")
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice or {"answer", "reference_answer"} <= set(header):
        raise DataError(f"{source} line 1: column {twice[0]!r} given twice" if twice else
                        f"{source} line 1: both 'answer' and 'reference_answer' columns",
                        hint="keep one column per field")
    for column in ("question", "reference_answer", "keywords"):
        if column not in header and not (column == "reference_answer" and "answer" in header):
            raise DataError(f"{source} line 1: column '{column}' missing",
                            hint=f"add it ({allowed}; CSV has no golden spans, so every row needs keywords)")
    answer = "reference_answer" if "reference_answer" in header else "answer"
    rows = []
    for line, cells in rows_read:
        where = f"{source} line {line}"
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise DataError(f"{where}: {len(cells)} cells, the header has {len(header)}",
                            hint="quote cells that hold commas" if len(cells) > len(header) else
                            "give every column its cell (an empty one is two commas in a row: ,,)")
        data = dict(zip(header, cells))
        keywords = [k.strip() for k in data.get("keywords", "").split(";") if k.strip()]
        if not keywords:
            raise DataError(f"{where}: field 'keywords': missing",
                            hint="CSV has no golden spans: give keywords (words a retrieved chunk must hold), "
                                 "separated by ';'")
        rows.append((where, {"id": data.get("id", "").strip() or None, "question": data.get("question", ""),
                             "keywords": keywords, "reference_answer": data.get(answer, ""),
                             "category": data.get("category", "").strip() or category}))
    return rows, {"answer_column": answer}, {}


def _check_categories(records: list[Record], categories: list[str]) -> None:
    """Every row's category is one of ``categories`` (a typo would become a category of its own)."""
    for where, data in records:
        if data.get("category") not in categories:
            raise DataError(f"{where}: field 'category': {data.get('category')!r} is not a declared category",
                            hint=f"{did_you_mean(str(data.get('category')), categories)}use one of "
                                 f"{', '.join(dict.fromkeys(categories))}, or pass --categories with your config's "
                                 "data.categories")


def _validated(records: list[Record], names: dict[str, str]) -> list[EvalRow]:
    """Each row checked as :func:`~lab.evalsets.evalset.load_eval_set` checks it, errors naming the
    input's own field (``names``: eval-set field -> input field) and place."""
    rows: list[EvalRow] = []
    seen: dict[str, str] = {}
    for n, (where, data) in enumerate(records, start=1):
        try:
            row = EvalRow.model_validate({k: v for k, v in data.items() if v is not None})
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "(row)"
            raise DataError(f"{where}: field '{names.get(field, field)}': "
                            f"{'missing' if err['type'] == 'missing' else err['msg']}",
                            hint="fix the value in the input file") from None
        row_id = row.id or f"L{n:04d}"  # the id load_eval_set gives a row without one, on line n of out
        if row_id in seen:
            raise DataError(f"{where}: field '{names.get('id', 'id')}': {row_id!r} already used ({seen[row_id]})",
                            hint="give every question a distinct id (a row without one is L<line number>)")
        seen[row_id] = where
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Importer:
    """One import format: ``read(source, category, extra)`` gives the rows, the format's own counts
    and any files to write (BEIR's corpus); ``names`` maps eval-set fields to the format's names
    for them (for errors); ``extra`` is the option it takes beside the source, if any (``kb``:
    the documents reference contexts come from; ``kb_out``: the folder a corpus is written to)."""

    read: Callable[[Path, str, Path | None], Imported]
    names: dict[str, str]
    extra: str | None = None
    #: Its rows name the lab's categories (a CSV written by hand), so each is checked against the
    #: declared ones; ragas and BEIR name their own (a synthesizer, ``category``).
    lab_categories: bool = False


#: The import formats (docs: "How to add a component", an eval-set importer).
IMPORTERS: Registry[Importer] = Registry("import format")
IMPORTERS.register("ragas")(Importer(_from_ragas, {"question": "user_input", "reference_answer": "reference"}, "kb"))
IMPORTERS.register("beir")(Importer(from_beir, {"id": "_id", "question": "text"}, "kb_out"))
IMPORTERS.register("csv")(Importer(lambda source, category, extra: _from_csv(source, category), {},
                                   lab_categories=True))


def import_set(kind: str, source: Path, out: Path, *, category: str = "direct_fact", kb: Path | None = None,
               kb_out: Path | None = None, overwrite: bool = False,
               categories: Sequence[str] | None = None) -> dict[str, Any]:
    """Write the eval set ``out`` from ``source`` in format ``kind`` (``ragas``, ``beir``,
    ``csv``; see the module docstring). ``kb``: the knowledge base that ragas' reference contexts
    are found in; ``kb_out``: the folder BEIR's corpus is written to (with ``overwrite``, a
    folder that holds files is added to, and ``documents_replaced`` counts the files replaced).
    ``categories``: the categories a row may name; None checks a CSV's rows against the lab's
    own and ``category``. ``out`` is checked by :func:`~lab.paths.check_output` (never the
    source, nor inside the knowledge base). Returns a summary: ``rows``, ``kind``, ``out`` and
    the format's own counts."""
    if kind not in IMPORTERS:
        raise DataError(f"unknown import format {kind!r}", hint=f"use one of {', '.join(IMPORTERS.names())}")
    importer = IMPORTERS.get(kind)
    if (kb is not None and importer.extra != "kb") or (kb_out is not None and importer.extra != "kb_out"):
        raise DataError(f"--kb is for ragas imports and --kb-out for BEIR imports, not {kind}",
                        hint="leave the option out")
    check_output(out, [source], kb if kb is not None else kb_out, overwrite)
    if not source.exists():
        raise DataError(f"{source} does not exist", hint="check the path of the file (or BEIR folder) to import")
    if kb_out is not None and (kb_out.is_file() or (kb_out.is_dir() and any(kb_out.iterdir()) and not overwrite)):
        raise DataError(f"--kb-out {kb_out} is a file or a folder that already holds files",
                        hint="give a new folder for the knowledge base, or pass --force to add to it (files of the "
                             "same name are replaced, and counted)")
    rows, counts, files = importer.read(source, category, kb if importer.extra == "kb" else kb_out)
    if not rows:
        raise DataError(f"{source} has no questions to import",
                        hint="only queries with a qrel score above 0 are imported" if kind == "beir" else "add rows")
    if categories is not None or importer.lab_categories:
        _check_categories(rows, list(categories) if categories is not None else [*DEFAULT_CATEGORIES, category])
    valid = _validated(rows, importer.names)
    replaced = sum(p.is_file() and p.read_bytes() != t.encode("utf-8") for p, t in files.items())
    if replaced:  # only with --force (overwrite) into a folder that held files
        counts["documents_replaced"] = replaced
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, "".join(json.dumps(r.model_dump(exclude_none=True), ensure_ascii=False) + "\n" for r in valid))
    return {"rows": len(valid), "kind": kind, "out": str(out), **counts}


def export_ragas(eval_path: Path, out: Path, documents: dict[str, str] | None = None, *,
                 overwrite: bool = False) -> dict[str, Any]:
    """Write the eval set at ``eval_path`` as ragas ``EvaluationDataset`` JSONL (see the module
    docstring). ``documents`` (source -> text): when given, every span is first checked against
    the knowledge base, so no stale span content is exported."""
    check_output(out, [eval_path], None, overwrite)
    eval_set = load_eval_set(eval_path, None)
    if documents is not None:
        check_references(eval_set, documents)
    samples = []
    for row in eval_set.rows:
        contexts = [ref.content for ref in row.references or []]
        samples.append({"user_input": row.question, "reference": row.reference_answer,
                        **({"reference_contexts": contexts} if contexts else {}), "id": row.id,
                        **({"keywords": row.keywords} if row.keywords else {}), "category": row.category})
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples))
    return {"rows": len(samples), "kind": "ragas", "out": str(out),
            "reference_contexts": sum(len(s.get("reference_contexts", [])) for s in samples),
            "rows_without_contexts": sum("reference_contexts" not in s for s in samples)}
