"""Classic IR evaluation against labelled relevant chunk ids: recall@k and MRR@k.

The labels file is CSV with a header ``query_id,relevant_ids``; ``relevant_ids`` lists chunk
ids separated by ``;`` (ids as the index names them, e.g. ``company/About.md#0``). Labels
belong to one chunking: another chunker makes other ids, so the run warns when a labelled id
is not in its index.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

from lab.errors import DataError


def labelled_ids(path: Path) -> list[str]:
    """The question ids a labels file names (first column), read before the eval set is checked:
    a labelled row may leave out its keywords. Errors are left to :func:`load_labels`."""
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        return [row[0].strip() for row in csv.reader(fh) if row][1:]


def load_labels(path: Path, question_ids: Sequence[str]) -> dict[str, list[str]]:
    if not path.is_file():
        raise DataError(f"labels file {path} does not exist", hint="check data.labels in the config")
    known = set(question_ids)
    out: dict[str, list[str]] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or [h.strip() for h in header[:2]] != ["query_id", "relevant_ids"]:
            raise DataError(f"{path} line 1: the header must be query_id,relevant_ids (got {header})",
                            hint="write the header line: query_id,relevant_ids")
        for lineno, row in enumerate(reader, start=2):
            if not row or not "".join(row).strip():
                continue
            if len(row) != 2:
                raise DataError(f"{path} line {lineno}: expected 2 fields, got {len(row)}",
                                hint='quote relevant_ids if it holds commas: q001,"a.md#0;a.md#1"')
            qid, ids = row[0].strip(), [i.strip() for i in row[1].split(";") if i.strip()]
            if qid not in known:
                raise DataError(f"{path} line {lineno}: field 'query_id': {qid!r} is not a question of the eval set",
                                hint="use the eval set's ids")
            if qid in out:
                raise DataError(f"{path} line {lineno}: field 'query_id': {qid!r} is labelled twice",
                                hint="one line per question, ids separated by ;")
            if not ids:
                raise DataError(f"{path} line {lineno}: field 'relevant_ids' is empty", hint="list at least one chunk id")
            out[qid] = ids
    return out


def label_scores(relevant: Sequence[str], retrieved: Sequence[str], k: int) -> dict:
    """recall@k = share of relevant ids in the top k; MRR@k = 1 / rank of the first relevant id
    in the top k (0 if none)."""
    rel = set(relevant)
    top = list(retrieved)[:k]
    hits = [i for i in top if i in rel]
    first = next((r for r, i in enumerate(top, start=1) if i in rel), None)
    return {"label_recall": len(set(hits)) / len(rel) if rel else 0.0, "label_mrr": 1.0 / first if first else 0.0}
