"""The training material of ``lab tune``: the passages of an index, the questions (eval-set rows
with golden spans, pseudo-queries), the hard negatives mined from the index's dense and BM25 sides,
and the dev split (scored by runs: :mod:`lab.tune.dev`)."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence


from llama_index.core.schema import QueryBundle

from lab.config import BM25Retriever, VectorRetriever, load_experiment, run_overrides
from lab.errors import ConfigError
from lab.evalsets.evalset import load_eval_set
from lab.evalsets.leakage import overlaps
from lab.evidence.holds import Passage
from lab.evidence.text import fold
from lab.models.resolve import resolve_hf_model
from lab.paths import cache_dir
from lab.progress import Ticker
from lab.rag.index import ensure_fts, index_passages
from lab.rag.pipeline import open_pipeline, resolve_models
from lab.rag.retrievers import build_retriever
from lab.tune.options import BASE_MODEL, TuneOptions
from lab.tune.pairs import TrainQuestion, in_view, mine_negatives, pseudo_queries, span_questions

log = logging.getLogger(__name__)

#: Candidates taken from each first stage (dense, BM25) per question, for mining.
CANDIDATES = 20


@dataclass
class Prepared:
    """The training material: passages, questions with negatives, the dev split."""

    passages: list[Passage]
    train: list[TrainQuestion]
    dev: list[TrainQuestion]
    counts: dict[str, Any] = field(default_factory=dict)
    kb_fingerprint: str = ""
    index_key: str = ""


def prepare(opts: TuneOptions) -> Prepared:
    """Passages from the index, questions from the files and the chunks, negatives mined."""

    cfg = load_experiment(opts.index, opts.experiments_dir, run_overrides(opts.kb, None))
    # every input is read before the index is opened: a bad row stops in a second
    rows: list[tuple[str, dict]] = []
    for path in opts.train:
        es = load_eval_set(Path(path), None)
        rows += [(f"{path}:{r._line}", r.model_dump(mode="json")) for r in es.rows]
    held: list[tuple[int, str, list[str]]] = []
    for path in opts.holdout:
        es = load_eval_set(Path(path), None)
        held += [(r._line, r.question, [x.content for x in r.references or []]) for r in es.rows]
    pipe, cache_root = open_index(cfg, opts)
    passages = sorted(index_passages(pipe.handle), key=lambda p: p.id)  # table order is not a contract
    by_id = {p.id: p for p in passages}
    questions, skipped = span_questions(rows, passages)
    pseudo = pseudo_queries(passages, opts.pseudo, opts.seed, opts.cloze)
    questions += pseudo
    if len(pseudo) < opts.pseudo:
        log.warning("asked for %d pseudo-queries; the %d chunks hold %d usable sentences and headings (each used once)",
                    opts.pseudo, len(passages), len(pseudo))
    counts: dict[str, Any] = {"passages": len(passages), "generated": len(questions) - len(pseudo),
                              "pseudo": len(pseudo), "skipped": skipped}
    if held:
        # each training question against every held-out row (overlaps() names one clash per eval row)
        kept = [q for q in questions if not overlaps([q.record()], held)]
        counts["held_out"] = len(questions) - len(kept)
        if counts["held_out"]:
            log.info("left out %d training question(s) that are, or share a span with, a --holdout question",
                     counts["held_out"])
        questions = kept
    if not questions:
        raise ConfigError("lab tune: no training question is left (every row lacked a golden span found in "
                          "the chunks, or overlapped --holdout)",
                          hint="add --pseudo N, or give --train an eval set made by lab generate on these documents")
    # candidates: dense (one batched LanceDB search) and BM25, for every question
    k = min(CANDIDATES, len(passages))
    dense_r = build_retriever(VectorRetriever(name="vector", top_k=k), pipe.handle.index, pipe.embed_model)
    dense_nodes = search(pipe, dense_r, [q.text for q in questions], opts.show_progress)
    ensure_fts(pipe.handle, cache_root)
    sparse_r = build_retriever(BM25Retriever(name="bm25", top_k=k), pipe.handle.index, pipe.embed_model)
    folded = {p.id: fold(p.text) for p in passages}
    draw = random.Random(opts.seed + 2)
    with Ticker("mine negatives", len(questions), opts.show_progress) as ticker:
        for q, nodes in zip(questions, dense_nodes):
            d = [n.node.node_id for n in nodes]
            s = [n.node.node_id for n in sparse_r.retrieve(QueryBundle(query_str=q.text))]
            q.negatives = mine_negatives(q, d, s, by_id, folded, opts.negatives)
            q.negatives += random_negatives(q, passages, folded, opts.random_negatives, draw)
            ticker.update()
    # the dev split: seeded, never trained on
    order = list(range(len(questions)))
    random.Random(opts.seed).shuffle(order)
    n_dev = int(round(opts.dev * len(questions))) if len(questions) >= 10 else 0
    dev = [questions[i] for i in sorted(order[:n_dev])]
    train = [questions[i] for i in sorted(order[n_dev:])]
    if opts.target == "reranker" and not opts.keep_unseen:  # a positive holds its answer in what the model reads
        # (the dev split is left whole: it scores the task as a run meets it)
        tokens = token_counter()
        max_length = opts.hyper()["max_length"]
        seen = [q for q in (in_view(q, folded, tokens, max_length) for q in train) if q is not None]
        counts["beyond_max_length"] = len(train) - len(seen)
        if counts["beyond_max_length"]:
            log.info("left out %d of %d training questions whose sentence lies past the %d tokens the model reads of "
                     "its chunk (a positive it cannot see)", counts["beyond_max_length"], len(train), max_length)
        if train and not seen:
            raise ConfigError(f"lab tune: every training question's sentence lies past the {max_length} tokens the "
                              "model reads of its chunk: no positive it could see",
                              hint=f"raise --max-length (it is {max_length}), or use smaller chunks (--index NAME)")
        train = seen
    counts.update({"train": len(train), "dev": len(dev),
                   "negatives": sum(len(q.negatives) for q in train)})
    return Prepared(passages, train, dev, counts, pipe.handle.manifest.get("corpus_hash", ""), pipe.handle.key)


def token_counter() -> Callable[[str], int]:
    """A text's token count under the base model's tokenizer (no special tokens)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_hf_model(BASE_MODEL, "base model").location)
    return lambda text: len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])


def open_index(cfg: Any, opts: TuneOptions) -> tuple[Any, Path]:
    """The pipeline of experiment ``cfg`` for retrieval alone (its index built or reused, no LLM),
    and the cache root."""

    cfg = cfg.model_copy(update={"generation": None, "judge": None, "reranker": None, "query": None,
                                 "ragas": None, "caches": None})
    root = opts.experiments_dir.resolve().parent
    cache_root = opts.cache_root or cache_dir()
    return open_pipeline(cfg, resolve_models(cfg, root), root, cache_root, opts.show_progress), cache_root


def search(pipe: Any, retriever: Any, texts: Sequence[str], show_progress: bool) -> list[list[Any]]:
    """Each text's candidates from ``retriever``: the questions embedded in one batch, searched in one."""
    vectors = pipe.embed_model.encode(list(texts), pipe.embed_model.query_prefix, show_progress=show_progress)
    return retriever.retrieve_many([QueryBundle(query_str=t, embedding=v.tolist()) for t, v in zip(texts, vectors)])


def random_negatives(q: TrainQuestion, passages: Sequence[Passage], folded: dict[str, str], n: int,
                     draw: random.Random) -> list[str]:
    """``n`` chunks of other documents than the question's positives, drawn at random (seeded),
    none holding its span. Hard negatives alone leave a fresh cross-encoder head at a constant score
    for hundreds of steps (measured: docs/tuning.md); a few easy ones give it its first signal."""
    sources = {p.source for p in passages if p.id in q.positives}
    out: list[str] = []
    for _ in range(20 * n):
        if len(out) >= n:
            break
        p = passages[draw.randrange(len(passages))]
        if p.source in sources or p.id in out or p.id in q.negatives or (q.span and q.span in folded[p.id]):
            continue
        out.append(p.id)
    return out
