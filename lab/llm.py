"""LLMs: one chat interface over local llama.cpp models and OpenAI (or compatible) servers,
behind a content cache.

Backends (:mod:`lab.backends`):

- ``llama_cpp``: a GGUF file (resolved by :func:`lab.models.resolve_gguf`) run in process with
  llama-cpp-python; JSON output is constrained by a grammar built from a JSON schema. The
  model reuses the longest cached token prefix between calls, so prompts that share a head
  (the judge's rubric and question) evaluate it once.
- ``openai``: LlamaIndex's ``OpenAI`` LLM (llama-index-llms-openai); ``openai_compatible``:
  ``OpenAILike`` against any base URL (Ollama, vLLM, llama.cpp's server). The OpenAI client
  retries 429/5xx/timeouts with exponential backoff (``max_retries``).

:class:`LabLLM` caches every call in SQLite by (backend, model, parameters, prompt version,
full messages, schema): re-running an unchanged experiment makes no model call, and an
interrupted one resumes from what was stored (each call commits on its own). It counts calls,
cache hits, tokens, seconds and, for priced models, cost.

Keys come from the environment or the project's ``.env`` file, never from configs, and are
never written into results or messages.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import ConfigError, LabError
from lab.store import SqliteStore

log = logging.getLogger(__name__)

#: USD per million (input, output) tokens, for the cost columns of results.
PRICES = {
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
}
REMOTE = {"openai", "openai_compatible"}


class EmptyAnswer(Exception):
    """A remote server answered with no text."""


def _retryable(exc: Exception) -> bool:
    """Worth another try: rate limits, server errors, timeouts, lost connections, unreadable replies."""
    status = getattr(exc, "status_code", None)
    if status is not None:
        return status == 429 or status >= 500
    names = {type(e).__name__ for e in (exc, exc.__cause__, exc.__context__) if e is not None}
    return isinstance(exc, (json.JSONDecodeError, ValueError, KeyError, TimeoutError, ConnectionError)) or bool(
        names & {"JSONDecodeError", "APIResponseValidationError", "ValidationError", "APITimeoutError",
                 "APIConnectionError", "ReadTimeout", "ConnectTimeout", "RemoteProtocolError"})


class LLMCallError(LabError):
    """A model call that failed (after the backend's retries); the run records it and goes on."""

    exit_code = 1


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float  # model time when computed (the original call's time when cached)
    finish_reason: str | None = None
    cached: bool = False


@dataclass
class Usage:
    """Counters of one role (generation, judge, ...)."""

    calls: int = 0  # computed by the model
    cached: int = 0  # served from the cache
    failed: int = 0  # calls that raised (after the backend's own retries)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0  # model time of the computed calls
    cost_usd: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# Keys and start-up checks


def read_dotenv(path: Path) -> dict[str, str]:
    """``KEY=value`` lines of a ``.env`` file (``export``, quotes and comments allowed)."""
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key.strip()] = value
    return out


def api_key(cfg: Any, project_root: Path | None) -> str | None:
    key = os.environ.get(cfg.api_key_env)
    if not key and project_root is not None:
        key = read_dotenv(project_root / ".env").get(cfg.api_key_env)
    return key or None


@dataclass(frozen=True)
class LLMPlan:
    """An LLM config with its model resolved and its key found (nothing loaded yet)."""

    cfg: Any
    role: str  # "generation", "judge": names it in messages and results
    location: str  # GGUF path, or the remote model name
    fingerprint: str
    key: str | None = field(default=None, repr=False)

    def describe(self) -> dict:
        c = self.cfg
        return {
            "backend": c.backend, "model": c.model, "location": self.location, "fingerprint": self.fingerprint,
            "temperature": c.temperature, "max_tokens": c.max_tokens, "seed": c.seed,
            **({"n_ctx": c.n_ctx} if c.backend == "llama_cpp" else {"base_url": c.base_url}),
        }


def resolve_llm(cfg: Any, role: str, project_root: Path | None) -> LLMPlan:
    """Check an LLM config at start-up: the GGUF exists (sha-verified) or the key is set."""
    from lab.models import model_fingerprint, resolve_gguf

    if cfg.backend == "llama_cpp":
        path = resolve_gguf(cfg.model)
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise LabError(
                f"{role}.llm: backend 'llama_cpp' needs llama-cpp-python",
                hint="run `make venv`, which builds it (portable CPU build, ~8 min on 2 cores)",
            ) from None
        return LLMPlan(cfg, role, str(path), f"{path.name}:{model_fingerprint(str(path))}")
    key = api_key(cfg, project_root)
    if cfg.backend == "openai" and not key:
        raise ConfigError(
            f"{role}.llm: model {cfg.model!r} uses the OpenAI API, and {cfg.api_key_env} is not set",
            hint=f"export {cfg.api_key_env}=... or put it in .env at the project root; or use "
            f"backend: llama_cpp (a local model, the default) for {role}",
        )
    where = cfg.base_url or "https://api.openai.com/v1"
    if cfg.backend == "openai_compatible":
        _probe(cfg.base_url, role)
    return LLMPlan(cfg, role, cfg.model, f"{cfg.backend}:{where}:{cfg.model}", key)


def _probe(base_url: str, role: str) -> None:
    """Stop at start-up when an OpenAI-compatible server does not accept connections."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(base_url)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=2).close()
    except OSError as exc:
        raise ConfigError(
            f"{role}.llm: the server at {base_url} does not answer ({exc.strerror or exc})",
            hint="start it (e.g. `ollama serve`), or correct base_url in the config",
        ) from None


# ---------------------------------------------------------------------------------------------
# The cache and the counting wrapper


class CallCache(SqliteStore):
    """Content-addressed store of LLM responses (SQLite, WAL; one commit per call)."""

    schema = "calls (key TEXT PRIMARY KEY, body TEXT NOT NULL)"

    def get(self, key: str) -> dict | None:
        row = self._conn().execute("SELECT body FROM calls WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, body: dict) -> None:
        conn = self._conn()
        with conn:
            conn.execute("INSERT OR REPLACE INTO calls (key, body) VALUES (?, ?)", (key, json.dumps(body)))


class LabLLM:
    """A backend behind the cache, with counters. Thread-safe (remote calls run concurrently)."""

    def __init__(self, plan: LLMPlan, cache: CallCache | None, backend: Any = None):
        self.plan = plan
        self.cache = cache
        self.backend = backend if backend is not None else build_backend(plan)
        self.usage = Usage(cost_usd=0.0 if self.price is not None else None)
        self._lock = threading.Lock()

    @property
    def price(self) -> tuple[float, float] | None:
        cfg = self.plan.cfg
        if cfg.price_per_mtok is not None:
            return tuple(cfg.price_per_mtok)
        if cfg.backend == "llama_cpp":
            return (0.0, 0.0)
        return PRICES.get(cfg.model) if cfg.backend == "openai" else None

    @property
    def concurrency(self) -> int:
        return self.plan.cfg.concurrency if self.plan.cfg.backend in REMOTE else 1

    def key(self, messages: list[dict], prompt_version: str, schema: dict | None, temperature: float,
            seed: int, max_tokens: int | None = None) -> str:
        cfg = self.plan.cfg
        body = {
            "model": self.plan.fingerprint, "max_tokens": max_tokens or cfg.max_tokens, "temperature": temperature,
            "seed": seed, "prompt_version": prompt_version, "messages": messages, "schema": schema,
        }
        if cfg.backend == "llama_cpp":
            body["n_ctx"] = cfg.n_ctx  # a longer window can change a truncated prompt
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def _call(self, messages: list[dict], schema: dict | None, temperature: float, seed: int,
              max_tokens: int | None) -> Completion:
        """The backend's call. Remote backends retry ``max_retries`` times with exponential
        backoff (0.5 s, doubling, at most 8 s) on 429, 5xx, timeouts, lost connections, replies
        that are not valid JSON and empty answers; other errors (400, 401, 404) fail at once."""
        cfg = self.plan.cfg
        attempts = 1 + (cfg.max_retries if cfg.backend in REMOTE else 0)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                out = self.backend.chat(messages, schema, temperature, seed, max_tokens)
            except Exception as exc:
                if last or not _retryable(exc):
                    raise
                log.info("%s LLM call failed (%s), retry %d of %d", self.plan.role, type(exc).__name__,
                         attempt + 1, attempts - 1)
            else:
                if out.text.strip() or cfg.backend not in REMOTE:
                    return out
                if last:
                    raise EmptyAnswer(f"the server returned an empty answer {attempts} times")
            time.sleep(min(8.0, 0.5 * 2 ** attempt))
        raise AssertionError("unreachable")

    def chat(self, messages: list[dict], prompt_version: str, schema: dict | None = None,
             temperature: float | None = None, seed: int | None = None, max_tokens: int | None = None
             ) -> Completion:
        """One chat call; ``temperature``, ``seed`` and ``max_tokens`` default to the config's."""
        cfg = self.plan.cfg
        temperature = cfg.temperature if temperature is None else temperature
        seed = cfg.seed if seed is None else seed
        key = self.key(messages, prompt_version, schema, temperature, seed, max_tokens)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                with self._lock:
                    self.usage.cached += 1
                return Completion(**{**hit, "cached": True})
        try:
            out = self._call(messages, schema, temperature, seed, max_tokens)
        except Exception as exc:  # recorded by the caller as a failed answer or judgement
            with self._lock:
                self.usage.failed += 1
            msg = f"{type(exc).__name__}: {exc}"
            if self.plan.key:
                msg = msg.replace(self.plan.key, "***")
            retries = f" after {cfg.max_retries} retries" if cfg.backend in REMOTE else ""
            raise LLMCallError(f"{self.plan.role} LLM ({cfg.model}) call failed{retries}: {msg[:500]}") from None
        if self.cache is not None:
            self.cache.put(key, {k: v for k, v in asdict(out).items() if k != "cached"})
        with self._lock:
            u = self.usage
            u.calls += 1
            u.prompt_tokens += out.prompt_tokens
            u.completion_tokens += out.completion_tokens
            u.seconds += out.seconds
            if self.price is not None:
                u.cost_usd = (u.cost_usd or 0.0) + (
                    out.prompt_tokens * self.price[0] + out.completion_tokens * self.price[1]
                ) / 1e6
        return out


def build_backend(plan: LLMPlan) -> Any:
    from lab.backends import LlamaCppBackend, OpenAIBackend

    return LlamaCppBackend(plan) if plan.cfg.backend == "llama_cpp" else OpenAIBackend(plan)


def build_llm(plan: LLMPlan, cache_root: Path | None) -> LabLLM:
    cache = CallCache(cache_root / "llm.sqlite") if cache_root else None
    return LabLLM(plan, cache)


def as_llamaindex_llm(llm: LabLLM, prompt_version: str = "raw") -> Any:
    """The cached LLM as a LlamaIndex ``LLM`` (for the response synthesizer and ragas)."""
    from llama_index.core.base.llms.types import (
        ChatMessage, ChatResponse, CompletionResponse, LLMMetadata,
    )
    from llama_index.core.llms import CustomLLM
    from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback

    class _Adapter(CustomLLM):
        @property
        def metadata(self) -> LLMMetadata:
            cfg = llm.plan.cfg
            return LLMMetadata(context_window=cfg.n_ctx, num_output=cfg.max_tokens, is_chat_model=True,
                               model_name=cfg.model)

        @llm_chat_callback()
        def chat(self, messages: list[ChatMessage], **kwargs: Any) -> ChatResponse:
            out = llm.chat([{"role": m.role.value, "content": m.content or ""} for m in messages], prompt_version)
            return ChatResponse(message=ChatMessage(role="assistant", content=out.text))

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            out = llm.chat([{"role": "user", "content": prompt}], prompt_version)
            return CompletionResponse(text=out.text)

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            text = self.complete(prompt).text
            yield CompletionResponse(text=text, delta=text)

    from llama_index.core.callbacks import CallbackManager

    return _Adapter(callback_manager=CallbackManager([]))
