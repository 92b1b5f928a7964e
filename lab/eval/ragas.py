"""Ragas: LLM-judged answer and context metrics, an optional evaluator (needs ragas==0.4.3).

Each metric is ragas' own definition, computed per row by the LLM and embedding model the
caller passes in (ragas never picks a default, so nothing reaches for OpenAI or the hub):

- **faithfulness**: the LLM splits the answer into statements, then judges each against the
  retrieved contexts (joined); the share of statements it judges supported (0..1).
- **answer_relevancy**: the LLM writes a question the answer would answer, and says whether the
  answer is noncommittal ("I don't know"); the cosine between the embeddings of the real and
  the generated question, or 0 when the answer is noncommittal. One generated question
  (ragas' ``strictness=1``): ragas' LlamaIndex wrapper returns one completion per call anyway,
  and a temperature-0 local model would write the same question three times.
- **context_precision**: the LLM judges each retrieved context, in rank order, useful or not
  for arriving at the reference answer; the average precision of those verdicts
  (sum over useful ranks k of precision@k, over the number useful; 0 when none is).
- **context_recall**: the LLM splits the reference answer into sentences and judges whether
  each can be attributed to the retrieved contexts (joined); the share attributed.

The metric classes are ragas' single-turn metrics (``ragas.metrics.Faithfulness`` and
siblings), with the LLM and embeddings in ragas' ``LlamaIndexLLMWrapper`` and
``LlamaIndexEmbeddingsWrapper``. ragas 0.4 deprecates these in favour of
``ragas.metrics.collections``, but those accept only an Instructor LLM built by
``llm_factory`` around an OpenAI-style client, and cannot take a LlamaIndex LLM.

Failures are recorded, never dropped: a metric that raises for a row (output that stays
unparseable after ragas' own format-fixing retries, an LLM error) or that ragas scores NaN
(no statements extracted, for instance) is ``None`` in that row, with the reason in
``errors[metric]``; a row lacking an input a metric needs (no reference answer, no contexts)
gets ``None`` and says so, without an LLM call. LLM calls are not retried on exceptions: a
local deterministic model would fail the same way, and ragas' default is 10 tries with
backoff.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

from lab.errors import DataError
from lab.metrics.catalog import RAGAS_METRICS as RAGAS_NAMES
from lab.progress import progress
from lab.registry import Registry

log = logging.getLogger(__name__)

RAGAS_METRICS = tuple(RAGAS_NAMES)
ROW_KEYS = ("id", "question", "answer", "contexts", "reference")
MAX_OUTPUT_IN_ERROR = 300

# metric name -> (builder(llm, embeddings), the row fields it needs non-empty)
METRICS: Registry[tuple[Callable[[Any, Any], Any], tuple[str, ...]]] = Registry("ragas metric")


def _legacy(name: str) -> Any:
    """A metric class from ``ragas.metrics`` without its deprecation warning."""
    import ragas.metrics

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return getattr(ragas.metrics, name)


def _register(name: str, class_name: str, needs: tuple[str, ...], embeddings: bool = False, **kwargs: Any) -> None:
    def build(llm: Any, emb: Any) -> Any:
        extra = {"embeddings": emb} if embeddings else {}
        return _legacy(class_name)(llm=llm, **extra, **kwargs)

    METRICS.register(name)((build, needs))


_register("faithfulness", "Faithfulness", ("answer", "contexts"))
_register("answer_relevancy", "AnswerRelevancy", ("answer",), embeddings=True, strictness=1)
_register("context_precision", "ContextPrecision", ("contexts", "reference"))
_register("context_recall", "ContextRecall", ("contexts", "reference"))


def offline_env() -> None:
    """Keep ragas and its dependencies off the network; call before importing ragas.

    tiktoken reads its encodings from llama-index-core's bundled cache instead of downloading
    them; the hub is off; ragas sends no usage analytics.
    """
    if not os.environ.get("TIKTOKEN_CACHE_DIR"):
        import llama_index.core

        cache = Path(llama_index.core.__file__).parent / "_static" / "tiktoken_cache"
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")


def check_rows(rows: Sequence[dict]) -> None:
    """Raise a DataError naming the first row with a missing key or a wrong type."""
    for i, row in enumerate(rows):
        where = f"ragas row {i} (id {row.get('id')!r})" if isinstance(row, dict) else f"ragas row {i}"
        if not isinstance(row, dict):
            raise DataError(f"{where}: expected a dict, got {type(row).__name__}")
        missing = [k for k in ROW_KEYS if k not in row]
        if missing:
            raise DataError(
                f"{where}: missing {', '.join(repr(k) for k in missing)}",
                hint=f"each row needs {', '.join(ROW_KEYS)} (reference may be empty)",
            )
        contexts = row["contexts"]
        if not isinstance(contexts, (list, tuple)) or not all(isinstance(c, str) for c in contexts):
            raise DataError(f"{where}: 'contexts' must be a list of strings")


def _missing_inputs(row: dict, needs: tuple[str, ...]) -> list[str]:
    missing = []
    for key in needs:
        value = row[key]
        if key == "contexts":
            value = [c for c in value if c.strip()]
        elif isinstance(value, str):
            value = value.strip()
        if not value:
            missing.append("reference answer" if key == "reference" else key)
    return missing


def _wrappers(llm: Any, embed_model: Any) -> tuple[Any, Any, Any]:
    """ragas' LlamaIndex wrappers around the caller's models, and a no-retry RunConfig."""
    from ragas.embeddings.base import LlamaIndexEmbeddingsWrapper
    from ragas.llms.base import LlamaIndexLLMWrapper
    from ragas.run_config import RunConfig

    class RecordingLLM(LlamaIndexLLMWrapper):
        """Keeps the last raw completion, so a parse failure can say what the LLM wrote."""

        last_output: str | None = None

        async def agenerate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None):
            self.last_output = None
            result = await super().agenerate_text(prompt, n, temperature, stop, callbacks)
            self.last_output = result.generations[0][0].text
            return result

    run_config = RunConfig(max_retries=1, max_wait=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return (
            RecordingLLM(llm, run_config=run_config),
            LlamaIndexEmbeddingsWrapper(embed_model, run_config=run_config),
            run_config,
        )


def _error_message(exc: BaseException, last_output: str | None) -> str:
    message = f"{type(exc).__name__}: {exc}".rstrip(": ")
    if last_output is not None:
        shown = last_output if len(last_output) <= MAX_OUTPUT_IN_ERROR else last_output[:MAX_OUTPUT_IN_ERROR] + "..."
        message += f"; last LLM output: {shown!r}"
    return message


async def _score(rows: Sequence[dict], metrics: dict[str, tuple[Any, tuple]], llm_wrapper: Any, bar: bool) -> list[dict]:
    from ragas.dataset_schema import SingleTurnSample

    results = []
    for row in progress(rows, total=len(rows), desc="ragas", bar=bar):
        sample = SingleTurnSample(
            user_input=row["question"],
            response=row["answer"],
            retrieved_contexts=list(row["contexts"]),
            reference=row["reference"] or None,
        )
        out: dict[str, Any] = {"id": row["id"]}
        errors: dict[str, str] = {}
        seconds: dict[str, float] = {}
        for name, (metric, needs) in metrics.items():
            out[name] = None
            missing = _missing_inputs(row, needs)
            if missing:
                errors[name] = f"not computed: the row has no {' and no '.join(missing)}"
                continue
            t0 = time.perf_counter()
            try:
                value = await metric.single_turn_ascore(sample)
            except Exception as exc:  # one failed judgement must not stop the others
                errors[name] = _error_message(exc, llm_wrapper.last_output)
                log.warning("ragas %s failed for row %r: %s", name, row["id"], errors[name])
                value = None
            seconds[name] = round(time.perf_counter() - t0, 3)
            if value is not None and not math.isfinite(float(value)):
                errors[name] = (
                    "ragas returned NaN (the LLM's output parsed but gave nothing to score, "
                    "e.g. no statements or no sentences)"
                )
                log.warning("ragas %s is NaN for row %r", name, row["id"])
                value = None
            out[name] = None if value is None else float(value)
        out["errors"] = errors
        out["seconds"] = seconds
        results.append(out)
    return results


def evaluate_ragas(
    rows: Sequence[dict],
    llm: Any,
    embed_model: Any,
    metrics: Sequence[str] = RAGAS_METRICS,
    show_progress: bool = False,
) -> list[dict]:
    """Score already-answered questions with ragas metrics, one row and one metric at a time.

    rows: dicts with keys id, question, answer, contexts (list[str]), reference (str; may be
    empty, and then the metrics that need it are None with a reason).
    llm: a ``llama_index.core.llms.LLM``; embed_model: a LlamaIndex ``BaseEmbedding`` (used by
    answer_relevancy only). LlamaIndex's global ``Settings`` are never read.
    Returns one dict per row, in order: ``{"id", <metric>: float | None, ...,
    "errors": {metric: message}, "seconds": {metric: seconds}}``.
    """
    metrics = list(metrics)
    for name in metrics:
        METRICS.check(name, where="ragas metrics")
    check_rows(rows)
    offline_env()
    try:
        import ragas  # noqa: F401
    except ImportError as exc:
        raise DataError(
            f"the ragas evaluator needs ragas ({exc})",
            hint="pip install ragas==0.4.3 langchain-community==0.4.1 inside .venv",
        ) from None

    llm_wrapper, emb_wrapper, run_config = _wrappers(llm, embed_model)
    built: dict[str, tuple[Any, tuple]] = {}
    for name in metrics:
        builder, needs = METRICS.get(name)
        metric = builder(llm_wrapper, emb_wrapper)
        metric.init(run_config)
        built[name] = (metric, needs)
    log.info("ragas: %d rows x %s", len(rows), ", ".join(metrics))
    return asyncio.run(_score(rows, built, llm_wrapper, show_progress))
