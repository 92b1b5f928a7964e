"""Models tuned here (``lab tune``): where they live and what their card says.

A tuned model is a plain Hugging Face folder at ``<cache>/tuned/<NAME>`` (weights, tokenizer,
config, a ``README.md`` model card) with ``lab-model.json``: the base model, the fingerprints of
the weights, the training set and the knowledge base, the hyperparameters, seed, steps, wall time
and losses, and the training questions (for the leakage guard). Configs name it ``tuned/NAME``.
The folder appears whole or not at all: it is written beside, then renamed into place.
"""

from __future__ import annotations

import json
from pathlib import Path

from lab.errors import ModelNotFoundError
from lab.paths import cache_dir

PREFIX = "tuned/"
CARD = "lab-model.json"
QUESTIONS = "training-questions.jsonl"


def tuned_root(cache_root: Path | None = None) -> Path:
    return (cache_root or cache_dir()) / "tuned"


def tuned_dir(name: str, cache_root: Path | None = None) -> Path:
    """The folder of ``tuned/NAME`` (or of NAME)."""
    return tuned_root(cache_root) / name.removeprefix(PREFIX)


def is_tuned(name: str) -> bool:
    return name.startswith(PREFIX)


def resolve_tuned(name: str, kind: str) -> Path:
    """``tuned/NAME``'s folder, or :class:`ModelNotFoundError` saying how to make it."""
    short = name.removeprefix(PREFIX)
    path = tuned_dir(name)
    if not short or "/" in short or short.startswith("."):
        raise ModelNotFoundError(f"{kind} {name!r}: a tuned model's name is tuned/NAME, NAME one folder name",
                                 hint="e.g. tuned/insurellm-reranker, as `lab tune ... --out insurellm-reranker` made it")
    if not (path / CARD).is_file():
        target = "reranker" if "reranker" in kind else "embedding"
        others = sorted(p.name for p in tuned_root().glob("*") if (p / CARD).is_file())
        raise ModelNotFoundError(
            f"{kind} {name!r} has not been tuned on this machine (no {path / CARD})",
            hint=f"make it: lab tune {target} --kb KB --out {short}"
                 + (f"; tuned here: {', '.join(others)}" if others else ""))
    return path


def read_card(path: Path) -> dict | None:
    """The card of a tuned model folder, or None for any other folder."""
    card = Path(path) / CARD
    if not card.is_file():
        return None
    return json.loads(card.read_text(encoding="utf-8"))


def card_summary(card: dict) -> dict:
    """What a run records of the tuned model it used (``results.json``, models.*.tuned)."""
    keys = ("name", "target", "fingerprint", "base_model", "training_set", "kb", "questions", "seed", "steps")
    return {k: card.get(k) for k in keys}


def training_questions(path: Path) -> list[dict]:
    """The training questions recorded beside a tuned model (text, span, origin)."""
    f = Path(path) / QUESTIONS
    if not f.is_file():
        return []
    return [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
