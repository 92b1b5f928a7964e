"""Eval sets: the questions a run asks. ``evalset`` (JSONL rows, golden spans, loading),
``excerpts`` (locating a model's excerpt in the documents, keywords), ``grounding`` (the support
check), ``generate`` (an LLM writes questions from the documents), ``audit`` (what a set can and
cannot show), ``interop`` (import and export: CSV, ragas, BEIR), ``holdout`` (dev and held-out
halves)."""
