"""Examples: RAG systems the lab did not build, evaluated as targets (docs/own-rag.md)."""
