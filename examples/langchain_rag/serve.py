"""The LangChain app behind HTTP, as a service the lab evaluates as an ``http`` target.

    python -m examples.langchain_rag.serve [--port 8766] [--kb knowledge-base] [--model NAME]

``POST /rag`` takes the lab's request ``{question, history, id, answers}`` and answers its
contract: ``{answer, contexts: [{text, source, id}]}``; with ``answers: false`` it retrieves only
(no model call). ``GET /rag`` answers with the app's version in ``X-Rag-Version``, which the
target config reads (``version_header``). One question at a time: llama.cpp is not thread-safe.
"""

from __future__ import annotations

import argparse
import threading

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from examples.langchain_rag import app as rag

HEADERS = {"X-Rag-Version": rag.VERSION}


def create_app(kb: str = "knowledge-base", model: str = "qwen2.5-coder-1.5b-instruct") -> Starlette:
    lock = threading.Lock()

    def ask(question: str, answers: bool) -> dict:
        with lock:
            if not answers:
                docs = rag.retriever(kb).invoke(question)
                return {"answer": None, "contexts": [_context(d) for d in docs]}
            out = rag.chain(kb, model=model).invoke({"question": question})
            return {"answer": out["answer"], "contexts": [_context(d) for d in out["context"]]}

    async def endpoint(request: Request) -> JSONResponse:
        if request.method == "GET":
            return JSONResponse({"service": "langchain-rag", "version": rag.VERSION}, headers=HEADERS)
        try:
            body = await request.json()
            question = body["question"]
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": "POST {\"question\": ...}"}, status_code=400, headers=HEADERS)
        reply = await run_in_threadpool(ask, str(question), body.get("answers", True) is not False)
        return JSONResponse(reply, headers=HEADERS)

    return Starlette(routes=[Route("/rag", endpoint, methods=["GET", "POST"])])


def _context(doc) -> dict:
    return {"text": doc.page_content, "source": doc.metadata.get("source"), "id": doc.id}


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description="the LangChain app as an HTTP service")
    ap.add_argument("--port", type=int, default=8766)
    ap.add_argument("--kb", default="knowledge-base")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct", help="the GGUF that answers")
    args = ap.parse_args()
    uvicorn.run(create_app(args.kb, args.model), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
