"""Reading a CSV eval set's cells (``lab import csv``, :mod:`lab.evalsets.interop`): strictly
quoted, each cell bounded, every error naming the line where its row starts, never a bare
``_csv.Error`` nor a quote that silently swallows the rest of the file."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Iterator

from lab.errors import DataError

#: The largest CSV cell read, in characters (Python's csv stops at 131,072 with a bare error).
MAX_CELL = 10_000_000

_QUOTES = 'a quote inside a quoted cell is written twice: ""'


def csv_rows(source: Path, text: str) -> Iterator[tuple[int, list[str]]]:
    """(line where the row starts, its cells) for each row of ``text``, the CSV file ``source``.
    A quote opened in a cell and never closed, text after a closing quote, and a cell over
    :data:`MAX_CELL` characters are DataErrors naming the line."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    previous = csv.field_size_limit(MAX_CELL + 1)
    try:
        while True:
            start = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                if "field larger than field limit" in str(exc):
                    raise _too_large(source, start) from None
                if "unexpected end of data" in str(exc):
                    raise DataError(f"{source} line {start}: a quote opened in a cell is never closed",
                                    hint=f'close it ("..."; {_QUOTES})') from None
                raise DataError(f"{source} line {reader.line_num}: {exc}",
                                hint=f'quote a cell that holds a comma or a quote ("..."; {_QUOTES})') from None
            if any(len(cell) > MAX_CELL for cell in row):
                raise _too_large(source, start)
            yield start, row
    finally:
        csv.field_size_limit(previous)


def _too_large(source: Path, line: int) -> DataError:
    return DataError(f"{source} line {line}: a cell is over {MAX_CELL:,} characters",
                     hint="a cell holds a question, an answer or keywords: look for a quote never closed, or "
                          "shorten the cell")
