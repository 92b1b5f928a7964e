"""Options that several verbs take, declared once (each verb module applies the ones it needs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from lab.metrics.catalog import DEFAULT_METRIC


def experiments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--experiments", type=Path, default=Path("experiments"), metavar="DIR",
                   help="folder of experiment configs (default: experiments)")


def reports(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reports", type=Path, default=Path("reports"), help="reports folder (default: reports)")


def cache(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache", help="cache folder or file:// URI (default: $LAB_CACHE or ~/.cache/lab)")


def metric(p: argparse.ArgumentParser, what: str) -> None:
    """``--metric NAME``, one metric of the catalogue; ``what`` says what it does for the verb."""
    p.add_argument("--metric", default=DEFAULT_METRIC, help=f"{what} (default: {DEFAULT_METRIC})")


def data(p: argparse.ArgumentParser) -> None:
    """Your documents and questions in place of the config's: every verb that reads them."""
    p.add_argument("--kb", type=Path, help="knowledge-base folder (overrides data.knowledge_base)")
    p.add_argument("--eval", type=Path, help="eval set JSONL (overrides data.eval_set)")


def run(p: argparse.ArgumentParser, sample: bool = True) -> None:
    """The options every verb that runs an experiment takes."""
    data(p)
    if sample:
        p.add_argument("--limit", type=count, help="evaluate a stratified sample of N questions")
        p.add_argument("--seed", type=int, help="seed of the sample (default: the config's, 13)")
    reports(p)
    cache(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bars (progress lines are logged instead)")


def force(p: argparse.ArgumentParser, what: str, also: str = "") -> None:
    """``--force``: the one way to let a verb replace an output that exists; ``what`` names it,
    ``also`` says what else the flag allows."""
    p.add_argument("--force", action="store_true", help=f"replace {what} if it exists{also}")


def split(p: argparse.ArgumentParser, holdout_optional: bool = True) -> None:
    """The dev/held-out split of sweep and optimize: points are picked on dev, the best reported on
    the held-out rest (``--no-holdout``, where the verb allows it, runs every point on everything)."""
    p.add_argument("--dev-fraction", type=float, default=0.5,
                   help="share of questions the points are picked on (default 0.5)")
    if holdout_optional:
        p.add_argument("--no-holdout", action="store_true", help="every point on every question (optimistic best)")


def count(text: str) -> int:
    """The type of an option that counts something (``--limit``, ``--trials``, ``--n``): a whole
    number of at least 1; anything else is argparse's error naming the option (exit code 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number: give one of 1 or more, e.g. 20") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1: give 1 or more, e.g. 20 (leave the option out "
                                         "for its default)")
    return value
