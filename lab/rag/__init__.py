"""The system an experiment builds, in pipeline order: ``loaders`` -> ``chunkers`` -> ``index``
(LanceDB) -> ``retrievers`` (vector, bm25, hybrid) -> ``postprocess`` (the chain: guard,
candidate cut, rerankers; ``llm_reranker``) -> ``context`` -> ``generation``, wired by
``pipeline``; ``semantic_cache`` and ``tokens`` serve them. It knows nothing of judges or metrics.
"""
