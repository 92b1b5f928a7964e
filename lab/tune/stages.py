"""The dev split over the first stage of the config that will use a tuned reranker
(``lab tune reranker --first-stage NAME``).

The dev split's own candidates are the tuning index's dense top :data:`~lab.tune.data.CANDIDATES`
(:mod:`lab.tune.data`), so the first-stage weight it picks fits a dense first stage. A config whose
first stage is another (hybrid, BM25, other chunks) orders other candidates by other scores: here
the dev questions go through that config's own retriever, over its own index, and the model's
scores are fused with the scores that retriever gives, as a run with ``first_stage_weight`` does.
A dev question's positives there are the chunks of that index holding its span; a question whose
span no chunk holds whole (cut by a chunk boundary) is left out and counted, and so is one that a
tuned bi-encoder of that first stage was trained on (same question or same span): its rank there
would be the training's, not the first stage's.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from lab.errors import ConfigError
from lab.evidence.text import fold
from lab.tune.data import (FUSION_WEIGHTS, Prepared, dev_fusion, dev_mrr, dev_scores, fused_mrr, fusion_text,
                           open_index, passages_of, pick_fusion, reciprocal_rank, search)
from lab.tune.options import TuneOptions
from lab.tune.pairs import Passage, TrainQuestion

log = logging.getLogger(__name__)


def score_dev(model: Any, prep: Prepared, by_id: dict[str, Passage], opts: TuneOptions, before: float | None) -> dict:
    """The card's ``dev``: MRR before and after; a reranker's also fused with the dense first stage
    at each weight, and over each ``--first-stage`` config's retriever (``first_stages``)."""
    dev: dict[str, Any] = {"n": len(prep.dev), "mrr_before": before, "mrr_after": None}
    if prep.dev and opts.target == "reranker":
        scores = dev_scores(model, prep, by_id)
        dev["mrr_after"] = dev_mrr(opts.target, model, prep, by_id, opts.show_progress, scores)
        dev["fusion"] = dev_fusion(prep, scores)
        dev["first_stage_weight"] = pick_fusion(dev["mrr_after"], dev["fusion"])
        if opts.first_stage:
            dev["first_stages"] = {name: first_stage_dev(name, model, prep.dev, opts) for name in opts.first_stage}
    elif prep.dev:
        dev["mrr_after"] = dev_mrr(opts.target, model, prep, by_id, opts.show_progress)
    return dev


def log_dev(dev: dict) -> None:
    if "fusion" in dev:
        log.info("dev MRR fused with the first stage, z(model) + w * z(dense): %s; %s",
                 fusion_text(dev["fusion"]),
                 "the model alone does best" if dev["first_stage_weight"] is None
                 else f"best w {dev['first_stage_weight']:g} (reranker.first_stage_weight in a config)")
    for name, stage in (dev.get("first_stages") or {}).items():
        log.info("dev MRR over %s", first_stage_text(name, stage))


def first_stage_dev(name: str, model: Any, dev: Sequence[TrainQuestion], opts: TuneOptions) -> dict[str, Any]:
    """Dev MRR over config ``name``'s first stage: the first stage alone, the model alone, and
    fused at each weight of :data:`FUSION_WEIGHTS`, with the pick (None: the model alone)."""
    from lab.config import load_experiment, run_overrides
    from lab.rag.index import ensure_fts
    from lab.rag.retrievers import build_retriever

    cfg = load_experiment(name, opts.experiments_dir, run_overrides(opts.kb, None))
    if cfg.query is not None and cfg.query.mode != "condense":  # condense: no LLM call in an evaluation
        raise ConfigError(f"--first-stage {name}: its query transform ({cfg.query.mode}) asks the LLM before "
                          "retrieving, which the dev split does not do",
                          hint="name a config with the same retriever and no query: section")
    retriever_cfg = cfg.retriever
    pipe, cache_root = open_index(cfg, opts)
    passages = passages_of(pipe.handle)
    by_id = {p.id: p for p in passages}
    folded = {p.id: fold(p.text) for p in passages}
    if retriever_cfg.name in ("bm25", "hybrid"):
        ensure_fts(pipe.handle, cache_root)
    retriever = build_retriever(retriever_cfg, pipe.handle.index, pipe.embed_model)
    seen = _trained_on(cfg.embedding.model, opts)
    fresh = [q for q in dev if fold(q.text) not in seen and q.span not in seen]
    kept = [(q, tuple(p.id for p in passages if q.span and q.span in folded[p.id])) for q in fresh]
    kept = [(q, pos) for q, pos in kept if pos]
    out: dict[str, Any] = {"retriever": retriever_cfg.name, "top_k": retriever_cfg.top_k, "n": len(kept),
                           "left_out": len(fresh) - len(kept)}
    if seen:
        out["trained_on"] = len(dev) - len(fresh)
    if not kept:
        return out | {"mrr_first_stage": None, "mrr_after": None, "fusion": {}, "first_stage_weight": None}
    results = search(pipe, retriever, [q.text for q, _ in kept], opts.show_progress)
    candidates = [[n.node.node_id for n in nodes] for nodes in results]
    first = [[float(n.score or 0.0) for n in nodes] for nodes in results]
    positives = [pos for _, pos in kept]
    scores = [[float(s) for s in model.predict([(q.text, by_id[c].text) for c in cands], show_progress_bar=False)]
              if cands else [] for (q, _), cands in zip(kept, candidates)]
    after = fused_mrr(candidates, positives, scores, first, None)
    fusion = {f"{w:g}": fused_mrr(candidates, positives, scores, first, w) for w in FUSION_WEIGHTS}
    before = sum(reciprocal_rank(c, p) for c, p in zip(candidates, positives)) / len(kept)
    return out | {"mrr_first_stage": before, "mrr_after": after, "fusion": fusion,
                  "first_stage_weight": pick_fusion(after, fusion)}


def _trained_on(model: str, opts: TuneOptions) -> set[str]:
    """The folded texts and spans of the training questions of a tuned embedding model (empty for
    any other model)."""
    from lab.models.tuned import is_tuned, training_questions, tuned_dir

    if not is_tuned(model):
        return set()
    rows = training_questions(tuned_dir(model, opts.cache_root))
    return ({fold(r.get("text") or "") for r in rows} | {r["span"] for r in rows if r.get("span")}) - {""}


def first_stage_text(name: str, stage: dict[str, Any]) -> str:
    """One line on a first stage's dev figures, as the log, the card and ``lab tune`` print them."""
    head = f"{name}'s first stage ({stage['retriever']} top {stage['top_k']}; {stage['n']} dev questions"
    if stage.get("trained_on"):
        head += f", {stage['trained_on']} left out: its bi-encoder trained on them"
    head += f", {stage['left_out']} left out: span cut by its chunks)" if stage["left_out"] else ")"
    if stage["mrr_after"] is None:
        return head + ": no dev question has its span in one of its chunks"
    w = stage["first_stage_weight"]
    best = max([stage["mrr_after"], *stage["fusion"].values()])
    alone = "; the first stage alone does better still" if stage["mrr_first_stage"] > best + 1e-12 else ""
    return (f"{head}: first stage {stage['mrr_first_stage']:.4f}, tuned alone {stage['mrr_after']:.4f}, fused "
            f"{fusion_text(stage['fusion'])}; " + ("the tuned model alone does best" if w is None else f"best w {w:g}")
            + alone)
