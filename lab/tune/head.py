"""A cross-encoder's new head started from a linear probe (the default of ``lab tune reranker``).

The cross-encoder is the packaged all-MiniLM-L6-v2 encoder with a new pooler (a dense layer and
tanh over the [CLS] state, whose packaged weights are near zero) and a one-logit classifier. So
started, every pair scores the same to the second decimal (logits' spread 0.008 over our own
knowledge base's training pairs), and the head can sit at BCE's constant-score loss for hundreds of
steps (docs/tuning.md). A probe gives it a direction from the first step (linear probing, then
fine-tuning: Kumar et al., ICLR 2022):

1. the frozen encoder's [CLS] states of the training pairs, one pass without gradients;
2. the pooler rescaled so that its pre-activation is centred and of spread :data:`SPREAD` over
   those pairs (tanh stays near its linear part, and the classifier's dropout acts on centred
   features: a probe on the raw features needs weights so large that dropout's noise alone put
   the loss near 9);
3. the classifier fitted to the labels on the pooled features by weighted logistic regression
   (the loss's own positive weight), ridge :data:`RIDGE`, and scaled down so that its logits'
   spread is at most :data:`MAX_LOGIT_SPREAD`: a direction to follow, not a fit to the pairs the
   model is about to train on.

Pure numpy past the encoder's pass; deterministic for the same pairs and weights.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from lab.paths import write_atomic

log = logging.getLogger(__name__)

#: The probe's report, kept in the run's work folder beside its checkpoints for a resumed run's card.
REPORT = "head-probe.json"

#: The pooler's pre-activation is standardised over the training pairs, then scaled by this.
SPREAD = 0.5
#: Ridge penalty of the probe's logistic regression (on features of spread about SPREAD).
RIDGE = 0.3
#: The probe's logits are scaled down to this standard deviation at most.
MAX_LOGIT_SPREAD = 1.0
#: Gradient steps of the probe's fit (full batch; converged well before on 1,700 pairs).
FIT_STEPS = 300


def fit_probe(features: np.ndarray, labels: np.ndarray, pos_weight: float, ridge: float = RIDGE,
              steps: int = FIT_STEPS, lr: float = 0.5) -> tuple[np.ndarray, float]:
    """Weighted, ridge-penalised logistic regression by full-batch gradient descent: the weights
    and bias of ``sigmoid(features @ w + b)`` against ``labels`` (1 relevant, 0 not), a positive
    counting ``pos_weight`` times."""
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    w, b = np.zeros(x.shape[1]), 0.0
    weight = np.where(y == 1, pos_weight, 1.0)
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x @ w + b)))
        g = weight * (p - y)
        w -= lr * (x.T @ g / len(y) + ridge * w)
        b -= lr * float(g.mean())
    return w, b


def rescaled_pooler(states: np.ndarray, weight: np.ndarray, bias: np.ndarray,
                    spread: float = SPREAD) -> tuple[np.ndarray, np.ndarray]:
    """The pooler's dense weights and bias rewritten so that its pre-activation over ``states``
    (the [CLS] states, one row a pair) has mean 0 and standard deviation ``spread`` in every unit."""
    pre = states @ weight.T + bias
    mean, sd = pre.mean(0), pre.std(0) + 1e-9
    return (spread / sd)[:, None] * weight, spread * (bias - mean) / sd


def first_ranks(scores: np.ndarray, queries: Sequence[str], labels: Sequence[float]) -> float:
    """MRR of each question's positive among its own pairs (a positive row, then its negatives,
    as :func:`lab.tune.train.pairs_dataset` lays them out), ties counted against the positive."""
    rr, i, n = [], 0, len(labels)
    while i < n:
        j = i + 1
        while j < n and labels[j] == 0 and queries[j] == queries[i]:
            j += 1
        if labels[i] == 1:
            rr.append(1.0 / (1 + int((scores[i + 1:j] >= scores[i]).sum())))
        i = j
    return float(np.mean(rr)) if rr else 0.0


def probe_head(model: Any, columns: dict[str, list], max_length: int, pos_weight: float,
               batch_size: int = 32) -> dict[str, float]:
    """Start ``model``'s (a sentence-transformers CrossEncoder) pooler and classifier from a probe
    of the training pairs ``columns`` (query, passage, label); returns what the card records: the
    probe's MRR over the pairs it was fitted on and its logits' spread."""
    import torch

    hf, tokenizer = model.model, model.tokenizer
    was_training = hf.training
    hf.eval()
    states = []
    with torch.no_grad():
        for s in range(0, len(columns["label"]), batch_size):
            enc = tokenizer(columns["query"][s:s + batch_size], columns["passage"][s:s + batch_size],
                            truncation="only_second", max_length=max_length, padding=True, return_tensors="pt")
            out = hf.base_model(**enc.to(hf.device))
            states.append(out.last_hidden_state[:, 0].float().cpu().numpy())
    cls = np.concatenate(states).astype(np.float64)
    pooler = hf.base_model.pooler.dense
    weight, bias = rescaled_pooler(cls, pooler.weight.detach().float().cpu().numpy().astype(np.float64),
                                   pooler.bias.detach().float().cpu().numpy().astype(np.float64))
    features = np.tanh(cls @ weight.T + bias)
    labels = np.asarray(columns["label"], dtype=np.float64)
    w, b = fit_probe(features, labels, pos_weight)
    logits = features @ w + b
    if logits.std() > MAX_LOGIT_SPREAD:
        w = w * (MAX_LOGIT_SPREAD / logits.std())
        b = -float((features @ w).mean())
        logits = features @ w + b
    with torch.no_grad():
        pooler.weight.copy_(torch.tensor(weight, dtype=pooler.weight.dtype))
        pooler.bias.copy_(torch.tensor(bias, dtype=pooler.bias.dtype))
        hf.classifier.weight.copy_(torch.tensor(w, dtype=hf.classifier.weight.dtype).reshape(hf.classifier.weight.shape))
        hf.classifier.bias.copy_(torch.tensor([b], dtype=hf.classifier.bias.dtype))
    hf.train(was_training)
    return {"pairs": len(labels), "train_mrr": round(first_ranks(logits, columns["query"], columns["label"]), 4),
            "logit_std": round(float(logits.std()), 4)}


def started_head(model: Any, columns: dict[str, list], max_length: int, pos_weight: float, work: Path,
                 resumed: bool) -> dict[str, float] | None:
    """Start ``model``'s head from a probe (:func:`probe_head`) and keep its report in ``work``; a run
    resumed from a checkpoint has its head from there, and its report is read back (None from a work
    folder without one)."""
    path = work / REPORT
    if resumed:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    probe = probe_head(model, columns, max_length, pos_weight)
    write_atomic(path, json.dumps(probe) + "\n")
    log.info("the head starts from a probe of %d pairs (its MRR on them %.3f)", probe["pairs"], probe["train_mrr"])
    return probe
