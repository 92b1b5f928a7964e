"""Chunking time against document size, for text with and without spaces.

    .venv/bin/python bench/chunking.py [--mb 4.8] [--smoke]

The recursive character chunker (1000/200) splits a document at blank lines, then lines, then
spaces, then between characters. A long run with no space (base64, a minified file) reaches the
last level; LangChain's merge step then copied a list of ~chunk_size items per character
(4.8 MB: 402 s). Prints, for a document of the given size with spaces (prose) and without (base64):
the lab's time, LangChain's stock splitter's time on the same text (skipped above 1.2 MB without
spaces, where it takes minutes), the ratio no-spaces / spaces for the lab (goal: about 1, i.e.
linear in size whatever the text), and checks that both give the same chunks. ``--smoke``: 0.2 MB,
a few seconds.
"""

from __future__ import annotations

import argparse
import base64
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from langchain_text_splitters import RecursiveCharacterTextSplitter
from llama_index.core.schema import Document

from lab.rag.chunkers import RecursiveCharacterNodeParser, stable_id

WORDS = "the policy covers hull damage liability cargo crew premiums renew annually under clause".split()


def texts(n_chars: int) -> dict[str, str]:
    rng = random.Random(13)
    prose = []
    size = 0
    while size < n_chars:
        sentence = " ".join(rng.choice(WORDS) for _ in range(12)) + ". "
        prose.append(sentence + ("\n\n" if rng.random() < 0.1 else ""))
        size += len(prose[-1])
    return {"spaces": "".join(prose)[:n_chars],
            "no spaces": base64.b64encode(rng.randbytes(n_chars * 3 // 4)).decode()[:n_chars]}


def lab_chunks(text: str) -> tuple[float, list[str]]:
    parser = RecursiveCharacterNodeParser(chunk_size=1000, chunk_overlap=200, id_func=stable_id,
                                          include_prev_next_rel=False)
    t0 = time.perf_counter()
    nodes = parser.get_nodes_from_documents([Document(text=text, id_="doc.txt", metadata={"source": "doc.txt"})])
    seconds = time.perf_counter() - t0
    assert all(text[n.start_char_idx:n.end_char_idx] == n.get_content() for n in nodes), "offsets"
    return seconds, [n.get_content() for n in nodes]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=4.8, help="document size in MB (default 4.8)")
    ap.add_argument("--smoke", action="store_true", help="0.2 MB: a few seconds, for make test")
    args = ap.parse_args()
    n = int((0.2 if args.smoke else args.mb) * 1_000_000)
    seconds = {}
    for kind, text in texts(n).items():
        t_lab, ours = lab_chunks(text)
        seconds[kind] = t_lab
        line = f"{kind:<10} {len(text):>10,} chars  lab {t_lab:7.2f} s  {len(ours):>6} chunks"
        if kind == "spaces" or n <= 1_200_000:
            t0 = time.perf_counter()
            stock = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200).split_text(text)
            t_stock = time.perf_counter() - t0
            if stock != ours:
                print(f"{kind}: the lab's chunks differ from LangChain's", file=sys.stderr)
                return 1
            line += f"  stock splitter {t_stock:7.2f} s (same chunks)"
        print(line)
    ratio = seconds["no spaces"] / seconds["spaces"]
    print(f"ratio no spaces / spaces (lab): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
