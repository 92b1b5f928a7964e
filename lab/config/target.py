"""The ``target:`` section: a RAG system the lab did not build, evaluated in place of a pipeline.

Three kinds, one of them per config: ``python: module:attr`` (a callable, a factory with
``kwargs``, a LlamaIndex query engine or retriever, a LangChain runnable or retriever), ``http:
URL`` (a service that answers the JSON contract of docs/own-rag.md, or its own shape through
``response`` paths) and ``replay: FILE`` (recorded outputs: a production log, another run's
samples, ragas or DeepEval rows). A target replaces the pipeline's sections
(:data:`PIPELINE_SECTIONS`); what it returns is scored by the same metrics, judge and funnel as a
native run (:mod:`lab.eval.target`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from lab.config.components import Strict

#: The sections a target replaces: a config with ``target:`` sets none of them.
PIPELINE_SECTIONS = ("chunker", "headers", "index", "retriever", "query", "reranker", "merge", "guardrail",
                     "caches", "generation")
#: Replay files' formats (``auto``: told apart by their rows' keys).
REPLAY_FORMATS = ("auto", "log", "run", "ragas", "deepeval")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


class ResponsePaths(Strict):
    """Where a target's reply holds each field of the contract, as dotted paths (``data.result``,
    ``choices.0.text``); a field left out takes the contract's own name. Inside each context (and
    candidate), ``text``, ``source``, ``id``, ``score``, ``start`` and ``end`` are paths too."""

    answer: str | None = Field(None, description="The answer's text (default: answer; a LangChain runnable: "
                               "answer, else its output when that is a string).")
    contexts: str | None = Field(None, description="The list of passages the answer was given (default: contexts; "
                                 "a LangChain runnable: context, else source_documents).")
    candidates: str | None = Field(None, description="The first stage's list, before any reranking or cut "
                                   "(default: candidates; optional in a reply).")
    usage: str | None = Field(None, description="Tokens and cost: {prompt_tokens, completion_tokens, cost_usd} "
                              "(default: usage; optional).")
    text: str = "text"
    """A context's text (a context that is a bare string is its text)."""
    source: str = "source"
    """A context's document, as a path relative to the knowledge base (optional)."""
    id: str = "id"
    """A context's id (optional)."""
    score: str = "score"
    """A context's score (optional)."""
    start: str = "start"
    """A context's first character in its document (optional: located in the knowledge base when missing)."""
    end: str = "end"
    """A context's end (exclusive) in its document (optional)."""


class RequestKeys(Strict):
    """The request's JSON keys, for a service that reads its own names: ``question``, ``history``,
    ``id`` and ``answers`` of the contract, each renamed (a dotted path nests it), or null to leave
    it out. A python target that is a LangChain runnable is invoked with ``{question: ...}`` under
    the name given here (default: what the runnable's input schema names, else the question alone)."""

    question: str = "question"
    """The question's key."""
    history: str | None = "history"
    """The conversation before the question, [{role, content}]."""
    id: str | None = "id"
    """The question's id in the eval set."""
    answers: str | None = "answers"
    """false when the run asks for contexts only (--retrieval-only): a service may then skip its model."""


class TargetConfig(Strict):
    """A RAG system evaluated as it is: exactly one of ``python``, ``http``, ``replay``."""

    python: str | None = Field(None, description="module:attr of a callable (question, history) -> {answer, contexts, "
                               "...}, or of a LlamaIndex query engine or retriever, or a LangChain runnable or "
                               "retriever; with kwargs, attr is a factory called with them.")
    kwargs: dict[str, Any] | None = Field(None, description="python: call attr with these keyword arguments and "
                                          "evaluate what it returns (null: attr is the target itself).")
    http: str | None = Field(None, description="URL the lab POSTs each question to (the JSON contract of "
                             "docs/own-rag.md).")
    replay: str | None = Field(None, description="A JSONL or JSON file of recorded outputs, relative to the project "
                               "root: a production log, another run's samples.jsonl, ragas or DeepEval rows.")
    format: Literal[REPLAY_FORMATS] = Field("auto", description="replay: the file's format (auto: told from its keys).")
    version: str | None = Field(None, description="The target's version: part of the config fingerprint and of "
                                "every cache key, so a new version is asked again.")
    version_header: str | None = Field(None, description="http: a response header that names the version (read at "
                                       "start-up from GET URL) when version is not set.")
    response: ResponsePaths = Field(default_factory=ResponsePaths)
    """Where the reply holds the answer, contexts, candidates and usage."""
    request: RequestKeys = Field(default_factory=RequestKeys)
    """http: the request's keys."""
    headers: dict[str, str] = Field(default_factory=dict, description="http: header name -> the environment variable "
                                    "holding its value (e.g. Authorization: MY_RAG_TOKEN); values are read at "
                                    "start-up and written nowhere.")
    timeout_s: float = Field(30.0, gt=0, le=600, description="http: seconds per request before it counts as failed.")
    retries: int = Field(2, ge=0, le=10, description="http: tries after the first, on a timeout, a connection error, "
                         "429 or a 5xx.")
    backoff_s: float = Field(0.5, ge=0, le=60, description="http: wait before the first retry, doubled each retry.")
    concurrency: int = Field(4, ge=1, le=64, description="Questions in flight at once (python: 1 unless set).")
    max_response_mb: float = Field(10.0, gt=0, le=1024, description="http: a larger reply is a failed row.")
    answers: bool = Field(True, description="Ask the target for answers; false (set by --retrieval-only, or "
                          "generation: null) keeps its contexts only.")

    @model_validator(mode="after")
    def _one_kind(self) -> "TargetConfig":
        kinds = [k for k in ("python", "http", "replay") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError("give exactly one of python (module:attr), http (a URL) or replay (a file), "
                             f"not {' and '.join(kinds) or 'none'}")
        if self.python is not None and not re.match(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$", self.python):
            raise ValueError(f"python: {self.python!r} is not module:attr (e.g. my_app.rag:answer)")
        if self.http is not None and not re.match(r"^https?://[^\s/]+", self.http):
            raise ValueError(f"http: {self.http!r} is not an http:// or https:// URL")
        if self.kwargs is not None and self.python is None:
            raise ValueError("kwargs is for a python target's factory: remove it")
        if self.version_header is not None and self.http is None:
            raise ValueError("version_header is read from an http target's reply: use version instead")
        return self

    @field_validator("headers")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for header, env in value.items():
            if not _HEADER_NAME.match(header):
                raise ValueError(f"headers: {header!r} is not an HTTP header name")
            if not _ENV_NAME.match(env):
                raise ValueError(f"headers.{header}: {env!r} is not the name of an environment variable: write the "
                                 "variable's name (e.g. MY_RAG_TOKEN), never the secret itself")
        return value

    @property
    def kind(self) -> str:
        return "python" if self.python else "http" if self.http else "replay"

    @property
    def where(self) -> str:
        """What the target is, in a line: its module:attr, URL or file."""
        return self.python or self.http or self.replay or ""
