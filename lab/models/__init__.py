"""Models: names resolved to weights, keys or servers (:mod:`~lab.models.resolve`), the cached
embedding model (:mod:`~lab.models.embeddings`), and the cached LLM (:mod:`~lab.models.llm`)
over its backends (:mod:`~lab.models.backends`, the one place llama.cpp is imported)."""
