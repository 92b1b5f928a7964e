"""bench/serve.py --smoke still runs: a real server over made runs answers the runs table and a
comparison (what it prints, never how fast)."""

import re

from test_bench import NUM, _line, _smoke


def test_bench_serve_smoke():
    out = _smoke("serve.py", timeout=300)
    assert _line(out, r"^made 20 runs of 10 questions and two of 60 in ")
    m = _line(out, rf"^runs table \(22 runs\)\s+cold {NUM} s\s+warm {NUM} s\s+floor .* {NUM} s\s+ratio warm/floor {NUM}")
    assert all(float(x) > 0 for x in m.groups())
    m = _line(out, rf"^compare \(60 questions each\)\s+served {NUM} s\s+lab compare's renderer {NUM} s\s+ratio {NUM}"
                   rf"\s+cached {NUM} s\s+page {NUM} MB \(file {NUM} MB\)$")
    served_mb, file_mb = float(m[5]), float(m[6])
    assert served_mb > 0 and re.match(r"\d", m[1])
    assert abs(served_mb - file_mb) < 0.01  # the served page is the file's page, links and the bar aside
