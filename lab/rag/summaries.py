"""Document summaries for contextual headers (``headers.summary``; Anthropic's "contextual
retrieval", LlamaIndex's ``SummaryExtractor``): the LLM reads each document's first
``max_chars`` characters once and writes a short summary, which :func:`lab.rag.chunkers.add_headers`
puts in the header of every chunk of that document. Calls go through the lab's cached LLM, so a
rebuild of the index, or another index over the same documents, makes no model call; a build
stopped half-way keeps the summaries already written.
"""

from __future__ import annotations

import re
import time
from typing import Any, Sequence

from lab.config import SummaryConfig
from lab.progress import Ticker
from lab.prompts import Prompt, load_prompt

_LEAD = re.compile(r"^(?:\*\*)?(?:summary|document summary)\s*:?(?:\*\*)?\s*", re.IGNORECASE)


def clean_summary(text: str) -> str:
    """The summary as one line: whitespace runs collapsed, a leading ``Summary:`` and
    surrounding quotes dropped."""
    one = " ".join(text.split())
    return _LEAD.sub("", one).strip().strip('"').strip()


def document_name(doc: Any) -> str:
    return str(doc.metadata.get("source") or doc.metadata.get("file_name") or doc.doc_id)


def load_summary_prompt(cfg: SummaryConfig) -> Prompt:
    """``headers.summary.prompt``, checked against the placeholders a summary fills."""
    return load_prompt(cfg.prompt, {"name", "document"}, where="headers.summary.prompt")


class DocumentSummarizer:
    """One summary per document, from ``llm`` (a :class:`lab.models.llm.LabLLM`) and the prompt
    file ``cfg.prompt``; ``seconds`` counts the time spent, cached calls included."""

    def __init__(self, llm: Any, cfg: SummaryConfig, prompt: Prompt | None = None):
        self.llm, self.cfg = llm, cfg
        self.prompt = prompt or load_summary_prompt(cfg)
        self.seconds = 0.0

    @property
    def fingerprint(self) -> str:
        """The model's fingerprint (its file's hash for a local model): part of the index key."""
        return self.llm.plan.fingerprint

    def summarize(self, doc: Any) -> str:
        messages = self.prompt.messages(name=document_name(doc), document=doc.text[: self.cfg.max_chars])
        return clean_summary(self.llm.chat(messages, self.prompt.version).text)

    def summaries(self, documents: Sequence[Any], show_progress: bool = False) -> dict[str, str]:
        """``{source: summary}`` for ``documents``, with progress and an ETA (a local model takes
        a few seconds a document)."""
        t0 = time.perf_counter()
        out: dict[str, str] = {}
        with Ticker("summaries", len(documents), show_progress, unit="docs") as ticker:
            for doc in documents:
                out[document_name(doc)] = self.summarize(doc)
                ticker.update(1)
        self.seconds += time.perf_counter() - t0
        return out
