"""What ``lab tune`` is asked to do (:class:`TuneOptions`), and its defaults."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

TARGETS = ("reranker", "embedding")
LOSSES = {"reranker": ("bce", "listnet"), "embedding": ("mnrl",)}
HEAD_INITS = ("fresh", "probe")
BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: Defaults by target: what the dev split picked (docs/tuning.md).
DEFAULTS = {
    "reranker": {"lr": 5e-5, "head_lr": 1e-3, "epochs": 1.0, "batch_size": 16, "max_length": 256},
    "embedding": {"lr": 3e-5, "head_lr": None, "epochs": 1.0, "batch_size": 32, "max_length": 256},
}

#: The fewest steps a default tuning takes. A fresh cross-encoder head sits at a constant score for
#: its first 50 to 200 steps at the full learning rate (the formats set, SciFact: docs/tuning.md);
#: a run of about a hundred steps has decayed its rate before the head breaks away and ends near
#: the constant, so a small training set is seen again up to this many steps.
MIN_TRAIN_STEPS = {"reranker": 300}


@dataclass
class TuneOptions:
    target: str
    out: str
    kb: str | None = None
    index: str = "turn13"
    train: Sequence[Path] = ()
    pseudo: int = 0
    cloze: float = 0.0  # share of pseudo-queries whose positive is the chunk without the sentence
    holdout: Sequence[Path] = ()
    negatives: int = 3
    random_negatives: int = 2  # chunks of other documents, drawn at random: a fresh head's first signal
    loss: str | None = None
    epochs: float | None = None
    lr: float | None = None
    batch_size: int | None = None
    max_length: int | None = None
    max_steps: int | None = None
    dev: float = 0.1
    first_stage: Sequence[str] = ()  # configs whose retrievers the dev split also goes through (reranker)
    seed: int = 0
    early_stop: float | None = None  # share of the steps after which the dev split is checked (lab.tune.early)
    keep_unseen: bool = False  # reranker: keep questions whose sentence lies past max_length (as before the option)
    curve: int = 0  # the dev split scored at this many evenly spaced steps, the end included (the card's dev.curve)
    head_init: str | None = None  # reranker: fresh, or from a linear probe (lab.tune.head); None: resolved_head()
    device: str | None = None  # auto (None): CUDA, then MPS, then the CPU (lab.models.device); cpu forces it
    force: bool = False
    save_every: int | None = None  # steps between checkpoints (default: a tenth of the run)
    show_progress: bool = True
    experiments_dir: Path = Path("experiments")
    cache_root: Path | None = None

    def hyper(self, rows: int | None = None) -> dict:
        """The hyperparameters; with ``rows`` (the training pairs), a reranker's run shorter than
        :data:`MIN_TRAIN_STEPS` at one epoch, neither ``--epochs`` nor ``--max-steps`` given, is
        made that long (``max_steps``: the pairs seen again)."""
        d = DEFAULTS[self.target]
        out = {"loss": self.loss or LOSSES[self.target][0], "epochs": self.epochs or d["epochs"],
               "lr": self.lr or d["lr"], "batch_size": self.batch_size or d["batch_size"],
               "max_length": self.max_length or d["max_length"], "negatives": self.negatives,
               "random_negatives": self.random_negatives, "head_lr": d["head_lr"],
               "max_steps": self.max_steps, "warmup_ratio": 0.1, "seed": self.seed}
        head = self.resolved_head(out["loss"])
        if head != "fresh":  # in the run key and the card only when not fresh: fresh runs' keys stand as before
            out["head_init"] = head
        floor = MIN_TRAIN_STEPS.get(self.target)
        if rows and floor and self.max_steps is None and self.epochs is None and -(-rows // out["batch_size"]) < floor:
            out["max_steps"] = floor
        return out

    def resolved_head(self, loss: str) -> str:
        """How a new head starts: as asked, else from a probe for a reranker trained with bce (the
        default since it ended above a fresh head on the dev splits measured: docs/tuning.md), else fresh."""
        if self.head_init:
            return self.head_init
        return "probe" if self.target == "reranker" and loss == "bce" else "fresh"
