"""What a target returns, and how a reply in any shape becomes it.

The contract (docs/own-rag.md): a reply is a JSON object ``{answer, contexts, candidates?,
usage?}``; ``contexts`` is the list of passages the answer was given, each a string or
``{text, source?, id?, score?, start?, end?}``; ``candidates`` the first stage's list in the same
shape; ``usage`` ``{prompt_tokens?, completion_tokens?, cost_usd?}``. A service that answers in
its own shape names where each field is (:class:`lab.config.ResponsePaths`: dotted paths).

:func:`parse_reply` checks a reply field by field and returns a plain dict (what the cache keeps
and the run reads); a reply that breaks the contract raises :class:`TargetCallError` naming the
field, which the run records as that question's failed row.
"""

from __future__ import annotations

import math
from typing import Any

from lab.config import ResponsePaths

#: Characters of a context's text kept (a larger one is cut, and says so): bounds the run files.
MAX_TEXT_CHARS = 200_000
#: Contexts and candidates read from one reply.
MAX_ITEMS = 1000
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "cost_usd")
#: A context's optional fields beyond the contract's own, kept as they are: its page and its document's type.
EXTRAS = ("page", "doc_type")


class TargetCallError(Exception):
    """One question's call failed: a timeout, an HTTP error, a reply that breaks the contract, a
    callable that raised. The run records it as a failed row (the question's id and this message)."""

    def __init__(self, message: str, *, retryable: bool = False):
        super().__init__(message)
        self.message = message
        self.retryable = retryable


_MISSING = object()


def get_path(body: Any, path: str) -> Any:
    """The value at dotted ``path`` in ``body`` (``data.items.0.text``); a missing step is
    :data:`_MISSING`. An object that is not a dict or list is read by attribute (a LangChain
    ``Document``'s ``page_content``, a LlamaIndex response's ``response``)."""
    node = body
    for part in path.split("."):
        if isinstance(node, dict):
            node = node.get(part, _MISSING)
        elif isinstance(node, (list, tuple)):
            node = node[int(part)] if part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node) else _MISSING
        elif node is not None and node is not _MISSING and not isinstance(node, (str, int, float, bool)):
            node = getattr(node, part, _MISSING)
        else:
            return _MISSING
        if node is _MISSING:
            return _MISSING
    return node


def missing(value: Any) -> bool:
    return value is _MISSING


def _number(value: Any, field: str, integer: bool = False) -> float | int | None:
    if value is None or value is _MISSING:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
        raise TargetCallError(f"{field} is {_kind(value)} {_short(value)}, not a number")
    if integer:
        if value != int(value) or value < 0:
            raise TargetCallError(f"{field} is {value}, not a whole number of 0 or more")
        return int(value)
    return float(value)


def _kind(value: Any) -> str:
    return {str: "a string", dict: "an object", list: "a list", type(None): "null", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(value), f"a {type(value).__name__}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_item(item: Any, paths: ResponsePaths, where: str) -> dict:
    """One context (or candidate): ``{text, source, id, score, start, end}``, None where not given."""
    if isinstance(item, str):
        text: Any = item
        item = {}
    else:
        text = get_path(item, paths.text)
        if text is _MISSING and paths.text == "text":  # LangChain's Document, LlamaIndex's NodeWithScore
            text = get_path(item, "page_content")
            if text is _MISSING:
                text = get_path(item, "node.text")
    if text is _MISSING:
        raise TargetCallError(f"{where} has no '{paths.text}' (its text): give each context as a string or "
                              f"an object with '{paths.text}'")
    if not isinstance(text, str):
        raise TargetCallError(f"{where}.{paths.text} is {_kind(text)}, not a string")
    out = {"text": text[:MAX_TEXT_CHARS]}
    if len(text) > MAX_TEXT_CHARS:
        out["cut"] = len(text)
    for key in ("source", "id"):
        value = get_path(item, getattr(paths, key)) if item else _MISSING
        if value is _MISSING and key == "source" and item:  # LangChain's Document: metadata.source
            value = get_path(item, "metadata.source")
        out[key] = None if value is _MISSING or value is None else str(value)
    out["score"] = _number(get_path(item, paths.score) if item else None, f"{where}.{paths.score}")
    start = _number(get_path(item, paths.start) if item else None, f"{where}.{paths.start}", integer=True)
    end = _number(get_path(item, paths.end) if item else None, f"{where}.{paths.end}", integer=True)
    if start is None and item:  # LangChain's text splitters record add_start_index's offset here
        start = _number(get_path(item, "metadata.start_index"), f"{where}.metadata.start_index", integer=True)
    if start is not None and end is None:
        end = start + len(text)
    if start is not None and end is not None and end < start:
        raise TargetCallError(f"{where}: end {end} is before start {start}")
    out["start"], out["end"] = start, end
    for key in EXTRAS:  # shown beside the passage where a reply has them
        value = item.get(key) if isinstance(item, dict) else None
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            out[key] = str(value)
    return out


def _items(value: Any, field: str, paths: ResponsePaths) -> list[dict]:
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise TargetCallError(f"'{field}' is {_kind(value)}, not a list: give a list of passages "
                              f"(strings or objects with '{paths.text}')")
    items = list(value)
    if len(items) > MAX_ITEMS:
        raise TargetCallError(f"'{field}' has {len(items)} items, more than {MAX_ITEMS}")
    return [parse_item(x, paths, f"{field}[{i}]") for i, x in enumerate(items)]


def parse_reply(body: Any, paths: ResponsePaths, answers: bool, *, defaults: dict[str, tuple[str, ...]] | None = None,
                text_reply: bool = False) -> dict:
    """A reply as the run reads it: ``{answer, contexts, candidates, usage}`` (answer None when
    ``answers`` is false; candidates and usage None when the reply has none). ``defaults``: the
    paths tried, in order, for a field the config does not name (an adapter's conventions);
    ``text_reply``: a reply that is a string is the answer, with no contexts (a LangChain chain
    that ends in a string parser)."""
    defaults = defaults or {}

    def find(field: str) -> tuple[str, Any]:
        named = getattr(paths, field)
        tried = (named,) if named else defaults.get(field, (field,))
        for path in tried:
            value = get_path(body, path)
            if value is not _MISSING:
                return path, value
        return tried[0], _MISSING

    if isinstance(body, str) and text_reply:
        return {"answer": body if answers else None, "contexts": [], "candidates": None, "usage": None}
    if body is None or isinstance(body, (str, bytes, int, float, bool, list)):
        raise TargetCallError(f"the reply is {_kind(body)}, not an object with answer and contexts")
    out: dict[str, Any] = {"answer": None}
    if answers:
        path, answer = find("answer")
        if answer is _MISSING:
            raise TargetCallError(f"the reply has no '{path}' (the answer): return it, or name where it is "
                                  "with target.response.answer")
        if not isinstance(answer, str):
            raise TargetCallError(f"'{path}' (the answer) is {_kind(answer)}, not a string")
        out["answer"] = answer
    path, contexts = find("contexts")
    if contexts is _MISSING:
        raise TargetCallError(f"the reply has no '{path}' (the passages the answer was given): return them, or name "
                              "where they are with target.response.contexts")
    out["contexts"] = _items(contexts, path, paths)
    path, candidates = find("candidates")
    out["candidates"] = None if candidates is _MISSING or candidates is None else _items(candidates, path, paths)
    path, usage = find("usage")
    if usage is _MISSING or usage is None:
        out["usage"] = None
    elif not isinstance(usage, dict):
        raise TargetCallError(f"'{path}' is {_kind(usage)}, not an object {{prompt_tokens, completion_tokens, cost_usd}}")
    else:
        out["usage"] = {k: _number(usage.get(k), f"{path}.{k}", integer=k.endswith("tokens"))
                        for k in USAGE_KEYS if usage.get(k) is not None}
    return out
