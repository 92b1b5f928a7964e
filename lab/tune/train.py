"""``lab tune``: fit a cross-encoder (``reranker``) or a bi-encoder (``embedding``) to a knowledge
base, from the packaged all-MiniLM-L6-v2 weights, with sentence-transformers' own trainers.

1. **Passages**: the chunks of the index an experiment builds on the knowledge base
   (``--index``, turn13 by default: the lab's own LanceDB table, built or reused).
2. **Questions** (:mod:`lab.tune.pairs`): an eval set's rows with golden spans (``--train``, e.g.
   what ``lab generate`` wrote) and inverse-cloze pseudo-queries made from the chunks without any
   LLM (``--pseudo N``); rows that are, or share a span with, a ``--holdout`` eval set's are left
   out before anything else.
3. **Hard negatives**: each question's dense and BM25 candidates from that index that do not
   hold its span, up to ``--negatives`` a question.
4. **A dev split** (``--dev``, a share of the questions, never trained on): the first stage's
   MRR against the tuned model's on it, written into the card, so hyperparameters are picked on
   generated questions, never on a human set.
5. **Training**: ``CrossEncoderTrainer`` with ``BinaryCrossEntropyLoss`` (``--loss bce``, the
   default) or ``ListNetLoss`` (``listnet``) on a fresh one-logit head; ``SentenceTransformerTrainer``
   with ``MultipleNegativesRankingLoss`` (anchor, positive, hard negative; no duplicates in a
   batch). Checkpoints go to ``<cache>/tuned/.work/``: Ctrl-C or a kill, then the same command,
   resumes from the last one.
6. **The model**: a plain Hugging Face folder at ``<cache>/tuned/NAME`` (see
   :mod:`lab.models.tuned`), written beside and renamed into place, so a config never sees half
   a model.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from lab.config import load_experiment, run_overrides
from lab.errors import ConfigError, LabError
from lab.evidence.holds import Passage
from lab.faults import point
from lab.paths import disk_full
from lab.models.device import describe, pick_device
from lab.models.resolve import model_fingerprint, resolve_hf_model
from lab.models.tuned import CARD, QUESTIONS, read_card, tuned_dir, tuned_root, weights_sha
from lab.progress import Ticker, duration
from lab.tune.data import Prepared, prepare
from lab.tune.card import model_card
from lab.tune.early import EarlyStop, curve_point
from lab.tune.head import started_head
from lab.tune.dev import DEV_SET, log_dev, score_dev
from lab.tune.options import BASE_MODEL, HEAD_INITS, LOSSES, TARGETS, TuneOptions
from lab.tune.pairs import TrainQuestion, fingerprint
from lab.tune.work import guarded

log = logging.getLogger(__name__)

def check_options(opts: TuneOptions) -> None:
    """Everything that can be checked before any work (exit 2 with the fix)."""
    if opts.target not in TARGETS:
        raise ConfigError(f"lab tune: unknown target {opts.target!r}", hint="lab tune reranker ... or lab tune embedding ...")
    name = opts.out
    if not name or "/" in name or name.startswith(".") or name != name.strip():
        raise ConfigError(f"--out {name!r}: a tuned model's name is one folder name (letters, digits, - and _)",
                          hint="e.g. --out insurellm-reranker; configs then name it tuned/insurellm-reranker")
    loss = opts.hyper()["loss"]
    if loss not in LOSSES[opts.target]:
        raise ConfigError(f"--loss {loss!r} does not train a {opts.target}",
                          hint=f"choose one of {', '.join(LOSSES[opts.target])}")
    if opts.head_init not in (None, "fresh") and (opts.head_init not in HEAD_INITS or opts.target != "reranker"
                                                   or loss != "bce"):
        raise ConfigError(f"--head-init {opts.head_init}: a reranker's head, trained with bce, starts fresh or from a "
                          "probe", hint="drop --head-init, or use it with lab tune reranker (--loss bce, the default)")
    if not opts.train and opts.pseudo <= 0:
        raise ConfigError("lab tune: no training questions: give --train FILE (an eval set with golden spans, "
                          "e.g. from lab generate) and/or --pseudo N (questions made from the chunks, no LLM)",
                          hint="e.g. lab tune reranker --kb my-docs --pseudo 1000 --out my-reranker")
    pick_device(opts.device, "--device")  # a forced accelerator this machine lacks
    if opts.early_stop is not None and not 0 <= opts.early_stop < 1:
        raise ConfigError(f"--early-stop {opts.early_stop}: a share of the steps, from 0 (never) to below 1",
                          hint="e.g. --early-stop 0.25")
    if not 0 <= opts.dev < 0.9:
        raise ConfigError(f"--dev {opts.dev}: the dev share is between 0 and 0.9", hint="e.g. --dev 0.1")
    if opts.first_stage:
        if opts.target != "reranker":
            raise ConfigError("--first-stage scores a reranker's dev split over another first stage; an embedding "
                              "model is the first stage", hint="drop --first-stage, or tune a reranker")
        for stage in opts.first_stage:  # a missing or bad config stops here, before any work
            load_experiment(stage, opts.experiments_dir, run_overrides(opts.kb, None))
    target = tuned_dir(name, opts.cache_root)
    if target.exists() and not opts.force and not opts.first_stage:  # --first-stage: maybe rescored only
        raise ConfigError(f"a tuned model {name!r} exists already ({target})",
                          hint=f"pass --force to replace it, or choose another --out; configs naming tuned/{name} "
                               "would use the new weights (their indexes are keyed by them)")


# ---------------------------------------------------------------------------------------------
# Datasets: columns as the losses' docs name them


def pairs_dataset(questions: Sequence[TrainQuestion], by_id: dict[str, Passage], loss: str) -> dict[str, list]:
    """Columns for the trainer: ``bce``: (query, passage, label) rows, the positive then each
    negative; ``listnet``: (query, docs, labels); ``mnrl``: (anchor, positive, negative), one row a
    question with its first hard negative (questions without one are left out)."""
    if loss == "bce":
        cols: dict[str, list] = {"query": [], "passage": [], "label": []}
        for q in questions:
            for text, label in [(_positive(q, by_id), 1.0)] + [(by_id[n].text, 0.0) for n in q.negatives]:
                cols["query"].append(q.text)
                cols["passage"].append(text)
                cols["label"].append(label)
        return cols
    if loss == "listnet":
        return {"query": [q.text for q in questions],
                "docs": [[_positive(q, by_id)] + [by_id[n].text for n in q.negatives] for q in questions],
                "labels": [[1.0] + [0.0] * len(q.negatives) for q in questions]}
    if loss == "mnrl":
        kept = [q for q in questions if q.negatives]
        return {"anchor": [q.text for q in kept], "positive": [_positive(q, by_id) for q in kept],
                "negative": [by_id[q.negatives[0]].text for q in kept]}
    raise ValueError(loss)


def _positive(q: TrainQuestion, by_id: dict[str, Passage]) -> str:
    return q.positive_text if q.positive_text is not None else by_id[q.positives[0]].text


# ---------------------------------------------------------------------------------------------
# Training


def base_location() -> str:
    return resolve_hf_model(BASE_MODEL, "base model").location


def _cross_encoder_base(location: str, work: Path) -> Path:
    """The base's transformer files alone (no modules.json), so CrossEncoder puts a fresh one-logit
    classification head on the MiniLM encoder instead of loading the bi-encoder's pooling."""
    base = work / "base"
    if not (base / "config.json").is_file():
        tmp = work / "base.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for f in Path(location).iterdir():
            if f.is_file() and f.name not in ("modules.json", "config_sentence_transformers.json", "README.md"):
                shutil.copy2(f, tmp / f.name)
        os.replace(tmp, base)
    return base


def build_model(target: str, location: str, work: Path, max_length: int, seed: int, device: str = "cpu") -> Any:
    import torch
    from transformers import set_seed
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the fresh head's "newly initialized" report is expected
    hf_logging.disable_progress_bar()
    set_seed(seed)
    torch.manual_seed(seed)
    if target == "reranker":
        from sentence_transformers.cross_encoder import CrossEncoder

        model = CrossEncoder(str(_cross_encoder_base(location, work)), num_labels=1, max_length=max_length,
                             device=device, local_files_only=True)
    else:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(location, device=device, local_files_only=True)
        model.max_seq_length = max_length
    # the library's own card would pick "widget examples" from the data (a progress bar of its own);
    # the lab writes its card (README.md) itself
    model.model_card_data.widget = [{"text": "lab tune"}]
    return model


def build_trainer(target: str, model: Any, columns: dict[str, list], hyper: dict, work: Path,
                  save_every: int, callbacks: list) -> Any:
    """sentence-transformers' trainer for ``target``, on ``columns``, as the docs set it up (its
    printed log dicts left out: the lab's progress lines carry step, ETA and loss)."""
    trainer = _trainer(target, model, columns, hyper, work, save_every, callbacks)
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    return trainer


def _trainer(target: str, model: Any, columns: dict[str, list], hyper: dict, work: Path,
             save_every: int, callbacks: list) -> Any:
    from datasets import Dataset

    dataset = Dataset.from_dict(columns)
    common = dict(output_dir=str(work / "checkpoints"), num_train_epochs=hyper["epochs"],
                  per_device_train_batch_size=hyper["batch_size"], learning_rate=hyper["lr"],
                  warmup_steps=hyper["warmup_ratio"], seed=hyper["seed"], data_seed=hyper["seed"],
                  save_strategy="steps", save_steps=save_every, save_total_limit=2, logging_steps=max(1, save_every // 2),
                  report_to=[], use_cpu=model.device.type == "cpu", dataloader_num_workers=0, disable_tqdm=True,
                  max_steps=hyper["max_steps"] or -1)
    if target == "reranker":
        from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
        from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss, ListNetLoss

        import torch

        if hyper["loss"] == "bce":
            loss = BinaryCrossEntropyLoss(model, pos_weight=torch.tensor(_pos_weight(hyper)))
        else:
            loss = ListNetLoss(model)
        # the head is new (pooler and one-logit classifier on the [CLS] token of an encoder trained for
        # mean pooling): it learns at head_lr, the encoder at lr
        mapping = {r"(pooler|classifier)\.": hyper["head_lr"]} if hyper.get("head_lr") else {}
        args = CrossEncoderTrainingArguments(**common, learning_rate_mapping=mapping)
        return CrossEncoderTrainer(model=model, args=args, train_dataset=dataset, loss=loss, callbacks=callbacks)
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.training_args import BatchSamplers

    args = SentenceTransformerTrainingArguments(**common, batch_sampler=BatchSamplers.NO_DUPLICATES)
    return SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset,
                                      loss=MultipleNegativesRankingLoss(model), callbacks=callbacks)


def _pos_weight(hyper: dict) -> float:
    """BCE's weight of a positive: its question's negatives, so both sides weigh the same."""
    return float(max(1, hyper["negatives"] + hyper.get("random_negatives", 0)))


def _progress_callback(ticker: Ticker, losses: list[float]) -> Any:
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
            ticker.update(max(0, state.global_step - ticker.done))

        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))
                ticker.note(f"loss {logs['loss']:.4f}")

        def on_save(self, args, state, control, **kwargs):  # noqa: ANN001
            point("tune.after_checkpoint")

    return Progress()


@dataclass
class TuneResult:
    path: Path
    card: dict
    rescored: bool = False  # an existing model, not retrained: its dev split scored again


def tune(opts: TuneOptions) -> TuneResult:
    """Prepare, train (resuming a checkpoint of the same work), score the dev split, save; one
    command at a time for one ``--out`` (a second stops at once, as ``lab generate`` does)."""
    check_options(opts)
    with guarded(opts):  # the lock, debris of killed tunings, a full disk (lab.tune.work)
        return _tune(opts)


def _tune(opts: TuneOptions) -> TuneResult:
    t0 = time.perf_counter()
    prep = prepare(opts)
    by_id = {p.id: p for p in prep.passages}
    columns = pairs_dataset(prep.train, by_id, opts.hyper()["loss"])
    n_rows = len(next(iter(columns.values())))
    hyper = opts.hyper(n_rows)  # a small training set: seen again up to MIN_TRAIN_STEPS
    train_fp = fingerprint(prep.train, prep.passages)
    base = base_location()
    run_key = hashlib.sha256(json.dumps([opts.target, train_fp, hyper, model_fingerprint(base)],
                                        sort_keys=True).encode()).hexdigest()[:12]
    target = tuned_dir(opts.out, opts.cache_root)
    if target.exists() and not opts.force:  # only with --first-stage (check_options)
        existing = read_card(target) or {}
        same = (existing.get("training_set") == train_fp and existing.get("hyperparameters") == hyper
                and existing.get("base_fingerprint") == model_fingerprint(base) and existing.get("target") == opts.target)
        if not same:
            raise ConfigError(f"a tuned model {opts.out!r} exists already ({target}), trained on other questions or "
                              "hyperparameters, so its dev split cannot be scored again without retraining",
                              hint="pass --force to retrain it, or give the options it was tuned with "
                                   f"({target / 'README.md'})")
        return _rescore(target, existing, prep, opts)
    root = tuned_root(opts.cache_root)
    work = root / ".work" / f"{opts.out}-{run_key}"
    work.mkdir(parents=True, exist_ok=True)
    if n_rows == 0:
        raise ConfigError("lab tune: no training pair: no question has a hard negative to learn against",
                          hint="raise --negatives, or add questions (--pseudo N)")
    steps_per_epoch = -(-n_rows // hyper["batch_size"])
    total = hyper["max_steps"] or max(1, int(round(steps_per_epoch * hyper["epochs"])))
    save_every = opts.save_every or max(1, total // 10)
    last = _last_checkpoint(work / "checkpoints")
    if hyper["max_steps"] and opts.max_steps is None:
        log.info("%d pairs make %d steps an epoch; trained for %d, the pairs seen again (a fresh head needs them: "
                 "docs/tuning.md; --epochs or --max-steps sets the length)", n_rows, steps_per_epoch, total)
    log.info("tuning a %s (%s) on %d questions (%d pairs/rows; %d dev questions held back): %d steps%s",
             opts.target, hyper["loss"], len(prep.train), n_rows, len(prep.dev), total,
             f", resuming from {last.name}" if last else "")
    device = pick_device(opts.device, "--device")  # not in the run key: a checkpoint resumes on any device
    model = build_model(opts.target, base, work, hyper["max_length"], opts.seed, device)
    probe = None  # a resumed run's head comes from its checkpoint, its report from the work folder
    if hyper.get("head_init") == "probe":
        probe = started_head(model, columns, hyper["max_length"], _pos_weight(hyper), work, resumed=last is not None)
    losses: list[float] = []
    t_train = time.perf_counter()
    with Ticker(f"tune {opts.target}", total, opts.show_progress, unit="steps") as ticker:
        if last is not None:
            ticker.update(int(last.name.split("-")[-1]))
        early = EarlyStop(opts, prep.dev, work, total, losses)  # the dev split after a share of the steps
        trainer = build_trainer(opts.target, model, columns, hyper, work, save_every,
                                [_progress_callback(ticker, losses), early.callback(model)])
        try:
            output = trainer.train(resume_from_checkpoint=str(last) if last else None)
        except BaseException as exc:  # Ctrl-C, SIGTERM: say what a rerun resumes from, and stop as the CLI does
            if disk_full(exc, work):
                raise  # tune() removes the checkpoints and says so
            kept = _last_checkpoint(work / "checkpoints")
            log.warning("training stopped at step %d; %s", ticker.done,
                        f"{kept.name} is kept: the same command resumes from it" if kept else "no checkpoint yet")
            raise
    early.raise_if_stopped()  # no learning at the check: nothing saved, the figures and what to try
    train_s = time.perf_counter() - t_train
    # the dev split, scored by retrieval-only runs of the model as trained (lab.tune.dev)
    shutil.rmtree(work / "dev", ignore_errors=True)
    model.save_pretrained(str(work / "dev" / "model"))
    dev = score_dev(str(work / "dev" / "model"), prep.dev, opts, work / "dev")
    if opts.curve and dev.get("mrr_after") is not None:  # --curve: the points scored in training, then the end
        dev["curve"] = [*early.curve, curve_point(int(output.global_step), dev, losses)]
    before, after = dev["mrr_before"], dev["mrr_after"]
    card = {
        "name": opts.out, "target": opts.target, "base_model": BASE_MODEL, "base_fingerprint": model_fingerprint(base),
        "training_set": train_fp, "kb": prep.kb_fingerprint, "index": {"experiment": opts.index, "key": prep.index_key},
        "sources": {"train": [str(p) for p in opts.train], "pseudo": opts.pseudo, "cloze": opts.cloze,
                    "holdout": [str(p) for p in opts.holdout]},
        "questions": prep.counts, "hyperparameters": hyper, "seed": opts.seed,
        "steps": int(output.global_step), "rows": n_rows, "train_s": round(train_s, 1),
        "wall_s": round(time.perf_counter() - t0, 1), "pairs_per_s": round(n_rows * hyper["epochs"] / train_s, 2)
        if not hyper["max_steps"] else round(output.global_step * hyper["batch_size"] / train_s, 2),
        "final_loss": losses[-1] if losses else float(output.training_loss), "mean_loss": float(output.training_loss),
        "losses": losses, "dev": dev, "device": describe(device), **({"head_probe": probe} if probe else {}),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    path = save(model, card, prep, opts, work / "dev" / DEV_SET)
    shutil.rmtree(work, ignore_errors=True)
    log.info("saved %s (%s, %s) in %s%s", path, card["fingerprint"], f"{card['steps']} steps",
             duration(card["wall_s"]),
             f"; dev MRR {before:.4f} -> {after:.4f} on {dev['n']} questions" if after is not None else "")
    log_dev(dev)
    return TuneResult(path, card)


def _rescore(target: Path, card: dict, prep: Prepared, opts: TuneOptions) -> TuneResult:
    """The model exists, trained on the same questions with the same hyperparameters: score its dev
    split again (with ``--first-stage``) and rewrite its card in place; the weights are untouched,
    so its fingerprint, and every index and cache key naming it, stay as they were."""
    log.info("tuned/%s exists, trained on these questions with these hyperparameters: not retrained; scoring "
             "its dev split again", opts.out)
    work = tuned_root(opts.cache_root) / ".work" / f"{opts.out}-rescore-{os.getpid()}"
    try:
        card = dict(card, dev=score_dev(str(target), prep.dev, opts, work))
        dev_set = (work / DEV_SET).read_text(encoding="utf-8") if (work / DEV_SET).is_file() else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    files = [(CARD, json.dumps(card, indent=2) + "\n"), ("README.md", model_card(card))]
    if dev_set is not None:
        files.append((DEV_SET, dev_set))
    for name, text in files:
        tmp = target / f".{name}.tmp-{os.getpid()}"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target / name)
    log_dev(card["dev"])
    return TuneResult(target, card, rescored=True)


def _last_checkpoint(folder: Path) -> Path | None:
    if not folder.is_dir():
        return None
    done = [p for p in folder.glob("checkpoint-*") if p.is_dir() and (p / "trainer_state.json").is_file()]
    return max(done, key=lambda p: int(p.name.split("-")[-1]), default=None)


def save(model: Any, card: dict, prep: Prepared, opts: TuneOptions, dev_set: Path | None = None) -> Path:
    """Write the model beside its final place and rename it there: whole or not at all. A full
    disk stops with exit 2 and leaves nothing a config could load. ``dev_set``: the dev split's
    eval set (:mod:`lab.tune.dev`), kept beside the model so ``lab run`` can score it again."""
    target = tuned_dir(opts.out, opts.cache_root)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(str(tmp))
        card["fingerprint"] = weights_sha(tmp)
        with open(tmp / QUESTIONS, "w", encoding="utf-8") as fh:
            for q in prep.train:
                fh.write(json.dumps(q.record(), ensure_ascii=False) + "\n")
        if dev_set is not None and dev_set.is_file():
            shutil.copyfile(dev_set, tmp / DEV_SET)
        (tmp / "README.md").write_text(model_card(card), encoding="utf-8")
        (tmp / CARD).write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
        point("tune.before_rename")
        if target.exists():
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException as exc:  # whatever stopped it (a full disk: tune() says so), no half-written folder
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES):
            raise LabError(f"could not write the tuned model to {target.parent}: {exc.strerror}",
                           hint="make the cache writable (LAB_CACHE names it), then run the same command again: "
                                "training resumes from its last checkpoint") from None
        raise
    return target
