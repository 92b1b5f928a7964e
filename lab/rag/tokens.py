"""Token counts with tiktoken, offline: the encodings ship inside llama-index-core."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import llama_index.core


@lru_cache(maxsize=4)
def encoding(name: str) -> Any:
    """The tiktoken encoding ``name`` (e.g. ``cl100k_base``), read from llama-index-core's copy."""
    os.environ.setdefault(
        "TIKTOKEN_CACHE_DIR", os.path.join(os.path.dirname(llama_index.core.__file__), "_static", "tiktoken_cache")
    )
    import tiktoken  # after the cache folder is set: tiktoken reads it when it loads an encoding

    return tiktoken.get_encoding(name)


def count_tokens(text: str, encoding_name: str = "cl100k_base") -> int:
    return len(encoding(encoding_name).encode(text))
