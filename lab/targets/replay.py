"""A ``replay`` target: outputs recorded elsewhere, looked up by question id, else by question text.

Formats, told apart by their rows' keys (``target.format: auto``) or named:

- ``log``: a production log in the contract's shape, a row per question:
  ``{id?, question, answer, contexts, candidates?, usage?}`` (``target.response`` paths apply);
- ``run``: another run's ``samples.jsonl`` (``retrieved`` chunks with offsets, ``answer.text``);
- ``ragas``: ``EvaluationDataset`` rows ``{user_input, retrieved_contexts, response}`` (a JSON
  list, JSONL, or ``{"samples": [...]}`` as ragas saves it);
- ``deepeval``: test cases ``{input, actual_output, retrieval_context}`` (a JSON list, JSONL, or
  ``{"test_cases": [...]}``).

Nothing is called, so nothing is cached: the file's sha256 is the target's identity.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from lab.config import TargetConfig
from lab.errors import ConfigError, DataError
from lab.targets.contract import TargetCallError, parse_reply

#: A replay file larger than this is refused (a log of outputs, not a dump).
MAX_FILE_MB = 512
#: The key each format's rows are recognised by, and where each holds the question.
SIGNS = {"run": ("retrieved", "question"), "ragas": ("user_input", "user_input"),
         "deepeval": ("actual_output", "input"), "log": ("contexts", "question")}


def _key(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def _rows(path: Path) -> list[dict]:
    raw = path.read_bytes()
    if len(raw) > MAX_FILE_MB * 1024 * 1024:
        raise DataError(f"{path}: {len(raw) / 1e6:.0f} MB, over {MAX_FILE_MB} MB", hint="replay a smaller file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start})", hint="re-save it as UTF-8") from None
    stripped = text.lstrip()
    if stripped.startswith("[") or (stripped.startswith("{") and path.suffix == ".json"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise DataError(f"{path}: not JSON ({exc})", hint="give a JSON list of rows, or JSONL (a row per line)") from None
        if isinstance(data, dict):
            data = next((data[k] for k in ("samples", "test_cases", "rows") if isinstance(data.get(k), list)), None)
        if not isinstance(data, list):
            raise DataError(f"{path}: a JSON file of rows is a list (or {{\"samples\": [...]}})", hint="give a list of rows")
        rows = data
    else:
        rows = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as exc:
                raise DataError(f"{path} line {n}: not JSON ({exc.msg})", hint="one JSON object per line") from None
    for n, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise DataError(f"{path} row {n}: {type(row).__name__}, not an object", hint="each row is a JSON object")
    return rows


def _format(rows: list[dict], path: Path) -> str:
    for fmt, (sign, _) in SIGNS.items():
        if rows and sign in rows[0]:
            return fmt
    keys = ", ".join(sorted(rows[0])[:12]) if rows else "(no rows)"
    raise ConfigError(f"field 'target.format': cannot tell the format of {path} from its first row's keys ({keys})",
                      hint="set target.format to log, run, ragas or deepeval; a log row has question, answer, contexts")


def _as_contract(row: dict, fmt: str) -> Any:
    """A row of ``fmt`` in the contract's shape (a log row is already)."""
    if fmt == "run":
        answer = row.get("answer")
        return {"answer": answer.get("text") if isinstance(answer, dict) and answer.get("status", "ok") == "ok" else None,
                "contexts": [{"text": r.get("text"), "source": r.get("source"), "id": r.get("id"), "score": r.get("score"),
                              "start": r.get("start_char_idx"), "end": r.get("end_char_idx"),
                              "page": r.get("page"), "doc_type": r.get("doc_type")}
                             for r in row.get("retrieved") or [] if isinstance(r, dict)],
                "usage": _run_usage(answer)}
    if fmt == "ragas":
        return {"answer": row.get("response"), "contexts": row.get("retrieved_contexts")}
    if fmt == "deepeval":
        return {"answer": row.get("actual_output"), "contexts": row.get("retrieval_context")}
    return row


def _run_usage(answer: Any) -> dict | None:
    if not isinstance(answer, dict) or answer.get("prompt_tokens") is None:
        return None
    return {"prompt_tokens": answer.get("prompt_tokens"), "completion_tokens": answer.get("completion_tokens")}


class ReplayTarget:
    """Recorded outputs, by id and by question text (whitespace and case folded)."""

    def __init__(self, cfg: TargetConfig, path: Path):
        if not path.is_file():
            raise ConfigError(f"field 'target.replay': {path} does not exist",
                              hint="give a JSONL or JSON file of recorded outputs, relative to the project root")
        self.cfg, self.path = cfg, path
        self.sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
        rows = _rows(path)
        self.format = cfg.format if cfg.format != "auto" else _format(rows, path)
        qkey = SIGNS[self.format][1]
        self.by_id: dict[str, dict] = {}
        self.by_text: dict[str, dict] = {}
        for row in rows:
            if row.get("id") is not None:
                self.by_id.setdefault(str(row["id"]), row)
            if isinstance(row.get(qkey), str):
                self.by_text.setdefault(_key(row[qkey]), row)
        self.n_rows = len(rows)

    def ask(self, question: str, history: list[dict], qid: str) -> dict:
        row = self.by_id.get(qid) or self.by_text.get(_key(question))
        if row is None:
            raise TargetCallError(f"no recorded output for this question in {self.path.name} ({self.n_rows} rows, "
                                  "matched by id, then by question text)")
        return parse_reply(_as_contract(row, self.format), self.cfg.response, self.cfg.answers)
