"""Context builders: which retrieved passages the generator reads, and how they are laid out.

Every builder returns numbered passages (``[1] (source: products/ember90.md)`` then the text),
so that answers can cite them. Budgets count the passages' own text, not the headers.

- ``top_n``: the first ``n`` passages in the order retrieval (and reranking) gave them.
- ``char_budget`` (relevance-prioritised truncation): trust the order; if the first passage
  exceeds ``max_chars``, truncate it to ``max_chars`` and use it alone; otherwise add the
  following passages only while they fit whole, and stop at the first that does not (an exact
  fit is taken).
- ``token_budget``: the same rule in tokens of ``encoding`` (tiktoken, offline).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from llama_index.core.schema import NodeWithScore

from lab.config import CharBudgetContext, ContextConfig, TokenBudgetContext, TopNContext
from lab.rag.tokens import encoding
from lab.registry import Registry


@dataclass
class Passage:
    node_id: str
    source: str | None
    text: str
    truncated: bool = False


@dataclass
class Context:
    builder: str
    passages: list[Passage]
    text: str = ""
    n_candidates: int = 0
    dropped: list[str] = field(default_factory=list)  # node ids left out by the budget

    @property
    def chars(self) -> int:
        return sum(len(p.text) for p in self.passages)

    def as_record(self) -> dict:
        return {
            "builder": self.builder,
            "chars": self.chars,
            "n_passages": len(self.passages),
            "n_candidates": self.n_candidates,
            "passages": [
                {"number": i + 1, "id": p.node_id, "source": p.source, "chars": len(p.text), "truncated": p.truncated}
                for i, p in enumerate(self.passages)
            ],
            "text": self.text,
        }


def format_passages(passages: Sequence[Passage]) -> str:
    return "\n\n".join(
        f"[{i + 1}] (source: {p.source or 'unknown'})\n{p.text.strip()}" for i, p in enumerate(passages)
    )


def budget_fill(texts: Sequence[str], budget: int, size: Callable[[str], int],
                cut: Callable[[str, int], str]) -> tuple[list[str], bool]:
    """The truncation rule on plain texts: returns (texts kept, whether the first was cut)."""
    if not texts:
        return [], False
    if size(texts[0]) > budget:
        return [cut(texts[0], budget)], True
    kept, used = [], 0
    for text in texts:
        n = size(text)
        if used + n > budget:
            break
        kept.append(text)
        used += n
    return kept, False


def _passages(nodes: Sequence[NodeWithScore]) -> list[Passage]:
    return [Passage(n.node.node_id, _cited_as(n.node.metadata), n.node.get_content()) for n in nodes]


def _cited_as(metadata: dict) -> str | None:
    """A passage's source as the prompt shows it (and answers cite it): PDFs with their pages."""
    source, page = metadata.get("source"), metadata.get("page")
    if source and page:
        return f"{source}, page{'s' if '-' in str(page) else ''} {page}"
    return source


CONTEXT_BUILDERS: Registry[Callable[[Any, Sequence[NodeWithScore]], Context]] = Registry("context builder")


@CONTEXT_BUILDERS.register("top_n")
def _top_n(cfg: TopNContext, nodes: Sequence[NodeWithScore]) -> Context:
    passages = _passages(nodes)
    kept = passages[: cfg.n] if cfg.n else passages
    return Context("top_n", kept, dropped=[p.node_id for p in passages[len(kept):]])


def _budgeted(name: str, passages: list[Passage], budget: int, size: Callable[[str], int],
              cut: Callable[[str, int], str]) -> Context:
    texts, was_cut = budget_fill([p.text for p in passages], budget, size, cut)
    kept = [Passage(p.node_id, p.source, t, truncated=(i == 0 and was_cut)) for i, (p, t) in
            enumerate(zip(passages, texts))]
    return Context(name, kept, dropped=[p.node_id for p in passages[len(kept):]])


@CONTEXT_BUILDERS.register("char_budget")
def _char_budget(cfg: CharBudgetContext, nodes: Sequence[NodeWithScore]) -> Context:
    return _budgeted("char_budget", _passages(nodes), cfg.max_chars, len, lambda t, n: t[:n])


@CONTEXT_BUILDERS.register("token_budget")
def _token_budget(cfg: TokenBudgetContext, nodes: Sequence[NodeWithScore]) -> Context:
    enc = encoding(cfg.encoding)
    return _budgeted(
        "token_budget", _passages(nodes), cfg.max_tokens,
        lambda t: len(enc.encode(t)), lambda t, n: enc.decode(enc.encode(t)[:n]),
    )


def build_context(cfg: ContextConfig, nodes: Sequence[NodeWithScore]) -> Context:
    ctx = CONTEXT_BUILDERS.get(cfg.name, where="generation.context.name")(cfg, nodes)
    ctx.n_candidates = len(nodes)
    ctx.text = format_passages(ctx.passages)
    return ctx
