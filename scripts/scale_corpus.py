"""A knowledge base of ~10^5 chunks from real text: InsureLLM where it is, plus distractors.

The InsureLLM knowledge base is copied unchanged (so its eval set's references still resolve),
and real English text found on this machine (package documentation, manuals, change logs, help
files: ``.md``, ``.rst``, ``.txt`` under /usr/share/doc, /usr/share/vim, Python installations...)
is added under ``distractors/`` until the corpus holds ``--chars`` characters. The selection is
deterministic (sorted paths, a seeded shuffle); files that are not UTF-8 text, are mostly not
prose (digits, tables), or are under 2 KB are left out.

    python scripts/scale_corpus.py --out /tmp/scale-kb --chars 26000000
    lab run scale-100k --retrieval-only --kb /tmp/scale-kb --eval ../shared/benchmarks/insurellm/tests.jsonl
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
from pathlib import Path

ROOTS = ("/usr/share/doc", "/usr/share/vim", "/usr/share/perl", "/usr/share/cmake-3.25", "/usr/lib/node_modules",
         "/root/.pyenv/versions", "/usr/lib/google-cloud-sdk", "/root/.rustup/toolchains")
EXTENSIONS = (".md", ".rst", ".txt")
MAX_FILE = 4_000_000  # under the loader's max_file_bytes (5,000,000)


def prose(text: str) -> bool:
    """Mostly words: letters are at least 60% of the characters and lines are not mostly digits."""
    if len(text) < 2000:
        return False
    letters = sum(c.isalpha() for c in text)
    return letters / len(text) >= 0.6 and len(re.findall(r"\d", text)) / len(text) < 0.1


def candidates(roots: tuple[str, ...]) -> list[Path]:
    found = []
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(EXTENSIONS):
                    found.append(Path(folder) / name)
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="folder to create (replaced if it exists)")
    ap.add_argument("--kb", type=Path, default=Path("../shared/benchmarks/insurellm/knowledge-base"))
    ap.add_argument("--chars", type=int, default=26_000_000, help="characters in the whole corpus")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    shutil.copytree(args.kb, args.out)
    total = sum(len(p.read_text(encoding="utf-8")) for p in args.out.rglob("*.md"))
    files = candidates(ROOTS)
    random.Random(args.seed).shuffle(files)
    seen: set[int] = set()
    added = 0
    for path in files:
        if total >= args.chars:
            break
        try:
            if path.stat().st_size > MAX_FILE:
                continue
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "\x00" in text or not prose(text) or hash(text) in seen:
            continue
        seen.add(hash(text))
        target = args.out / "distractors" / f"{added:05d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', path.name)}"
        target = target.with_suffix(".md" if path.suffix == ".md" else ".txt")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        total += len(text)
        added += 1
    print(f"{args.out}: InsureLLM + {added} distractor files, {total:,} characters")


if __name__ == "__main__":
    main()
