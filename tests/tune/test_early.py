"""The early stop of `lab tune reranker`: when it checks, its rule on dev figures, and a real tuning
on the fixture stopped at its check with the figures, exit 1 and nothing saved."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lab.tune.early import DEFAULT_SHARE, MIN_STEPS, check_step, curve_point, curve_steps, message, no_learning
from lab.tune.options import TuneOptions

FIXTURES = Path(__file__).parent.parent / "fixtures"


@pytest.mark.parametrize("target, early_stop, total, n_dev, expected", [
    ("reranker", None, 310, 50, 200),  # the default: a quarter of a long run (ceil(77.5)), not before step 200
    ("reranker", None, 1000, 50, 250),  # a quarter
    ("reranker", None, 190, 50, None),  # step 200 is past the end: no check
    ("reranker", None, MIN_STEPS - 1, 50, None),  # a short run costs less than its check
    ("reranker", 0.5, 4, 5, 2),  # asked for: any length
    ("reranker", 0.0, 310, 50, None),  # off
    ("reranker", 0.99, 10, 5, None),  # the check would fall on the last step
    ("reranker", None, 310, 0, None),  # no dev question
    ("embedding", 0.5, 310, 50, None),  # its dev run builds an index: at the end only
])
def test_when_the_check_runs(target, early_stop, total, n_dev, expected):
    opts = TuneOptions(target=target, out="x", early_stop=early_stop)
    assert check_step(opts, total, n_dev) == expected
    assert DEFAULT_SHARE == 0.25


@pytest.mark.parametrize("curve, total, n_dev, expected", [
    (4, 310, 50, [78, 155, 232]),  # 310 * 1/4, 2/4, 3/4 rounded; the end (310) is scored anyway
    (3, 3, 5, [1, 2]),
    (10, 3, 5, [1, 2]),  # more points than steps: each step once
    (0, 310, 50, []),  # off
    (4, 310, 0, []),  # no dev question
])
def test_the_curves_points(curve, total, n_dev, expected):
    assert curve_steps(TuneOptions(target="reranker", out="x", curve=curve), total, n_dev) == expected


def test_a_curve_point_next_to_the_early_check_is_that_check(tmp_path):
    from lab.tune.early import EarlyStop

    opts = TuneOptions(target="reranker", out="x", curve=4)
    early = EarlyStop(TuneOptions(target="reranker", out="x", curve=4, early_stop=0.25), [object()] * 48, tmp_path, 105)
    assert early.step == 27 and sorted(early.points) == [52, 79]  # 26 is the check's (a share asked for: no floor)
    default = EarlyStop(opts, [object()] * 48, tmp_path, 300)
    assert default.step == 200 and sorted(default.points) == [75, 150]  # 225 is the check's
    off = EarlyStop(TuneOptions(target="reranker", out="x", curve=4, early_stop=0), [object()] * 48, tmp_path, 105)
    assert off.step is None and sorted(off.points) == [26, 52, 79]


def test_a_curve_point_reads_the_last_loss_and_the_best_fused():
    dev = {"mrr_before": 0.6, "mrr_after": 0.28, "fusion": {"0.25": 0.41, "2": 0.59}, "n": 90}
    assert curve_point(78, dev, [1.2, 1.1]) == {"step": 78, "loss": 1.1, "mrr_before": 0.6, "mrr_after": 0.28,
                                                "best_fused": 0.59}
    assert curve_point(1, {"mrr_before": 0.5, "mrr_after": 0.5}, [])["loss"] is None


@pytest.mark.parametrize("dev, stop", [
    ({"mrr_before": 0.60, "mrr_after": 0.28, "fusion": {"0.25": 0.41, "2": 0.59}, "n": 90}, True),  # formats set
    ({"mrr_before": 0.60, "mrr_after": 0.28, "fusion": {"0.25": 0.41, "2": 0.60}, "n": 90}, True),  # equal: nothing added
    ({"mrr_before": 0.60, "mrr_after": 0.28, "fusion": {"0.25": 0.41, "2": 0.61}, "n": 90}, False),  # fused adds
    ({"mrr_before": 0.23, "mrr_after": 0.50, "fusion": {}, "n": 90}, False),  # alone adds
    ({"mrr_before": None, "mrr_after": None, "n": 0}, False),  # nothing scored: no verdict
])
def test_the_rule(dev, stop):
    assert no_learning(dev) is stop


def test_the_message_gives_the_figures_and_what_to_try():
    text, hint = message({"mrr_before": 0.6, "mrr_after": 0.28, "fusion": {"0.25": 0.41, "2": 0.59}, "n": 90}, 78, 310)
    assert text == ("lab tune: after 78 of 310 steps (25%) the dev split shows no learning: dev MRR first stage 0.6000, "
                    "tuned alone 0.2800, best fused 0.5900 (w 2) on 90 questions; the model adds nothing to the first "
                    "stage, so training stopped 232 steps early and nothing was saved")
    assert "--early-stop 0" in hint and "--pseudo" in hint and "--head-init" not in hint
    assert message({"mrr_before": 0.6, "mrr_after": 0.28, "fusion": {}, "n": 90}, 78, 310, probed=False)[1].startswith(
        "a head started from a probe of the pairs (--head-init probe")


@pytest.mark.slow
def test_a_tuning_that_does_not_learn_stops_at_its_check(tmp_path, monkeypatch, cli):
    """The fixture's reranker after 2 of 8 steps of a learning rate too small to move the fresh head
    (1e-9): its dev split is scored by runs, shows nothing over the first stage, and the command
    exits 1 with the figures, leaving no model and no checkpoint."""
    project = tmp_path / "project"
    shutil.copytree(FIXTURES, project)
    cache = tmp_path / "cache"
    monkeypatch.setenv("LAB_CACHE", str(cache))
    monkeypatch.chdir(project)
    code, out, err = cli("tune", "reranker", "--index", "small-retrieval", "--pseudo", "30", "--out", "stuck",
                         "--max-steps", "8", "--batch-size", "4", "--max-length", "64", "--no-progress",
                         "--lr", "1e-9", "--early-stop", "0.25")
    assert code == 1, (out, err)
    assert "lab tune: after 2 of 8 steps (25%) the dev split shows no learning: dev MRR first stage" in err
    assert "--early-stop 0 trains to the end regardless" in err
    assert not (cache / "tuned" / "stuck").exists()
    assert not [w for w in (cache / "tuned" / ".work").glob("stuck-*")]


@pytest.mark.parametrize("kw, rows, expected", [
    ({}, 1674, 300),  # the formats set: 105 steps an epoch at batch 16, seen again up to 300
    ({}, 4800, None),  # 300 steps an epoch already
    ({}, None, None),  # before the pairs are known
    ({"epochs": 1.0}, 1674, None),  # asked for: as asked
    ({"max_steps": 40}, 1674, 40),
    ({"batch_size": 4}, 1674, None),  # 419 steps an epoch
])
def test_a_small_reranker_training_set_is_seen_again_up_to_the_floor(kw, rows, expected):
    from lab.tune.options import MIN_TRAIN_STEPS

    assert MIN_TRAIN_STEPS["reranker"] == 300
    assert TuneOptions(target="reranker", out="x", **kw).hyper(rows)["max_steps"] == expected
    assert TuneOptions(target="embedding", out="x").hyper(10)["max_steps"] is None  # an embedding: one epoch
