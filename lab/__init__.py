"""The lab: an evaluation-driven RAG laboratory.

Layers, each importing only those below it (checked by import-linter, see pyproject.toml):
the kernel (``errors``, ``registry``, ``faults``, ``progress``, ``paths``, ``caches``) <
``config`` < ``models`` < ``rag`` (the system an experiment builds) < ``eval`` (questions in, run
folder out) < ``cli``; ``metrics`` is pure and ``report`` reads run files only. Nothing is loaded
at import time.
"""

__version__ = "0.1.0"
