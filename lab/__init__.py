"""The lab: an evaluation-driven RAG laboratory.

Layers, each importing only those below it (checked by import-linter, see pyproject.toml):
the kernel (``errors``, ``registry``, ``faults``, ``progress``, ``paths``, ``caches``) <
``config`` < ``models`` < ``rag`` (the system an experiment builds) < ``eval`` (questions in, run
folder out) < ``cli``; ``metrics`` is pure and ``report`` reads run files only. Nothing is loaded
at import time.

One setting is made here, before any library loads: ``OMP_WAIT_POLICY=PASSIVE``. torch ships its
own ``libgomp.so.1``, and once torch has loaded it llama.cpp links that same runtime, which read
its wait policy when torch loaded it; set any later, the setting is ignored and llama.cpp's
threads spin (GOMP_SPINCOUNT 300000 instead of 0: a sweep with answers took 404 s instead of 69 s).
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
