"""A ``python`` target: ``module:attr``, recognised by its type.

- a LlamaIndex query engine: ``query`` (or ``ask`` with history, as the lab's own engine) answers,
  its ``source_nodes`` are the contexts; retrieval only, its ``retrieve`` (retriever and node
  postprocessors, no answer);
- a LlamaIndex retriever or a LangChain retriever: the contexts alone (a retrieval-only target);
- a LangChain runnable: ``invoke``; its output's answer (``answer``, ``result``, ``output``, or the
  output itself when it is a string or a message) and context documents (``context``,
  ``source_documents``), each path configurable (``target.response``);
- any other callable: ``fn(question, history)`` (or ``fn(question)``) returning the contract's
  object (:mod:`lab.targets.contract`), a LlamaIndex response or a LangChain output.

With ``kwargs``, ``attr`` is a factory called once at start-up with them. LlamaIndex and
LangChain are never imported here: objects are recognised by the names of their classes.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
from pathlib import Path
from typing import Any, Callable

from lab.config import TargetConfig
from lab.errors import ConfigError
from lab.targets.contract import TargetCallError, parse_reply

log = logging.getLogger(__name__)

LLAMA_ENGINE = "llama_index.core.base.base_query_engine.BaseQueryEngine"
LLAMA_RETRIEVER = "llama_index.core.base.base_retriever.BaseRetriever"
LLAMA_RESPONSE = "llama_index.core.base.response.schema.Response"
LC_RETRIEVER = "langchain_core.retrievers.BaseRetriever"
LC_RUNNABLE = "langchain_core.runnables.base.Runnable"
LC_MESSAGE = "langchain_core.messages.base.BaseMessage"
#: Where a LangChain runnable's output holds each field, tried in order (a named path wins).
LC_DEFAULTS = {"answer": ("answer", "result", "output"), "contexts": ("contexts", "context", "source_documents")}


def is_a(obj: Any, qualname: str) -> bool:
    """Whether ``obj``'s class is, or derives from, the class named ``qualname`` (module.Class)."""
    return any(f"{c.__module__}.{c.__qualname__}" == qualname for c in type(obj).__mro__)


def load_attr(spec: str, project_root: Path) -> Any:
    """The object ``module:attr`` names, imported with the project root on the path."""
    module_name, attr = spec.split(":", 1)
    root = str(project_root)
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"field 'target.python': cannot import {module_name!r}: {exc}",
                          hint="install the package that provides it, or put the module under the project root "
                               "(it is importable from there)") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n in dir(module) if not n.startswith("_"))[:20]
            raise ConfigError(f"field 'target.python': {module_name} has no {attr!r}",
                              hint=f"name one of its attributes: {', '.join(names)}")
        obj = getattr(obj, part)
    return obj


def _node(n: Any) -> dict:
    """A LlamaIndex ``NodeWithScore`` in the contract's shape."""
    node = n.node
    meta = node.metadata or {}
    return {"text": node.get_content(), "source": meta.get("source") or meta.get("file_path"), "id": node.node_id,
            "score": n.score, "start": node.start_char_idx, "end": node.end_char_idx,
            **{k: meta[k] for k in ("page", "doc_type") if meta.get(k) is not None}}


def _document(d: Any) -> dict:
    """A LangChain ``Document`` in the contract's shape (offsets from ``add_start_index``)."""
    meta = d.metadata or {}
    start = meta.get("start_index")
    score = meta.get("score", meta.get("relevance_score"))
    return {"text": d.page_content, "source": meta.get("source"), "id": getattr(d, "id", None) or meta.get("id"),
            "score": score if isinstance(score, (int, float)) else None,
            "start": start if isinstance(start, int) else None,
            "end": start + len(d.page_content) if isinstance(start, int) else None}


def _plain(value: Any) -> Any:
    """LangChain documents and LlamaIndex nodes inside a reply, as the contract's dicts."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "page_content") and hasattr(value, "metadata"):
        return _document(value)
    if hasattr(value, "node") and hasattr(value, "score"):
        return _node(value)
    if is_a(value, LC_MESSAGE):
        return value.content
    return value


class PythonTarget:
    """A target in this process. :meth:`ask` returns the reply in the contract's shape
    (:func:`lab.targets.contract.parse_reply`) or raises :class:`TargetCallError`."""

    def __init__(self, cfg: TargetConfig, project_root: Path, obj: Any = None):
        self.cfg = cfg
        if obj is None:
            obj = load_attr(cfg.python, project_root)
            if cfg.kwargs is not None:
                try:
                    obj = obj(**cfg.kwargs)
                except Exception as exc:  # the user's factory: its message, not a traceback
                    raise ConfigError(f"field 'target.kwargs': {cfg.python}(**kwargs) raised {type(exc).__name__}: {exc}",
                                      hint="fix the factory's arguments in target.kwargs") from None
        self.obj = obj
        self.adapter = self._adapter(obj)
        if self.adapter in ("llama-retriever", "langchain-retriever") and cfg.answers:
            raise ConfigError(f"field 'target.python': {cfg.python} is a retriever: it gives contexts, no answers",
                              hint="run it with --retrieval-only (or judge: null and generation: null), or name "
                                   "a chain or query engine that answers")

    @staticmethod
    def _adapter(obj: Any) -> str:
        if is_a(obj, LLAMA_ENGINE):
            return "llama-query-engine"
        if is_a(obj, LLAMA_RETRIEVER):
            return "llama-retriever"
        if is_a(obj, LC_RETRIEVER):
            return "langchain-retriever"
        if is_a(obj, LC_RUNNABLE):
            return "langchain-runnable"
        if callable(obj):
            return "callable"
        raise ConfigError(f"field 'target.python': {type(obj).__name__} is neither callable nor a LlamaIndex query "
                          "engine or retriever, nor a LangChain runnable or retriever",
                          hint="name a function (question, history) -> {answer, contexts}, or a factory with kwargs")

    def ask(self, question: str, history: list[dict], qid: str) -> dict:
        try:
            body, text_reply, defaults = self._call(question, history, qid)
        except TargetCallError:
            raise
        except Exception as exc:  # whatever the user's code raises is a failed row, never a traceback
            log.debug("target %s raised on %s", self.cfg.python, qid, exc_info=True)
            raise TargetCallError(f"{type(exc).__name__}: {exc}") from None
        return parse_reply(body, self.cfg.response, self.cfg.answers, defaults=defaults, text_reply=text_reply)

    def _call(self, question: str, history: list[dict], qid: str) -> tuple[Any, bool, dict]:
        obj, kind = self.obj, self.adapter
        if kind == "llama-query-engine":
            if not self.cfg.answers and hasattr(obj, "retrieve"):
                from llama_index.core.schema import QueryBundle  # the target's own library, loaded with it

                return {"contexts": [_node(n) for n in obj.retrieve(QueryBundle(query_str=question))]}, False, {}
            response = obj.ask(question, history) if history and hasattr(obj, "ask") else obj.query(question)
            return self._response(response), False, {}
        if kind in ("llama-retriever", "langchain-retriever"):
            found = obj.retrieve(question) if kind == "llama-retriever" else obj.invoke(question)
            return {"contexts": _plain(list(found))}, False, {}
        if kind == "langchain-runnable":
            out = obj.invoke(self._runnable_input(question, history))
            return _plain(out), True, LC_DEFAULTS
        out = self._callable(question, history, qid)
        if is_a(out, LLAMA_RESPONSE) or (hasattr(out, "source_nodes") and hasattr(out, "response")):
            return self._response(out), False, {}
        return _plain(out), True, LC_DEFAULTS

    @staticmethod
    def _response(response: Any) -> dict:
        meta = getattr(response, "metadata", None) or {}
        return {"answer": str(getattr(response, "response", None) or ""),
                "contexts": [_node(n) for n in getattr(response, "source_nodes", None) or []],
                "usage": meta.get("usage") if isinstance(meta.get("usage"), dict) else None}

    def _runnable_input(self, question: str, history: list[dict]) -> Any:
        keys = self.cfg.request
        if "question" not in keys.model_fields_set:  # what the chain says it takes
            try:
                schema = self.obj.get_input_jsonschema()
            except Exception:  # an old or custom runnable: a string, as most chains take
                schema = {}
            props = schema.get("properties") or {}
            if schema.get("type") != "object" or not props:
                return question
            name = next((k for k in ("question", "input", "query") if k in props), "question")
            out: dict[str, Any] = {name: question}
            for k in ("chat_history", "history"):
                if k in props:
                    out[k] = history
            return out
        out = {keys.question: question}
        if keys.history:
            out[keys.history] = history
        return out

    def _callable(self, question: str, history: list[dict], qid: str) -> Any:
        fn: Callable = self.obj
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            return fn(question, history)
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
        if len(positional) >= 2 or varargs:
            return fn(question, history)
        return fn(question)
