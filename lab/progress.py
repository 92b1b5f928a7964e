"""What a run prints: progress with ETA (a tqdm bar on a terminal, periodic log lines
elsewhere: CI, ``| tee``, nohup) and the process's logging set-up."""

from __future__ import annotations

import logging
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

T = TypeVar("T")
log = logging.getLogger("lab.progress")


def progress(items: Iterable[T], total: int, desc: str, bar: bool, every: float = 0.1) -> Iterator[T]:
    """Yield ``items``; show a bar when ``bar``, else log ``desc i/total, ETA`` every 10%."""
    if bar:
        from tqdm import tqdm

        yield from tqdm(items, total=total, desc=desc, unit="q", file=sys.stderr)
        return
    t0 = time.perf_counter()
    step = max(1, int(total * every))
    for i, item in enumerate(items, start=1):
        yield item
        if i % step == 0 or i == total:
            elapsed = time.perf_counter() - t0
            eta = elapsed / i * (total - i)
            log.info("%s %d/%d, %.0f s elapsed, ETA %.0f s", desc, i, total, elapsed, eta)


def run_all(fn: Callable[[T], object], items: Sequence[T], desc: str, bar: bool, concurrency: int = 1) -> list:
    """``[fn(x) for x in items]`` with progress and ETA; ``concurrency`` > 1 runs that many in
    threads (remote LLM calls), results still in input order."""
    if concurrency <= 1:
        return [fn(x) for x in progress(items, len(items), desc, bar)]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(fn, x) for x in items]
        return [f.result() for f in progress(futures, len(futures), desc, bar)]


#: Libraries whose INFO chatter is not the user's business (their warnings still show).
QUIET_LOGGERS = ("httpx", "llama_index", "sentence_transformers", "urllib3", "huggingface_hub", "filelock")


def setup_logging(verbose: bool) -> None:
    """The CLI's logging: lab INFO lines (with times) on stderr, libraries at WARNING."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname).1s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ.setdefault("LANCE_LOG", "error")  # read by Lance's Rust logger when it loads
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
