"""A prompt's fixed head, evaluated once and restored (``LabLLM.chat(head=...)``), with the real
SmolLM2 model: the replies are the same bits in any order of calls and with or without a head
state kept from an earlier call, so the head changes the work, never the reply (nor the cache key)."""

from __future__ import annotations

import re

from lab.config import LLMConfig
from lab.evalsets.generate import TASKS, _held_schema, choices
from lab.models.backends import LlamaCppBackend
from lab.models.resolve import resolve_llm
from lab.prompts import load_prompt

DOCS = {
    "kilns.md": 'Ferrand Kilns was founded in Lyon in March 2011 by Odile Ferrand.\n'
                'The Ember 40 kiln costs 4,900 euros and carries a "five-year" warranty.\n',
    "glazes.md": "Celadon glaze fires at 1,280 degrees.\nThe Tenmoku glaze was added to the range in 2019.\n",
    "staff.md": "Marco Feltri designed the Ember 40 controller.\nHe joined Ferrand Kilns in 2014 as its first "
                "engineer.\n",
}


def _call(backend: LlamaCppBackend, source: str) -> str:
    prompt = load_prompt("generate-qa-v1")
    task = TASKS["direct_fact"]
    text = DOCS[source]
    messages = prompt.messages(task=task, source=source, text=text.strip())
    schema = _held_schema([list(choices(text, (0, len(text))))])
    out = backend.chat(messages, schema, 0.0, 0, 60, head=prompt.head("source", task=task))
    return out.text


def test_a_reply_is_the_same_whichever_call_came_before_and_whether_the_head_was_kept():
    plan = resolve_llm(LLMConfig(model="smollm2-135m-instruct"), "testset", None)
    order = list(DOCS)
    one = LlamaCppBackend(plan)
    forward = {s: _call(one, s) for s in order}
    assert len(one._heads) == 1  # three calls, one task: its head evaluated once, then restored
    backward = {s: _call(one, s) for s in reversed(order)}
    fresh = {}
    for s in order:  # a new model for each call: the head evaluated there, never restored
        fresh[s] = _call(LlamaCppBackend(plan), s)
    assert forward == backward == fresh
    for s, text in forward.items():  # the grammar holds the excerpt to the document's sentences
        excerpt = re.match(r'\{ ?"excerpt": ?"(.*?)", ?"question"', text)[1]
        assert excerpt in choices(DOCS[s], (0, len(DOCS[s])))


def test_the_head_is_the_steps_and_the_task_before_the_document():
    prompt = load_prompt("generate-qa-v1")
    task = TASKS["numerical"]
    user = prompt.messages(task=task, source="a.md", text="X")[-1]["content"]
    head = prompt.head("source", task=task)
    assert user[:head].startswith("Steps:\n1.") and user[:head].endswith(f"Task: {task}\n\nDocument \"")
    two = load_prompt("generate-qa2-v1")
    assert two.messages(task=task, source_a="a.md", text_a="X", source_b="b.md", text_b="Y")[-1]["content"][
        two.head("source_a", task=task):].startswith('a.md"')
