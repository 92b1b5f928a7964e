"""Jupyter notebooks as documents: a notebook's JSON read as the Markdown it shows.

A ``.ipynb`` file, and a text file that holds one (Sphinx copies a notebook page's source to
``_sources/<name>.ipynb.txt``, nbsphinx and myst-nb documentation alike), is read as its cells
in order, one blank line apart: a Markdown or raw cell as it is written, a code cell as a fenced
block in the notebook's language, and each text output after it as a fenced block of its own
(a stream, a result's ``text/plain``, an error's message). Images and HTML outputs leave no text.
Read as JSON, the cells' prose was split by quotes and ``\\n`` escapes, and code, outputs and
metadata were prose: ``lab generate`` took ``ureg.meter\\n", "print(legs1)" ] }, { "cell_type":
"markdown", ...`` for a sentence (docs/own-documents.md#notebooks).
"""

from __future__ import annotations

import json
import re
from typing import Any

#: A text file is tried as a notebook only when it starts like one (cheap for every other file).
_STARTS = re.compile(r"\A\s*\{")


def _source(value: Any) -> str:
    """A cell's source or an output's text: a string, or a list of lines (nbformat 4)."""
    return "".join(value) if isinstance(value, list) else str(value or "")


def _fence(body: str, info: str = "") -> str:
    """``body`` fenced, the fence longer than any backtick run inside it."""
    runs = [len(m) for m in re.findall(r"`{3,}", body)]
    fence = "`" * max([3, *(n + 1 for n in runs)])
    return f"{fence}{info}\n{body.rstrip()}\n{fence}"


def _outputs(cell: dict) -> list[str]:
    texts = []
    for out in cell.get("outputs") or []:
        if not isinstance(out, dict):
            continue
        kind = out.get("output_type")
        if kind == "stream":
            text = _source(out.get("text"))
        elif kind in ("execute_result", "display_data"):
            text = _source((out.get("data") or {}).get("text/plain"))
        elif kind == "error":
            text = f"{out.get('ename', '')}: {out.get('evalue', '')}".strip(": ")
        else:
            text = ""
        if text.strip():
            texts.append(_fence(text))
    return texts


def notebook_text(nb: dict) -> str:
    """The Markdown a notebook (nbformat 4: a list of cells) shows: the module docstring."""
    cells = nb["cells"]
    meta = nb.get("metadata") or {}
    language = str((meta.get("kernelspec") or {}).get("language") or (meta.get("language_info") or {}).get("name")
                   or "")
    parts = []
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        source = _source(cell.get("source")).strip("\n")
        if cell.get("cell_type") == "code":
            if source.strip():
                parts.append(_fence(source, language))
            parts.extend(_outputs(cell))
        elif source.strip():
            parts.append(source)
    return "\n\n".join(parts) + "\n" if parts else ""


def read_notebook(raw: bytes) -> str:
    """The Markdown of a ``.ipynb`` file's bytes; a ValueError says why there is none."""
    try:
        nb = json.loads(raw.decode("utf-8-sig"))  # a byte-order mark is not JSON
    except UnicodeDecodeError:
        raise ValueError("not UTF-8, so not a Jupyter notebook") from None
    except ValueError as exc:
        raise ValueError(f"not a Jupyter notebook: invalid JSON ({exc})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError("not a Jupyter notebook of nbformat 4 (no list of cells)")
    if not (text := notebook_text(nb)).strip():
        raise ValueError("no text in the notebook")
    return text


def as_notebook(text: str) -> str | None:
    """The Markdown of a text file's ``text`` when it is a notebook's JSON (nbformat 4), else
    None: any other text file is left as it is."""
    if not _STARTS.match(text) or '"cells"' not in text:
        return None
    try:
        nb = json.loads(text)
    except ValueError:
        return None
    if not isinstance(nb, dict) or "nbformat" not in nb or not isinstance(nb.get("cells"), list):
        return None
    return notebook_text(nb)
