"""Keyword-overlap rerank, a model reranker fused with the first stage, auto-activation and the
low-confidence guardrail, by hand."""

import pytest
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from lab.config import GuardrailConfig
from llama_index.core.postprocessor.types import BaseNodePostprocessor

from lab.rag.postprocess import (AutoActivatedReranker, Chain, ChainPostprocessor, FusedReranker,
                                   KeywordOverlapReranker, activation, jaccard, low_confidence, words)


def nodes(*pairs):
    return [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=s) for i, (t, s) in enumerate(pairs)]


def test_words_drop_stop_words_and_keep_numbers_whole():
    assert words("What is the price of the Ember 90? It costs 8,400 euros.") == {
        "price", "ember", "90", "costs", "8,400", "euros"}
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard(set(), set()) == 0.0


def test_keyword_overlap_scores_by_hand():
    q = QueryBundle("Ember 90 price")  # words: ember, 90, price
    ns = nodes(("The Ember 90 price list", 0.5),  # words ember 90 price list: J = 3/4
               ("Kilns for schools", 0.6),  # J = 0
               ("Ember 40", 0.2))  # words ember 40: J = 1/4
    out = KeywordOverlapReranker(min_score=0.3, top_n=5).postprocess_nodes(ns, query_bundle=q)
    # 0.7*0.5 + 0.3*0.75 = 0.575; 0.7*0.6 = 0.42; 0.7*0.2 + 0.3*0.25 = 0.215 < 0.3: dropped
    assert [n.node.node_id for n in out] == ["n0", "n1"]
    assert [n.score for n in out] == pytest.approx([0.575, 0.42])
    assert out[0].node.metadata["lab_overlap"] == pytest.approx(0.75)
    assert "lab_overlap" in out[0].node.excluded_llm_metadata_keys
    top1 = KeywordOverlapReranker(min_score=0.0, top_n=1).postprocess_nodes(nodes(("a b", 0.1), ("c", 0.9)),
                                                                             query_bundle=QueryBundle("c"))
    assert [n.node.node_id for n in top1] == ["n1"]


@pytest.mark.parametrize("question, scores, why", [
    ("short question", [0.9, 0.5, 0.4], []),
    ("one two three four five six seven eight nine ten eleven", [0.9, 0.5, 0.4], ["long"]),
    ("short", [0.30, 0.10, 0.05], ["low"]),
    ("short", [0.60, 0.55, 0.50], ["flat"]),  # 0.60 - median 0.55 = 0.05 < 0.08
    ("short", [0.34, 0.33, 0.30], ["low", "flat"]),
    ("short", [], []),
])
def test_activation_policy(question, scores, why):
    assert activation(question, scores, min_query_tokens=10, max_top_score=0.35, min_spread=0.08) == why


class Reverse:
    """A stand-in second stage for the wrapper's test (plumbing only): reverses the order."""

    def postprocess_nodes(self, ns, query_bundle=None):
        return list(reversed(ns))[:2]


def test_auto_activated_reranker_records_its_decision():
    wrapped = AutoActivatedReranker(inner=Reverse(), top_n=2)
    ns = nodes(("a", 0.9), ("b", 0.5), ("c", 0.4))
    assert [n.node.node_id for n in wrapped.postprocess_nodes(ns, query_bundle=QueryBundle("short"))] == ["n0", "n1"]
    assert wrapped.last == {"fired": False, "why": []}
    flat = nodes(("a", 0.6), ("b", 0.58), ("c", 0.57))
    assert [n.node.node_id for n in wrapped.postprocess_nodes(flat, query_bundle=QueryBundle("q"))] == ["n2", "n1"]
    assert wrapped.last == {"fired": True, "why": ["flat"]}


def test_low_confidence():
    assert low_confidence([0.2, 0.1], 0.3) and not low_confidence([0.31], 0.3) and low_confidence([], 0.3)


def ids(ns) -> list[str]:
    return [n.node.node_id for n in ns]


def test_chain_guard_cut_rerank_as_the_evaluator_and_the_query_engine_see_it():
    guard = GuardrailConfig(min_top_score=0.3, suppress_generation=True)
    chain = Chain(guard, candidate_k=2, reranker=Reverse())
    weak, strong = nodes(("a", 0.2), ("b", 0.1), ("c", 0.05)), nodes(("a", 0.9), ("b", 0.5), ("c", 0.4))
    # the evaluator: the guard flags the weak question but its ranking is still scored
    r = chain.apply(weak, QueryBundle("q"))
    assert (r.low_confidence, r.suppress, ids(r.nodes)) == (True, True, ["n1", "n0"])  # cut to 2, reversed
    r = chain.apply(strong, QueryBundle("q"))
    assert (r.low_confidence, r.suppress, ids(r.nodes)) == (False, False, ["n1", "n0"])
    assert r.rerank_s is not None and r.rerank is None
    # the query engine: the same chain as one postprocessor; a suppressed question gets nothing
    post = ChainPostprocessor(chain)
    assert post.postprocess_nodes(weak, query_bundle=QueryBundle("q")) == []
    assert ids(post.postprocess_nodes(strong, query_bundle=QueryBundle("q"))) == ["n1", "n0"]


def test_chain_without_reranker_or_guard_passes_first_stage_through():
    r = Chain(None, None, None).apply(nodes(("a", 0.1), ("b", 0.05)), QueryBundle("q"))
    assert (ids(r.nodes), r.low_confidence, r.suppress, r.rerank_s) == (["n0", "n1"], None, False, None)
    flagged_only = Chain(GuardrailConfig(min_top_score=0.3, suppress_generation=False), None, None)
    r = flagged_only.apply(nodes(("a", 0.1)), QueryBundle("q"))
    assert (r.low_confidence, r.suppress) == (True, False)  # flagged, still answered


class Overwriting(BaseNodePostprocessor):
    """Scores as LlamaIndex's cross-encoder rerankers do: on the nodes it is given, in place."""

    def _postprocess_nodes(self, nodes, query_bundle=None):
        for n in nodes:
            n.score = {"n0": 3.0, "n1": 1.0, "n2": 2.0}[n.node.node_id]
        return sorted(nodes, key=lambda n: -n.score)


@pytest.mark.parametrize("weight, kept, scores", [
    # z(inner) over 3, 1, 2: mean 2, sd sqrt(2/3) -> 1.2247, -1.2247, 0
    # z(first) over 0.9, 0.8, 0.1: mean 0.6, sd sqrt(0.38/3) = 0.355903 -> 0.842927, 0.561951, -1.404879
    (0.0, ["n0", "n2"], [1.224745, 0.0]),
    (1.0, ["n0", "n1"], [2.067672, -0.662794]),  # 1.224745 + 0.842927; -1.224745 + 0.561951 beats 0 - 1.404879
])
def test_fused_reranker_orders_by_z_inner_plus_weighted_z_first(weight, kept, scores):
    ns = nodes(("a", 0.9), ("b", 0.8), ("c", 0.1))
    out = FusedReranker(inner=Overwriting(), weight=weight, top_n=2).postprocess_nodes(ns, query_bundle=QueryBundle("q"))
    assert [n.node.node_id for n in out] == kept
    assert [n.score for n in out] == pytest.approx(scores, abs=1e-6)
    assert [n.score for n in ns] == [0.9, 0.8, 0.1]  # the first stage's scores, as recorded


class FakeCrossEncoder(Overwriting):
    """Built as LlamaIndex's SentenceTransformerRerank is, keeping its ``top_n``."""

    top_n: int = 3
    model: str = ""
    device: str = "cpu"

    def _postprocess_nodes(self, nodes, query_bundle=None):
        return super()._postprocess_nodes(nodes, query_bundle)[: self.top_n]


@pytest.mark.parametrize("weight, kept, scores", [
    (None, ["n0", "n2"], [3.0, 2.0]),  # off: the cross-encoder's own scores
    (0, ["n0", "n2"], [3.0, 2.0]),  # 0 is off too (it used to record z-scores: 1.224745, 0.0)
    (1.0, ["n0", "n1"], [2.067672, -0.662794]),  # z-fused, as in the table above
])
def test_a_cross_encoder_from_config_fuses_only_with_a_positive_weight(monkeypatch, weight, kept, scores):
    import llama_index.core.postprocessor

    from lab.config import SentenceTransformerRerankerConfig
    from lab.models.resolve import ResolvedModel
    from lab.rag.postprocess import RerankerPlan, build_reranker

    monkeypatch.setattr(llama_index.core.postprocessor, "SentenceTransformerRerank", FakeCrossEncoder)
    cfg = SentenceTransformerRerankerConfig(name="sentence_transformer", top_n=2, first_stage_weight=weight)
    rr = build_reranker(RerankerPlan(cfg, ResolvedModel("fake", "fake", "path")), None)
    assert isinstance(rr, FusedReranker) == (weight == 1.0)
    ns = nodes(("a", 0.9), ("b", 0.8), ("c", 0.1))
    out = Chain(None, 3, rr).apply(ns, QueryBundle("q")).nodes
    assert [n.node.node_id for n in out] == kept
    assert [n.score for n in out] == pytest.approx(scores, abs=1e-6)


def test_the_chain_hands_the_reranker_copies_so_first_stage_scores_survive():
    ns = nodes(("a", 0.9), ("b", 0.8), ("c", 0.1))
    ranked = Chain(None, 3, Overwriting()).apply(ns, QueryBundle("q"))
    assert [n.node.node_id for n in ranked.nodes] == ["n0", "n2", "n1"] and [n.score for n in ranked.nodes] == [3, 2, 1]
    assert [n.score for n in ns] == [0.9, 0.8, 0.1]
