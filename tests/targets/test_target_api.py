"""``lab.api.run`` with the RAG system itself: a callable evaluated as a python target, in this
process, its replies cached under its version."""

from __future__ import annotations

import pytest

from lab import api
from lab.errors import ConfigError


def test_api_runs_a_callable(project):
    calls = []

    def my_rag(question, history):
        calls.append(question)
        return {"answer": "Lyon", "contexts": ["Brightwater Kilns was founded in 2009 by Odile Ferrand in Lyon."]}

    kw = dict(kb=project / "kb", eval_set=project / "eval.jsonl", experiments=project / "experiments",
              reports=project / "reports", cache=project / "cache", retrieval_only=True, version="1")
    run = api.run(my_rag, **kw)
    assert run.name == "my_rag" and len(calls) == 6
    t = run.results["target"]
    assert (t["kind"], t["where"], t["version"]) == ("python", "test_target_api:test_api_runs_a_callable._locals_.my_rag", "1")
    assert t["contexts"] == {"n": 6, "given": 0, "exact": 6, "tolerant": 0, "not_located": 0}
    # f1: "Odile Ferrand" and "2009" both at rank 1; f6: "Odile Ferrand" at rank 1, "reports" nowhere
    mrr = run.questions().set_index("id")["mrr"]
    assert (mrr["f1"], mrr["f6"]) == (1.0, 0.5)
    again = api.run(my_rag, **kw)  # cached: no call
    assert len(calls) == 6 and again.results["target"]["cached"] == 6
    api.run(my_rag, **kw, refresh=True)
    assert len(calls) == 12
    with pytest.raises(ConfigError, match="needs kb="):
        api.run(my_rag, experiments=project / "experiments")
