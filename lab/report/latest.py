"""Which run an experiment NAME stands for where runs are judged against each other (``lab gate``,
``lab track``, ``lab compare`` and the Python API): its latest *full* run, never silently a sample.

- A run folder, or ``reports/<NAME>/LATEST``, is taken as given: the user named that run.
- A NAME whose newest run covers the whole eval set is that run, as ``reports/<NAME>/LATEST`` says.
- A NAME whose newest run is a ``--limit`` sample is its newest full run (``LATEST-FULL``; in a
  folder written before that pointer existed, the newest run folder whose results say it is not a
  sample), with a note naming the run used and the sample passed over.
- A NAME with samples only is its newest sample, with a note saying it is one, of how many
  questions, and how to make a full run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab.paths import LATEST, LATEST_FULL, follow_latest, resolve_run
from lab.runfiles import read_results


@dataclass(frozen=True)
class Chosen:
    """The run folder a reference stands for, and a note when a NAME did not simply mean its
    newest run, or meant a sample (None otherwise)."""

    folder: Path
    note: str | None = None


def is_sample(results: dict) -> bool:
    """Whether a run asked only some of its eval set's questions (``--limit``)."""
    return bool((results.get("sample") or {}).get("is_sample"))


def sample_text(results: dict) -> str:
    """``a sample of 4 of 150 questions (--limit 4, seed 13)``."""
    s = results.get("sample") or {}
    return (f"a sample of {s.get('n_questions')} of {s.get('n_total')} questions "
            f"(--limit {s.get('limit')}, seed {s.get('seed')})")


def _runs_newest_first(base: Path) -> list[Path]:
    return sorted((d for d in base.iterdir() if not d.name.startswith(".") and (d / "results.json").is_file()),
                  key=lambda d: d.name, reverse=True)


def latest_full(base: Path) -> Path | None:
    """The newest full run in ``reports/<NAME>``: ``LATEST-FULL``, else (a folder written before
    that pointer) the newest run folder whose results say it is not a sample; None if none is."""
    pointer = base / LATEST_FULL
    if pointer.is_file():
        folder = follow_latest(pointer)
        if (folder / "results.json").is_file():
            return folder
    return next((d for d in _runs_newest_first(base) if not is_sample(read_results(d))), None)


def choose_run(ref: str, reports_root: Path) -> Chosen:
    """The run ``ref`` stands for (see the module docstring); an unknown ``ref`` is
    :func:`lab.paths.resolve_run`'s error."""
    base = Path(reports_root) / ref
    if (follow_latest(Path(ref)) / "results.json").is_file() or not (base / LATEST).is_file():
        return Chosen(resolve_run(ref, reports_root))  # a run folder or LATEST named as such
    newest = resolve_run(ref, reports_root)
    results = read_results(newest)
    if not is_sample(results):
        return Chosen(newest)
    full = latest_full(base)
    if full is not None:
        n = (read_results(full).get("sample") or {}).get("n_questions")
        return Chosen(full, f"{ref}: using its latest full run {full.name} ({n} questions), not its newer run "
                            f"{newest.name}, {sample_text(results)}")
    return Chosen(newest, f"{ref}: using its latest run {newest.name}, {sample_text(results)}: {ref} has no full "
                          f"run (lab run {ref} without --limit makes one)")
