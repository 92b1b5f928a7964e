"""A LangChain RAG app the lab did not build, evaluated as a target (docs/own-rag.md)."""
