"""Embeddings: LlamaIndex's ``HuggingFaceEmbedding``, behind a content cache.

The model is loaded from the resolved local folder (never a hub name the library would try to
download). Prefixes come only from the config: the folder path keeps LlamaIndex from adding its
own query instructions for models it recognises by name.

Every vector is stored in a SQLite table keyed by (model fingerprint, prefix, text), so a text
is embedded once per model on a machine, whichever experiment asked for it. ``counters`` tells
how many texts were computed versus served from the cache; runs record it. A cached vector that
cannot be this model's (another length, not unit length) is computed again and replaced.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from lab import heap
from lab.caches import VectorCache
from lab.config import EmbeddingConfig
from lab.models.device import describe, pick_device
from lab.models.resolve import ResolvedModel, model_fingerprint
from lab.progress import Ticker

log = logging.getLogger(__name__)

#: Batches per slice of an embedding request: the unit of progress and of commits to the cache.
SLICE_BATCHES = 8
#: How far a cached vector's squared length may be from 1 (float32 rounding is about 1e-7).
UNIT_TOLERANCE = 1e-3


class LabEmbedding(BaseEmbedding):
    """``HuggingFaceEmbedding`` with config prefixes, one batched call per request, and a cache."""

    model_location: str
    query_prefix: str = ""
    passage_prefix: str = ""
    device: str | None = None  # asked for: None (auto), cpu, cuda or mps (lab.models.device)

    _model: Any = PrivateAttr(default=None)
    _device_used: str | None = PrivateAttr(default=None)  # once the model has loaded
    _cache: VectorCache | None = PrivateAttr(default=None)
    _fingerprint: str = PrivateAttr(default="")
    _counters: dict = PrivateAttr(default_factory=lambda: {"computed": 0, "cached": 0})
    _dim: int = PrivateAttr(default=0)  # the model's, once it has computed a vector

    def __init__(self, resolved: ResolvedModel, cache: VectorCache | None, **kwargs: Any):
        super().__init__(model_name=resolved.name, model_location=resolved.location, **kwargs)
        self._cache = cache
        self._fingerprint = f"{resolved.name}:{model_fingerprint(resolved.location)}"

    @classmethod
    def class_name(cls) -> str:
        return "LabEmbedding"

    @property
    def counters(self) -> dict:
        return self._counters

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    def device_record(self) -> dict:
        """The device asked for and the one the model loaded on (``used`` None when it never
        loaded: every vector came from the cache), as results.json records them."""
        return {"asked": self.device or "auto", "used": self._device_used and describe(self._device_used)}

    def load(self) -> Any:
        """Load the model now (it otherwise loads at its first use)."""
        return self._load()

    def use_loaded(self, model: Any) -> None:
        """Share a model another LabEmbedding of the same weights has loaded (:meth:`load`), so
        a bench times the work, not the load."""
        self._model = model

    def _load(self) -> Any:
        if self._model is None:  # torch and sentence-transformers load here, on first use: heavy
            with heap.loading():
                from llama_index.embeddings.huggingface import HuggingFaceEmbedding
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # "Loading weights" bars, also when output is not a terminal
                self._device_used = pick_device(self.device, "embedding.device")
                self._model = HuggingFaceEmbedding(
                    model_name=self.model_location,
                    device=self._device_used,
                    embed_batch_size=self.embed_batch_size,
                    normalize=True,
                    show_progress_bar=False,
                )
        return self._model

    def encode(self, texts: list[str], prefix: str, show_progress: bool = False, use_cache: bool = True
               ) -> np.ndarray:
        """Embed ``texts`` (normalised float32 rows), computing only what the cache lacks."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        keys = [
            hashlib.sha256(f"{self._fingerprint}\x00{prefix}\x00{t}".encode()).hexdigest() for t in texts
        ]
        cache = self._cache if use_cache else None
        found = self._intact(cache.get_many(list(set(keys)))) if cache else {}
        missing = sorted({k: t for k, t in zip(keys, texts) if k not in found}.items())
        if missing:
            model = self._load()
            model.show_progress_bar = False  # the ticker below shows progress
            # One call over every missing text would let sentence-transformers sort them by length
            # (np.argsort of -len) and cut batches of embed_batch_size. Take that very order here and
            # hand it one batch at a time, so every batch holds the same texts (same padding, same
            # vectors to the last bit) while the work is counted and committed as it goes: an
            # interrupted build keeps what it embedded, and the rerun embeds only the rest.
            inputs = [prefix + t for _, t in missing]
            order = np.argsort([-len(t) for t in inputs])
            bs = self.embed_batch_size
            with Ticker("embed", len(missing), show_progress, unit="texts") as ticker:
                for start in range(0, len(order), SLICE_BATCHES * bs):
                    part = order[start : start + SLICE_BATCHES * bs]
                    vecs = np.concatenate([
                        np.asarray(model._get_text_embeddings([inputs[i] for i in part[b : b + bs]]), dtype=np.float32)
                        for b in range(0, len(part), bs)])
                    self._dim = int(vecs.shape[1])
                    new = {missing[i][0]: v for i, v in zip(part, vecs)}
                    if cache:
                        cache.put_many(new)
                    found.update(new)
                    self._counters["computed"] += len(part)
                    ticker.update(len(part))
        self._counters["cached"] += len(texts) - len(missing)
        return np.stack([found[k] for k in keys])

    def _intact(self, found: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The cached vectors that can be this model's: of its length (where it has not computed
        one yet, the length of most of them) and of unit length (it normalises them). The others
        are left out, with a warning, so they are computed again and replaced."""
        if not found:
            return found
        lengths = [len(v) for v in found.values()]
        dim = self._dim or max(set(lengths), key=lengths.count)
        same = [k for k, v in found.items() if len(v) == dim]
        if same:
            m = np.stack([found[k] for k in same])
            same = [k for k, ok in zip(same, np.abs(np.einsum("ij,ij->i", m, m) - 1.0) <= UNIT_TOLERANCE) if ok]
        if len(same) < len(found):
            log.warning("%s: %d cached vectors are damaged (not %d values, or not of unit length) and are computed "
                        "again", self._cache.path if self._cache else "the cache", len(found) - len(same), dim)
        return {k: found[k] for k in same}

    # LlamaIndex interface ---------------------------------------------------------------------
    def _get_query_embedding(self, query: str) -> list[float]:
        return self.encode([query], self.query_prefix)[0].tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.encode([text], self.passage_prefix)[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self.encode(texts, self.passage_prefix).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def build_embedding(cfg: EmbeddingConfig, resolved: ResolvedModel, cache_root: Path | None) -> LabEmbedding:
    """The experiment's embedding model, not loaded yet; a forced accelerator this machine lacks
    stops here, at start-up (``auto`` and ``cpu`` are settled when the model loads)."""
    if cfg.device in ("cuda", "mps"):
        pick_device(cfg.device, "embedding.device")
    cache = VectorCache(cache_root / "embeddings.sqlite") if cache_root else None
    return LabEmbedding(
        resolved,
        cache,
        embed_batch_size=cfg.batch_size,
        query_prefix=cfg.query_prefix,
        passage_prefix=cfg.passage_prefix,
        device=cfg.device,
    )
