"""A line before the suite: how fast this machine runs plain Python now, and whether it pages out
files nobody touched for a while (the kernel's DAMON ``pageout`` scheme), so that the suite's time
can be read against the machine's. Most of the suite's time is llama.cpp's, which reads its 1.1 GB
model from memory for every token, so the line gives memory's copy speed too: on a day the same
suite took 2.7 times as long, memory copied 1.3 GB/s and llama.cpp ran 2.7 times slower
(docs/index.md); idle file pages paged out by the kernel were not the cause.

    python scripts/machine_speed.py
    machine: 10 M Python additions in 1.08 s, memory copies 1.4 GB/s, load average 1.77 on 2 cores;
    file pages no process maps idle for 60 s are paged out (DAMON pageout, up to 128 MiB/s)
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


def copy_speed() -> str:
    """Memory's copy speed, from copying 256 MiB three times with numpy (", memory copies X GB/s";
    "" without numpy)."""
    try:
        import numpy as np
    except ImportError:
        return ""
    a = np.ones(1 << 28, dtype=np.uint8)
    began = time.perf_counter()
    for _ in range(3):
        a.copy()
    return f", memory copies {3 * a.nbytes / (time.perf_counter() - began) / 1e9:.1f} GB/s"


def main() -> None:
    began, total = time.perf_counter(), 0
    for i in range(10_000_000):
        total += i
    seconds = time.perf_counter() - began
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: 10 M Python additions in {seconds:.2f} s{copy_speed()}, load average {load:.2f} on"
          f" {os.cpu_count()} cores"
          f"{pageout()}", flush=True)


if __name__ == "__main__":
    main()
