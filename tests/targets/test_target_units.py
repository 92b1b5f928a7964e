"""The pieces of a target, one by one: the ``target:`` section of the schema, the reply contract,
locating contexts in the knowledge base, and the ``python`` adapters for LangChain and LlamaIndex
objects (the real classes, no model)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from lab.config import ExperimentConfig, ResponsePaths, TargetConfig, load_experiment
from lab.eval.locate import Locator
from lab.targets.contract import TargetCallError, parse_reply
from lab.targets.python import PythonTarget

ROOT = Path(__file__).resolve().parents[2]
DATA = {"knowledge_base": "kb", "eval_set": "eval.jsonl"}


# --- the schema --------------------------------------------------------------------------------

def test_shipped_fingerprints_unchanged_by_the_target_section():
    """Fingerprints recorded before the section existed (config.yaml and results.json unchanged too:
    an unset target is not dumped)."""
    known = {"turn13": "e436ef118de1bbb7", "turn18": "33fdadfaa9b5cd25", "hybrid": "4cf2cae1fe3d3d80",
             "semantic-cache": "32befb8dc5898832"}
    for name, fingerprint in known.items():
        cfg = load_experiment(name, ROOT / "experiments")
        assert cfg.fingerprint() == fingerprint
        assert "target" not in cfg.model_dump(mode="json")


def test_target_section_rules():
    cfg = ExperimentConfig.model_validate({"name": "x", "data": DATA, "target": {"python": "app:rag"}})
    assert cfg.generation is None and cfg.target.answers and cfg.judge is not None
    retrieval = ExperimentConfig.model_validate({"name": "x", "data": DATA, "target": {"python": "app:rag"},
                                                 "generation": None, "judge": None, "ragas": None})
    assert retrieval.target.answers is False  # what --retrieval-only's overrides make of a target
    v2 = ExperimentConfig.model_validate({"name": "x", "data": DATA, "target": {"python": "app:rag", "version": "2"}})
    assert v2.fingerprint() != cfg.fingerprint()
    bad = [({"target": {"python": "app:rag"}, "retriever": {"name": "vector"}}, "but retriever is set"),
           ({"target": {"python": "app"}}, "'app' is not module:attr"),
           ({"target": {"http": "ftp://x"}}, "is not an http:// or https:// URL"),
           ({"target": {"replay": "r.jsonl", "kwargs": {}}}, "kwargs is for a python target"),
           ({"target": {"python": "a:b", "version_header": "X-V"}}, "use version instead"),
           ({"target": {"http": "http://h", "headers": {"X-Key": "sk-live-123"}}}, "never the secret itself"),
           ({"target": {"python": "a:b"}, "ragas": {}}, "ragas is not computed for a target run"),
           ({}, "chunker is missing")]
    for extra, message in bad:
        with pytest.raises(ValidationError, match=message):
            ExperimentConfig.model_validate({"name": "x", "data": DATA, **extra})


def test_extends_a_base_target(tmp_path):
    (tmp_path / "base.yaml").write_text("schema_version: 1\ndata: {knowledge_base: kb, eval_set: e.jsonl}\n"
                                        "target: {http: 'http://127.0.0.1:8000/rag', version: '1', timeout_s: 5}\n")
    (tmp_path / "v2.yaml").write_text("schema_version: 1\nextends: base\ntarget: {version: '2'}\n")
    cfg = load_experiment("v2", tmp_path)
    assert (cfg.target.http, cfg.target.version, cfg.target.timeout_s) == ("http://127.0.0.1:8000/rag", "2", 5.0)


# --- the contract --------------------------------------------------------------------------------

def test_reply_mapped_from_a_services_own_shape():
    paths = ResponsePaths(answer="result.output", contexts="result.docs", text="body", source="meta.file",
                          usage="meta.usage")
    body = {"result": {"output": "Lyon", "docs": [{"body": "in Lyon.", "meta": {"file": "company/about.md"},
                                                    "score": 0.7, "start": 3}]},
            "meta": {"usage": {"prompt_tokens": 12, "completion_tokens": 2}}}
    out = parse_reply(body, paths, True)
    assert out == {"answer": "Lyon", "contexts": [{"text": "in Lyon.", "source": "company/about.md", "id": None,
                                                   "score": 0.7, "start": 3, "end": 11}],
                   "candidates": None, "usage": {"prompt_tokens": 12, "completion_tokens": 2}}


@pytest.mark.parametrize("body, message", [
    ({"contexts": []}, "the reply has no 'answer' (the answer)"),
    ({"answer": 3, "contexts": []}, "'answer' (the answer) is a number, not a string"),
    ({"answer": "a"}, "the reply has no 'contexts'"),
    ({"answer": "a", "contexts": {"text": "x"}}, "'contexts' is an object, not a list"),
    ({"answer": "a", "contexts": [{"body": "x"}]}, "contexts[0] has no 'text'"),
    ({"answer": "a", "contexts": [{"text": "x", "start": -1}]}, "contexts[0].start is -1, not a whole number"),
    ({"answer": "a", "contexts": [{"text": "x", "score": "high"}]}, "contexts[0].score is a string 'high', not a number"),
    ({"answer": "a", "contexts": [], "usage": 5}, "'usage' is a number, not an object"),
    ([1, 2], "the reply is a list, not an object"),
])
def test_reply_that_breaks_the_contract(body, message):
    with pytest.raises(TargetCallError) as err:
        parse_reply(body, ResponsePaths(), True)
    assert message in err.value.message


# --- locating contexts ---------------------------------------------------------------------------

def test_locate_each_level():
    doc = "# Title\n\nThe Ember 90 costs *8,400* euros.\nIt reaches   1280 degrees."
    loc = Locator({"products/ember90.md": doc, "other.md": "nothing here"})
    assert loc.locate("costs", "products/ember90.md", 2, 5).how == "given"
    hit = loc.locate("The Ember 90 costs")
    assert (hit.source, hit.start, hit.end, hit.how) == ("products/ember90.md", 9, 27, "exact")
    hit = loc.locate("costs 8,400 euros. It reaches 1280")  # emphasis dropped, whitespace runs as one
    assert (hit.start, hit.how) == (22, "tolerant") and doc[hit.start:hit.end] == "costs *8,400* euros.\nIt reaches   1280"
    assert loc.locate("THE EMBER 90   COSTS").how == "tolerant"
    assert loc.locate("not in the knowledge base").how == "not_located"
    # a reply's source written as a path ending in the lab's name of the document
    assert loc.source("/srv/app/knowledge-base/products/ember90.md") == "products/ember90.md"


# --- the python adapters --------------------------------------------------------------------------

def test_langchain_runnable_and_retriever():
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda

    docs = [Document(page_content="Odile Ferrand founded it.", metadata={"source": "company/about.md",
                                                                         "start_index": 40})]

    class Fixed(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager=None):
            return docs

    chain = RunnableLambda(lambda q: {"input": q, "context": docs, "answer": f"Answer to {q}"})
    out = PythonTarget(TargetConfig(python="m:chain"), Path("."), chain).ask("Who?", [], "q1")
    assert out["answer"] == "Answer to Who?"
    assert out["contexts"] == [{"text": "Odile Ferrand founded it.", "source": "company/about.md", "id": None,
                                "score": None, "start": 40, "end": 65}]
    retriever = PythonTarget(TargetConfig(python="m:r", answers=False), Path("."), Fixed())
    assert retriever.adapter == "langchain-retriever" and retriever.ask("Who?", [], "q1")["answer"] is None
    with pytest.raises(Exception, match="is a retriever: it gives contexts, no answers"):
        PythonTarget(TargetConfig(python="m:r"), Path("."), Fixed())
    text_chain = RunnableLambda(lambda q: "just text")  # a chain ending in a string parser: no contexts
    assert PythonTarget(TargetConfig(python="m:c"), Path("."), text_chain).ask("Q", [], "q")["contexts"] == []


def test_plain_callable_signatures_and_errors():
    one = PythonTarget(TargetConfig(python="m:f"), Path("."), lambda q: {"answer": q.upper(), "contexts": ["x"]})
    assert one.ask("hi", [{"role": "user", "content": "earlier"}], "q")["answer"] == "HI"
    two = PythonTarget(TargetConfig(python="m:f"), Path("."),
                       lambda q, history: {"answer": str(len(history)), "contexts": []})
    assert two.ask("hi", [{"role": "user", "content": "earlier"}], "q")["answer"] == "1"

    def boom(q, h):
        raise KeyError("index")

    with pytest.raises(TargetCallError, match="KeyError: 'index'"):
        PythonTarget(TargetConfig(python="m:f"), Path("."), boom).ask("hi", [], "q")
