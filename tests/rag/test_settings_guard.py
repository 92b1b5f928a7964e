import pytest


def test_the_guard_fails_code_that_reaches_for_global_settings():
    """conftest's autouse guard is live: LlamaIndex's silent OpenAI fallbacks cannot hide."""
    from llama_index.core import Settings

    with pytest.raises(AssertionError, match="global Settings"):
        Settings.embed_model
    with pytest.raises(AssertionError, match="global Settings"):
        Settings.llm
