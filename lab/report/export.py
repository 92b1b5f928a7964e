"""Per-question results as a table (pandas): ``questions.csv`` and ``questions.parquet``.

One row per (run, question), long format, so several runs stack and pivot easily::

    import pandas as pd
    df = pd.read_parquet("reports/_compare/turn13-turn18/questions.parquet")
    df.pivot(index="id", columns="experiment", values="mrr")
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lab.metrics import catalog
from lab.metrics.funnel import question_funnel

#: Every metric of the catalogue, in its order: the columns a run has are written.
METRIC_COLUMNS = catalog.names()


def rows(results: dict, samples: list[dict]) -> list[dict]:
    out = []
    for s in samples:
        answer = s.get("answer") or {}
        judgement = s.get("judgement") or {}
        row = {
            "experiment": results["name"],
            "run_id": results["run_id"],
            "id": s["id"],
            "category": s["category"],
            "question": s["question"],
            "keywords": "; ".join(s.get("keywords") or []),
            "keywords_missed": "; ".join(k for k, rank in (s.get("keyword_ranks") or {}).items() if not rank),
            "retrieved_sources": "; ".join(c["source"] or "-" for c in s.get("retrieved") or []),
            "retrieved_ids": "; ".join(c["id"] for c in s.get("retrieved") or []),
        }
        for m in METRIC_COLUMNS:
            if m in results["metrics"]["overall"]:
                row[m] = s["metrics"].get(m)
        funnel = question_funnel(s)  # where the question lost its gold evidence (lab.metrics.funnel)
        row["lost_at"] = funnel["lost_at"] if funnel is not None else None
        if s.get("answer") is not None:
            row.update(answer=answer.get("text"), answer_status=answer.get("status", "ok"),
                       answer_refused=answer.get("refused"))
        if s.get("judgement") is not None:
            row.update(judge_status=judgement.get("status"), judge_feedback=judgement.get("feedback"))
        out.append(row)
    return out


def frame(runs: list[tuple[dict, list[dict]]]) -> Any:
    import pandas as pd  # heavy: loaded when an export is written, not when a report module is imported

    df = pd.DataFrame([row for results, samples in runs for row in rows(results, samples)])
    for m in METRIC_COLUMNS:
        if m in df.columns:
            df[m] = pd.to_numeric(df[m], errors="coerce")
    return df


#: A spreadsheet runs a cell starting with one of these as a formula (=HYPERLINK(...), +cmd|...).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _neutralised(df: Any) -> Any:
    """The frame for CSV: text cells that a spreadsheet would run as a formula get a leading
    apostrophe (OWASP's advice), so they show as text; numbers are untouched. Parquet keeps the
    exact values."""
    out = df.copy()
    for column in out.columns:
        if out[column].dtype.kind not in "biufcmM":  # text columns (object or pandas strings)
            out[column] = out[column].map(
                lambda v: "'" + v if isinstance(v, str) and v.startswith(FORMULA_START) else v)
    return out


#: The files :func:`write_exports` writes.
FILES = ("questions.csv", "questions.parquet")


def write_exports(runs: list[tuple[dict, list[dict]]], folder: Path) -> list[Path]:
    """Write ``questions.csv`` and ``questions.parquet`` into ``folder``, each atomically."""
    df = frame(runs)
    written = []
    for name, write in zip(FILES, (lambda p: _neutralised(df).to_csv(p, index=False),
                                   lambda p: df.to_parquet(p, index=False))):
        final = folder / name
        tmp = folder / f".{name}.tmp-{os.getpid()}"
        try:
            write(tmp)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        written.append(final)
    return written
