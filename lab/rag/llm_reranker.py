"""The LLM pointwise reranker: a local GGUF LLM reads question and passage together and scores
log P(yes) - log P(no) to "is this passage relevant?" (prompt ``relevance-yesno-v1``).

Registered as ``llm_pointwise`` in :data:`lab.rag.postprocess.RERANKERS`. Scores are cached by
content (model fingerprint, prompt version, question, passage), so a rerun makes no model call.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from lab.errors import LabError
from lab.models.backends import eval_reusing_prefix, llama_class
from lab.models.resolve import model_fingerprint
from lab.prompts import load_prompt

#: The prompt file (``lab/prompts/relevance-yesno-v1.txt``); its name is part of every score's key.
PROMPT_VERSION = "relevance-yesno-v1"


class LlamaCppRelevanceScorer:
    """Scores (question, passage) with a local GGUF model in one forward pass per pair.

    The prompt puts the question before the passage, so the tokens shared by every candidate
    of a question (instruction and question) stay in the KV cache and are evaluated once.
    """

    def __init__(self, model_path: str, n_ctx: int = 1024, n_threads: int | None = None):
        self.prompt_file = load_prompt(PROMPT_VERSION, {"question", "passage"}, where="reranker prompt")
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.fingerprint = f"{os.path.basename(model_path)}:{model_fingerprint(model_path)}:{PROMPT_VERSION}"
        self._llm = None
        self.tokens_evaluated = 0

    def _load(self) -> Any:
        if self._llm is None:
            try:
                Llama = llama_class()
            except ImportError:
                raise LabError(
                    "reranker 'llm_pointwise' needs llama-cpp-python",
                    hint="run `make venv`, which builds it (portable CPU build, ~8 min on 2 cores)",
                ) from None
            self._llm = Llama(
                model_path=self.model_path,
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_batch=512,
                logits_all=False,
                verbose=False,
            )
            template = self._llm.metadata.get("tokenizer.chat_template", "")
            if "<|im_start|>" not in template:
                raise LabError(
                    f"{self.model_path}: reranker 'llm_pointwise' needs a ChatML model "
                    "(<|im_start|> chat template), and this GGUF has another template",
                    hint="use qwen2.5-coder-1.5b-instruct, smollm2-135m-instruct or another ChatML GGUF",
                )
            tok = lambda s: self._llm.tokenize(s.encode(), add_bos=False, special=False)[0]  # noqa: E731
            self._yes = sorted({tok(w) for w in ("yes", "Yes", " yes", " Yes")})
            self._no = sorted({tok(w) for w in ("no", "No", " no", " No")})
        return self._llm

    def prompt(self, question: str, passage: str) -> str:
        system, user = self.prompt_file.messages(question=question.strip(), passage=passage.strip())
        return (
            f"<|im_start|>system\n{system['content']}<|im_end|>\n"
            f"<|im_start|>user\n{user['content']}<|im_end|>\n<|im_start|>assistant\n"
        )

    def score(self, question: str, passage: str) -> float:
        llm = self._load()
        tokens = llm.tokenize(self.prompt(question, passage).encode(), add_bos=False, special=True)
        limit = self.n_ctx - 1
        if len(tokens) > limit:  # keep the head and the answer cue
            tokens = tokens[: limit - 16] + tokens[-16:]
        common = eval_reusing_prefix(llm, tokens)
        self.tokens_evaluated += len(tokens) - common
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        return float(_logsumexp(logits[self._yes]) - _logsumexp(logits[self._no]))


def _logsumexp(x: np.ndarray) -> float:
    m = float(np.max(x))
    return m + float(np.log(np.sum(np.exp(x - m))))


class LLMPointwiseReranker(BaseNodePostprocessor):
    """Reorders nodes by an LLM's relevance score; keeps ``top_n``. Scores are cached by content.

    With ``first_stage_weight`` set, the run wraps it in :class:`lab.rag.postprocess.FusedReranker`,
    as it does a cross-encoder, so that a weak LLM adds its signal to the first stage's instead of
    replacing it.
    """

    top_n: int = Field(default=3)
    max_passage_chars: int = Field(default=1500)
    _scorer: Any = PrivateAttr()
    _cache: Any = PrivateAttr(default=None)
    counters: dict = Field(default_factory=lambda: {"computed": 0, "cached": 0})

    def __init__(self, scorer: Any, cache: Any = None, **kwargs: Any):
        super().__init__(**kwargs)
        self._scorer = scorer
        self._cache = cache

    @classmethod
    def class_name(cls) -> str:
        return "LLMPointwiseReranker"

    def _key(self, question: str, passage: str) -> str:
        body = f"{self._scorer.fingerprint}\x00{question}\x00{passage}"
        return hashlib.sha256(body.encode()).hexdigest()

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("LLMPointwiseReranker needs the query")
        question = query_bundle.query_str
        passages = [n.node.get_content()[: self.max_passage_chars] for n in nodes]
        keys = [self._key(question, p) for p in passages]
        found = self._cache.get_many(keys) if self._cache else {}
        scores = []
        for key, passage in zip(keys, passages):
            if key in found:
                scores.append(float(found[key][0]))
                self.counters["cached"] += 1
                continue
            s = self._scorer.score(question, passage)
            self.counters["computed"] += 1
            if self._cache:
                self._cache.put_many({key: np.array([s], dtype=np.float32)})
            scores.append(float(np.float32(s)))  # the precision the cache keeps
        order = sorted(range(len(nodes)), key=lambda i: -scores[i])  # stable: ties keep retrieval order
        return [NodeWithScore(node=nodes[i].node, score=scores[i]) for i in order[: self.top_n]]
