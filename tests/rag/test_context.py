"""Context builders: the truncation rule on hand-made cases, and the numbered layout."""

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from lab.config import CharBudgetContext, TokenBudgetContext, TopNContext
from lab.rag.context import budget_fill, build_context, format_passages
from lab.rag.tokens import count_tokens


def nodes(*texts):
    return [NodeWithScore(node=TextNode(text=t, id_=f"n{i}", metadata={"source": f"doc{i}.md"}), score=1.0)
            for i, t in enumerate(texts)]


@pytest.mark.parametrize("lengths, budget, kept, cut", [
    ([12, 3], 10, [10], True),          # first passage too long: cut to the budget, used alone
    ([4, 5, 3], 10, [4, 5], False),     # 4 + 5 = 9 fits; 9 + 3 = 12 does not: stop there
    ([4, 6, 1], 10, [4, 6], False),     # exact fit (4 + 6 = 10) is taken; nothing more fits
    ([4, 7, 1], 10, [4], False),        # the second does not fit: stop, even though the third would
    ([10], 10, [10], False),            # a first passage of exactly the budget is not cut
    ([], 10, [], False),
])
def test_budget_rule(lengths, budget, kept, cut):
    texts = ["x" * n for n in lengths]
    out, was_cut = budget_fill(texts, budget, len, lambda t, n: t[:n])
    assert [len(t) for t in out] == kept and was_cut is cut


def test_char_budget_builder_truncates_first_and_records_dropped():
    ctx = build_context(CharBudgetContext(name="char_budget", max_chars=5), nodes("abcdefgh", "ij"))
    assert [p.text for p in ctx.passages] == ["abcde"] and ctx.passages[0].truncated
    assert ctx.dropped == ["n1"] and ctx.chars == 5 and ctx.n_candidates == 2
    assert ctx.text == "[1] (source: doc0.md)\nabcde"


def test_top_n_and_layout():
    ctx = build_context(TopNContext(name="top_n", n=2), nodes("alpha", "beta", "gamma"))
    assert ctx.text == "[1] (source: doc0.md)\nalpha\n\n[2] (source: doc1.md)\nbeta"
    assert ctx.dropped == ["n2"]
    assert build_context(TopNContext(name="top_n"), nodes("a", "b", "c")).chars == 3


def test_token_budget_counts_cl100k_tokens_offline():
    # " hello" is one cl100k token: 3 passages of 4, 4 and 3 tokens under a budget of 8
    a, b, c = "hello" + " hello" * 3, "hello" + " hello" * 3, "hello" + " hello" * 2
    assert [count_tokens(t) for t in (a, b, c)] == [4, 4, 3]
    ctx = build_context(TokenBudgetContext(name="token_budget", max_tokens=8), nodes(a, b, c))
    assert [p.node_id for p in ctx.passages] == ["n0", "n1"]
    cut = build_context(TokenBudgetContext(name="token_budget", max_tokens=2), nodes(a))
    assert cut.passages[0].text == "hello hello" and cut.passages[0].truncated


def test_format_passages_numbers_from_one():
    from lab.rag.context import Passage

    assert format_passages([Passage("a", None, " x \n")]) == "[1] (source: unknown)\nx"
