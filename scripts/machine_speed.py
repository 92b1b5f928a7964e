"""A line before the suite: how fast this machine runs plain Python now, and whether it pages out
files nobody touched for a while (the kernel's DAMON ``pageout`` scheme), so that the suite's time
can be read against the machine's. On a machine that pages out idle files, every test process
read the compiled modules and llama.cpp's 1.1 GB model from disk again after a pause: the same
tests took 2.6 times as long there (docs/index.md), and ``make test`` runs them beside
scripts/keep_warm.py.

    python scripts/machine_speed.py
    machine: 10 M Python additions in 0.79 s, load average 0.60 on 2 cores; file pages no process
    maps idle for 60 s are paged out (DAMON pageout, up to 128 MiB/s)
"""

import os
import time
from pathlib import Path

DAMON = Path("/sys/kernel/mm/damon/admin/kdamonds")


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _which(scheme: Path) -> str:
    """The pages a scheme's filters let it page out: "file pages no process maps" when a filter
    allows unmapped pages only (anonymous ones refused), else "file pages"."""
    for flt in sorted((scheme / "ops_filters").glob("[0-9]*")):
        if _read(flt / "type") == "unmapped" and _read(flt / "allow") == "Y" and _read(flt / "matching") == "Y":
            return "file pages no process maps"
    return "file pages"


def pageout() -> str:
    """What a running DAMON pageout scheme does, in words ("" when none runs or it cannot be read)."""
    for kd in sorted(DAMON.glob("[0-9]*")):
        if _read(kd / "state") != "on":
            continue
        for ctx in sorted((kd / "contexts").glob("[0-9]*")):
            aggr = _read(ctx / "monitoring_attrs" / "intervals" / "aggr_us")
            for scheme in sorted((ctx / "schemes").glob("[0-9]*")):
                if _read(scheme / "action") != "pageout":
                    continue
                age = _read(scheme / "access_pattern" / "age" / "min")
                quota, every = _read(scheme / "quotas" / "bytes"), _read(scheme / "quotas" / "reset_interval_ms")
                idle = f"{int(age) * int(aggr) / 1e6:.0f} s" if age.isdigit() and aggr.isdigit() else "a while"
                rate = f", up to {int(quota) * 1000 // int(every) // 2**20} MiB/s" \
                    if quota.isdigit() and every.isdigit() and int(quota) and int(every) else ""
                return f"; {_which(scheme)} idle for {idle} are paged out (DAMON pageout{rate})"
    return ""


def main() -> None:
    began, total = time.perf_counter(), 0
    for i in range(10_000_000):
        total += i
    seconds = time.perf_counter() - began
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: 10 M Python additions in {seconds:.2f} s, load average {load:.2f} on {os.cpu_count()} cores"
          f"{pageout()}", flush=True)


if __name__ == "__main__":
    main()
