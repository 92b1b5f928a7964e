"""The lab: an evaluation-driven RAG laboratory.

Nothing is loaded at import time; each stage lives in its own module
(``lab.ingest``, ``lab.index``, ``lab.retrieval``, ``lab.rerank``, ``lab.metrics``,
``lab.runner``, ``lab.report``).
"""

__version__ = "0.1.0"
