"""The answering sections of an experiment: an LLM (local GGUF or remote), the context
builders, the generation section and the query section (rewrites, HyDE, condense)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from lab.config.components import Strict


class LLMConfig(Strict):
    """One LLM: a local GGUF through llama.cpp (the default), OpenAI, or any OpenAI-compatible
    server. Keys come from the environment or a ``.env`` file, never from configs."""

    backend: Literal["llama_cpp", "openai", "openai_compatible"] = "llama_cpp"
    """llama_cpp: a local GGUF file in this process (JSON held to its schema by a grammar); openai:
    OpenAI's API (the key from ``api_key_env`` or ``.env``); openai_compatible: any server that
    speaks OpenAI's API (Ollama, vLLM, llama.cpp's server) at ``base_url``."""
    model: str = Field("qwen2.5-coder-1.5b-instruct", description="llama_cpp: a packaged GGUF name "
                       "(qwen2.5-coder-1.5b-instruct, sha256-verified; smollm2-135m-instruct for plumbing) or a "
                       ".gguf path; remote backends: the model's name on the server (e.g. gpt-4.1-nano).")
    temperature: float = Field(0.0, ge=0, le=2)
    """Sampling temperature; 0: greedy decoding. Part of each call's cache key."""
    max_tokens: int = Field(256, gt=0, description="Cap on output tokens per call.")
    seed: int = 0
    """Sampling seed, sent with every call (part of each call's cache key); repeats use seeds 1..k."""
    n_ctx: int = Field(4096, gt=0, description="llama_cpp: context window in tokens.")
    n_threads: int | None = Field(None, gt=0, description="llama_cpp: CPU threads (default: all cores).")
    base_url: str | None = Field(None, description="openai_compatible (required) or openai: the API base URL.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the key.")
    concurrency: int = Field(4, gt=0, description="Remote backends: requests in flight.")
    max_retries: int = Field(5, ge=0, description="Remote backends: retries with backoff on 429/5xx/timeouts.")
    timeout_s: float = Field(60.0, gt=0)
    """Remote backends: seconds before a request times out (then it is retried)."""
    price_per_mtok: tuple[float, float] | None = Field(
        None, description="USD per million (input, output) tokens; known OpenAI models have defaults."
    )

    @model_validator(mode="after")
    def _backend_fields(self) -> "LLMConfig":
        if self.backend == "openai_compatible" and not self.base_url:
            raise ValueError("backend 'openai_compatible' needs base_url (e.g. http://localhost:11434/v1)")
        if self.backend == "llama_cpp" and self.base_url:
            raise ValueError("base_url is for remote backends; backend 'llama_cpp' runs a local GGUF file")
        return self


class TopNContext(Strict):
    """Concatenate the top ``n`` passages (all of them when ``n`` is unset)."""

    name: Literal["top_n"]
    """Picks this context builder."""
    n: int | None = Field(None, gt=0)
    """Passages concatenated, in the final order; null: all the retrieved ones."""


class CharBudgetContext(Strict):
    """Relevance-prioritised truncation to a character budget (see lab.rag.context)."""

    name: Literal["char_budget"]
    """Picks this context builder: it trusts the (reranked) order. A first passage over the budget
    is cut and sent alone; otherwise passages are added whole while they fit, stopping at the
    first that does not."""
    max_chars: int = Field(5000, gt=0)
    """The budget, in characters of passage text."""


class TokenBudgetContext(Strict):
    """Numbered passages while they fit a token budget (tiktoken, offline)."""

    name: Literal["token_budget"]
    """Picks this context builder: the same rule as char_budget, counted in tokens."""
    max_tokens: int = Field(3000, gt=0)
    """The budget, in tokens of passage text."""
    encoding: str = "cl100k_base"
    """The tiktoken encoding that counts them (cl100k_base ships offline)."""


ContextConfig = Annotated[
    Union[TopNContext, CharBudgetContext, TokenBudgetContext], Field(discriminator="name")
]


class GenerationConfig(Strict):
    """Answers: the LLM that writes them, the context it reads, and the prompt. Passages are
    numbered with their source, so answers can cite them as ``[n]``."""

    llm: LLMConfig = Field(default_factory=LLMConfig)
    """The generator."""
    context: ContextConfig = Field(default_factory=lambda: TopNContext(name="top_n"))
    """How the final passages become the context the generator reads."""
    prompt: str = Field("answer-grounded-v1", description="A prompt file in lab/prompts (without .txt).")
    repeats: int | None = Field(
        None, ge=2, le=20, description="Answer every question this many times (seeds 1..k at the repeats' "
        "temperature); with judge.repeats, judge variance and answer variance are reported apart. null: once.")


class QueryConfig(Strict):
    """Query-side rewriting before the first stage; LLM calls are cached by content.

    - ``multi_query``: the LLM writes ``rewrites`` other phrasings of each question; the first
      stage runs for the question and each rewrite, and the lists are fused by reciprocal rank
      (LlamaIndex's ``QueryFusionRetriever``, k = 60), top_k kept.
    - ``hyde``: the LLM writes a passage that would answer the question (HyDE, LlamaIndex's
      ``HyDEQueryTransform``); the dense side searches with the mean of the passage's and the
      question's embeddings, BM25 with the question.
    - ``condense``: in a conversation (``lab ask``), the LLM rewrites a follow-up question into a
      standalone one from the turns before it, and that is what is searched (the answer still
      sees the question and the turns); a question without turns before it is searched as asked."""

    mode: Literal["multi_query", "hyde", "condense"] = "multi_query"
    """multi_query: rewrites searched beside the question, fused by rank; hyde: the dense side
    searches with a written answer's embedding averaged with the question's; condense: follow-ups
    in ``lab ask`` rewritten into standalone questions (no LLM call in an evaluation). What the LLM
    wrote is recorded per question (``query_rewrites``); its calls count under ``llm_usage.query``."""
    rewrites: int = Field(3, ge=1, le=8, description="multi_query: rewrites per question (the question is searched too).")
    prompt: str | None = Field(None, description="A prompt file in lab/prompts (without .txt); default "
                               "multi-query-v1, hyde-v1 or condense-v1.")
    llm: LLMConfig = Field(default_factory=lambda: LLMConfig(max_tokens=128))
    """The LLM that writes the rewrites, passages or standalone questions."""

    @property
    def prompt_name(self) -> str:
        return self.prompt or {"multi_query": "multi-query-v1", "hyde": "hyde-v1", "condense": "condense-v1"}[self.mode]
