"""A cross-encoder's scores behind the content cache: a pair scored once is read after, keyed by the
weights' content and the max length; the real reranker of a run reads them back."""

from __future__ import annotations

import numpy as np
import pytest

from lab.caches import VectorCache
from lab.rag.cross_encoder import CachedPredict, weights_key


class Counting:
    """A stand-in CrossEncoder (plumbing only): the score is the passage's length, each pair counted."""

    def __init__(self, max_length=512):
        self.max_length = max_length
        self.seen: list[tuple[str, str]] = []

    def predict(self, pairs):
        self.seen += list(pairs)
        return np.array([len(p) + 0.1 for _, p in pairs], dtype=np.float32)


def test_a_pair_scored_once_is_read_after(tmp_path):
    cache = VectorCache(tmp_path / "scores.sqlite")
    model = Counting()
    cached = CachedPredict(model, cache, "w1")
    pairs = [("q", "abc"), ("q", "de"), ("q", "abc")]  # a repeated pair is scored once
    assert cached.predict(pairs).tolist() == pytest.approx([3.1, 2.1, 3.1])
    assert model.seen == [("q", "abc"), ("q", "de")]
    assert cached.predict([("q", "de"), ("q", "fghi")]).tolist() == pytest.approx([2.1, 4.1])
    assert model.seen[2:] == [("q", "fghi")]  # only the new pair
    # other weights, or another max length, are other scores
    other = Counting()
    CachedPredict(other, cache, "w2").predict([("q", "de")])
    shorter = Counting(max_length=256)
    CachedPredict(shorter, cache, "w1").predict([("q", "de")])
    assert other.seen == [("q", "de")] and shorter.seen == [("q", "de")]
    assert cached.max_length == 512  # every other attribute is the model's


def test_weights_are_named_by_their_content_not_their_size(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, byte in ((a, b"\x01"), (b, b"\x02")):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(byte * 64)  # same size, other weights: a model mid-training
        (folder / "config.json").write_text("{}")
    assert weights_key(str(a)) != weights_key(str(b))
    (b / "model.safetensors").write_bytes(b"\x01" * 64)
    assert weights_key(str(a)) == weights_key(str(b))
