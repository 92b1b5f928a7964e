"""The pace and the progress of ``lab generate``'s loops (both modes): Ctrl-C that keeps what was
accepted, the seconds a computed candidate takes (for the ETA), and the progress note."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


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
