"""The generator's rule-based rejections: questions naming a file, spans too short to hold an
answer, answers their category contradicts; each a reason in the sidecar."""

from __future__ import annotations

import pytest

from lab.evalsets.excerpts import contradicts_category, heading_span, names_a_file, short_span
from lab.evidence.states import words_not_in_spans
from lab.evalsets.generate import REASONS, _check


@pytest.mark.parametrize("question, sources, named", [
    ("What does products/carllm.md say about roadside assistance?", (), "products/carllm.md"),
    ("Which tier is described in pricing.pdf?", (), "pricing.pdf"),
    ("What does employees/avery_lancaster say about her start date?", ("employees/avery_lancaster.md",),
     "employees/avery_lancaster.md"),
    # the content, asked without the file
    ("When did Avery Lancaster join Insurellm?", ("employees/avery_lancaster.md",), None),
    ("Does Carllm cover theft and/or fire damage?", (), None),  # "and/or" is not a path
    ("What is the price of version 2.5 of the plan?", (), None),
    # a data or configuration file is what software documentation is about
    ("What is the purpose of the `overrides` field in the `package.json` file?", ("configuring-npm/package-json.md",),
     None),
    ("Which npm versions read `npm-shrinkwrap.json` or `config/settings.yaml`?", (), None),
    ("What does docs/setup.md say about proxies?", (), "docs/setup.md"),
    # a notebook page (Sphinx's numpy.ipynb.txt, read as the notebook it holds)
    ("What does the additional comment in numpy.ipynb section 'Additional Comments' say about converting "
     "quantities?", ("numpy.ipynb.txt",), "numpy.ipynb"),
])
def test_a_question_naming_a_file_or_path(question, sources, named):
    assert names_a_file(question, sources) == named


@pytest.mark.parametrize("spans, answer, why", [
    (["Roadside assistance included."], "It is the Premium plan.", "spans of 3 words in all, holding nothing the "
                                                                   "answer names"),
    (["- **Location:** Calgary"], "Insurellm is located in Calgary.", None),  # a short line holding the name
    (["Five words are too few."], "It costs $120 a month.", "spans of 5 words in all, without '120'"),
    # five words that hold the answer's figure are enough
    (["Her three contracts total $843,260."], "$843,260 in all.", None),
    (["Carllm Premium costs $120", "per month."], "$120 a month.", None),  # 6 words in two spans
    (["Carllm Premium costs $120 per month for each insured vehicle."], "$99.", None),  # 10 words
])
def test_spans_too_short_to_hold_the_answer(spans, answer, why):
    assert short_span(spans, answer) == why


@pytest.mark.parametrize("category, answer, why", [
    ("numerical", "The premium tier.", "a numerical question whose answer holds no number"),
    ("numerical", "$120 per month.", None),
    ("numerical", "Twelve agents.", None),
    ("temporal", "At the head office.", "a temporal question whose answer holds no date, year or period"),
    ("temporal", "In March.", None),
    ("temporal", "It lasts 18 months.", None),
    ("temporal", "In 2019.", None),
    ("direct_fact", "At the head office.", None),
])
def test_an_answer_its_category_contradicts(category, answer, why):
    assert contradicts_category(category, answer) == why


DOC = ("Carllm Premium costs $120 per month for each insured vehicle and includes roadside assistance "
       "across the country.")


@pytest.mark.parametrize("category, item, reason", [
    ("direct_fact", {"question": "What does products/carllm.md include for each vehicle?",
                     "answer": "Roadside assistance.", "excerpt": DOC}, "names_file"),
    ("numerical", {"question": "What does Carllm Premium include for each vehicle?",
                   "answer": "Roadside assistance.", "excerpt": "includes roadside assistance"}, "short_span"),
    ("numerical", {"question": "What does Carllm Premium include for each vehicle?",
                   "answer": "Roadside assistance.", "excerpt": DOC}, "category"),
    ("numerical", {"question": "How much does Carllm Premium cost for each vehicle?",
                   "answer": "$120 per month.", "excerpt": DOC}, None),
])
def test_the_checks_reject_with_their_reason(category, item, reason):
    task = {"category": category, "parts": [("products/carllm.md", (0, len(DOC)))]}
    got, _, _ = _check(task, item, {"products/carllm.md": DOC})
    assert got == reason
    assert reason is None or reason in REASONS


def test_the_numbered_document_is_cut_into_sentences_lines_and_list_items():
    from lab.evalsets.excerpts import numbered, sentences

    text = ("Metropolitan Life Group will receive the complete suite:\n\n"
            "1. **Unlimited Policy Administration:** No capacity restrictions. It scales.\n"
            "2. White-Label Platform: branding, e.g. custom domains.\nNo. 5 is here. It costs 5. Next one.")
    spans = sentences(text)
    assert numbered(text, spans).splitlines() == [
        "[1] Metropolitan Life Group will receive the complete suite:",
        "[2] 1. **Unlimited Policy Administration:** No capacity restrictions.",  # "1." opens the item
        "[3] It scales.",
        "[4] 2. White-Label Platform: branding, e.g. custom domains.",  # "e.g." ends no sentence
        "[5] No. 5 is here.",
        "[6] It costs 5.",
        "[7] Next one.",
    ]
    assert all(text[a:b] == text[a:b].strip() for a, b in spans)  # offsets into the text, trimmed


@pytest.mark.parametrize("spans, why", [
    (["SafeHaven Property Insurance will receive the complete Homellm Enterprise suite:"],
     "a span that only introduces what follows: 'SafeHaven Property Insurance will receive the complete Homellm "
     "Enterprise suite:'"),
    (["## Key Features"], "a span that only introduces what follows: '## Key Features'"),
    (["**Pricing:**"], "a span that only introduces what follows: '**Pricing:**'"),
    (["Pricing: $55 per month for the basic tier."], None),  # the colon introduces the answer it holds
])
def test_a_span_that_only_introduces_what_follows(spans, why):
    assert heading_span(spans) == why


REGISTRY = ("To resolve packages by name and version, npm talks to a registry website that implements the CommonJS "
            "Package Registry specification for reading package info.")
SERVER = ("If there is a `server.js` file in the root of your package, then npm will default the `start` command to "
          "`node server.js`.")


@pytest.mark.parametrize("category, answer, why", [
    # every word of the answer is in the first span, or in both: the second span is a stray
    ("spanning", "npm defaults the start command to node server.js for a package with a server.js file.",
     "a spanning answer that uses nothing only its second span holds"),
    ("comparative", "npm talks to a registry website to resolve packages by name and version.",
     "a comparative answer that uses nothing only its first span holds"),
    # a word only each span holds (server.js; registry)
    ("spanning", "npm starts server.js by default and reads package info from a registry.", None),
    # one-document categories are not asked
    ("direct_fact", "npm defaults the start command to node server.js.", None),
])
def test_a_two_document_answer_uses_both_spans(category, answer, why):
    from lab.evalsets.excerpts import one_document_answer

    assert one_document_answer(category, [SERVER, REGISTRY], answer) == why


@pytest.mark.parametrize("question, is_vague", [
    ("What is the purpose of the tarball URL in the example?", True),
    ("Which fields does the following snippet set?", True),
    ("What does the code block above install?", True),
    ("What does npm pack do with an example folder?", False),  # "an example" names nothing
])
def test_a_question_leaning_on_an_example_in_the_document_is_vague(question, is_vague):
    from lab.evalsets.excerpts import vague

    assert vague(question) is is_vague


@pytest.mark.parametrize("spans, answer, why", [
    (["npm only recognizes its own configuration options."], "npm recognizes 10 configuration options.",
     "the answer states 10, which its span(s) do not"),
    (["* Default: 10\n* Type: Number\n\nThe maximum number of log files to store."], "10 log files.", None),
    (["Her three contracts total $843,260."], "$843260 in all.", None),  # commas ignored
    (["the latest copy of blerg is 1.3.7"], "Version 1.3.7, released 2019.", "the answer states 2019, which its "
                                                                             "span(s) do not"),
    (["No figure here."], "No figure either.", None),
])
def test_an_answer_stating_a_figure_no_span_holds(spans, answer, why):
    from lab.evalsets.excerpts import figure_not_in_spans

    assert figure_not_in_spans(spans, answer) == why


def test_a_question_naming_the_prompts_document_a_or_b_is_vague():
    from lab.evalsets.excerpts import vague

    assert vague("How do the names and versions in document A and document B relate to each other?")
    assert not vague("Which plan does Document Analyzer include?")


AUTH = "If the specified configuration param resolves unambiguously to a known configuration parameter, then it is " \
       "expanded to that configuration parameter."


@pytest.mark.parametrize("answer, question, why", [
    # the answer's one own word ("null": the question holds default, value, _auth, configuration,
    # parameter, npm) is not in the span: written from elsewhere
    ("The default value for the `_auth` configuration parameter in npm is null.",
     "What is the default value for the `_auth` configuration parameter in npm?",
     "only 0 of the answer's 1 own words are in its span(s)"),
    # own words: resolves, unambiguously, known, expanded (4 of 4 in the span)
    ("A parameter that resolves unambiguously to a known one is expanded to it.",
     "What happens to an abbreviated configuration parameter?", None),
    # own words: script, aborts, whole, build, zero, output: 1 of 6 held (script) is under half
    ("The script aborts the whole build with zero output.", "What happens on a bad parameter?",
     "only 1 of the answer's 6 own words are in its span(s)"),
    # script, exits, aborts, process, zero: 3 of 5 held (script, exits, process) is half or more
    ("The script exits and aborts the process with zero.", "What happens on a bad parameter?", None),
    ("Configuration parameter.", "Which configuration parameter?", None),  # no own word: nothing to check
])
def test_an_answer_whose_own_words_its_span_does_not_hold(answer, question, why):
    spans = [AUTH] if "script" not in answer else ["If the script exits with a code other than 0, the process stops."]
    assert words_not_in_spans(spans, answer, question) == why
