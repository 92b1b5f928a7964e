"""Eval sets: JSONL rows ``{question, keywords, reference_answer, category}`` plus optional
``id``, ``references`` (golden evidence spans) and ``qrels`` (graded relevant documents:
document id -> grade, as BEIR and trec_eval write them; :mod:`lab.metrics.qrels`). ``keywords``
may be left out of a row that has ``references``, ``qrels`` (or labelled chunk ids,
``data.labels``): the keyword metrics are then n/a for it, with the reason in results, never 0. Errors name the file, line and field.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import random
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from lab.errors import DataError
from lab.registry import did_you_mean


def normalise_source(source: str) -> str:
    """A document path as the loader spells it: forward slashes, no ``./``, no ``a/../``
    (``company\\about.md`` and ``./company/about.md`` are ``company/about.md``)."""
    return posixpath.normpath(source.replace("\\", "/")).lstrip("/") if source else source


class Reference(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str | None = None
    content: str
    start_index: int = Field(ge=0)
    end_index: int = Field(ge=0)

    @field_validator("source")
    @classmethod
    def _spelling(cls, value: str | None) -> str | None:
        return None if value is None else normalise_source(value)

    @model_validator(mode="after")
    def _ordered(self) -> "Reference":
        if self.end_index <= self.start_index:
            raise ValueError(f"end_index ({self.end_index}) must be greater than start_index ({self.start_index})")
        return self


def visible(text: str) -> bool:
    """Whether ``text`` shows anything: a character other than whitespace and the invisible
    format characters (zero-width space U+200B, byte-order mark U+FEFF, word joiner U+2060,
    soft hyphen, direction marks: Unicode category Cf)."""
    return any(not c.isspace() and unicodedata.category(c) != "Cf" for c in text)


class Review(BaseModel):
    """A person's review of a row, as the review queue of ``lab serve`` writes it into the reviewed
    copy of an eval set (``<set>.reviewed.jsonl``): ``keep`` (read, left as it was) or ``fix``
    (read, and its question, reference answer or span changed), who and when (UTC, ISO 8601). A
    dropped row is not in the copy."""
    model_config = ConfigDict(extra="forbid")
    verdict: Literal["keep", "fix"]
    by: str = Field(min_length=1)
    at: str = Field(min_length=1)
    note: str = ""


class EvalRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str | None = None
    question: str = Field(min_length=1)
    keywords: list[str] | None = None
    reference_answer: str
    category: str = Field(min_length=1)
    references: list[Reference] | None = None
    review: Review | None = None
    #: graded relevant documents: a knowledge base document's path, or its path without the
    #: extension (a BEIR id), -> grade (0: judged not relevant; 1 or more: relevant, the gain)
    qrels: dict[str, int] | None = None
    _line: int = PrivateAttr(0)  # where the row is in its file, for errors found later

    @field_validator("question")
    @classmethod
    def _has_words(cls, value: str) -> str:
        if not visible(value):
            raise ValueError(f"the question is only whitespace or invisible characters ({value!r})")
        return value

    @field_validator("keywords")
    @classmethod
    def _non_empty(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("an empty list: give at least one keyword, or leave the field out of a row "
                             "with references")
        for i, kw in enumerate(value):
            if not visible(kw):
                raise ValueError(f"keyword {i} is empty or invisible ({kw!r}): no chunk can be checked for it")
        return value

    @field_validator("qrels")
    @classmethod
    def _graded(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        if value is None:
            return None
        if not any(grade >= 1 for grade in value.values()):
            raise ValueError("no document graded 1 or more: every qrels metric would be 0 whatever is retrieved; "
                             "grade the relevant documents 1 or more (0 marks a document judged not relevant)")
        for doc in value:
            if not visible(doc):
                raise ValueError(f"an empty or invisible document id ({doc!r})")
        return value


@dataclass
class EvalSet:
    path: Path
    rows: list[EvalRow]
    sha256: str
    n_total: int

    @property
    def is_sample(self) -> bool:
        return len(self.rows) < self.n_total


def load_eval_set(path: Path, categories: Sequence[str] | None, labelled: Sequence[str] = ()) -> EvalSet:
    """Read and check an eval set. ``categories``: the declared ones (None: any); ``labelled``:
    ids with labelled chunk ids, which may leave out ``keywords`` like rows with references."""
    if path.is_dir():
        raise DataError(f"eval set {path} is a folder", hint="give the path of the eval set's .jsonl file")
    if not path.is_file():
        raise DataError(f"eval set {path} does not exist", hint="check data.eval_set or EVAL=")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"{path} line {line}: not UTF-8", hint="re-save the file as UTF-8") from None
    rows: list[EvalRow] = []
    seen: dict[str, int] = {}
    # JSONL lines end at "\n" only: U+2028, U+0085 and other Unicode line breaks are valid
    # inside a JSON string (str.splitlines would cut the row there and shift every line number)
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{path} line {lineno}: invalid JSON ({exc.msg} at column {exc.colno})",
                hint="each line must be one JSON object",
            ) from None
        if not isinstance(data, dict):
            raise DataError(f"{path} line {lineno}: expected a JSON object, got {type(data).__name__}",
                            hint="each line must be one JSON object")
        try:
            row = EvalRow.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "(row)"
            msg = "missing" if err["type"] == "missing" else err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown field (allowed: id, question, keywords, reference_answer, category, references, qrels)"
            raise DataError(f"{path} line {lineno}: field '{field}': {msg}",
                            hint="a row is {\"question\": ..., \"reference_answer\": ..., \"category\": ...} "
                                 "with keywords (a list of words a retrieved chunk must hold), golden spans "
                                 "(references), or both, and an optional id; see eval_sets/company.jsonl") from None
        if categories is not None and row.category not in categories:
            raise DataError(
                f"{path} line {lineno}: field 'category': {row.category!r} is not a declared category"
                + ("" if categories else " (data.categories is an empty list)"),
                hint=f"use one of {', '.join(categories)}, or declare it in data.categories" if categories else
                "list the categories in data.categories, e.g. [direct_fact, temporal], or remove the key for the "
                "lab's own",
            )
        row.id = row.id or f"L{lineno:04d}"
        if row.id in seen:
            raise DataError(
                f"{path} line {lineno}: field 'id': {row.id!r} already used on line {seen[row.id]}",
                hint="give every question a unique id",
            )
        seen[row.id] = lineno
        if row.keywords is None and not row.references and not row.qrels and row.id not in labelled:
            raise DataError(f"{path} line {lineno}: field 'keywords': missing",
                            hint="give keywords (words a retrieved chunk must hold), or golden spans in "
                                 "'references', or graded relevant documents in 'qrels', or label the row's "
                                 "chunk ids in data.labels")
        row._line = lineno
        rows.append(row)
    if not rows:
        raise DataError(f"eval set {path} has no questions", hint="add JSONL rows")
    return EvalSet(path=path, rows=rows, sha256=hashlib.sha256(raw).hexdigest(), n_total=len(rows))


def stratified_sample(rows: Sequence[EvalRow], limit: int, seed: int) -> list[EvalRow]:
    """``limit`` rows drawn per category in proportion to its size (largest remainder), each
    category keeping at least one row when ``limit`` allows; original order is kept."""
    if limit >= len(rows):
        return list(rows)
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(row.category, []).append(i)
    cats = sorted(groups)
    quotas = {c: limit * len(groups[c]) / len(rows) for c in cats}
    alloc = {c: int(quotas[c]) for c in cats}
    if limit >= len(cats):
        for c in cats:
            alloc[c] = max(alloc[c], 1)
    while sum(alloc.values()) > limit:  # the floor of 1 overshot: take from the largest
        c = max(cats, key=lambda c: (alloc[c] - quotas[c], alloc[c]))
        alloc[c] -= 1
    for c in sorted(cats, key=lambda c: -(quotas[c] - int(quotas[c]))):
        if sum(alloc.values()) >= limit:
            break
        if alloc[c] < len(groups[c]):
            alloc[c] += 1
    rng = random.Random(seed)
    chosen: set[int] = set()
    for c in cats:
        chosen.update(rng.sample(groups[c], min(alloc[c], len(groups[c]))))
    return [rows[i] for i in sorted(chosen)]


def same_text(a: str, b: str) -> bool:
    """Equal once both are in Unicode NFC (a span copied from an editor that decomposes accents is
    the same text)."""
    return a == b or unicodedata.normalize("NFC", a) == unicodedata.normalize("NFC", b)


def check_references(eval_set: EvalSet, documents: dict[str, str], root: Path | None = None,
                     extensions: Sequence[str] = ()) -> int:
    """Every golden span in a document of the knowledge base must lie inside it and hold its
    ``content``. A span must name a document of the knowledge base: one that names none stops
    the run with its line, unless the knowledge base holds that document in another format
    (``company/about.pdf`` for ``company/about.md``: spans are offsets in the original, so it is
    not scored). Returns how many spans are not scored for that reason. ``root`` and
    ``extensions``: the knowledge base's folder and the formats the run reads, so that a span in
    a file of a format it does not read (``lab generate`` reads them all) says so, and the fix."""
    stems = {posixpath.splitext(source)[0] for source in documents}
    elsewhere = 0
    for row in eval_set.rows:
        for i, ref in enumerate(row.references or []):
            where = f"{eval_set.path} line {row._line}: field 'references.{i}"
            text = documents.get(ref.source or "")
            if text is None:
                if ref.source and posixpath.splitext(ref.source)[0] in stems:
                    elsewhere += 1
                    continue
                suffix = posixpath.splitext(ref.source or "")[1].lower() or "no extension"
                unread = suffix not in {e.lower() for e in extensions}  # one it reads was skipped: said below
                if root is not None and ref.source and unread and (root / ref.source).is_file():
                    read = ", ".join(f'"{e}"' for e in extensions)
                    raise DataError(f"{where}.source': {ref.source!r} is a file of the knowledge base that this run "
                                    f"does not read ({suffix} is not in loader.extensions: {read})",
                                    hint=f'read it: loader: {{extensions: [{read}, "{suffix}"]}} in the config '
                                         "(lab generate reads every format the lab reads)")
                raise DataError(f"{where}.source': {ref.source!r} names no document of the knowledge base",
                                hint=did_you_mean(ref.source or "", documents) + "a span's source is the document's "
                                     "path under the knowledge base, with forward slashes, e.g. "
                                     f"{next(iter(sorted(documents)), 'company/about.md')!r}")
            if ref.end_index > len(text):
                raise DataError(f"{where}.end_index': {ref.end_index} is past the end of {ref.source} "
                                f"({len(text)} chars)", hint="the offsets are characters of the document's text")
            if not same_text(text[ref.start_index:ref.end_index], ref.content):
                found = text.find(ref.content)
                hint = (f"the content is at start_index {found}, end_index {found + len(ref.content)}" if found >= 0
                        else "the content does not occur in the document: copy it from the document")
                raise DataError(f"{where}.content': does not match {ref.source} chars "
                                f"{ref.start_index}-{ref.end_index}", hint=hint)
    return elsewhere


def document_ids(sources: Iterable[str]) -> dict[str, list[str]]:
    """The ids a qrels key may use for each knowledge base document: its path (``company/about.md``)
    and its path without the extension (``company/about``; a BEIR import's ``4983.txt`` is
    ``4983``, its BEIR id). id -> the documents it names (several when only the extension differs)."""
    ids: dict[str, list[str]] = {}
    for source in sources:
        for name in dict.fromkeys((source, posixpath.splitext(source)[0])):
            ids.setdefault(name, []).append(source)
    return ids


def qrels_sources(qrels: dict[str, int], ids: dict[str, list[str]], where: str = "") -> dict[str, int]:
    """A row's qrels keyed by document path (``ids``: :func:`document_ids`), as retrieved passages
    name their document. An id that names no document, or several, is a DataError naming ``where``."""
    out: dict[str, int] = {}
    for doc, grade in qrels.items():
        found = ids.get(normalise_source(doc), [])
        if len(found) != 1:
            raise DataError(f"{where}field 'qrels': {doc!r} names "
                            + ("no document of the knowledge base" if not found else
                               f"{len(found)} documents ({', '.join(found)})"),
                            hint=(did_you_mean(doc, ids) + "a qrels key is a document's path under the knowledge "
                                  "base, or that path without its extension") if not found else
                            "write the document's path with its extension")
        if found[0] in out:
            raise DataError(f"{where}field 'qrels': {doc!r} names {found[0]}, as another key of the row does",
                            hint="grade each document once")
        out[found[0]] = grade
    return out


def check_qrels(eval_set: EvalSet, documents: Iterable[str]) -> None:
    """Every qrels key of every row names exactly one document of the knowledge base
    (``documents``: their paths), so a typo stops the run at start-up with its line."""
    ids = document_ids(documents)
    for row in eval_set.rows:
        if row.qrels:
            qrels_sources(row.qrels, ids, f"{eval_set.path} line {row._line}: ")
