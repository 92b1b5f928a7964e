"""bench/target.py --smoke still runs: the lab around a callable and around a local HTTP server,
against calling them directly (what it prints, never how fast)."""

from test_bench import NUM, _line, _smoke


def test_bench_target_smoke():
    out = _smoke("target.py", timeout=300)
    for label in ("no-op callable", "callable 20 ms", "http fixed body", "http 20 ms"):
        m = _line(out, rf"^{label}\s+6 questions\s+direct {NUM} ms/q\s+lab {NUM} ms/q\s+overhead (-?[0-9.]+) ms/q\s+"
                       rf"ratio {NUM}\s+start-up {NUM} s$")
        direct, lab_ms, ratio = float(m[1]), float(m[2]), float(m[4])
        assert lab_ms > 0 and ratio > 0
        if label.endswith("20 ms"):  # the target's own sleep is in both
            assert direct >= 20 and lab_ms >= 20
    assert _line(out, rf"^ratio at 20 ms: callable {NUM}, http {NUM} \(goal <= 1\.05\)$")
