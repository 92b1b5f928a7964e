"""The early stop of ``lab tune reranker``: after a share of the steps (``--early-stop``, a quarter by
default), the dev split is scored as at the end (:func:`lab.tune.dev.score_dev`: runs over the dev
questions, the model as trained so far). When the model adds nothing to the first stage there, alone
or fused at any weight, training stops with the figures and what to try, and nothing is saved: a
tuning that would have run its whole budget to give a model worse than no model says so early.

By default the check runs at a quarter of a run of at least :data:`MIN_STEPS` steps (a shorter run
costs less than its check), and not before step :data:`PLATEAU_STEPS`; ``--early-stop SHARE`` sets
the share and checks a run of any length at that share.

The rule, *no learning*: ``max(tuned alone, fused at each weight) <= first stage`` on the dev MRR.
A model with any signal lifts at least one fused order above the first stage's, so the rule is
lenient: it fires on a head still at a constant score, not on a model that learns slowly. The
embedding target is not checked (its dev run builds a whole index with the model: at the end only).
"""

from __future__ import annotations

import logging
import math
import shutil
from pathlib import Path
from typing import Any, Sequence

from lab.errors import LabError
from lab.tune.dev import score_dev
from lab.tune.options import TuneOptions
from lab.tune.pairs import TrainQuestion

log = logging.getLogger(__name__)


#: The default share of the steps after which the dev split is scored.
DEFAULT_SHARE = 0.25
#: The shortest run the default check applies to.
MIN_STEPS = 50
#: The default check comes no sooner: a fresh head sits at a constant score for its first 50 to 200
#: steps, then breaks away (the formats set: tuned alone 0.27 at step 52, 0.51 at 79; SciFact: 0.34
#: at 100, 0.875 at 200, where a check at 100 stopped it; docs/tuning.md). A check inside that
#: plateau stops a run that learns.
PLATEAU_STEPS = 200


class NoLearning(LabError):
    """The dev split shows no learning at the early check: exit 1 (the work was done and its answer is
    no), with the figures and what to try."""

    exit_code = 1


def check_step(opts: TuneOptions, total: int, n_dev: int) -> int | None:
    """The step after which the dev split is scored, or None where there is no check: off
    (``--early-stop 0``, or the default on a run shorter than :data:`MIN_STEPS`), an embedding
    model, no dev question, or a check that would fall on the last step."""
    default = opts.early_stop is None
    share = DEFAULT_SHARE if default and total >= MIN_STEPS else opts.early_stop
    if not share or opts.target != "reranker" or n_dev == 0:
        return None
    step = max(1, math.ceil(share * total))
    if default:  # not before the head can have left its constant score
        step = max(step, PLATEAU_STEPS)
    return step if step < total else None


def no_learning(dev: dict[str, Any]) -> bool:
    """The rule of the module's docstring, on :func:`~lab.tune.dev.score_dev`'s figures."""
    before, after = dev.get("mrr_before"), dev.get("mrr_after")
    if before is None or after is None:
        return False
    return max([after, *(dev.get("fusion") or {}).values()]) <= before


def message(dev: dict[str, Any], step: int, total: int, probed: bool = True) -> tuple[str, str]:
    """What :class:`NoLearning` says, and its hint (a fresh head's, ``probed`` False, names the probe)."""
    fusion = dev.get("fusion") or {}
    best_w = max(fusion, key=lambda w: fusion[w]) if fusion else None
    fused = f", best fused {fusion[best_w]:.4f} (w {best_w})" if best_w is not None else ""
    text = (f"lab tune: after {step} of {total} steps ({step / total:.0%}) the dev split shows no learning: dev MRR "
            f"first stage {dev['mrr_before']:.4f}, tuned alone {dev['mrr_after']:.4f}{fused} on {dev['n']} questions; "
            f"the model adds nothing to the first stage, so training stopped {total - step} steps early and "
            "nothing was saved")
    hint = ("" if probed else "a head started from a probe of the pairs (--head-init probe: it leaves the constant "
            "score sooner, docs/tuning.md), ") + ("more training questions (--train FILE, a higher --pseudo), more "
            "steps (--epochs), harder or more negatives "
            "(--negatives), another learning rate or batch (--lr, --batch-size); --early-stop 0 trains to the end "
            "regardless")
    return text, hint


def curve_steps(opts: TuneOptions, total: int, n_dev: int) -> list[int]:
    """The steps before the last at which ``--curve N`` scores the dev split: N evenly spaced
    points of the run, the last of them the end (scored there anyway)."""
    if not opts.curve or n_dev == 0:
        return []
    return sorted({max(1, round(total * i / opts.curve)) for i in range(1, opts.curve)} - {total})


def curve_point(step: int, dev: dict[str, Any], losses: Sequence[float]) -> dict[str, Any]:
    """One point of the card's ``dev.curve``: the step, the last logged loss, the dev MRR before,
    tuned alone and best fused (a reranker)."""
    fusion = dev.get("fusion") or {}
    return {"step": step, "loss": losses[-1] if losses else None, "mrr_before": dev.get("mrr_before"),
            "mrr_after": dev.get("mrr_after"), "best_fused": max(fusion.values()) if fusion else None}


class EarlyStop:
    """The early check (and the points of ``--curve``) as a trainer callback (:meth:`callback`),
    and its verdict after training (:meth:`raise_if_stopped`)."""

    def __init__(self, opts: TuneOptions, dev: Sequence[TrainQuestion], work: Path, total: int,
                 losses: Sequence[float] = ()):
        self.opts, self.dev, self.work, self.total, self.losses = opts, dev, work, total, losses
        self.step = check_step(opts, total, len(dev))
        # a point of the curve next to the early check is that check (one dev scoring, not two)
        near = max(1, total // (2 * opts.curve)) if opts.curve else 0
        self.points = {p for p in curve_steps(opts, total, len(dev)) if self.step is None or abs(p - self.step) > near}
        self.curve: list[dict[str, Any]] = []
        self.figures: dict[str, Any] | None = None
        self.stopped = False

    def score(self, model: Any, step: int) -> dict[str, Any]:
        """The dev split's figures with ``model`` as it is at ``step`` (a point of the curve)."""
        folder = self.work / "early"
        shutil.rmtree(folder, ignore_errors=True)
        model.save_pretrained(str(folder / "model"))
        opts = TuneOptions(**{**vars(self.opts), "first_stage": ()})  # the dev split's own first stage only
        figures = score_dev(str(folder / "model"), self.dev, opts, folder)
        shutil.rmtree(folder, ignore_errors=True)
        self.curve.append(curve_point(step, figures, self.losses))
        if step in self.points:
            log.info("dev after %d of %d steps: MRR first stage %s, tuned alone %s, best fused %s", step, self.total,
                     _fmt(figures.get("mrr_before")), _fmt(figures.get("mrr_after")),
                     _fmt(self.curve[-1]["best_fused"]))
        return figures

    def check(self, model: Any, step: int) -> bool:
        """Score the dev split with ``model`` as it is at ``step``; True to stop."""
        self.figures = self.score(model, step)
        self.stopped = no_learning(self.figures)
        log.info("early check after %d of %d steps: dev MRR first stage %s, tuned alone %s, best fused %s: %s", step,
                 self.total, _fmt(self.figures.get("mrr_before")), _fmt(self.figures.get("mrr_after")),
                 _fmt(self.curve[-1]["best_fused"]), "no learning, stopping" if self.stopped else "learning, going on")
        return self.stopped

    def callback(self, model: Any) -> Any:
        from transformers import TrainerCallback

        early = self

        class Check(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
                step = state.global_step
                if early.step is not None and step == early.step:
                    if early.check(model, step):
                        control.should_training_stop = True
                        control.should_save = False
                elif step in early.points:
                    early.score(model, step)

        return Check()

    def raise_if_stopped(self) -> None:
        """After training: where the check stopped it, remove the run's work folder and raise
        :class:`NoLearning`."""
        if self.stopped and self.figures is not None and self.step is not None:
            shutil.rmtree(self.work, ignore_errors=True)
            text, hint = message(self.figures, self.step, self.total, self.opts.hyper().get("head_init") == "probe")
            raise NoLearning(text, hint=hint)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
