"""Progress where output is not a terminal: log lines with counts, share, elapsed and ETA."""

from __future__ import annotations

import logging

import pytest

from lab import progress as progress_mod
from lab.progress import Ticker, duration, progress


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(progress_mod.time, "perf_counter", c)
    return c


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "lab.progress"]


def test_lines_every_tenth_with_eta(clock, caplog):
    caplog.set_level(logging.INFO, logger="lab.progress")
    with Ticker("judge", 20, bar=False, heartbeat=3600, quiet=0) as t:
        for _ in range(20):
            clock.t += 3.0  # 3 s a question
            t.update()
    got = lines(caplog)
    assert len(got) == 10  # every 2 of 20
    assert got[0] == "judge 2/20 q (10%), 6 s elapsed, ETA 54 s"  # 6 s / 2 * 18 left
    assert got[4] == "judge 10/20 q (50%), 30 s elapsed, ETA 30 s"
    assert got[-1] == "judge 20/20 q (100%), 1 min 00 s elapsed, ETA 0 s"


def test_fast_work_stays_quiet(clock, caplog):
    caplog.set_level(logging.INFO, logger="lab.progress")
    with Ticker("embed", 100, bar=False, unit="texts", heartbeat=3600, quiet=5.0) as t:
        for _ in range(100):
            clock.t += 0.01
            t.update()
    assert lines(caplog) == []


def test_slow_work_after_a_quiet_start_reports_its_end(clock, caplog):
    caplog.set_level(logging.INFO, logger="lab.progress")
    with Ticker("rerank", 10, bar=False, heartbeat=3600, quiet=5.0) as t:
        for i in range(10):
            clock.t += 0.5 if i < 9 else 10.6  # quiet until the last, slow item
            t.update()
    assert lines(caplog) == ["rerank 10/10 q (100%), 15 s elapsed, ETA 0 s"]


def test_progress_counts_an_item_when_the_next_is_asked_for(clock, caplog):
    caplog.set_level(logging.INFO, logger="lab.progress")
    seen = []
    for x in progress(range(4), 4, "generate", bar=False):
        clock.t += 10.0
        seen.append(x)
    assert seen == [0, 1, 2, 3]
    assert lines(caplog)[-1] == "generate 4/4 q (100%), 40 s elapsed, ETA 0 s"


@pytest.mark.parametrize("seconds,text", [(0.4, "0 s"), (59, "59 s"), (61, "1 min 01 s"), (3725, "1 h 02 min")])
def test_durations(seconds, text):
    assert duration(seconds) == text
