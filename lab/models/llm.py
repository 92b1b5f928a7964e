"""LLMs: one chat interface over local llama.cpp models and OpenAI (or compatible) servers,
behind a content cache.

Backends (:mod:`lab.models.backends`):

- ``llama_cpp``: a GGUF file (resolved by :func:`lab.models.resolve.resolve_gguf`) run in process with
  llama-cpp-python; JSON output is constrained by a grammar built from a JSON schema. The
  judge's calls reuse the longest cached token prefix between calls, so prompts that share a head
  (its rubric and question) evaluate it once; every other role starts each call from an empty
  cache, so that a reply depends on its prompt alone (``LlamaCppBackend``).
- ``openai``: LlamaIndex's ``OpenAI`` LLM (llama-index-llms-openai); ``openai_compatible``:
  ``OpenAILike`` against any base URL (Ollama, vLLM, llama.cpp's server). The OpenAI client
  retries 429/5xx/timeouts with exponential backoff (``max_retries``). A call that fails after
  them is an :class:`LLMCallError`, recorded by the caller; but when no call of this LLM has got
  through yet and the connection itself failed (refused, a name that does not resolve, a connect
  timeout), it is an :class:`LLMUnreachable`, which stops the command with the fix.

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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse, LLMMetadata
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback

from lab.caches import CallCache
from lab.errors import LabError
from lab.models.backends import Completion, build_backend
from lab.models.resolve import REMOTE, LLMPlan

log = logging.getLogger(__name__)

#: USD per million (input, output) tokens, for the cost columns of results.
PRICES = {
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
}


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


class LLMUnreachable(LabError):
    """A remote LLM that no call has reached yet refused the connection (or its name did not
    resolve, or the connection timed out): no network, a server that is down, a wrong base URL.
    Not recorded as a failed answer: the command stops (exit code 2) with the fix, since every
    other call would fail the same way."""


#: Exceptions that mean no connection was made (as opposed to a server that answered with an error).
_CONNECT_FAILURES = {"ConnectError", "ConnectTimeout", "ConnectionRefusedError", "gaierror"}


def connect_failure(exc: BaseException) -> BaseException | None:
    """The exception in ``exc``'s chain that says no connection was made, or None when a
    server answered (a 4xx/5xx, a timeout while reading, a reply that is not JSON)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ in _CONNECT_FAILURES:
            return exc  # httpx's ConnectError: "[Errno 111] Connection refused"
        exc = exc.__cause__ or exc.__context__
    return None


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
# The cache and the counting wrapper


#: Set in every worker of a parallel sweep or search (:mod:`lab.eval.parallel`) to the number of
#: workers: each then keeps 1/N of a remote LLM's ``concurrency``, a global limit across them.
SHARE_ENV = "LAB_LLM_SHARE"


def concurrency_share() -> int:
    """How many processes share each remote LLM's concurrency (1 outside a parallel run)."""
    try:
        return max(1, int(os.environ.get(SHARE_ENV, "1")))
    except ValueError:
        return 1


class LabLLM:
    """A backend behind the cache, with counters. Thread-safe (remote calls run concurrently)."""

    def __init__(self, plan: LLMPlan, cache: CallCache | None, backend: Any = None):
        self.plan = plan
        self.cache = cache
        self.backend = backend if backend is not None else build_backend(plan)
        self.usage = Usage(cost_usd=0.0 if self.price is not None else None)
        self._lock = threading.Lock()
        self._reached = False  # a computed call has succeeded: the server is reachable
        self._unreachable: LLMUnreachable | None = None  # set once no connection could be made

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
        """Requests in flight: a remote backend's ``concurrency``, divided among the processes that
        share it (``$LAB_LLM_SHARE``, set in the workers of a parallel sweep), so that together
        they keep the config's limit; a local model takes one call at a time."""
        if self.plan.cfg.backend not in REMOTE:
            return 1
        return max(1, self.plan.cfg.concurrency // concurrency_share())

    def key(self, messages: list[dict], prompt_version: str, schema: dict | None, temperature: float,
            seed: int, max_tokens: int | None = None, stop: list[str] | None = None) -> str:
        cfg = self.plan.cfg
        body = {
            "model": self.plan.fingerprint, "max_tokens": max_tokens or cfg.max_tokens, "temperature": temperature,
            "seed": seed, "prompt_version": prompt_version, "messages": messages, "schema": schema,
        }
        if stop:  # only then: every key made without one stays what it was
            body["stop"] = stop
        if cfg.backend == "llama_cpp":
            body["n_ctx"] = cfg.n_ctx  # a longer window can change a truncated prompt
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def cached(self, messages: list[dict], prompt_version: str, schema: dict | None, temperature: float | None,
               seed: int | None, max_tokens: int | None = None, stop: list[str] | None = None) -> bool:
        """Whether :meth:`chat`'s call with these arguments is in the cache: it then takes no model
        time (estimates count it out, the review queue reads it without running a model)."""
        temperature = self.plan.cfg.temperature if temperature is None else temperature
        seed = self.plan.cfg.seed if seed is None else seed
        key = self.key(messages, prompt_version, schema, temperature, seed, max_tokens, stop)
        return self.cache is not None and self.cache.get(key) is not None

    def _call(self, messages: list[dict], schema: dict | None, temperature: float, seed: int,
              max_tokens: int | None, head: int | None = None, stop: list[str] | None = None) -> Completion:
        """The backend's call. Remote backends retry ``max_retries`` times with exponential
        backoff (0.5 s, doubling, at most 8 s) on 429, 5xx, timeouts, lost connections, replies
        that are not valid JSON and empty answers; other errors (400, 401, 404) fail at once."""
        cfg = self.plan.cfg
        attempts = 1 + (cfg.max_retries if cfg.backend in REMOTE else 0)
        extra = {k: v for k, v in (("head", head), ("stop", stop)) if v}  # a backend without them is not given them
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                out = self.backend.chat(messages, schema, temperature, seed, max_tokens, **extra)
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
             temperature: float | None = None, seed: int | None = None, max_tokens: int | None = None,
             head: int | None = None, stop: list[str] | None = None) -> Completion:
        """One chat call; ``temperature``, ``seed`` and ``max_tokens`` default to the config's.
        ``head``: the last message's first ``head`` characters are shared by many calls (a
        prompt's fixed steps); a local model evaluates them once (``LlamaCppBackend.chat``). It is
        not part of the cache key: it changes the work, not the reply. ``stop``: strings that end
        a local model's reply where they first appear, left out of its text (a remote server's
        reply comes whole: see ``OpenAIBackend.chat``), in the cache key when given."""
        cfg = self.plan.cfg
        temperature = cfg.temperature if temperature is None else temperature
        seed = cfg.seed if seed is None else seed
        key = self.key(messages, prompt_version, schema, temperature, seed, max_tokens, stop)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                with self._lock:
                    self.usage.cached += 1
                return Completion(**{**hit, "cached": True})
        if self._unreachable is not None and not self._reached:
            raise self._unreachable
        try:
            out = self._call(messages, schema, temperature, seed, max_tokens, head, stop)
        except Exception as exc:  # recorded by the caller as a failed answer or judgement
            with self._lock:
                self.usage.failed += 1
            retries = f" after {cfg.max_retries} retries" if cfg.backend in REMOTE else ""
            cause = connect_failure(exc) if cfg.backend in REMOTE else None
            if cause is not None and not self._reached:
                self._unreachable = self._unreachable_error(cause, retries)
                raise self._unreachable from None
            msg = self._hide_key(f"{type(exc).__name__}: {exc}")
            raise LLMCallError(f"{self.plan.role} LLM ({cfg.model}) call failed{retries}: {msg[:500]}") from None
        if self.cache is not None:
            self.cache.put(key, {k: v for k, v in asdict(out).items() if k != "cached"})
        with self._lock:
            self._reached = True
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

    def _hide_key(self, text: str) -> str:
        return text.replace(self.plan.key, "***") if self.plan.key else text

    def _unreachable_error(self, cause: BaseException, retries: str) -> LLMUnreachable:
        """The stop of a command whose remote LLM could not be reached by its first call."""
        cfg = self.plan.cfg
        where = cfg.base_url or "https://api.openai.com/v1"
        reason = self._hide_key(f"{type(cause).__name__}: {cause}")[:300]
        return LLMUnreachable(
            f"{self.plan.role} LLM ({cfg.backend} {cfg.model} at {where}): no connection{retries} ({reason}); "
            "stopped before any answer was recorded, since every call would fail the same way",
            hint=f"check the network and that the server is up (for OpenAI, a proxy in HTTPS_PROXY if "
                 f"you need one), or correct the base_url of the config's {self.plan.role} LLM; finished work is "
                 "cached: run the same command again once the server answers")

    def choice_logprobs(self, messages: list[dict], prompt_version: str, prefix: str, choices: list[str]
                        ) -> dict[str, float]:
        """``{choice: log P(choice)}`` for the next token after ``messages`` and the reply's
        start ``prefix`` (local models; see ``LlamaCppBackend.choice_logprobs``), cached like a
        chat call: the key holds the model, prompt version, messages, prefix and choices."""
        if not hasattr(self.backend, "choice_logprobs"):
            raise LLMCallError(f"{self.plan.role} LLM ({self.plan.cfg.model}): backend {self.plan.cfg.backend!r} "
                               "gives no next-token probabilities; use judge.method: rubric")
        body = {"kind": "choice_logprobs", "model": self.plan.fingerprint, "prompt_version": prompt_version,
                "messages": messages, "prefix": prefix, "choices": choices, "n_ctx": self.plan.cfg.n_ctx}
        key = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                with self._lock:
                    self.usage.cached += 1
                return json.loads(hit["text"])
        try:
            out = self.backend.choice_logprobs(messages, prefix, choices)
        except LabError:
            raise
        except Exception as exc:
            with self._lock:
                self.usage.failed += 1
            raise LLMCallError(f"{self.plan.role} LLM ({self.plan.cfg.model}) call failed: "
                               f"{type(exc).__name__}: {str(exc)[:500]}") from None
        if self.cache is not None:
            self.cache.put(key, {k: v for k, v in asdict(out).items() if k != "cached"})
        with self._lock:
            self.usage.calls += 1
            self.usage.prompt_tokens += out.prompt_tokens
            self.usage.seconds += out.seconds
        return json.loads(out.text)


def build_llm(plan: LLMPlan, cache_root: Path | None) -> LabLLM:
    cache = CallCache(cache_root / "llm.sqlite") if cache_root else None
    return LabLLM(plan, cache)


def as_llamaindex_llm(llm: LabLLM, prompt_version: str = "raw") -> Any:
    """The cached LLM as a LlamaIndex ``LLM`` (for the response synthesizer and ragas)."""

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

    return _Adapter(callback_manager=CallbackManager([]))
