"""``--workers N`` and ``--ray-address ADDR`` of ``lab sweep`` and ``lab optimize``: run the
points (trials) as Ray tasks, N at a time (:mod:`lab.eval.parallel`)."""

from __future__ import annotations

import argparse


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="run N points at once as Ray tasks, on N local processes sharing the cache (default: 1, "
                        "one after another, no Ray); results as a serial run's. Needs the ray extra: "
                        "pip install .[ray]")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="run on this Ray cluster (e.g. auto, ray://host:10001) instead of a local one; the "
                        "project, reports and cache must be at the same paths on every node")


def options(args: argparse.Namespace) -> dict:
    """The keyword arguments of run_sweep and run_optimize."""
    return {"workers": args.workers, "ray_address": args.ray_address}
