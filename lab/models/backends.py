"""LLM backends behind :class:`lab.models.llm.LabLLM`: one ``chat`` call each.

- :class:`LlamaCppBackend`: a GGUF file run in process with llama-cpp-python; JSON output held
  to a schema by a grammar.
- :class:`OpenAIBackend`: OpenAI (LlamaIndex's ``OpenAI``) or any OpenAI-compatible server
  (``OpenAILike``); :meth:`lab.models.llm.LabLLM.chat` retries 429/5xx/timeouts with exponential
  backoff.

This module is the lab's one import site of ``llama_cpp`` (:func:`llama_class`): the OpenMP
runtime llama.cpp links reads ``OMP_WAIT_POLICY`` when it loads, so the setting must come
first, and a test fails if any other module imports ``llama_cpp``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from lab.errors import LabError
from lab.models.resolve import LLMPlan


def eval_reusing_prefix(llm: Any, tokens: list[int]) -> int:
    """Evaluate ``tokens`` on a loaded ``Llama``, reusing the longest prefix its KV cache already
    holds (at least the last token is evaluated, so its logits are fresh); returns that prefix's
    length. The LLM reranker and probability-weighted judging both score this way."""
    cached = llm.input_ids[: llm.n_tokens].tolist()
    common = 0
    for a, b in zip(cached, tokens):
        if a != b:
            break
        common += 1
    llm.n_tokens = min(common, len(tokens) - 1)
    llm.eval(tokens[llm.n_tokens :])
    return common


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float  # model time when computed (the original call's time when cached)
    finish_reason: str | None = None
    cached: bool = False


def llama_class() -> type:
    """``llama_cpp.Llama``, imported with its OpenMP threads waiting passively.

    llama.cpp's OpenMP threads spin at every barrier by default; when another process holds a
    core (a 2-core machine running tests beside an experiment) one call then takes 10-100x
    longer (a SmolLM2 call: 41.7 s spinning, 1.0 s passive). The setting is read when the
    OpenMP runtime that llama.cpp links loads, i.e. at this import; idle, it costs ~5%.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from llama_cpp import Llama  # heavy, optional, and must follow the line above: imported on first use

    return Llama


#: The roles whose chat calls reuse the token prefix the previous call left in llama.cpp's KV
#: cache (see :class:`LlamaCppBackend`); every other role starts each call from an empty cache.
PREFIX_REUSE_ROLES = frozenset({"judge"})
#: How many of the likeliest tokens a choice-first reply tries for one that continues a choice.
CHOICE_SEARCH = 2000


def _enum_first(schema: dict | None) -> bool:
    """A schema of string fields, all required, whose first holds an ``enum`` of strings."""
    if not schema or schema.get("type") != "object":
        return False
    props = list((schema.get("properties") or {}).values())
    return (len(props) >= 2 and set(schema.get("required", [])) == set(schema["properties"])
            and all(p.get("type") == "string" for p in props) and bool(props[0].get("enum"))
            and all(isinstance(o, str) and '"' not in o and "\\" not in o for o in props[0]["enum"])
            and not any("enum" in p for p in props[1:]))


def _whole_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _chatml(llm: Any) -> bool:
    return "<|im_start|>" in llm.metadata.get("tokenizer.chat_template", "")


#: A head shorter than this is evaluated with the rest (its state would save nothing).
MIN_HEAD_TOKENS = 32
#: Head states kept per model (about 30 KB a token for Qwen2.5-1.5B: ~5 MB for a 170-token head).
MAX_HEADS = 16


class LlamaCppBackend:
    """A local GGUF model; loaded on the first call that the cache cannot answer.

    llama.cpp can reuse the longest token prefix a call shares with the previous one. That is
    what makes the judge fast (its rubric, and a question's three judgements, share long
    prefixes), but the numbers of a prefix evaluated in another batch differ in the last bits:
    in a check of 24 judge calls, 3 feedback texts (no score) came out differently with and
    without reuse. So only the judge reuses prefixes (:data:`PREFIX_REUSE_ROLES`); every other
    role (answers, query rewrites, summaries, ``lab generate``'s questions and grounding checks)
    starts each call from an empty cache, and with greedy decoding (temperature 0) or a seed set
    per call its output depends on its prompt alone, i.e. on its cache key: not on which call came
    before, nor on which calls an interrupted run had cached. ``lab generate`` reused prefixes
    until it was found that a rerun after a kill wrote a different excerpt (span end 283 for 282)
    than an uninterrupted run, and then, its choices diverging, computed calls anew.

    What it can reuse safely is a *fixed* head: a caller that names one (``head``: the first
    characters of the last message, the same in many calls) gets the head's tokens evaluated
    alone, once, and their state restored before each later call; a call's bits then depend on
    its prompt alone again, since the head is always one batch and the rest another, whether the
    head was just evaluated or restored (a real-model test checks the replies in both orders).
    ``lab generate``'s question prompts name their steps and task as the head: about a third of
    a prompt, evaluated once per task instead of once per candidate.
    """

    def __init__(self, plan: LLMPlan):
        self.plan = plan
        self.reuse_prefix = plan.role in PREFIX_REUSE_ROLES
        self._llm: Any = None
        self._lock = threading.Lock()
        self._heads: dict[tuple[int, ...], Any] = {}  # head tokens -> llama.cpp state after them

    def load(self) -> Any:
        """Load the model now (it otherwise loads at its first call): benches time the work, not the load."""
        return self._load()

    def _load(self) -> Any:
        if self._llm is None:
            cfg = self.plan.cfg
            self._llm = llama_class()(
                model_path=self.plan.location,
                n_ctx=cfg.n_ctx,
                n_threads=cfg.n_threads or os.cpu_count() or 1,
                n_batch=512,
                seed=cfg.seed,
                verbose=False,
            )
        return self._llm

    def chat(self, messages: list[dict], schema: dict | None, temperature: float, seed: int,
             max_tokens: int | None = None, head: int | None = None, stop: list[str] | None = None) -> Completion:
        """One chat completion. ``head``: the last message's first ``head`` characters are the same
        in many calls (a prompt's steps and task, before its document); their tokens are evaluated
        on their own, once, and their KV state restored for every later call that starts with
        them (:meth:`_start_at_head`). ``stop``: the reply ends where one of these first appears
        (left out of its text)."""
        with self._lock:  # one llama.cpp context: calls run one at a time
            llm = self._load()
            kwargs: dict[str, Any] = {}
            if schema is not None:
                kwargs["response_format"] = {"type": "json_object", "schema": schema}
            if stop:
                kwargs["stop"] = stop
            t0 = time.perf_counter()
            if not stop and not self.reuse_prefix and temperature == 0 and _enum_first(schema) and _chatml(llm):
                return self._choice_first(llm, messages, schema, seed, max_tokens or self.plan.cfg.max_tokens, head, t0)
            if not self.reuse_prefix:
                llm.reset()
            if head and not self.reuse_prefix:
                # the chat handler renders and tokenizes the messages, then calls generate: the
                # tokens are known there, and the head's state is put in place before it evaluates
                plain = llm.generate

                def generate(tokens: Any, **kw: Any) -> Any:
                    self._start_at_head(llm, list(tokens), messages[-1]["content"][:head])
                    return plain(tokens, **kw)

                llm.generate = generate
            try:
                out = llm.create_chat_completion(
                    messages=messages, temperature=temperature, max_tokens=max_tokens or self.plan.cfg.max_tokens,
                    seed=seed, **kwargs,
                )
            finally:
                llm.__dict__.pop("generate", None)
            seconds = time.perf_counter() - t0
        usage = out.get("usage") or {}
        choice = out["choices"][0]
        return Completion(
            text=choice["message"].get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=seconds,
            finish_reason=choice.get("finish_reason"),
        )

    def _choice_first(self, llm: Any, messages: list[dict], schema: dict, seed: int, max_tokens: int,
                      head: int | None, t0: float) -> Completion:
        """A JSON reply whose first field is one of a list of strings (``lab generate``'s excerpt,
        held to the window's sentences), greedy, written with fewer model steps than a grammar
        takes: the model writes the choice token by token only where the choices left part
        (each step the likeliest token that keeps the text a prefix of a choice, or closes it
        where it is a whole choice); what all choices left go on with, and once one is left the
        rest of it and the next key, are evaluated as one batch, as a prompt is, instead of one
        step each; the other string fields follow under a grammar (``create_completion``). The
        choice's text is what the grammar path would have forced too, so only steps are saved;
        like every call of this backend, the reply depends on the prompt alone. The last word
        before a choice parts is left to the model: it may end it with a token that also closes
        the string (``."``), which a batch cut after the word would take from it (measured: the
        model then went on to the next sentence where the grammar path stopped)."""
        import numpy as np
        from llama_cpp import LlamaGrammar  # loaded already (self._load): see llama_class

        props = list(schema["properties"].items())
        (first, spec), rest = props[0], props[1:]
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        prompt = llm.tokenize(f"{text}<|im_start|>assistant\n".encode(), add_bos=False, special=True)
        llm.reset()
        if head:
            self._start_at_head(llm, prompt, messages[-1]["content"][:head])
        opening = llm.tokenize(f'{{"{first}": "'.encode(), add_bos=False, special=False)
        llm.eval((prompt + opening)[llm.n_tokens:])
        options = [o.encode() for o in spec["enum"]]
        written, steps = b"", 0
        while True:
            live = [o for o in options if o.startswith(written)]
            if len(live) == 1 or (written in live and steps >= max_tokens):
                chosen = live[0] if len(live) == 1 else written
                break
            common = os.path.commonprefix(live)[len(written):]
            common = common[: common.rfind(b" ") + 1]  # the last word the model writes itself: it
            while common and not _whole_utf8(common):  # may end it with a token that closes the string
                common = common[:-1]
            if common:  # what every choice left goes on with ("A." of "A." and "A. B."): one batch
                llm.eval(llm.tokenize(common, add_bos=False, special=False))
                written += common
                continue
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
            pick, closed = None, None
            for t in np.argsort(-logits, kind="stable")[:CHOICE_SEARCH]:
                piece = llm.detokenize([int(t)])
                if piece and any(o.startswith(written + piece) for o in live):
                    pick = int(t)
                    break
                # a token that ends a whole choice and closes the string (".\"" after "...store")
                closed = next((o for o in live if (written + piece).startswith(o + b'"')), None)
                if closed is not None:
                    break
            if closed is not None or pick is None:  # closed, or no likely token continues a choice
                chosen = closed if closed is not None else live[0]
                break
            written += llm.detokenize([pick])
            llm.eval([pick])
            steps += 1
        keys = "".join(f'", "{k}": "' for k, _ in rest[:1])
        llm.eval(llm.tokenize(chosen[len(written):] + keys.encode(), add_bos=False, special=False))  # forced
        char = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
        fields = []
        for k, (name, spec_k) in enumerate(rest):
            limit = spec_k.get("maxLength")
            body = f"char{{0,{limit}}}" if limit else "char*"
            fields.append(body if k == 0 else f'"\\", \\"{name}\\": \\"" {body}')
        gbnf = f'root ::= {" ".join(fields)} "\\"}}"\nchar ::= {char}\n'
        held = list(llm.input_ids[: llm.n_tokens])
        out = llm.create_completion(prompt=held, grammar=LlamaGrammar.from_string(gbnf, verbose=False),
                                    temperature=0.0, max_tokens=max(1, max_tokens - steps), seed=seed)
        reply = f'{{"{first}": "'.encode() + chosen + keys.encode() + out["choices"][0]["text"].encode()
        written_tokens = steps + int((out.get("usage") or {}).get("completion_tokens", 0))
        return Completion(text=reply.decode("utf-8", errors="replace"), prompt_tokens=len(held) - steps,
                          completion_tokens=written_tokens, seconds=time.perf_counter() - t0,
                          finish_reason=out["choices"][0].get("finish_reason"))

    def _start_at_head(self, llm: Any, tokens: list[int], head_text: str) -> None:
        """Leave llama.cpp's KV cache holding exactly the prompt's head: the tokens that lie wholly
        inside the rendered prompt up to the end of ``head_text`` (the last message's fixed start).
        The first call with a head evaluates it alone and keeps its state; later calls restore
        that state. Either way the head is one batch and the rest another, so a reply is the same
        bits whatever came before it (the reason other roles reset, see the class docstring)."""
        pieces = [llm.detokenize([t], special=True) for t in tokens]
        rendered = b"".join(pieces)
        at = rendered.rfind(head_text.encode())
        if at < 0 or not head_text:
            return  # a template that rewrites the message: no head, the whole prompt from empty
        end, n, head = at + len(head_text.encode()), 0, 0
        for piece in pieces:
            if n + len(piece) > end:
                break
            n += len(piece)
            head += 1
        if head < MIN_HEAD_TOKENS or head >= len(tokens):
            return
        key = tuple(tokens[:head])
        state = self._heads.pop(key, None)
        if state is None:
            llm.reset()
            llm.eval(list(key))
            state = llm.save_state()
        else:
            llm.load_state(state)
        self._heads[key] = state  # most recently used last
        while len(self._heads) > MAX_HEADS:
            self._heads.pop(next(iter(self._heads)))

    def choice_logprobs(self, messages: list[dict], prefix: str, choices: list[str]) -> Completion:
        """Log-probabilities of ``choices`` as the next token after the chat ``messages`` and the
        start of the assistant's reply ``prefix``: one forward pass over what the previous call
        did not already evaluate, no sampling. Each choice counts its spellings with and
        without a leading space; the text returned is JSON ``{choice: logprob}`` over the whole
        vocabulary (the choices' mass need not sum to 1). ChatML models only (the judge's
        models: Qwen2.5, SmolLM2)."""
        import numpy as np

        with self._lock:
            llm = self._load()
            if "<|im_start|>" not in llm.metadata.get("tokenizer.chat_template", ""):
                raise LabError(f"{self.plan.location}: probability-weighted judging needs a ChatML model "
                               "(<|im_start|> chat template)", hint="use judge.method: rubric with this model")
            text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
            text += f"<|im_start|>assistant\n{prefix}"
            t0 = time.perf_counter()
            tokens = llm.tokenize(text.encode(), add_bos=False, special=True)
            limit = self.plan.cfg.n_ctx - 1
            if len(tokens) > limit:  # keep the head and the reply's start
                tokens = tokens[: limit - 32] + tokens[-32:]
            common = eval_reusing_prefix(llm, tokens)
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)
            top = float(logits.max())
            log_z = top + float(np.log(np.exp(logits - top).sum()))
            out = {}
            for choice in choices:
                spellings = [llm.tokenize(w.encode(), add_bos=False, special=False) for w in (choice, " " + choice)]
                ids = sorted({t[0] for t in spellings if len(t) == 1})
                if not ids:
                    raise LabError(f"{self.plan.location}: {choice!r} is not one token of this model",
                                   hint="use judge.method: rubric with this model")
                lp = logits[ids] - log_z
                m = float(lp.max())
                out[choice] = m + float(np.log(np.exp(lp - m).sum()))
            seconds = time.perf_counter() - t0
        return Completion(text=json.dumps(out), prompt_tokens=len(tokens) - common, completion_tokens=0,
                          seconds=seconds, finish_reason="logprobs")


class OpenAIBackend:
    """OpenAI, or an OpenAI-compatible server, through LlamaIndex's LLM classes."""

    def __init__(self, plan: LLMPlan):
        self.plan = plan
        self._llm: Any = None

    def load(self) -> Any:
        """Load the model now (it otherwise loads at its first call): benches time the work, not the load."""
        return self._load()

    def _load(self) -> Any:
        if self._llm is None:
            cfg = self.plan.cfg
            common = dict(
                model=cfg.model, temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                max_retries=0, timeout=cfg.timeout_s,  # lab.models.llm retries, once (LlamaIndex's OpenAI
                # class would retry in tenacity *and* in the client: (1 + n) ** 2 requests)
            )
            try:
                if cfg.backend == "openai":
                    from llama_index.llms.openai import OpenAI

                    self._llm = OpenAI(api_key=self.plan.key, api_base=cfg.base_url, **common)
                else:
                    from llama_index.llms.openai_like import OpenAILike

                    self._llm = OpenAILike(
                        api_key=self.plan.key or "not-needed", api_base=cfg.base_url,
                        is_chat_model=True, context_window=cfg.n_ctx, **common,
                    )
            except ImportError:
                raise LabError(
                    f"backend {cfg.backend!r} needs llama-index-llms-openai and llama-index-llms-openai-like",
                    hint="run `make venv`",
                ) from None
        return self._llm

    def chat(self, messages: list[dict], schema: dict | None, temperature: float, seed: int,
             max_tokens: int | None = None, head: int | None = None, stop: list[str] | None = None) -> Completion:
        """One chat call (``head`` is for local models; a server caches prefixes by itself).
        ``stop`` is not sent: reasoning models refuse the parameter, so a server's reply comes
        whole, and a caller that stops a local model's reply reads both forms."""
        from llama_index.core.llms import ChatMessage

        llm = self._load()
        kwargs: dict[str, Any] = {"temperature": temperature, "seed": seed}
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        if schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": schema, "strict": False},
            }
        t0 = time.perf_counter()
        resp = llm.chat([ChatMessage(role=m["role"], content=m["content"]) for m in messages], **kwargs)
        seconds = time.perf_counter() - t0
        raw = resp.raw
        usage = getattr(raw, "usage", None) or (raw.get("usage") if isinstance(raw, dict) else None)

        def get(obj: Any, name: str) -> int:
            value = getattr(obj, name, None) if not isinstance(obj, dict) else obj.get(name)
            return int(value or 0)

        choices = getattr(raw, "choices", None) or []
        return Completion(
            text=resp.message.content or "",
            prompt_tokens=get(usage, "prompt_tokens") if usage else 0,
            completion_tokens=get(usage, "completion_tokens") if usage else 0,
            seconds=seconds,
            finish_reason=getattr(choices[0], "finish_reason", None) if choices else None,
        )


def build_backend(plan: LLMPlan) -> LlamaCppBackend | OpenAIBackend:
    return LlamaCppBackend(plan) if plan.cfg.backend == "llama_cpp" else OpenAIBackend(plan)
