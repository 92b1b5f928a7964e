"""lab.rag.pipeline: prompts checked once at start-up with the placeholders they are filled with
and kept; the batched first stage with its loop fallback; the pipeline's own counters."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

import lab.prompts
from lab.config import load_experiment
from lab.errors import ConfigError
from lab.rag.pipeline import Pipeline, resolve_models

FIXTURES = Path(__file__).parents[1] / "fixtures"
LLM = {"model": "smollm2-135m-instruct", "n_ctx": 2048, "max_tokens": 64}


@pytest.fixture
def prompts(tmp_path, monkeypatch) -> Path:
    """A copy of the prompt files that a test may add to."""
    folder = tmp_path / "prompts"
    shutil.copytree(lab.prompts.PROMPTS_DIR, folder)
    monkeypatch.setattr(lab.prompts, "PROMPTS_DIR", folder)
    return folder


def _prompt(folder: Path, name: str, user: str) -> None:
    (folder / f"{name}.txt").write_text(f"# test prompt\n=== system\nYou help.\n=== user\n{user}\n", encoding="utf-8")


def _cfg(query: dict):
    return load_experiment("small-retrieval", FIXTURES / "experiments", {"query": {**query, "llm": LLM}})


@pytest.mark.parametrize("mode, user, extra", [
    ("hyde", "Write a passage with {n} facts answering: {question}", ["n"]),  # HyDE fills the question only
    ("multi_query", "Rewrite {question} {n} times, after {history}", ["history"]),  # no history for rewrites
    ("condense", "{history}\nRewrite {question} as {n} questions", ["n"]),  # condense fills history + question
])
def test_a_query_prompt_asking_for_what_its_mode_does_not_fill_fails_at_start_up(prompts, mode, user, extra):
    _prompt(prompts, "bad", user)
    with pytest.raises(ConfigError) as exc:
        resolve_models(_cfg({"mode": mode, "prompt": "bad"}), FIXTURES)
    assert f"unknown placeholders {extra}" in exc.value.message
    assert exc.value.hint.startswith("query.prompt can fill")


def test_the_pipeline_keeps_the_prompts_it_checked(prompts):
    _prompt(prompts, "good-hyde", "A passage answering: {question}")
    plans = resolve_models(_cfg({"mode": "hyde", "prompt": "good-hyde"}), FIXTURES)
    assert set(plans.prompts) == {"query"}
    assert plans.prompts["query"].version == "good-hyde"
    assert plans.prompts["query"].fields == {"question"}
    full = resolve_models(load_experiment("small", FIXTURES / "experiments"), FIXTURES)
    assert full.prompts["generation"].version == "answer-grounded-v1"


class OnlyRetrieve(BaseRetriever):
    """A retriever that implements only LlamaIndex's one required method."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text=query_bundle.query_str.upper(), id_="n"), score=1.0)]


class Batched(OnlyRetrieve):
    calls = 0

    def retrieve_many(self, bundles):
        Batched.calls += 1
        return [self._retrieve(b) for b in bundles]


def test_retrieve_many_falls_back_to_one_retrieve_per_question():
    pipe = SimpleNamespace(retriever=OnlyRetrieve())
    out = Pipeline.retrieve_many(pipe, [QueryBundle("a"), QueryBundle("b")])
    assert [[n.node.get_content() for n in hits] for hits in out] == [["A"], ["B"]]
    assert Pipeline.rewrites(pipe, "a") is None  # no query section, no rewrites
    batched = SimpleNamespace(retriever=Batched())
    assert len(Pipeline.retrieve_many(batched, [QueryBundle("a"), QueryBundle("b"), QueryBundle("c")])) == 3
    assert Batched.calls == 1  # the batched path, once for all three


def test_the_pipeline_counts_embeddings_and_reranker_scores():
    pipe = SimpleNamespace(embed_model=SimpleNamespace(counters={"computed": 7, "cached": 2}),
                           chain=SimpleNamespace(reranker=SimpleNamespace(counters={"computed": 5, "cached": 1})))
    pipe.reranker = pipe.chain.reranker
    assert Pipeline.counters(pipe) == {"embeddings_computed": 7, "embeddings_cached": 2,
                                       "rerank_scores_computed": 5, "rerank_scores_cached": 1}
    pipe.reranker = None  # no second stage
    assert Pipeline.counters(pipe)["rerank_scores_computed"] == 0


def test_lab_ask_is_served_from_the_semantic_cache_the_evaluator_fills(project):
    """The pipeline opens the caches section's semantic cache itself, so the query engine (`lab ask`)
    gets a close question's nodes back from it, as the evaluator does."""
    from lab.paths import cache_dir  # noqa: F401  (the real cache location is not used: LAB_CACHE below)
    from lab.rag.pipeline import open_pipeline
    from lab.rag.semantic_cache import SemanticCachedRetriever

    cfg = load_experiment("small", project / "experiments", {"caches": {"semantic_threshold": 0.95}})
    plans = resolve_models(cfg, project)
    pipe = open_pipeline(cfg, plans, project, project / "cache", show_progress=False)
    assert pipe.semantic is not None
    engine = pipe.query_engine()
    cached = engine._retriever
    assert isinstance(cached, SemanticCachedRetriever)
    first = [n.node.node_id for n in cached.retrieve("Where is Harrowfield Aerial headquartered?")]
    assert cached.last == {"hit": False} and first
    again = [n.node.node_id for n in cached.retrieve("Where is Harrowfield Aerial headquartered?")]
    assert cached.last["hit"] is True and cached.last["of"] == "Where is Harrowfield Aerial headquartered?"
    assert again == first  # the same nodes, in the same order, without a search
    plain = open_pipeline(load_experiment("small", project / "experiments"), plans, project, project / "cache",
                          show_progress=False)
    assert plain.semantic is None and not isinstance(plain.query_engine()._retriever, SemanticCachedRetriever)
