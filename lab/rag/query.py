"""Query-side designs: the question is rewritten before the first stage searches.

- ``multi_query`` (:class:`MultiQueryRetriever`): LlamaIndex's ``QueryFusionRetriever`` over the
  experiment's first stage (vector, BM25 or hybrid). The LLM writes ``rewrites`` other phrasings
  of the question (the lab's cached LLM and a versioned prompt file, so a rerun makes no model
  call); the question and each rewrite are searched, and the lists are fused by reciprocal rank
  (k = 60), ``top_k`` kept.
- ``hyde`` (:class:`HyDERetriever`): LlamaIndex's ``TransformRetriever`` with a
  ``HyDEQueryTransform`` whose passage comes from the lab's cached LLM and prompt file: the
  dense side searches with the mean embedding of the passage and the question (LlamaIndex's
  aggregation), BM25 with the question's words.

- ``condense`` (:class:`CondenseRetriever`): in a conversation (``lab ask``), the LLM rewrites a
  follow-up question into a standalone one from the turns before it (:attr:`history`, set by the
  query engine), and the first stage searches that; without turns, the question as asked.

Each keeps what the LLM wrote for each question in ``rewrites``, which lands in the samples.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.indices.query.query_transform import HyDEQueryTransform
from llama_index.core.retrievers import QueryFusionRetriever, TransformRetriever
from llama_index.core.retrievers.fusion_retriever import FUSION_MODES
from llama_index.core.schema import NodeWithScore, QueryBundle

from lab.config import QueryConfig
from lab.models.llm import as_llamaindex_llm
from lab.progress import progress
from lab.prompts import Prompt, load_prompt

#: The placeholders each mode fills: a prompt that asks for another fails at start-up.
PROMPT_FIELDS = {"multi_query": {"n", "question"}, "hyde": {"question"}, "condense": {"history", "question"}}


def load_query_prompt(cfg: QueryConfig) -> Prompt:
    """``query.prompt`` (or the mode's default), checked against the placeholders its mode fills."""
    return load_prompt(cfg.prompt_name, PROMPT_FIELDS[cfg.mode], where="query.prompt")

_NUMBERING = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|query\s*\d*\s*:)\s*", re.IGNORECASE)


def parse_rewrites(text: str, question: str, n: int) -> list[str]:
    """The first ``n`` distinct rewrites in an LLM's reply, one per line: list marks, numbering
    and quotes stripped; blank lines, repeats and the question itself (ignoring case) left out."""
    seen = {question.strip().casefold()}
    out = []
    for line in text.strip().strip("`").splitlines():
        q = _NUMBERING.sub("", line).strip().strip('"').strip()
        if q and q.casefold() not in seen:
            seen.add(q.casefold())
            out.append(q)
    return out[:n]


class MultiQueryRetriever(QueryFusionRetriever):
    """``QueryFusionRetriever`` whose rewrites come from the lab's LLM and prompt file."""

    def __init__(self, base: Any, cfg: QueryConfig, llm: Any, top_k: int, show_progress: bool = False,
                 prompt: Prompt | None = None) -> None:
        self._lab_llm, self._cfg, self._prompt = llm, cfg, prompt or load_query_prompt(cfg)
        self._show_progress = show_progress
        self.rewrites: dict[str, list[str]] = {}
        super().__init__(retrievers=[base], llm=as_llamaindex_llm(llm, self._prompt.version),
                         mode=FUSION_MODES.RECIPROCAL_RANK, similarity_top_k=top_k,
                         num_queries=cfg.rewrites + 1, use_async=False)

    def _get_queries(self, original_query: str) -> list[QueryBundle]:
        out = self._lab_llm.chat(self._prompt.messages(n=str(self._cfg.rewrites), question=original_query),
                                 self._prompt.version)
        rewrites = parse_rewrites(out.text, original_query, self._cfg.rewrites)
        self.rewrites[original_query] = rewrites
        return [QueryBundle(q) for q in rewrites]

    def _reciprocal_rerank_fusion(self, results: dict) -> list[NodeWithScore]:
        """LlamaIndex's reciprocal rank fusion (k = 60, ranks from 0), with nodes told apart by id:
        LlamaIndex tells them apart by ``node.hash``, which covers metadata, and the first stage
        records per-query scores there (hybrid's ``lab_scores``), so the same chunk found by two
        queries would count as two chunks, each with one list's credit."""
        fused: dict[str, float] = {}
        first: dict[str, NodeWithScore] = {}
        for nodes in results.values():
            for rank, n in enumerate(sorted(nodes, key=lambda x: x.score or 0.0, reverse=True)):
                first.setdefault(n.node.node_id, n)
                fused[n.node.node_id] = fused.get(n.node.node_id, 0.0) + 1.0 / (rank + 60.0)
        order = sorted(fused, key=lambda i: -fused[i])  # stable: ties keep the order first found
        return [NodeWithScore(node=first[i].node, score=fused[i]) for i in order]

    def retrieve_many(self, bundles: Sequence[QueryBundle]) -> list[list[NodeWithScore]]:
        """Every question in turn (each waits on its rewrites): a bar or log lines with an ETA."""
        return [self.retrieve(b) for b in progress(bundles, len(bundles), "rewrite", bar=self._show_progress)]


class LabHyDE(HyDEQueryTransform):
    """HyDE's transform with the passage from the lab's LLM and prompt file: the question keeps
    its words (BM25 reads them) and gains ``custom_embedding_strs`` [passage, question], whose
    embeddings the dense retriever averages. An empty passage leaves the question alone."""

    def __init__(self, llm: Any, prompt: Any) -> None:
        super().__init__(llm=as_llamaindex_llm(llm, prompt.version), include_original=True)
        self._lab_llm, self._lab_prompt = llm, prompt
        self.passages: dict[str, list[str]] = {}

    def _run(self, query_bundle: QueryBundle, metadata: dict) -> QueryBundle:
        q = query_bundle.query_str
        passage = self._lab_llm.chat(self._lab_prompt.messages(question=q), self._lab_prompt.version).text.strip()
        self.passages[q] = [passage] if passage else []
        return QueryBundle(query_str=q, custom_embedding_strs=[passage, q] if passage else [q])


class HyDERetriever(TransformRetriever):
    """The first stage over HyDE-transformed questions, with ``retrieve_many`` and ``rewrites``."""

    def __init__(self, base: BaseRetriever, cfg: QueryConfig, llm: Any, show_progress: bool = False,
                 prompt: Prompt | None = None) -> None:
        self._hyde = LabHyDE(llm, prompt or load_query_prompt(cfg))
        self._show_progress = show_progress
        super().__init__(retriever=base, query_transform=self._hyde)

    @property
    def rewrites(self) -> dict[str, list[str]]:
        return self._hyde.passages

    def retrieve_many(self, bundles: Sequence[QueryBundle]) -> list[list[NodeWithScore]]:
        return [self.retrieve(QueryBundle(query_str=b.query_str))
                for b in progress(bundles, len(bundles), "hyde", bar=self._show_progress)]


class CondenseRetriever(BaseRetriever):
    """The first stage over the standalone form of a follow-up question (see the module)."""

    def __init__(self, base: BaseRetriever, cfg: QueryConfig, llm: Any, prompt: Prompt | None = None) -> None:
        self._base, self._lab_llm = base, llm
        self._prompt = prompt or load_query_prompt(cfg)
        self.history: list[dict] = []  # the conversation before the question ({role, content})
        self.rewrites: dict[str, list[str]] = {}
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        q = query_bundle.query_str
        if not self.history:
            return self._base.retrieve(query_bundle)
        turns = "\n".join(f"{t['role']}: {t['content']}" for t in self.history)
        standalone = self._lab_llm.chat(self._prompt.messages(history=turns, question=q),
                                        self._prompt.version).text.strip().splitlines()
        rewritten = standalone[0].strip() if standalone and standalone[0].strip() else q
        self.rewrites[q] = [rewritten] if rewritten != q else []
        return self._base.retrieve(QueryBundle(query_str=rewritten))

    def retrieve_many(self, bundles: Sequence[QueryBundle]) -> list[list[NodeWithScore]]:
        return [self.retrieve(b) for b in bundles]


def wrap_retriever(base: Any, cfg: QueryConfig | None, llm: Any, top_k: int, show_progress: bool = False,
                   prompt: Prompt | None = None) -> Any:
    """The first stage as the experiment's ``query`` section makes it (unchanged without one);
    ``prompt`` is the one :func:`load_query_prompt` checked at start-up (None: loaded here)."""
    if cfg is None:
        return base
    if cfg.mode == "hyde":
        return HyDERetriever(base, cfg, llm, show_progress, prompt)
    if cfg.mode == "condense":
        return CondenseRetriever(base, cfg, llm, prompt)
    return MultiQueryRetriever(base, cfg, llm, top_k, show_progress, prompt)
