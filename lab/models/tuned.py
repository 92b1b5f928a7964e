"""Models tuned here (``lab tune``): where they live and what their card says.

A tuned model is a plain Hugging Face folder at ``<cache>/tuned/<NAME>`` (weights, tokenizer,
config, a ``README.md`` model card) with ``lab-model.json``: the base model, the fingerprints of
the weights, the training set and the knowledge base, the hyperparameters, seed, steps, wall time
and losses, and the training questions (for the leakage guard). Configs name it ``tuned/NAME``.
The folder appears whole or not at all: it is written beside, then renamed into place.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from lab.errors import DataError, ModelNotFoundError
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
    check_weights(path, f"{kind} {name!r}")
    return path


def read_card(path: Path) -> dict | None:
    """The card of a tuned model folder, or None for any other folder; a damaged card is a
    :class:`DataError` naming it."""
    card = Path(path) / CARD
    if not card.is_file():
        return None
    try:
        doc = json.loads(card.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"{card}: not a tuned model's card ({exc})",
                        hint=f"tune the model again (lab tune ... --out {Path(path).name} --force)") from None
    if not isinstance(doc, dict):
        raise DataError(f"{card}: not a tuned model's card (not a JSON object)",
                        hint=f"tune the model again (lab tune ... --out {Path(path).name} --force)")
    return doc


def weights_sha(folder: Path) -> str:
    """The content hash of a model folder's weights (its ``*.safetensors``, names and bytes): a
    tuned model's fingerprint, written into its card when it is saved."""
    h = hashlib.sha256()
    for f in sorted(Path(folder).rglob("*.safetensors")):
        h.update(f.relative_to(folder).as_posix().encode() + b"\x00")
        with open(f, "rb") as fh:
            while block := fh.read(1 << 22):
                h.update(block)
    return h.hexdigest()[:16]


#: Weights found sound in this process, by (file, size, modification time): hashed once.
_SOUND: set[tuple] = set()


def check_weights(path: Path, what: str) -> None:
    """A tuned model's weights against its card's fingerprint: a file damaged, truncated or
    replaced since ``lab tune`` wrote it is an error naming it, never used silently."""
    files = sorted(Path(path).rglob("*.safetensors"))
    stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    if stamp in _SOUND:
        return
    card = read_card(path) or {}
    fix = (f"tune it again: lab tune {card.get('target') or 'reranker'} ... --out {Path(path).name} --force "
           f"(its options are in {Path(path) / 'README.md'})")
    if not files:
        raise DataError(f"{what}: {path} holds no weights (*.safetensors)", hint=fix)
    got = weights_sha(path)
    if got != card.get("fingerprint"):
        raise DataError(f"{what}: the weights in {path} are not the ones its card names (content hash {got}, the "
                        f"card says {card.get('fingerprint')}): damaged or replaced since lab tune wrote them",
                        hint=fix)
    _SOUND.add(stamp)


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
