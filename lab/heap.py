"""The cyclic garbage collector and the libraries' long-lived objects.

Once torch, sentence-transformers, LlamaIndex and LanceDB have loaded, the interpreter tracks
about 700,000 objects that live until exit. While they load, the collector runs a full collection
each time the heap has grown by a quarter, walking everything loaded so far, and it walks them all
again at every later full collection and at interpreter exit: about 3.5 s of a 27 s cold
retrieval-only run over InsureLLM. :func:`loading` keeps the collector off while libraries load,
then :func:`settle` collects once and moves what is alive out of its reach (``gc.freeze``): later
collections walk only what was made after, and exit skips the frozen objects. Objects are still
freed by reference counting as before; only cycles among frozen objects wait for exit.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def loading() -> Iterator[None]:
    """No collection while the block imports libraries or loads a model; settle after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
            settle()


def settle(collect: bool = True) -> None:
    """Freeze every object alive now: after heavy imports and model loads (collecting first, so no
    garbage is frozen), and before exit (``collect=False``: what is left is freed by exit anyway)."""
    if collect:
        gc.collect()
    gc.freeze()
