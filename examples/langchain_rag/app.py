"""A RAG app written with LangChain, as a team would write it, that the lab evaluates as a target.

The first seed's design: documents cut by ``langchain-experimental``'s ``SemanticChunker`` (buffer
1, breakpoints at the 95th percentile of distances), embedded by all-MiniLM-L6-v2 into a Chroma
store, the top 4 chunks by cosine similarity given to Qwen2.5-Coder-1.5B-Instruct (llama.cpp,
through LangChain's ``ChatLlamaCpp``), which answers citing them as ``[n]``.

Models: the lab's packaged ones, found where the lab finds them (``lab.models.resolve``). The
embeddings go through LangChain's ``Embeddings`` interface over sentence-transformers, as
``langchain-huggingface``'s ``HuggingFaceEmbeddings`` does: that package pins huggingface-hub
below 2, which the lab's lock (2.x) excludes. The seed's cross-encoder compressor is left out: no
cross-encoder is packaged (docs/models-offline.md says how to supply one).

    from examples.langchain_rag.app import chain, retriever
    chain().invoke({"question": "Where is Harrowfield Aerial headquartered?"})
    # {"question": ..., "context": [Document, ...], "answer": "... [1]"}

The Chroma store is built once per knowledge-base content, under ``$LAB_CACHE/examples/``;
answers are cached by LangChain's own SQLite cache beside it, so the same app asked again in
another process (``serve.py``) answers alike without calling the model.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from operator import itemgetter
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda, RunnableParallel

from lab.models.resolve import resolve_gguf, resolve_hf_model
from lab.paths import cache_dir

#: The app's version: the lab's target config names it, so a change here is asked again.
VERSION = "2"
EXTENSIONS = (".md", ".txt")
SYSTEM = ("You answer questions about a company from the numbered context passages only. Cite the passages you "
          "use as [1], [2]. If the passages do not contain the answer, reply exactly: I don't have enough "
          "information to answer that.")


class MiniLM(Embeddings):
    """all-MiniLM-L6-v2 (the lab's packaged copy) behind LangChain's Embeddings interface."""

    def __init__(self) -> None:
        from sentence_transformers import SentenceTransformer

        path = resolve_hf_model("sentence-transformers/all-MiniLM-L6-v2", "embedding model").location
        self.model = SentenceTransformer(path, device="cpu")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.model.encode(list(texts), batch_size=32, normalize_embeddings=True).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def documents(kb: str | Path) -> list[Document]:
    """Every .md and .txt file of ``kb``, its path relative to ``kb`` as ``source``."""
    root = Path(kb)
    return [Document(page_content=p.read_text(encoding="utf-8"), metadata={"source": p.relative_to(root).as_posix()})
            for p in sorted(root.rglob("*")) if p.suffix in EXTENSIONS and p.is_file()]


@lru_cache(maxsize=None)
def embeddings() -> MiniLM:
    return MiniLM()


@lru_cache(maxsize=4)
def store(kb: str = "knowledge-base"):
    """The Chroma store of ``kb``'s semantic chunks, built on first use and kept on disk."""
    import chromadb
    from langchain_chroma import Chroma
    from langchain_experimental.text_splitter import SemanticChunker

    docs = documents(kb)
    digest = hashlib.sha256("".join(d.metadata["source"] + d.page_content for d in docs).encode()).hexdigest()[:16]
    folder = cache_dir() / "examples" / f"chroma-{digest}-v{VERSION}"
    settings = chromadb.config.Settings(anonymized_telemetry=False)
    db = Chroma(collection_name="knowledge-base", embedding_function=embeddings(), persist_directory=str(folder),
                client_settings=settings, collection_metadata={"hnsw:space": "cosine"})
    if not db.get(limit=1)["ids"]:
        chunker = SemanticChunker(embeddings(), buffer_size=1, breakpoint_threshold_type="percentile",
                                  breakpoint_threshold_amount=95)
        chunks = [c for c in chunker.split_documents(docs) if c.page_content.strip()]  # it can cut empty ones
        db.add_documents(chunks, ids=[f"{c.metadata['source']}#{i}" for i, c in enumerate(chunks)])
    return db


def retriever(kb: str = "knowledge-base", k: int = 4):
    """The app's retriever: the top ``k`` chunks by cosine similarity."""
    return store(kb).as_retriever(search_kwargs={"k": k})


@lru_cache(maxsize=None)
def llm(model: str = "qwen2.5-coder-1.5b-instruct", max_tokens: int = 256):
    from langchain_community.cache import SQLiteCache
    from langchain_community.chat_models import ChatLlamaCpp
    from langchain_core.globals import set_llm_cache

    folder = cache_dir() / "examples"
    folder.mkdir(parents=True, exist_ok=True)
    set_llm_cache(SQLiteCache(database_path=str(folder / "langchain-llm.sqlite")))
    return ChatLlamaCpp(model_path=str(resolve_gguf(model)), temperature=0,
                        max_tokens=max_tokens, n_ctx=4096, n_batch=512, n_threads=os.cpu_count() or 2, seed=0,
                        verbose=False)


def _numbered(docs: list[Document]) -> str:
    return "\n\n".join(f"[{i}] (source: {d.metadata.get('source')})\n{d.page_content}" for i, d in enumerate(docs, 1))


def chain(kb: str = "knowledge-base", k: int = 4, max_tokens: int = 256,
          model: str = "qwen2.5-coder-1.5b-instruct") -> Runnable:
    """``{"question": ...}`` -> ``{"question", "context": [Document], "answer": str}``; ``model``: a
    GGUF the lab knows by name (or a path to one)."""
    prompt = ChatPromptTemplate.from_messages([("system", SYSTEM),
                                               ("human", "Context:\n{context}\n\nQuestion: {question}")])
    answer = (RunnableLambda(lambda x: {"context": _numbered(x["context"]), "question": x["question"]})
              | prompt | llm(model, max_tokens) | StrOutputParser())
    return RunnableParallel(question=itemgetter("question"),
                            context=itemgetter("question") | retriever(kb, k)).assign(answer=answer)
