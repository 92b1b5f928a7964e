"""The pace and the progress of ``lab generate``'s loops (both modes): Ctrl-C that keeps what was
accepted, the eval set written as rows are accepted, the seconds a computed candidate takes (for
the ETA), the progress note, and what a finished run left short."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from lab.evalsets.extract import example_page


class _Halt:
    """Whether Ctrl-C stopped the block (see :func:`interruptible`)."""

    def __init__(self) -> None:
        self.hit = False

    def __bool__(self) -> bool:
        return self.hit


@contextmanager
def interruptible() -> Iterator[_Halt]:
    """Ctrl-C inside the block ends the block quietly: the flag it yields turns true, and the
    caller keeps, writes and reports what it had (``lab generate``'s rows)."""
    halt = _Halt()
    try:
        yield halt
    except KeyboardInterrupt:
        halt.hit = True


class Rows:
    """The eval set, written a row at a time as rows are accepted: a valid JSONL file at every
    moment (each line whole, flushed and synced), so a stopped run keeps what it accepted."""

    def __init__(self, path: Path):
        self.path = path
        self.fh = open(path, "w", encoding="utf-8")
        self.n = 0

    def __call__(self, row: dict) -> None:
        self.fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.n += 1

    def close(self) -> None:
        self.fh.close()


class Pace:
    """The seconds a candidate takes when its call is computed (a cached call takes none), for an
    ETA that a resumed or cached start does not make too short."""

    def __init__(self) -> None:
        self.spent, self.computed = 0.0, 0

    def add(self, seconds: float) -> None:
        if seconds > CACHED_SECONDS:
            self.spent += seconds
            self.computed += 1

    def left(self, wanted: int, accepted: int, tried: int, budget: int) -> float | None:
        if not self.computed or not accepted:
            return None
        return min(budget, wanted * tried / accepted) * self.spent / self.computed


#: A candidate that took less than this came from the cache.
CACHED_SECONDS = 0.3


def tally(tried: int, rejected: dict[str, list]) -> str:
    """The progress note: candidates tried so far and rejections by reason."""
    rej = ", ".join(f"{r} {len(v)}" for r, v in rejected.items() if v)
    return f"{tried} candidates tried, rejected: {rej or 'none'}"


def candidate_sentences(stats: dict) -> int | None:
    """The candidate sentences the rules found in the documents (a finished ``lab generate``'s
    sidecar ``stats``), which bound an extractive run's candidates; None for the abstractive mode."""
    return (stats.get("sentences") or {}).get("candidates")


def short(stats: dict, n_documents: int, sidecar: str) -> list[str]:
    """What a finished ``lab generate`` (its sidecar's ``stats``) left short: the documents without
    a question, and, when the extractive mode wrote fewer questions than asked and was not stopped,
    why and what would give more: every candidate sentence tried (more documents), or the
    candidate budget spent (a larger ``--max-candidates`` at the rate seen so far, with ``--force``:
    the set is finished; the calls made are cached)."""
    lines = []
    if none := stats["documents_without_questions"]:
        bare = set((stats.get("sentences") or {}).get("documents_without_candidates", [])) & set(none)
        last = sum(example_page(s) for s in none if s not in bare)
        why = ", ".join([f"{len(bare)} of them hold{'s' * (len(bare) == 1)} no candidate sentence"] * bool(bare)
                        + [f"{last} are example or tutorial pages, asked last"] * bool(last))
        lines.append(f"{len(none)} of {n_documents} documents have no question ({why + '; ' if why else ''}see "
                     f"{sidecar})")
    got, wanted, tried = stats["n_accepted"], stats["n_requested"], stats["candidates"]
    pool = candidate_sentences(stats)
    if got >= wanted or stats.get("stopped") or pool is None:
        return lines
    if tried >= pool:
        lines.append(f"{got} of {wanted} questions: every one of the {pool} candidate sentences in these documents' "
                     "prose was tried (the census above says what the sentence rules left out); more questions "
                     "need more documents")
    else:
        more = min(pool, -(-tried * wanted // got) if got else 2 * tried)
        lines.append(f"{got} of {wanted} questions: the budget of {tried} candidates was spent; the same command "
                     f"with --max-candidates {more} --force gives more (the calls made are cached)")
    return lines
