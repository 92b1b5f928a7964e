"""The dev split of ``lab tune``, scored by the run: the dev questions are written as an eval set
with golden spans, and each figure of the model card's ``dev`` is the ``span_mrr`` of an ordinary
retrieval-only run (:func:`lab.eval.runner.run_experiment`) over it, as ``lab race`` scores its
batches. So the figure ``lab tune`` prints is the figure ``lab run`` gives on the same questions,
under the run's one rule for holding a span (:func:`lab.evidence.holds.holds`: a passage covering
at least half of the span, or of a twin, by offsets).

- The **dev set** (``dev.jsonl``, kept beside the model): each dev question with its span located
  in its document (a pseudo-query's sentence in the document of its chunk; a generated row's
  references as they are). A question whose span is in no loaded document is left out and counted.
- **Base**: experiment ``--index`` with its generation, judge, query transform, reranker and
  caches taken away and a dense retriever of :data:`CANDIDATES` (the candidates the reranker is
  tuned to reorder). Its MRR is ``mrr_before``.
- A **reranker**: the base with the tuned cross-encoder keeping all :data:`CANDIDATES`
  (``mrr_after``), and fused with the dense score at each weight of :data:`FUSION_WEIGHTS`
  (``fusion``): one run per weight, a sweep of ``reranker.first_stage_weight``; the model's scores
  are computed once and read from the cache by the other runs.
- An **embedding model**: the base with the tuned model as ``embedding.model`` (its own index).
- ``--first-stage NAME``: the same over experiment NAME's own retriever and index, the questions
  its tuned bi-encoder was trained on left out (:func:`first_stage_dev`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence

from lab.config import ExperimentConfig, SentenceTransformerRerankerConfig, VectorRetriever, load_experiment
from lab.config import run_overrides
from lab.errors import ConfigError
from lab.eval.runner import RunOptions, run_experiment
from lab.evidence.text import fold, fold_at
from lab.models.tuned import is_tuned, training_questions, tuned_dir
from lab.paths import cache_dir
from lab.rag.pipeline import load_corpus
from lab.runfiles import load_run
from lab.tune.options import TuneOptions
from lab.tune.pairs import TrainQuestion

log = logging.getLogger(__name__)

#: Candidates of the dense first stage per dev question: what the reranker reorders.
CANDIDATES = 20
#: First-stage weights w tried on the dev split for a reranker: order by z(cross-encoder) + w * z(dense).
FUSION_WEIGHTS = (0.25, 0.5, 1.0, 2.0)
#: The dev set's file in the model's folder (and in the dev runs' folder).
DEV_SET = "dev.jsonl"


def dev_rows(dev: Sequence[TrainQuestion], documents: dict[str, str], category: str = "dev") -> tuple[list[dict], int]:
    """The dev questions as eval-set rows with their spans located (and how many could not be):
    a generated question's references where it has them, a pseudo-query's sentence in its
    document (its first occurrence, in the ``tolerant`` fold; a repeat elsewhere is a twin).
    ``category``: one the experiment declares, so that ``lab run`` reads the set as it is."""
    rows: list[dict] = []
    missing = 0
    for q in dev:
        places = [p for p in q.places if p[0] in documents] or _locate(q, documents)
        if not places:
            missing += 1
            continue
        refs = [{"source": s, "content": documents[s][a:b], "start_index": a, "end_index": b} for s, a, b in places]
        rows.append({"id": f"dev-{len(rows) + 1:04d}", "question": q.text, "category": category,
                     "reference_answer": " ".join(r["content"] for r in refs), "references": refs})
    return rows, missing


def _locate(q: TrainQuestion, documents: dict[str, str]) -> list[tuple[str, int, int]]:
    text = documents.get(q.source)
    if text is None or not q.span:
        return []
    folded = fold_at(text)
    at = folded.text.find(q.span)
    if at < 0:
        return []
    return [(q.source, folded.where[at], folded.where[at + len(q.span) - 1] + 1)]


class DevRuns:
    """Retrieval-only runs over one dev set, each a variant of one experiment, in a folder of
    their own: :meth:`mrr` runs one and returns its ``span_mrr``."""

    def __init__(self, opts: TuneOptions, folder: Path, rows: Sequence[dict]):
        self.opts = opts
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / DEV_SET
        self.path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        self.n = len(rows)

    def base(self, name: str, dense: bool) -> ExperimentConfig:
        """Experiment ``name`` over the dev set, retrieval alone: no answer, judge, query transform,
        reranker or cache; with ``dense``, a dense retriever of :data:`CANDIDATES` (its own else)."""
        cfg = load_experiment(name, self.opts.experiments_dir, run_overrides(self.opts.kb, self.path, answers=False))
        update: dict[str, Any] = {"reranker": None, "query": None, "caches": None, "guardrail": None,
                                  "sample": cfg.sample.model_copy(update={"limit": None})}
        if dense:
            update["retriever"] = VectorRetriever(name="vector", top_k=CANDIDATES)
        return cfg.model_copy(update=update)

    def mrr(self, label: str, cfg: ExperimentConfig) -> float:
        """``span_mrr`` of a retrieval-only run of ``cfg`` (named ``label`` in the runs' folder)."""
        run = run_experiment(cfg.model_copy(update={"name": label}), RunOptions(
            project_root=self.opts.experiments_dir.resolve().parent, reports_root=self.folder / "runs",
            cache_root=self.opts.cache_root or cache_dir(), show_progress=False), quiet=True)
        results, _ = load_run(run)
        return float(results["metrics"]["overall"]["span_mrr"]["mean"])


def reranking(cfg: ExperimentConfig, model: str, top_n: int, weight: float | None) -> ExperimentConfig:
    """``cfg`` with the cross-encoder ``model`` keeping ``top_n``, fused at ``weight`` (None: alone)."""
    return cfg.model_copy(update={"reranker": SentenceTransformerRerankerConfig(
        name="sentence_transformer", model=model, top_n=top_n, first_stage_weight=weight)})


def score_dev(model: str, dev: Sequence[TrainQuestion], opts: TuneOptions, folder: Path) -> dict[str, Any]:
    """The card's ``dev``: the dev questions' MRR before and after, by runs (see the module's
    docstring); ``model`` is the tuned model's folder."""
    out: dict[str, Any] = {"n": 0, "mrr_before": None, "mrr_after": None}
    if not dev:
        return out
    cfg = load_experiment(opts.index, opts.experiments_dir, run_overrides(opts.kb, None))
    documents = {d.metadata["source"]: d.text for d in load_corpus(cfg, opts.experiments_dir.resolve().parent).documents}
    rows, missing = dev_rows(dev, documents, _category(cfg))
    out["n"] = len(rows)
    if missing:
        out["not_located"] = missing
    if not rows:
        return out
    runs = DevRuns(opts, folder, rows)
    base = runs.base(opts.index, dense=True)
    out["mrr_before"] = runs.mrr("dev-base", base)
    if opts.target == "embedding":
        out["mrr_after"] = runs.mrr("dev-tuned", base.model_copy(
            update={"embedding": base.embedding.model_copy(update={"model": model})}))
        return out
    out["mrr_after"] = runs.mrr("dev-tuned", reranking(base, model, CANDIDATES, None))
    out["fusion"] = {f"{w:g}": runs.mrr(f"dev-fused-{w:g}", reranking(base, model, CANDIDATES, w))
                     for w in FUSION_WEIGHTS}
    out["first_stage_weight"] = pick_fusion(out["mrr_after"], out["fusion"])
    if opts.first_stage:
        out["first_stages"] = {name: first_stage_dev(name, model, dev, documents, opts, folder / "first-stages" / name)
                               for name in opts.first_stage}
    return out


def first_stage_dev(name: str, model: str, dev: Sequence[TrainQuestion], documents: dict[str, str],
                    opts: TuneOptions, folder: Path) -> dict[str, Any]:
    """Dev MRR over config ``name``'s first stage: the first stage alone, the model alone, and
    fused at each weight of :data:`FUSION_WEIGHTS`, with the pick (None: the model alone). Dev
    questions that config's tuned bi-encoder was trained on (same question or same span) are left
    out: their ranks there would be the training's."""
    cfg = load_experiment(name, opts.experiments_dir, run_overrides(opts.kb, None))
    if cfg.query is not None and cfg.query.mode != "condense":  # condense: no LLM call in an evaluation
        raise ConfigError(f"--first-stage {name}: its query transform ({cfg.query.mode}) asks the LLM before "
                          "retrieving, which the dev split does not do",
                          hint="name a config with the same retriever and no query: section")
    seen = _trained_on(cfg.embedding.model, opts)
    fresh = [q for q in dev if fold(q.text) not in seen and q.span not in seen]
    rows, missing = dev_rows(fresh, documents, _category(cfg))
    out: dict[str, Any] = {"retriever": cfg.retriever.name, "top_k": cfg.retriever.top_k, "n": len(rows),
                           "left_out": missing}
    if seen:
        out["trained_on"] = len(dev) - len(fresh)
    if not rows:
        return out | {"mrr_first_stage": None, "mrr_after": None, "fusion": {}, "first_stage_weight": None}
    runs = DevRuns(opts, folder, rows)
    base = runs.base(name, dense=False)
    k = cfg.retriever.top_k
    before = runs.mrr("dev-first-stage", base)
    after = runs.mrr("dev-tuned", reranking(base, model, k, None))
    fusion = {f"{w:g}": runs.mrr(f"dev-fused-{w:g}", reranking(base, model, k, w)) for w in FUSION_WEIGHTS}
    return out | {"mrr_first_stage": before, "mrr_after": after, "fusion": fusion,
                  "first_stage_weight": pick_fusion(after, fusion)}


def _category(cfg: ExperimentConfig) -> str:
    """The dev rows' category: the experiment's first declared one (its set of categories is
    closed), else ``dev``."""
    return cfg.data.categories[0] if cfg.data.categories else "dev"


def _trained_on(model: str, opts: TuneOptions) -> set[str]:
    """The folded texts and spans of the training questions of a tuned embedding model (empty for
    any other model)."""
    if not is_tuned(model):
        return set()
    rows = training_questions(tuned_dir(model, opts.cache_root))
    return ({fold(r.get("text") or "") for r in rows} | {r["span"] for r in rows if r.get("span")}) - {""}


def pick_fusion(after: float, fusion: dict[str, float]) -> float | None:
    """The first-stage weight with the best dev MRR, or None when the cross-encoder alone does at
    least as well (ties go to the smaller weight)."""
    best, mrr = None, after
    for w, value in fusion.items():
        if value > mrr + 1e-12:
            best, mrr = float(w), value
    return best


def fusion_text(fusion: dict[str, float]) -> str:
    """The dev fusion figures as the log, the model card and ``lab tune`` print them."""
    return ", ".join(f"w {w}: {v:.4f}" for w, v in fusion.items())


def log_dev(dev: dict) -> None:
    if "fusion" in dev:
        log.info("dev MRR fused with the first stage, z(model) + w * z(dense): %s; %s",
                 fusion_text(dev["fusion"]),
                 "the model alone does best" if dev["first_stage_weight"] is None
                 else f"best w {dev['first_stage_weight']:g} (reranker.first_stage_weight in a config)")
    for name, stage in (dev.get("first_stages") or {}).items():
        log.info("dev MRR over %s", first_stage_text(name, stage))


def first_stage_text(name: str, stage: dict[str, Any]) -> str:
    """One line on a first stage's dev figures, as the log, the card and ``lab tune`` print them."""
    head = f"{name}'s first stage ({stage['retriever']} top {stage['top_k']}; {stage['n']} dev questions"
    if stage.get("trained_on"):
        head += f", {stage['trained_on']} left out: its bi-encoder trained on them"
    head += f", {stage['left_out']} left out: span in no document)" if stage["left_out"] else ")"
    if stage["mrr_after"] is None:
        return head + ": no dev question has its span in a document"
    w = stage["first_stage_weight"]
    best = max([stage["mrr_after"], *stage["fusion"].values()])
    alone = "; the first stage alone does better still" if stage["mrr_first_stage"] > best + 1e-12 else ""
    return (f"{head}: first stage {stage['mrr_first_stage']:.4f}, tuned alone {stage['mrr_after']:.4f}, fused "
            f"{fusion_text(stage['fusion'])}; " + ("the tuned model alone does best" if w is None else f"best w {w:g}")
            + alone)


def curve_text(curve: Sequence[dict[str, Any]]) -> str:
    """The card's ``dev.curve`` as lines: step, loss, dev MRR tuned alone and best fused, against the
    first stage's."""
    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.4f}"

    return "\n".join(f"  step {p['step']:>5}: loss {f(p['loss'])}, tuned alone {f(p['mrr_after'])}, best fused "
                     f"{f(p['best_fused'])} (first stage {f(p['mrr_before'])})" for p in curve)
