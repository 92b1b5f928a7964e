"""``lab tune reranker|embedding``: fit a cross-encoder or a bi-encoder to your documents
(:mod:`lab.tune.train`). Torch and sentence-transformers load inside the handler."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lab.cli import options
from lab.models.device import DEVICES
from lab.tune.options import DEFAULTS, HEAD_INITS, LOSSES, MIN_TRAIN_STEPS, TuneOptions

#: Every default of the flags, from the one place that holds them (TuneOptions and DEFAULTS).
_D = TuneOptions(target="reranker", out="")

EPILOG = """example: lab tune reranker --kb ~/docs --index turn18 --pseudo 1000 --holdout eval_sets/docs.jsonl \\
      --out reranker-semantic
also:    lab tune reranker ... --first-stage hybrid-tuned   (the dev split over that config's retriever too)
         lab tune embedding --kb ~/docs --train eval_sets/docs.jsonl --pseudo 500 --out docs-embed

then name the model in a config:  reranker: {name: sentence_transformer, model: tuned/reranker-semantic}
                                  embedding: {model: tuned/docs-embed}
The model is written to $LAB_CACHE/tuned/NAME (default ~/.cache/lab/tuned/NAME), whole or not at all;
Ctrl-C or a kill, then the same command, resumes from the last checkpoint."""


def add_parsers(sub: Any, common: Any) -> None:
    p = sub.add_parser(
        "tune", help="fit a reranker (cross-encoder) or an embedding model (bi-encoder) to your documents",
        description="Train from the packaged all-MiniLM-L6-v2 weights with sentence-transformers' trainers, on "
                    "questions from an eval set with golden spans (--train, e.g. lab generate's) and/or questions "
                    "made from the chunks without any LLM (--pseudo N: a sentence or heading taken out of its "
                    "chunk), against hard negatives mined from the lab's own index of the documents. A share of the "
                    "questions (--dev) is held back and scored before and after, for picking hyperparameters.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", choices=["reranker", "embedding"], help="what to train")
    p.add_argument("--out", required=True, metavar="NAME", help="the model's name: configs use tuned/NAME")
    p.add_argument("--kb", type=Path, help="knowledge-base folder (default: the --index config's)")
    p.add_argument("--index", default=_D.index, metavar="NAME",
                   help="the experiment whose chunks are the passages and whose index mines negatives "
                        f"(default: {_D.index}; train a reranker on the chunks it will rerank, e.g. turn18 for turn22)")
    p.add_argument("--train", type=Path, action="append", default=[], metavar="FILE",
                   help="eval set (JSONL) with golden spans to train on; repeatable")
    p.add_argument("--pseudo", type=int, default=_D.pseudo, metavar="N",
                   help="pseudo-queries made from the chunks (no LLM)")
    p.add_argument("--cloze", type=float, default=_D.cloze, metavar="SHARE",
                   help="share of pseudo-queries whose positive is the chunk without the sentence (inverse cloze; "
                        f"default {_D.cloze:g}: the chunk whole)")
    p.add_argument("--holdout", type=Path, action="append", default=[], metavar="FILE",
                   help="eval set to keep out: training questions that are, or share a span with, one of its "
                        "questions are dropped before training; repeatable")
    p.add_argument("--negatives", type=int, default=_D.negatives,
                   help=f"hard negatives per question (default: {_D.negatives})")
    p.add_argument("--random-negatives", type=int, default=_D.random_negatives, metavar="N",
                   help=f"negatives drawn at random from other documents, per question (default: {_D.random_negatives})")
    p.add_argument("--loss", help=f"reranker: {' or '.join(LOSSES['reranker'])} (the first is the default); "
                                  f"embedding: {' or '.join(LOSSES['embedding'])}")
    p.add_argument("--epochs", type=float,
                   help=f"passes over the training pairs (default: {_by_target('epochs')}; a reranker's run is at "
                        f"least {MIN_TRAIN_STEPS['reranker']} steps unless --epochs or --max-steps is given)")
    p.add_argument("--lr", type=float, help=f"learning rate (default: {_by_target('lr')})")
    p.add_argument("--batch-size", type=options.count, help=f"pairs per step (default: {_by_target('batch_size')})")
    p.add_argument("--max-length", type=options.count, help=f"tokens per input (default: {_by_target('max_length')})")
    p.add_argument("--max-steps", type=options.count, help="stop after this many steps (a quick trial)")
    p.add_argument("--dev", type=float, default=_D.dev,
                   help=f"share of questions held back and scored by retrieval-only runs (default: {_D.dev:g})")
    p.add_argument("--first-stage", action="append", default=[], metavar="NAME",
                   help="reranker: also score the dev split over experiment NAME's own retriever and index (e.g. "
                        "hybrid-tuned), fused at each weight, so the first_stage_weight picked fits that first "
                        "stage; repeatable. An existing model trained with the same options is not retrained: "
                        "only its dev split is scored again")
    p.add_argument("--seed", type=int, default=_D.seed,
                   help=f"seed of questions, split and training (default: {_D.seed})")
    p.add_argument("--early-stop", type=float, metavar="SHARE",
                   help="reranker: score the dev split after this share of the steps and stop, saving nothing, "
                        "when the model adds nothing to the first stage there (default: 0.25 for a run of 50 steps "
                        "or more; 0: never)")
    p.add_argument("--keep-unseen", action="store_true",
                   help="reranker: keep training questions whose sentence lies past the --max-length tokens the "
                        "model reads of its chunk (left out by default: a positive it cannot see; kept by lab tune "
                        "before this option existed, so it reproduces such a model)")
    p.add_argument("--curve", type=int, default=0, metavar="N",
                   help="reranker: score the dev split at N evenly spaced steps, the end included: its learning "
                        "curve (dev MRR against steps) in the card's dev.curve and README.md (default: 0, the end "
                        "alone; each point costs a dev scoring)")
    p.add_argument("--head-init", choices=HEAD_INITS, default=_D.head_init,
                   help="reranker: start the new head from a linear probe of the training pairs on the frozen "
                        "encoder (probe, the default with --loss bce: one pass over the pairs first; the head leaves "
                        "the constant score sooner, docs/tuning.md) or fresh (as lab tune did before; it reproduces "
                        "such a model)")
    p.add_argument("--device", choices=DEVICES, default="auto",
                   help="where to train: auto (the default) picks CUDA, then Apple's MPS, then the CPU; cpu forces "
                        "it (the card records the device)")
    options.force(p, "the tuned model NAME")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (progress lines are logged instead)")
    common(p)


def _by_target(key: str) -> str:
    """A hyperparameter's default per target, as the help says it ("reranker 5e-05, embedding 3e-05")."""
    values = {t: DEFAULTS[t][key] for t in DEFAULTS}
    if len(set(values.values())) == 1:
        return f"{next(iter(values.values())):g}"
    return ", ".join(f"{t} {v:g}" for t, v in values.items())


def cmd_tune(args: argparse.Namespace) -> int:
    import sys

    from lab.tune.dev import curve_text, first_stage_text, fusion_text  # torch and sentence-transformers load here
    from lab.tune.train import tune

    opts = TuneOptions(
        target=args.target, out=args.out, kb=str(args.kb) if args.kb else None, index=args.index, train=args.train,
        pseudo=args.pseudo, cloze=args.cloze, holdout=args.holdout, negatives=args.negatives, random_negatives=args.random_negatives, loss=args.loss, epochs=args.epochs,
        lr=args.lr, batch_size=args.batch_size, max_length=args.max_length, max_steps=args.max_steps, dev=args.dev, first_stage=args.first_stage,
        seed=args.seed, early_stop=args.early_stop, head_init=args.head_init, curve=args.curve, keep_unseen=args.keep_unseen,
        device=args.device, force=args.force, show_progress=not args.no_progress and sys.stderr.isatty(),
        experiments_dir=args.experiments)
    result = tune(opts)
    card = result.card
    q = card["questions"]
    print(f"tuned/{card['name']}: {card['target']} from {card['base_model']}, {card['steps']} steps on "
          f"{q['train']} questions ({q['generated']} from eval sets, {q['pseudo']} pseudo-queries), "
          f"{card['wall_s']:.0f} s" + (" (not retrained now: the same questions and hyperparameters; its dev split "
                                 "was scored again)" if result.rescored else ""))
    dev = card["dev"]
    if dev["mrr_after"] is not None:
        first = "first stage" if card["target"] == "reranker" else "base model"
        print(f"dev split ({dev['n']} questions, never trained on): MRR {dev['mrr_before']:.4f} ({first}) -> "
              f"{dev['mrr_after']:.4f} (tuned); span MRR of retrieval-only runs, as lab run scores "
              f"{result.path / 'dev.jsonl'}")
    w = dev.get("first_stage_weight")
    if dev.get("fusion"):
        print(f"dev split fused with the first stage, z(tuned) + w * z(dense): {fusion_text(dev['fusion'])}"
              + ("; the tuned model alone does best" if w is None else f"; best w {w:g}"))
    for name, stage in (dev.get("first_stages") or {}).items():
        print(f"dev split over {first_stage_text(name, stage)}")
    if dev.get("curve"):
        print("learning curve (dev MRR against steps):\n" + curve_text(dev["curve"]))
    print(f"folder: {result.path}")
    fused = "" if w is None else f", first_stage_weight: {w:g}"
    use = (f"reranker: {{name: sentence_transformer, model: tuned/{card['name']}, top_n: 3{fused}}}"
           if card["target"] == "reranker" else f"embedding: {{model: tuned/{card['name']}}}")
    print(f"use it: {use}")
    return 0


COMMANDS = {"tune": cmd_tune}
