"""What ``lab generate`` gives the model for one task: the windows of a document, the excerpts a
held reply may choose (:func:`choices`), and the JSON schemas of the replies."""

from __future__ import annotations

import re
from typing import Sequence

from lab.evalsets.excerpts import heading_span, sentences

WINDOW_CHARS = 1500


def _cite_schema(counts: Sequence[int]) -> dict:
    if len(counts) == 1:
        props = {"sentences": {"type": "array", "items": {"type": "integer", "enum": list(range(1, counts[0] + 1))},
                               "minItems": 1, "maxItems": 2}}
    else:
        props = {f"sentence_{k}": {"type": "integer", "enum": list(range(1, n + 1))} for k, n in zip("ab", counts)}
    props |= {"question": {"type": "string", "maxLength": 300}, "answer": {"type": "string", "maxLength": 400}}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _cited(numbers: Sequence[int], spans: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """The document offsets of the cited sentences: from the first to the last when they are
    consecutive, else the first alone."""
    numbers = sorted({int(n) for n in numbers})
    if not numbers or numbers[0] < 1 or numbers[-1] > len(spans):
        raise ValueError(f"cited sentence numbers {numbers} not in 1..{len(spans)}")
    last = numbers[-1] if numbers[-1] - numbers[0] <= 1 else numbers[0]
    return spans[numbers[0] - 1][0], spans[last - 1][1]


#: How the model gives the excerpt (``Options.excerpt``, ``lab generate --excerpt``).
EXCERPT_MODES = ("held", "copied", "cited")
#: The longest excerpt the grammar offers (a pair of sentences longer than this is left out).
MAX_EXCERPT_CHARS = 500


def choices(text: str, window: tuple[int, int], pairs: bool = True) -> dict[str, tuple[int, int]]:
    """The excerpts the grammar lets the model write for ``window`` of ``text`` (mode ``held``),
    each with its offsets: every sentence (:func:`lab.evalsets.excerpts.sentences`) and, with
    ``pairs``, every two consecutive ones, whitespace folded to one space, in document order.
    Double quotes are offered as single ones and a piece holding a backslash or a control
    character is left out: llama-cpp-python's JSON-schema grammar writes a JSON escape inside an
    enum value into GBNF unescaped (0.3.36), which fails to parse. The row keeps the document's
    own text (the offsets), never the form the model wrote. Also left out: a sentence with no
    word (a table rule, a lone symbol) or a heading, alone or in a pair; a piece that only
    introduces what follows (a line ending in a colon: what ``heading_span`` rejects); and one
    over :data:`MAX_EXCERPT_CHARS`. A piece whose text is repeated keeps its first place."""
    spans = sentences(text, *window)
    ok = [bool(re.search(r"[^\W\d_]{2}", text[a:b])) and not text[a:b].startswith("#") for a, b in spans]
    runs = [sp for sp, good in zip(spans, ok) if good]
    if pairs:
        runs += [(spans[i][0], spans[i + 1][1]) for i in range(len(spans) - 1) if ok[i] and ok[i + 1]]
    out: dict[str, tuple[int, int]] = {}
    for a, b in sorted(runs):
        shown = " ".join(text[a:b].split()).replace('"', "'")
        if (len(shown) <= MAX_EXCERPT_CHARS and heading_span([shown]) is None
                and not re.search(r"[\\\x00-\x1f\x7f]", shown)):
            out.setdefault(shown, (a, b))
    return out


def _held_schema(options: Sequence[Sequence[str]]) -> dict:
    fields = ["excerpt_a", "excerpt_b"] if len(options) == 2 else ["excerpt"]
    props = {f: {"type": "string", "enum": list(o)} for f, o in zip(fields, options)}
    props |= {"question": {"type": "string", "maxLength": 300}, "answer": {"type": "string", "maxLength": 400}}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _schema(two: bool) -> dict:
    fields = ["excerpt_a", "excerpt_b"] if two else ["excerpt"]
    props = {f: {"type": "string", "maxLength": 400} for f in fields}
    props |= {"question": {"type": "string", "maxLength": 300}, "answer": {"type": "string", "maxLength": 400}}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def windows(text: str, size: int = WINDOW_CHARS) -> list[tuple[int, int]]:
    """Consecutive windows of about ``size`` characters, cut at line ends where one is near."""
    out, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = text.rfind("\n", start + size // 2, end)
            end = cut + 1 if cut > 0 else end
        out.append((start, end))
        start = end
    return [w for w in out if text[w[0]:w[1]].strip()]
