"""The semantic query cache's lookup: nearest earlier question, only at or above the threshold."""

import numpy as np

from lab.caches import SemanticQueryCache


def unit(*xs):
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_lookup_returns_the_nearest_question_above_the_threshold(tmp_path):
    cache = SemanticQueryCache(tmp_path / "s.sqlite", "scope-a", threshold=0.9)
    assert cache.lookup(unit(1, 0, 0)) is None  # empty
    cache.put_many([("first?", unit(1, 0, 0), [["a#0", 0.8]]), ("second?", unit(0, 1, 0), [["b#0", 0.7]])])
    reopened = SemanticQueryCache(tmp_path / "s.sqlite", "scope-a", threshold=0.9)
    hit = reopened.lookup(unit(1, 0.3, 0))  # cosine 1/sqrt(1.09) = 0.9578 with "first?"
    assert hit["question"] == "first?" and abs(hit["similarity"] - 0.9578) < 1e-4 and hit["nodes"] == [["a#0", 0.8]]
    assert reopened.lookup(unit(1, 1, 0)) is None  # 0.7071 to both: under the threshold
    assert SemanticQueryCache(tmp_path / "s.sqlite", "scope-b", threshold=0.5).lookup(unit(1, 0, 0)) is None
