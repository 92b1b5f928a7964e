"""A cross-encoder's scores behind the content cache (``scores.sqlite``, beside the LLM reranker's).

LlamaIndex's ``SentenceTransformerRerank`` scores every (question, passage) pair through its
sentence-transformers ``CrossEncoder.predict``; :func:`cache_scores` puts a cache in front of that
call, so a pair scored before by the same weights at the same max length is read, not computed:
a run again, the same candidates reordered at another ``first_stage_weight``, the dev split of
``lab tune`` scored alone and fused at four weights. The key is the weights' content (a tuned
model's card fingerprint, else the hash of its ``*.safetensors``), the max length, the question
and the passage; the device is not in it, as for embeddings. Scores are kept as float32, and a
computed score is returned at that precision too, so a cached run orders as the first did.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from lab.models.resolve import model_fingerprint
from lab.models.tuned import read_card, weights_sha


def weights_key(location: str) -> str:
    """What names a cross-encoder's weights in the cache: a tuned model's card fingerprint (its
    weights' content hash), else the content hash of the folder's ``*.safetensors`` (a model saved
    mid-training has no card, and its file sizes do not change from step to step), else the
    names and sizes of its files."""
    path = Path(location)
    card = read_card(path) if path.is_dir() else None
    if card is not None and card.get("fingerprint"):
        return str(card["fingerprint"])
    if path.is_dir() and any(path.rglob("*.safetensors")):
        return weights_sha(path)
    return model_fingerprint(location)


class CachedPredict:
    """``model.predict`` (a sentence-transformers ``CrossEncoder``) with each pair's score read from
    ``cache`` where it is there; every other attribute is the model's."""

    def __init__(self, model: Any, cache: Any, weights: str):
        self._model, self._cache, self._weights = model, cache, weights
        self._length = getattr(model, "max_seq_length", None) or model.max_length  # renamed in sentence-transformers 5

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def _key(self, question: str, passage: str) -> str:
        body = f"cross-encoder\x00{self._weights}\x00{self._length}\x00{question}\x00{passage}"
        return hashlib.sha256(body.encode()).hexdigest()

    def predict(self, pairs: Sequence[tuple[str, str]], **kwargs: Any) -> np.ndarray:
        keys = [self._key(q, p) for q, p in pairs]
        found = self._cache.get_many(list(set(keys)))
        todo = sorted({k: i for i, k in reversed(list(enumerate(keys))) if k not in found}.values())
        if todo:
            scores = np.asarray(self._model.predict([pairs[i] for i in todo], **kwargs), dtype=np.float32)
            new = {keys[i]: np.array([s], dtype=np.float32) for i, s in zip(todo, scores.reshape(-1))}
            self._cache.put_many(new)
            found = {**found, **new}
        return np.array([float(found[k][0]) for k in keys], dtype=np.float32)


def cache_scores(reranker: Any, location: str, cache: Any) -> Any:
    """``reranker`` (LlamaIndex's ``SentenceTransformerRerank``) scoring through ``cache``; as it
    is where there is no cache."""
    if cache is not None:
        reranker._model = CachedPredict(reranker._model, cache, weights_key(location))
    return reranker
