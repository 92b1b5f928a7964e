"""Config sections of answering: the LLMs, the context builder, the judge and ragas.

Part of the experiment schema in :mod:`lab.config` (which re-exports these classes).
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")



class LLMConfig(Strict):
    """One LLM: a local GGUF through llama.cpp (the default), OpenAI, or any OpenAI-compatible
    server. Keys come from the environment or a ``.env`` file, never from configs."""

    backend: Literal["llama_cpp", "openai", "openai_compatible"] = "llama_cpp"
    model: str = Field("qwen2.5-coder-1.5b-instruct", description="GGUF name or path; or the remote model name.")
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int = Field(256, gt=0, description="Cap on output tokens per call.")
    seed: int = 0
    n_ctx: int = Field(4096, gt=0, description="llama_cpp: context window in tokens.")
    n_threads: int | None = Field(None, gt=0, description="llama_cpp: CPU threads (default: all cores).")
    base_url: str | None = Field(None, description="openai_compatible (required) or openai: the API base URL.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the key.")
    concurrency: int = Field(4, gt=0, description="Remote backends: requests in flight.")
    max_retries: int = Field(5, ge=0, description="Remote backends: retries with backoff on 429/5xx/timeouts.")
    timeout_s: float = Field(60.0, gt=0)
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
    n: int | None = Field(None, gt=0)


class CharBudgetContext(Strict):
    """Relevance-prioritised truncation to a character budget (see lab.context)."""

    name: Literal["char_budget"]
    max_chars: int = Field(5000, gt=0)


class TokenBudgetContext(Strict):
    """Numbered passages while they fit a token budget (tiktoken, offline)."""

    name: Literal["token_budget"]
    max_tokens: int = Field(3000, gt=0)
    encoding: str = "cl100k_base"


ContextConfig = Annotated[
    Union[TopNContext, CharBudgetContext, TokenBudgetContext], Field(discriminator="name")
]


class GenerationConfig(Strict):
    llm: LLMConfig = Field(default_factory=LLMConfig)
    context: ContextConfig = Field(default_factory=lambda: TopNContext(name="top_n"))
    prompt: str = Field("answer-grounded-v1", description="A prompt file in lab/prompts (without .txt).")


class JudgeConfig(Strict):
    llm: LLMConfig = Field(default_factory=lambda: LLMConfig(max_tokens=160))
    prompt: str = Field("judge-v1", description="A prompt file in lab/prompts (without .txt).")
    calibration: bool = Field(
        True, description="Also judge each reference answer as the answer (should score high) and "
        "another question's reference (should score 1), and report the separation.",
    )
    max_attempts: int = Field(3, gt=0, description="Tries per judgement before it is recorded as failed.")


class RagasConfig(Strict):
    metrics: list[Literal["faithfulness", "answer_relevancy", "context_precision", "context_recall"]] = Field(
        default_factory=lambda: ["faithfulness", "answer_relevancy", "context_precision", "context_recall"]
    )
    limit: int | None = Field(5, gt=0, description="Questions scored (a seeded sample); None: all.")
    seed: int = 13
