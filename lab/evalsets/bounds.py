"""How much an import reads (:mod:`lab.evalsets.interop`): a file, a JSONL line and a text field are
bounded, so that a damaged or wrong file stops in seconds naming its file, line and field and the
limit (a 1 GB ragas user_input used to be read, held three times over and written back out)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from lab.errors import DataError
from lab.evalsets.csvfile import MAX_CELL

#: A file in bytes, checked before it is read.
MAX_FILE_BYTES = 512 * 2**20
#: A JSONL line in characters.
MAX_LINE = 50_000_000
#: A text field (a question, an answer, a reference context, a document) in characters: the CSV
#: cell's bound.
MAX_FIELD = MAX_CELL
HINT = ("an eval set holds questions, answers and passages: look for a file pasted into a field or a quote never "
        "closed, or split the file")


def read_text(path: Path) -> str:
    """The UTF-8 text of ``path`` (a byte-order mark dropped), if it is within :data:`MAX_FILE_BYTES`."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise DataError(f"{path}: {size:,} bytes, over the limit of {MAX_FILE_BYTES:,} bytes of a file the lab "
                        "imports", hint=HINT)
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"{path} line {line}: not UTF-8", hint="re-save the file as UTF-8") from None


def check_line(path: Path, n: int, line: str) -> None:
    """Line ``n`` of ``path`` is within :data:`MAX_LINE`, or a DataError naming it."""
    if len(line) > MAX_LINE:
        raise DataError(f"{path} line {n}: {len(line):,} characters, over the limit of {MAX_LINE:,} of a line",
                        hint=HINT)


def bounded(where: str, name: str, text: str) -> str:
    """``text``, the field ``name`` of the row at ``where``, if it is within :data:`MAX_FIELD`."""
    if len(text) > MAX_FIELD:
        raise DataError(f"{where}: field '{name}': {len(text):,} characters, over the limit of {MAX_FIELD:,} of "
                        "a field", hint=HINT)
    return text


def jsonl_objects(path: Path, text: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``"path line n"``, object) per non-blank line; lines end at ``\\n`` only, as in
    :func:`~lab.evalsets.evalset.load_eval_set`, so line numbers agree with an editor's."""
    for n, line in enumerate((read_text(path) if text is None else text).split("\n"), start=1):
        if not line.strip():
            continue
        check_line(path, n, line)
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path} line {n}: invalid JSON ({exc.msg} at column {exc.colno})",
                            hint="each line must be one JSON object") from None
        if not isinstance(data, dict):
            raise DataError(f"{path} line {n}: expected a JSON object, got {type(data).__name__}",
                            hint="each line must be one JSON object")
        yield f"{path} line {n}", data


def text_field(where: str, data: dict[str, Any], *names: str, default: str | None = None) -> str:
    """The first of ``names`` present in ``data``, which must be a string; ``default`` when none
    is, else an error naming the first."""
    for name in names:
        if name in data and data[name] is not None:
            if not isinstance(data[name], str):
                raise DataError(f"{where}: field '{name}': expected a string, got {type(data[name]).__name__}",
                                hint=f"'{name}' holds text")
            return bounded(where, name, data[name])
    if default is None:
        raise DataError(f"{where}: field '{names[0]}': missing", hint=f"every row needs '{names[0]}'")
    return default
