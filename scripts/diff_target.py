"""Does a target run see what the native run saw? Identity of a pipeline's run and of its own
query engine evaluated as a ``python`` target (docs/own-rag.md, "Identity").

    python scripts/diff_target.py RUN_FOLDER TARGET_RUN_FOLDER

Compares, question by question: the question's fields, the keyword ranks, every metric, every
retrieved passage (id, source, offsets, score, text, ranks), the golden spans' ranks, the answer's
text and the judgement (scores, status, reason); and the funnel's verdicts, the native run's
stages before the final list read as the one ``retrieval`` stage a target without candidates
shows. Overall and per-category metrics of ``results.json`` must be equal too. Prints what
differs (or that nothing does) and exits 1 when anything differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from lab.metrics.funnel import RETRIEVAL, RETRIEVAL_STAGES, lost_at_by_id
from lab.paths import follow_latest
from lab.runfiles import load_run

FIELDS = ("question", "category", "keywords", "reference_answer", "keyword_ranks", "metrics", "retrieved",
          "references", "span_chars")
JUDGED = ("status", "accuracy", "completeness", "relevance", "feedback", "suspect")


def differences(native: Path, target: Path) -> list[str]:
    (ra, sa), (rb, sb) = load_run(follow_latest(native)), load_run(follow_latest(target))
    out = []
    if [s["id"] for s in sa] != [s["id"] for s in sb]:
        return ["the runs asked other questions"]
    for a, b in zip(sa, sb):
        for f in FIELDS:
            if a.get(f) != b.get(f):
                out.append(f"{a['id']}: {f} differs")
        if (a.get("answer") or {}).get("text") != (b.get("answer") or {}).get("text"):
            out.append(f"{a['id']}: answer text differs")
        ja, jb = a.get("judgement") or {}, b.get("judgement") or {}
        if any(ja.get(k) != jb.get(k) for k in JUDGED):
            out.append(f"{a['id']}: judgement differs")
    fold = lambda v: RETRIEVAL if v in RETRIEVAL_STAGES else v  # noqa: E731
    la, lb = lost_at_by_id(sa), lost_at_by_id(sb)
    out += [f"{q}: funnel {fold(la[q])} != {lb.get(q)}" for q in la if fold(la[q]) != fold(lb.get(q))]
    for part in ("overall", "by_category"):
        if ra["metrics"][part] != rb["metrics"][part]:
            out.append(f"results.json metrics.{part} differ")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    found = differences(Path(argv[0]), Path(argv[1]))
    for line in found:
        print(line)
    n = len(load_run(follow_latest(Path(argv[0])))[1])
    print(f"{n} questions: {'identical' if not found else f'{len(found)} differences'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
