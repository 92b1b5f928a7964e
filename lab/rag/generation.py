"""Generate: answers from the retrieved passages, with citations, through a LlamaIndex query engine.

:class:`LabSynthesizer` is a LlamaIndex response synthesizer: it builds the context with the
configured builder (:mod:`lab.rag.context`), fills the versioned answer prompt
(:mod:`lab.prompts`) and asks the cached generator LLM (:mod:`lab.models.llm`). The answer cites
passages as ``[n]``; those numbers are mapped back to their source documents.
:class:`LabQueryEngine` is LlamaIndex's ``RetrieverQueryEngine`` with per-stage timings and
optional conversation history. The evaluator calls the same synthesizer on nodes it retrieved
in one batch, so answers are identical either way.
"""

from __future__ import annotations

import re
import time
from typing import Any, Sequence

from llama_index.core.base.response.schema import Response
from llama_index.core.callbacks import CallbackManager
from llama_index.core.indices.prompt_helper import PromptHelper
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers.base import BaseSynthesizer
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from lab.config import GenerationConfig
from lab.evidence.text import citations
from lab.models.llm import LabLLM, LLMCallError, as_llamaindex_llm
from lab.rag.context import Context, build_context
from lab.prompts import Prompt, load_prompt

ANSWER_FIELDS = {"context", "question"}
REFUSAL = "I don't have enough information to answer that."
_REFUSAL_RE = re.compile(r"(do not|don't|does not|doesn't) (have|contain) enough information", re.I)


def parse_citations(text: str, n_passages: int) -> list[int]:
    """Passage numbers cited as ``[2]`` or ``[1, 3]``, in order of first mention, within 1..n."""
    return list(dict.fromkeys(n for n in citations(text) if 1 <= n <= n_passages))


def is_refusal(text: str) -> bool:
    return bool(_REFUSAL_RE.search(text))


def load_answer_prompt(cfg: GenerationConfig) -> Prompt:
    """``generation.prompt``, checked against the placeholders an answer fills."""
    return load_prompt(cfg.prompt, ANSWER_FIELDS, where="generation.prompt")


class LabSynthesizer(BaseSynthesizer):
    """Context builder + versioned prompt + cached LLM, as a LlamaIndex response synthesizer."""

    def __init__(self, llm: LabLLM, cfg: GenerationConfig, prompt: Prompt | None = None):
        self.prompt = prompt or load_answer_prompt(cfg)
        super().__init__(
            llm=as_llamaindex_llm(llm, self.prompt.version),
            callback_manager=CallbackManager([]),
            prompt_helper=PromptHelper(context_window=cfg.llm.n_ctx, num_output=cfg.llm.max_tokens),
        )
        self.lab_llm = llm
        self.cfg = cfg

    def _get_prompts(self) -> dict:
        return {}

    def _update_prompts(self, prompts: dict) -> None:
        raise NotImplementedError("prompts are versioned files in lab/prompts: name another in the config")

    def messages(self, question: str, context_text: str, history: Sequence[dict] | None = None) -> list[dict]:
        system, user = self.prompt.messages(context=context_text, question=question.strip())
        return [system, *(history or []), user]

    def answer(self, question: str, nodes: Sequence[NodeWithScore], history: Sequence[dict] | None = None
               ) -> tuple[dict, Context]:
        """(answer record, context) for one question; the record is what samples.jsonl keeps."""
        ctx = build_context(self.cfg.context, nodes)
        record: dict[str, Any] = {"prompt_version": self.prompt.version, "prompt_sha256": self.prompt.sha256}
        if not ctx.passages:  # nothing retrieved: no call, the prompt's own refusal
            record.update(status="ok", text=REFUSAL, citations=[], cited_sources=[], refused=True, no_context=True,
                          prompt_tokens=0, completion_tokens=0, seconds=0.0, cached=False, finish_reason=None)
            return record, ctx
        try:
            out = self.lab_llm.chat(self.messages(question, ctx.text, history), self.prompt.version)
        except LLMCallError as exc:  # recorded, shown and counted; the judge does not grade it
            record.update(status="failed", error=exc.message, text="", citations=[], cited_sources=[],
                          refused=False, prompt_tokens=0, completion_tokens=0, seconds=0.0, cached=False,
                          finish_reason=None)
            return record, ctx
        text = out.text.strip()
        cites = parse_citations(text, len(ctx.passages))
        record.update(
            status="ok",
            text=text,
            citations=cites,
            cited_sources=list(dict.fromkeys(ctx.passages[n - 1].source for n in cites)),
            refused=is_refusal(text),
            prompt_tokens=out.prompt_tokens,
            completion_tokens=out.completion_tokens,
            seconds=round(out.seconds, 4),
            finish_reason=out.finish_reason,
            cached=out.cached,
        )
        return record, ctx

    # LlamaIndex interface ---------------------------------------------------------------------
    def synthesize(self, query: Any, nodes: list[NodeWithScore], additional_source_nodes: Any = None,
                   history: Sequence[dict] | None = None, **kwargs: Any) -> Response:
        question = query.query_str if isinstance(query, QueryBundle) else str(query)
        record, ctx = self.answer(question, nodes, history)
        used = {p.node_id for p in ctx.passages}
        sources = [n for n in nodes if n.node.node_id in used] + list(additional_source_nodes or [])
        return Response(record["text"], source_nodes=sources, metadata={"answer": record, "context": ctx.as_record()})

    async def asynthesize(self, query: Any, nodes: list[NodeWithScore], additional_source_nodes: Any = None,
                          **kwargs: Any) -> Response:
        return self.synthesize(query, nodes, additional_source_nodes, **kwargs)

    def get_response(self, query_str: str, text_chunks: Sequence[str], **kwargs: Any) -> str:
        nodes = [NodeWithScore(node=TextNode(text=t, id_=f"chunk-{i}")) for i, t in enumerate(text_chunks)]
        return self.answer(query_str, nodes, kwargs.get("history"))[0]["text"]

    async def aget_response(self, query_str: str, text_chunks: Sequence[str], **kwargs: Any) -> str:
        return self.get_response(query_str, text_chunks, **kwargs)


class LabQueryEngine(RetrieverQueryEngine):
    """Retriever + node postprocessors + :class:`LabSynthesizer`, timing each stage.

    ``response.metadata`` holds the answer record, the context sent and ``timings``
    (retrieve_s, rerank_s, generate_s). :meth:`ask` carries conversation history.
    """

    def __init__(self, retriever: Any, synthesizer: LabSynthesizer, node_postprocessors: list | None = None):
        super().__init__(retriever, response_synthesizer=synthesizer, node_postprocessors=node_postprocessors,
                         callback_manager=CallbackManager([]))
        self._history: list[dict] | None = None

    def _query(self, query_bundle: QueryBundle) -> Response:
        t0 = time.perf_counter()
        nodes = self._retriever.retrieve(query_bundle)
        t1 = time.perf_counter()
        nodes = self._apply_node_postprocessors(nodes, query_bundle=query_bundle)
        t2 = time.perf_counter()
        response = self._response_synthesizer.synthesize(query=query_bundle, nodes=nodes, history=self._history)
        t3 = time.perf_counter()
        response.metadata["timings"] = {"retrieve_s": t1 - t0, "rerank_s": t2 - t1, "generate_s": t3 - t2}
        return response

    async def _aquery(self, query_bundle: QueryBundle) -> Response:
        return self._query(query_bundle)

    def ask(self, question: str, history: Sequence[dict] | None = None) -> Response:
        """Answer ``question`` after the conversation ``history`` ([{role, content}, ...])."""
        self._history = list(history or [])
        if hasattr(self._retriever, "history"):  # a condensing retriever reads the turns too
            self._retriever.history = self._history
        try:
            return self.query(question)
        finally:
            self._history = None
            if hasattr(self._retriever, "history"):
                self._retriever.history = []
