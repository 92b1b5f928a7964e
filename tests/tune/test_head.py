"""The probe that starts a reranker's new head (``--head-init probe``): the fit, the pooler's
rescaling, the ranks it reports, and the head it writes into a real cross-encoder."""

from __future__ import annotations

import numpy as np
import pytest

from lab.tune.head import MAX_LOGIT_SPREAD, first_ranks, fit_probe, probe_head, rescaled_pooler
from lab.tune.options import TuneOptions


def test_the_fit_is_the_penalised_objectives_minimum():
    """At the returned weights the gradient of the weighted, ridge-penalised log loss is zero."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 5))
    y = (x[:, 0] - 0.5 * x[:, 1] + 0.3 * rng.normal(size=120) > 0.8).astype(float)
    w, b = fit_probe(x, y, pos_weight=3.0, ridge=0.1, steps=4000)
    p = 1 / (1 + np.exp(-(x @ w + b)))
    g = np.where(y == 1, 3.0, 1.0) * (p - y)
    assert np.abs(x.T @ g / len(y) + 0.1 * w).max() < 1e-6 and abs(g.mean()) < 1e-6
    assert w[0] > 0 > w[1]  # the direction the labels were drawn along


def test_the_pooler_is_rescaled_to_a_centred_spread():
    rng = np.random.default_rng(1)
    states = rng.normal(3.0, 2.0, size=(50, 4))
    weight, bias = rng.normal(scale=0.01, size=(3, 4)), np.array([0.1, -0.2, 0.0])
    w2, b2 = rescaled_pooler(states, weight, bias, spread=0.5)
    pre = states @ w2.T + b2
    np.testing.assert_allclose(pre.mean(0), 0.0, atol=1e-9)
    np.testing.assert_allclose(pre.std(0), 0.5, atol=1e-6)
    # the same units, each only shifted and scaled: the order of the states in a unit is kept
    before = states @ weight.T + bias
    assert all((np.argsort(pre[:, j]) == np.argsort(before[:, j])).all() for j in range(3))


def test_first_ranks_by_hand():
    queries = ["a", "a", "a", "b", "b", "b", "c", "c"]
    labels = [1, 0, 0, 1, 0, 0, 1, 0]
    scores = np.array([0.9, 0.1, 0.2,  # a: first
                       0.1, 0.5, 0.3,  # b: third
                       0.4, 0.4])  # c: a tie counts against the positive: second
    assert first_ranks(scores, queries, labels) == pytest.approx((1 + 1 / 3 + 1 / 2) / 3)


def test_head_init_is_in_the_run_key_only_when_not_fresh():
    """A fresh head's hyperparameters are as before the option (older runs' keys and cards stand);
    a bce reranker starts from a probe unless asked otherwise, and nothing else has one."""
    assert "head_init" not in TuneOptions(target="reranker", out="x", head_init="fresh").hyper()
    assert TuneOptions(target="reranker", out="x").hyper()["head_init"] == "probe"
    assert TuneOptions(target="reranker", out="x", head_init="probe").hyper()["head_init"] == "probe"
    assert "head_init" not in TuneOptions(target="reranker", out="x", loss="listnet").hyper()
    assert "head_init" not in TuneOptions(target="embedding", out="x").hyper()


@pytest.mark.slow
def test_the_probe_head_scores_the_pairs_as_it_reports(tmp_path):
    """On a real cross-encoder from the packaged weights: the fresh head scores every pair alike;
    after the probe its logits (eval mode) spread as the probe says, and rank the positives first
    more often than chance."""
    import torch

    from lab.tune.train import base_location, build_model

    model = build_model("reranker", base_location(), tmp_path, 64, 0, "cpu")
    facts = ["The kiln fires at 1,200 degrees.", "Orders ship on Tuesdays.", "The glaze is lead-free.",
             "Refunds take ten days.", "The studio opens at nine.", "Clay is sourced from Devon."]
    questions = ["What temperature does the kiln fire at?", "When do orders ship?", "Is the glaze lead-free?",
                 "How long do refunds take?", "When does the studio open?", "Where is the clay from?"]
    cols: dict[str, list] = {"query": [], "passage": [], "label": []}
    for i, q in enumerate(questions):
        for j in [i, (i + 1) % 6, (i + 3) % 6]:
            cols["query"].append(q)
            cols["passage"].append(facts[j])
            cols["label"].append(1.0 if j == i else 0.0)

    def logits() -> np.ndarray:
        model.model.eval()
        enc = model.tokenizer(cols["query"], cols["passage"], truncation="only_second", max_length=64,
                              padding=True, return_tensors="pt")
        with torch.no_grad():
            return model.model(**enc).logits[:, 0].numpy()

    assert logits().std() < 0.05  # a fresh head: every pair alike
    report = probe_head(model, cols, 64, pos_weight=2.0)
    after = logits()
    assert report["pairs"] == 18 and 0 < report["logit_std"] <= MAX_LOGIT_SPREAD
    assert after.std() == pytest.approx(report["logit_std"], rel=1e-3)
    assert first_ranks(after, cols["query"], cols["label"]) == pytest.approx(report["train_mrr"], abs=1e-4)
    assert report["train_mrr"] > (1 + 1 / 2 + 1 / 3) / 3  # above a random order of three
