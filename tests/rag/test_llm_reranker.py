from pathlib import Path

import pytest
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from lab.caches import VectorCache
from lab.rag.llm_reranker import LlamaCppRelevanceScorer, LLMPointwiseReranker
from lab.rag.postprocess import build_reranker, resolve_reranker


class FakeScorer:
    """Plumbing only: scores by the number of question words in the passage."""

    fingerprint = "fake-v1"

    def __init__(self):
        self.calls = 0

    def score(self, question, passage):
        self.calls += 1
        return float(sum(w in passage.lower() for w in question.lower().split()))


def nodes(*texts):
    return [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0 - i / 10) for i, t in enumerate(texts)]


def test_reorders_keeps_top_n_and_caches(tmp_path):
    cache = VectorCache(tmp_path / "scores.sqlite")
    scorer = FakeScorer()
    rr = LLMPointwiseReranker(scorer=scorer, cache=cache, top_n=2)
    q = QueryBundle("kiln price euros")
    out = rr.postprocess_nodes(nodes("nothing", "kiln", "kiln price euros", "price euros"), query_bundle=q)
    assert [n.node.node_id for n in out] == ["n2", "n3"]  # 3 words, then 2 (n3 before n1 "kiln": 2 > 1)
    assert [n.score for n in out] == [3.0, 2.0]
    assert rr.counters == {"computed": 4, "cached": 0} and scorer.calls == 4
    rr2 = LLMPointwiseReranker(scorer=FakeScorer(), cache=cache, top_n=2)
    again = rr2.postprocess_nodes(nodes("nothing", "kiln", "kiln price euros", "price euros"), query_bundle=q)
    assert [n.node.node_id for n in again] == ["n2", "n3"] and rr2.counters == {"computed": 0, "cached": 4}


def test_ties_keep_first_stage_order():
    rr = LLMPointwiseReranker(scorer=FakeScorer(), top_n=3)
    out = rr.postprocess_nodes(nodes("a", "b", "c"), query_bundle=QueryBundle("zzz"))
    assert [n.node.node_id for n in out] == ["n0", "n1", "n2"]


@pytest.mark.slow
def test_kv_prefix_reuse_does_not_change_scores():
    from lab.models.resolve import resolve_gguf

    path = str(resolve_gguf("smollm2-135m-instruct"))
    q = "Who founded Brightwater Kilns?"
    p1 = "Brightwater Kilns was founded in 2009 by Odile Ferrand in Lyon."
    p2 = "The Ember 90 is a 90-litre production kiln for schools."
    warm = LlamaCppRelevanceScorer(path, n_ctx=512)
    s1, s2, s1_again = warm.score(q, p1), warm.score(q, p2), warm.score(q, p1)
    cold = LlamaCppRelevanceScorer(path, n_ctx=512)
    assert cold.score(q, p2) == pytest.approx(s2, abs=1e-3)
    assert s1_again == pytest.approx(s1, abs=1e-3)
    assert warm.tokens_evaluated < 3 * len(warm._llm.tokenize(warm.prompt(q, p1).encode(), add_bos=False, special=True))


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    """A tiny randomly initialised BERT classifier with MiniLM's tokenizer (plumbing only)."""
    import shutil

    from transformers import BertConfig, BertForSequenceClassification

    from lab.models.resolve import resolve_hf_model

    out = tmp_path_factory.mktemp("tiny-cross-encoder")
    minilm = Path(resolve_hf_model("sentence-transformers/all-MiniLM-L6-v2", "m").location)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(minilm / name, out / name)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(out)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sentence_transformer", "flag_embedding"])
def test_cross_encoder_routes_load_a_local_folder(kind, tiny_cross_encoder):
    from lab.config import FlagEmbeddingRerankerConfig, SentenceTransformerRerankerConfig

    model_cls = {"sentence_transformer": SentenceTransformerRerankerConfig,
                 "flag_embedding": FlagEmbeddingRerankerConfig}[kind]
    plan = resolve_reranker(model_cls(name=kind, model=str(tiny_cross_encoder), top_n=2))
    assert plan.model.source == "path"
    rr = build_reranker(plan, None)
    out = rr.postprocess_nodes(nodes("alpha", "beta", "gamma"), query_bundle=QueryBundle("alpha?"))
    assert len(out) == 2 and all(isinstance(float(n.score), float) for n in out)
    assert {n.node.node_id for n in out} <= {"n0", "n1", "n2"}


def test_interrupted_rerank_resumes_without_recomputing(tmp_path):
    cache = VectorCache(tmp_path / "scores.sqlite")

    class Dies(FakeScorer):
        def score(self, question, passage):
            if self.calls == 2:
                raise KeyboardInterrupt
            return super().score(question, passage)

    q = QueryBundle("kiln price euros")
    with pytest.raises(KeyboardInterrupt):
        LLMPointwiseReranker(scorer=Dies(), cache=cache, top_n=2).postprocess_nodes(
            nodes("nothing", "kiln", "kiln price euros", "price euros"), query_bundle=q)
    resumed = LLMPointwiseReranker(scorer=FakeScorer(), cache=cache, top_n=2)
    out = resumed.postprocess_nodes(nodes("nothing", "kiln", "kiln price euros", "price euros"), query_bundle=q)
    assert resumed.counters == {"computed": 2, "cached": 2}  # the two finished pairs were kept
    assert [n.node.node_id for n in out] == ["n2", "n3"]


def llm_reranker(monkeypatch, **cfg):
    """``llm_pointwise`` as a run builds it from its config, scoring with :class:`FakeScorer`."""
    from lab.config import LLMPointwiseRerankerConfig
    from lab.models.resolve import ResolvedModel
    from lab.rag.postprocess import RerankerPlan

    monkeypatch.setattr("lab.rag.postprocess.LlamaCppRelevanceScorer", lambda *a, **k: FakeScorer())
    config = LLMPointwiseRerankerConfig(name="llm_pointwise", **cfg)
    return build_reranker(RerankerPlan(config, ResolvedModel("fake", "fake.gguf", "path")), None)


def test_first_stage_weight_fuses_z_scores(monkeypatch):
    """z(llm) + w * z(first): hand arithmetic on three candidates."""
    import numpy as np

    rr = llm_reranker(monkeypatch, top_n=3, first_stage_weight=1.0)
    # llm scores (question words present): [0, 1, 2]; first-stage scores: [1.0, 0.9, 0.8]
    out = rr.postprocess_nodes(nodes("x", "kiln", "kiln price"), query_bundle=QueryBundle("kiln price"))
    z_llm = (np.array([0, 1, 2]) - 1) / np.std([0, 1, 2])
    z_first = (np.array([1.0, 0.9, 0.8]) - 0.9) / np.std([1.0, 0.9, 0.8])
    fused = z_llm + z_first  # [0, 0, 0] up to rounding: ties keep the first-stage order
    assert fused == pytest.approx([0, 0, 0], abs=1e-9)
    assert [n.node.node_id for n in out] == ["n0", "n1", "n2"]
    assert rr.counters == {"computed": 3, "cached": 0}  # the LLM's counters, through the fusion
    rr2 = llm_reranker(monkeypatch, top_n=1, first_stage_weight=0.5)
    top = rr2.postprocess_nodes(nodes("x", "kiln", "kiln price"), query_bundle=QueryBundle("kiln price"))
    assert top[0].node.node_id == "n2" and top[0].score == pytest.approx(z_llm[2] + 0.5 * z_first[2])


@pytest.mark.parametrize("weight", [None, 0])
def test_first_stage_weight_off_records_the_llms_own_scores(monkeypatch, weight):
    rr = llm_reranker(monkeypatch, top_n=2, first_stage_weight=weight)
    out = rr.postprocess_nodes(nodes("x", "kiln", "kiln price"), query_bundle=QueryBundle("kiln price"))
    assert [(n.node.node_id, n.score) for n in out] == [("n2", 2.0), ("n1", 1.0)]
