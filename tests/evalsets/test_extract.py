"""The extractive mode's choice of sentences, by rule, on hand-made Markdown, reStructuredText and
HTML text: code, console transcripts, example output and option tables are never candidates;
sentences that stand alone and state a fact are, with their exact offsets and section."""

from __future__ import annotations

import numpy as np
import pytest

from lab.evalsets.extract import blocks, candidates, in_example
from lab.evalsets.standalone import why_not
from lab.evalsets.questions import RoundTrip, answer_type, clean, coverage_order

RST = """\
#####################
Restoring from backup
#####################

Restoring from a snapshot
=========================

Restoring a snapshot is as easy as it sounds, just use the following
command:

.. code-block:: console

    $ restic -r /srv/restic-repo restore 79766175 --target /tmp/restore-work
    restoring <Snapshot of [/home/user/work] at 2015-05-08 21:40:19 +0200 CEST>

Use the word ``latest`` to restore the last backup. It is the newest
snapshot of the repository.

Literal blocks follow a double colon::

    created new cache in /home/user/.cache/restic
    Files:        5307 new,     0 changed

.. note:: The ``--target`` directory must be empty before a restore begins.

--target DIR     directory to extract data to
--include PAT    include a pattern, can be given 3 times

=====  =======
Flag   Default
=====  =======
-v     off
=====  =======

Mounting repositories via FUSE is only possible on Linux, macOS and FreeBSD.
"""

MD = """\
# Install

The installer writes its log to `/var/log/kiln.log` by default.

```console
$ kiln install --all
Installed 12 packages in 2019-04-01 10:00:00
```

    kiln --version
    kiln 2.4.1

| Option | Default |
|---|---|
| retries | 5 |

Retries stop after 5 attempts, spaced 30 seconds apart.

$ kiln status
Running since 2021-03-04
"""

HTML_TEXT = """\
Backups

The daily backup starts at 02:00 and keeps 14 copies.

<pre>
$ kiln backup --now
Backup 2024-01-02 finished in 42 s
</pre>
"""


def _sentences(source: str, text: str) -> list[str]:
    return [" ".join(c.text.split()) for c in candidates(source, text)]


def test_rst_code_transcripts_literal_blocks_and_option_tables_are_no_candidates():
    got = _sentences("050_restore.rst.txt", RST)
    assert got == [
        "Use the word ``latest`` to restore the last backup.",
        "The ``--target`` directory must be empty before a restore begins.",  # the admonition's body is prose
        "Mounting repositories via FUSE is only possible on Linux, macOS and FreeBSD.",
    ]
    kinds = [b.kind for b in blocks(RST, "050_restore.rst.txt")]
    assert kinds.count("transcript") == 1 and kinds.count("code") == 1 and kinds.count("table") >= 2
    # offsets are the document's own text; the section is the nearest title above
    c = candidates("050_restore.rst.txt", RST)[0]
    assert RST[c.start:c.end] == "Use the word ``latest`` to restore the last backup." and c.heading == \
        "Restoring from a snapshot"
    at = RST.index("restoring <Snapshot")
    assert in_example(RST, "050_restore.rst.txt", at, at + 30) == "transcript"
    at = RST.index("Files:")
    assert in_example(RST, "050_restore.rst.txt", at, at + 20) == "code"
    assert in_example(RST, "050_restore.rst.txt", c.start, c.end) is None


def test_markdown_fences_indented_code_tables_and_prompts_are_no_candidates():
    got = _sentences("docs/install.md", MD)
    assert got == ["The installer writes its log to `/var/log/kiln.log` by default.",
                   "Retries stop after 5 attempts, spaced 30 seconds apart."]
    cats = [c.category for c in candidates("docs/install.md", MD)]
    assert cats == ["direct_fact", "temporal"]  # "30 seconds": a period


def test_an_html_comment_in_markdown_is_no_candidate():
    """Black's documentation opens with a generator's note in ``<!-- ... -->`` (its date made a
    temporal question about the Sphinx master file)."""
    md = ("<!--\nkiln documentation master file, created by\nsphinx-quickstart on Fri Mar 23 10:53:30 2018.\n-->\n\n"
          "# Kiln\n\n<!-- Kiln's logs are kept for 9 days by the `logrotate` job. -->\n"
          "The installer writes its log to `/var/log/kiln.log` by default.\n")
    assert _sentences("docs/index.md", md) == ["The installer writes its log to `/var/log/kiln.log` by default."]
    assert [b.kind for b in blocks(md, "docs/index.md")] == ["comment", "heading", "comment", "prose"]


def test_html_pre_blocks_are_examples():
    got = _sentences("site/backup.html", HTML_TEXT)
    assert got == ["The daily backup starts at 02:00 and keeps 14 copies."]
    assert [c.category for c in candidates("site/backup.html", HTML_TEXT)] == ["temporal"]  # "at 02:00"


def test_a_sentence_that_does_not_stand_alone_is_no_candidate():
    assert why_not("It is the newest snapshot of the repository.") == "points elsewhere"
    assert why_not("Use the following command to restore the latest snapshot:") == "not a statement"
    assert why_not("Backups are good.") == "short"
    assert why_not("The repository keeps every snapshot you make.") == "no fact"
    assert why_not("Find the download link for your platform here.") == "points elsewhere"  # a link's text
    assert why_not("The size of each pack file is also configurable.") == "no fact"  # which size, it does not say
    assert why_not("The repository keeps every snapshot for 30 days.") is None
    # a FAQ's answer label does not hide the opening ("A: This is how ..." points back, as "This is how" does)
    assert why_not("A: This is how the -B and -A options in grep works, so that made it easier.") == "points elsewhere"
    assert why_not("A: Pexpect does NOT interpret shell meta characters such as ``>`` or ``|``.") is None


def test_a_sentence_continuing_one_begun_before_it_is_no_candidate():
    """A paragraph that goes on after a code block or a formula, or a list item finishing a
    lead-in, opens with a lowercase "where", "will", "by", ...: a fragment (sphinx-gallery's
    "will build all examples starting with ``plot_compute_``." after its ``conf.py`` snippet).
    Capitalised, the same words open a sentence; a lowercase name still does."""
    text = ("Patterns\n========\n\n.. code-block:: python\n\n    sphinx_gallery_conf = {'filename_pattern': "
            "'/plot_compute_'}\n\nwill build all examples starting with ``plot_compute_``. The key "
            "``filename_pattern`` defaults to ``plot``.\n")
    assert [c.text for c in candidates("configuration.rst", text)] == [
        "The key ``filename_pattern`` defaults to ``plot``."]
    for fragment in ("where :math:`d` is the number of features in the training set.",
                     "by loading all plugins specified through the PYTEST_PLUGINS environment variable.",
                     "is a read-only property that returns the widget in focus for this container.",
                     "which enforces full backward compatibility up to HDF5 1.8."):
        assert why_not(fragment) == "points elsewhere", fragment
    assert why_not("Where possible, the daily backup keeps 14 copies of every file.") is None
    assert why_not("pandas supports three kinds of sorting: by index labels, by column values, or both.") is None
    assert why_not("the `encoding` parameter is deprecated in `ClientSession.request()`.") is None  # a list item


def test_a_sentence_leaning_on_its_surroundings_or_a_contents_entry_is_no_candidate():
    """Mako's pages (docs/own-documents.md#mako): "If yes, ..." answers the sentence before it,
    "For X, see Y." sends the reader to Y, "here" is the page's example, "The function can ..."
    names its function by its section; a section's title with a dash and what it holds is a
    table of contents' entry. Each of these gave a bad row; a sentence naming its subject stays."""
    for pointer in ("If yes, the block is not executed: the parent template renders it already.",
                    "If not, pint will just copy the quantity to the new registry.",
                    "To create custom tags which accept a body, see Calling a Def with Embedded Content.",
                    "The full range of Python colon expressions are allowed here, including ``if`` and ``for``.",
                    "The function can control whether or not the ``render_body`` function executes."):
        assert why_not(pointer) == "points elsewhere", pointer
    for standing in ("If not set, the ``PORT`` variable defaults to 8080.",
                     "The ``Template.render()`` method calls upon Mako to create a ``Context`` object.",
                     "Quart by default times out long responses after 60 seconds, see dos_mitigations."):
        assert why_not(standing) is None, standing
    text = ("Caching\n=======\n\n* Using the Beaker Cache Backend - Includes arguments understood by Beaker.\n"
            "* Mako caches the ``render()`` output of a template for 60 seconds by default.\n\n"
            "Using the Beaker Cache Backend\n------------------------------\n\n"
            "The ``cache_region`` argument names a Beaker region of the ``cache_impl`` backend.\n")
    assert [c.text for c in candidates("caching.rst", text)] == [
        "Mako caches the ``render()`` output of a template for 60 seconds by default.",
        "The ``cache_region`` argument names a Beaker region of the ``cache_impl`` backend."]


def test_hard_wrapped_lines_make_one_sentence():
    text = "Intro\n=====\n\nThe cache lives in ``~/.cache/restic`` unless\nthe ``--cache-dir`` option says otherwise.\n"
    (c,) = candidates("cache.rst", text)
    assert text[c.start:c.end].endswith("says otherwise.") and c.start == text.index("The cache")


def test_a_sentence_ends_inside_emphasis_and_loses_its_markers():
    text = "Debugging\n=========\n\n**Do not run the development server in production.** The debugger runs any Python code from a browser.\n"
    first, second = candidates("debugging.rst", text)
    assert clean(first.text) == "Do not run the development server in production."
    assert second.text == "The debugger runs any Python code from a browser." and text[second.start:second.end] == second.text


def test_the_reference_answer_drops_markup():
    assert clean("Register handlers with :meth:`~flask.Flask.errorhandler` or :func:`abort <flask.abort>`.") == \
        "Register handlers with flask.Flask.errorhandler or abort."
    assert why_not("Because of that Flask configures the Jinja2 template engine for you.") == "points elsewhere"
    assert clean("Use ``--exclude`` and `FUSE for macOS <https://osxfuse.github.io/>`__ with **care**.") == \
        "Use --exclude and FUSE for macOS with care."


def test_answer_type_by_the_questions_wording():
    assert answer_type("How many copies does the backup keep?", "The backup keeps 14 copies.") is None
    assert answer_type("How many copies does the backup keep?", "The backup keeps some copies.") == \
        "the question asks for a number; its answer holds none"
    assert answer_type("In what year was the format changed?", "The format changed in 2019.") is None
    assert answer_type("Which option sets the target?", "The ``--target`` option sets it.") is None
    assert answer_type("When does a prune run?", "A prune runs after every forget.") is None
    assert answer_type("What does prune do?", "Anything.") is None  # no kind asked


def test_the_round_trip_takes_the_better_of_words_and_meaning():
    texts = ["The cache lives in the home folder.", "Backups run at night.", "Snapshots are kept for 14 days.",
             "The cache lives in the home folder."]
    vecs = np.eye(4)  # each sentence its own direction; the question points at the third
    trip = RoundTrip(texts, lambda t: vecs[: len(t)], k=1)
    # by words: "cache" and "home" are shared with sentences 1 and 4 (the same text: one answer)
    by_words, by_meaning = trip.ranks("Where does the cache live in the home folder?", texts[0], vecs[2])
    assert by_words == 1 and by_meaning == 2  # one sentence (the third) is nearer by meaning
    by_words, by_meaning = trip.ranks("How long are snapshots kept?", texts[2], vecs[2])
    assert by_words == 1 and by_meaning == 1
    by_words, _ = trip.ranks("What colour is the sky?", texts[1], vecs[2])
    assert by_words is None  # no content word in common


def test_example_and_tutorial_pages_are_tried_after_the_others():
    from lab.evalsets.extract import example_page

    for source in ("wiki-example.txt", "tutorials/blog.rst.txt", "json_tutorial.md.txt", "examples/advanced/x.rst",
                   "Tutorial.md", "docs\\examples\\a.md", "example.rst"):
        assert example_page(source), source
    for source in ("index.txt", "counterexamples.md", "guide/exampled.rst", "reference.txt", "quickstart.rst"):
        assert not example_page(source), source
    docs = {"a-example.md": "# Wiki\n\nThe wiki stores each page as a file of 4 KB.\n\nThe page title holds at most 80 characters.\n",
            "guide.md": "# Kiln\n\nThe kiln fires at 1,300 degrees.\n",
            "tutorials/start.md": "# Start\n\nThe demo shop sells 12 kilns.\n"}
    order = [c.source for c in coverage_order(docs, seed=0)]
    assert order[0] == "guide.md" and sorted(order[1:]) == ["a-example.md", "a-example.md", "tutorials/start.md"]


def test_coverage_visits_every_document_and_section_before_repeating():
    docs = {"a.md": "# One\n\nThe kiln fires at 1,300 degrees.\n\nThe kiln weighs 80 kilos when empty.\n\n# Two\n\n"
                    "The Ember kiln costs 8,400 euros.\n",
            "b.md": "# Three\n\nThe Ghent workshop opened in 2014.\n"}
    order = [(c.source, c.heading) for c in coverage_order(docs, seed=0)]
    assert len(order) == 4
    assert set(order[:3]) == {("a.md", "One"), ("a.md", "Two"), ("b.md", "Three")}  # one of each first


PAGE = """<html><head><title>Options</title></head><body>
<h1>Options</h1>
<p>Options are added to commands with the option decorator and default to None.</p>
<div class="highlight"><pre><span class="nd">@click.option</span>(<span class="s1">'--count'</span>, default=1)
<span class="k">def</span> hello(count):
    <span class="sd">\"\"\"Simple program that greets NAME for a total of COUNT times.\"\"\"</span>

    click.echo(count)
</pre></div>
<p>The help page lists every option with its default value and its help text.</p>
<pre>Usage: hello [OPTIONS]
  Simple program that greets NAME for a total of COUNT times.</pre>
</body></html>
"""


def test_an_html_pages_pre_elements_are_examples_though_its_text_lost_the_tags(tmp_path):
    """The loader's text of an HTML page keeps a ``<pre>``'s lines but not its tags (the text is
    what the index keys are made of, so it stays as it was); the loader gives the elements'
    ranges beside it, and with them the docstring inside the example is no candidate."""
    from lab.rag.loaders import load_folder

    (tmp_path / "options.html").write_text(PAGE, encoding="utf-8")
    corpus = load_folder(tmp_path, [".html"], 1_000_000, False)
    text, literal = corpus.documents[0].text, corpus.literal["options.html"]
    assert "<pre" not in text and len(literal) == 3
    assert literal[0] == [0, 7, 1] and text[:7] == "Options"  # the <h1>, its level beside it
    assert [text[a:b] for a, b, *_ in literal[1:]] == [
        "@click.option('--count', default=1)\ndef hello(count):\n"
        "\"\"\"Simple program that greets NAME for a total of COUNT times.\"\"\"\n\nclick.echo(count)",
        "Usage: hello [OPTIONS]\nSimple program that greets NAME for a total of COUNT times."]
    docstring = "Simple program that greets NAME for a total of COUNT times."
    without = _sentences("options.html", text)
    assert sum(docstring in s for s in without) >= 1  # the tags gone, the example reads as prose
    got = [" ".join(c.text.split()) for c in candidates("options.html", text, blocks(text, "options.html", literal))]
    assert got == ["Options are added to commands with the option decorator and default to None.",
                   "The help page lists every option with its default value and its help text."]
    at = text.index(docstring)
    assert in_example(text, "options.html", at, at + len(docstring)) is None
    assert in_example(text, "options.html", at, at + len(docstring), literal) == "code"


def test_option_rows_in_code_markup_pointing_openings_and_questions_on_the_given_snippet():
    from lab.evalsets.excerpts import vague

    rst = ("Options\n=======\n\n"
           "``--app src/hello``     Sets the current working directory to ``src`` then imports ``hello``.\n\n"
           "The other two are for the ``show`` function of the ``simple_page`` blueprint.\n\n"
           "The ``--app`` option tells Flask where to find the application instance.\n")
    assert _sentences("cli.rst.txt", rst) == ["The ``--app`` option tells Flask where to find the application instance."]
    assert [b.kind for b in blocks(rst, "cli.rst.txt")][:2] == ["heading", "table"]
    assert vague("What is the default behavior of options in the given code snippet?")
    assert vague("What does the `--count` option do in the `index` documentation?")
    assert not vague("What does the --count option default to?")


def test_questions_leaning_on_the_answer_or_an_unnamed_product_are_vague():
    """The sentence alone (generate-q-v2, no nearby text) lets the model write "the answer" or
    "the product" where it should name the thing (restic's and Werkzeug's rows)."""
    from lab.evalsets.excerpts import vague

    assert vague("What does the answer say about recovering from 'no free space' errors?")
    assert vague("What are the prerequisites for using the product?")
    assert vague("What is the response on the other hand?")
    assert vague("What does the 'snapshots' command show in the manual_rest document?")  # its title, echoed
    # a product picked out by what follows it is named (InsureLLM's people's questions)
    assert not vague("Who is the technical lead for the product that costs $10,000/month for Standard Tier?")
    assert not vague("What is the name of the new user created in the tutorial?")


def test_sentences_that_only_announce_or_judge_are_no_candidates():
    """requests' pages: "Making a request with Requests is very simple." and "An important note
    about using Response.iter_content versus Response.raw." state no fact to ask about."""
    assert why_not("Making a request with Requests is very simple.") == "no fact"
    assert why_not("An important note about using Response.iter_content versus Response.raw.") == "points elsewhere"
    assert why_not("Requests makes it simple to send a request with a timeout of 5 seconds.") is None


@pytest.mark.parametrize("sentence", [  # Werkzeug's manual: each sends the reader to the text before or elsewhere
    "Either method will include SSL support.",
    "For that you should set at least an etag and the date header and then call make_conditional.",
    "For more details about those exceptions have a look at the documentation of the MapAdapter.match method.",
    "Be sure to read its documentation and ``waitress-serve --help`` to understand what features are available.",
    "Supported platforms for the ``mypyc`` wheels are documented in the FAQ.",  # Black's release notes
])
def test_sentences_leaning_on_other_text_are_no_candidates(sentence):
    assert why_not(sentence) == "points elsewhere"
    assert why_not("Either ``host`` or ``port`` must be given to the server.") is None  # a rule, not a pointer


@pytest.mark.parametrize("sentence, said", [  # rows graded bad on Black's and Cookiecutter's pages
    ("Open your shell and cd into the directory where you'd like to create a starter Python package project.",
     "a walkthrough's step"),
    ("Great, you just generated a skeleton Python package.", "a walkthrough's step"),
    ("**line 10**: This contains the position of the end of the last match.", "a walkthrough's step"),  # WebOb's
    ("**line 16, 17**: If the response is just a string, create a full response object from it.",
     "a walkthrough's step"),
    ("Lines 3-5: The ``finditer`` method yields all the matches of the template.", "a walkthrough's step"),
    ("In Tutorial 2, you'll see how to create cookiecutters of your own, from scratch.", "a walkthrough's step"),
    ("We are proud to be an open source sponsor of [PyCon 2016](https://us.pycon.org/2016/sponsors/).",
     "the authors' story"),
    ("GitHub lets us delete comments using the incredibly aptly named DELETE method.", "the authors' story"),
    ("You will also need to add these keys to the `cookiecutter.json` or `.cookiecutterrc`.", "points elsewhere"),
    ("On Windows, `Colorama`_ must be installed as well to enable this.", "points elsewhere"),
    ("Consult the official `Python documentation <https://docs.python.org/3/>`_ for details.", "points elsewhere"),
    ("Why not explore some more on using _Black_ by reading [the basics](./the_basics.md).", "points elsewhere"),
    ("Some parentheses are optional in the Python grammar.", "no fact"),
    ("In Click 2.0 the signature for callbacks changed.", "no fact"),
    ("Foundational knowledge on using and configuring Black.", "a caption"),
    ("A fake wrapper around Python's timeit.", "a caption"),
])
def test_walkthrough_steps_the_authors_story_and_captions_are_no_candidates(sentence, said):
    assert why_not(sentence) == said


@pytest.mark.parametrize("sentence", [  # the same shapes, stating a fact
    "We recommend ``pipx`` for installing Black on a developer's machine.",  # a rule, in the authors' voice
    "Several backends, for example Google Drive and Dropbox, work with rclone.",  # some, and named
    "To override the location of the cache, set the environment variable ``BLACK_CACHE_DIR``.",
    "If you use Windows, the cache lives in ``%LOCALAPPDATA%``.",
    "``--ignore-inode``: require mtime to match, but allow inode number and ctime to differ.",  # code: no caption
    "Restic uses the Poly1305-AES message authentication code for every blob.",
    "Lines longer than 88 characters are split by Black at the outermost brackets.",  # "Lines", no number
])
def test_facts_of_the_same_shapes_stay_candidates(sentence):
    assert why_not(sentence) is None


def test_questions_about_a_part_of_the_documentation_are_vague():
    """Cookiecutter's rows: a user asks about the product, not about where a page says it."""
    from lab.evalsets.excerpts import vague

    assert vague("What are the pre- and post-generate hooks mentioned in the README file?")
    assert vague("What does the usage section of the documentation say about working with Zip files?")
    assert vague("What is the purpose of the 'Community' section in the README?")
    assert not vague("Which variables does the README template of cookiecutter-pypackage use?")  # a file it makes


def test_questions_about_a_release_none_named_are_vague():
    """Celery's and h5py's rows: "this release" or "the new version" is the page's release,
    which the question does not name; a release named by its number is a question."""
    from lab.evalsets.excerpts import vague

    assert vague("What is the minimum required version of Kombu for this release?")
    assert vague("What is the new major release of Celery?")
    assert vague("What is the default behavior of opening files in this version of the software?")
    assert not vague("What is the minimum Python version required for Celery 4.0 and later?")
    assert not vague("What changed in the new version 2.0 of the sync command?")
    assert not vague("What does the new task_remote_tracebacks feature do?")


def test_a_simple_tables_rows_with_sentences_in_them_are_the_tables():
    """behave's pages: a simple table's header row ended the table at its first border, and each
    description ("Provides JUnit XML-like output.") was read as prose."""
    text = ("Formatters\n==========\n\n"
            "============== ================================================================\n"
            "Name            Description\n"
            "============== ================================================================\n"
            "junit           Provides JUnit XML-like output.\n"
            "summary         Provides a summary of the test run.\n"
            "============== ================================================================\n\n"
            "The ``plain`` formatter is used by default when the output is not a terminal.\n")
    table = [b for b in blocks(text, "formatters.rst.txt") if b.kind == "table"]
    assert len(table) == 1 and text[table[0].start:table[0].end].count("\n") == 6  # both borders, every row
    assert [c.text for c in candidates("formatters.rst.txt", text)] == [
        "The ``plain`` formatter is used by default when the output is not a terminal."]
    # a border that no border closes is left as it was read before
    assert [b.kind for b in blocks("=====  =====\nThe cache lives in ``~/.cache``.\n", "x.rst")][0] == "table"


@pytest.mark.parametrize("sentence", [  # doit's and behave's pages
    "Check this `blog post <http://blog.example.net/posts/task-creation.html>`_ for some examples.",
    "The full detail of the Python side of *behave* is in the :doc:`API documentation <api>`.",
    # Quart's, Click's and Jinja's: the reason, the goal or the users are the sentence before's
    "For this reason coroutines are preferred even in cases where IO seems unlikely.",
    "For this, you can use the :func:`Context.invoke` or :func:`Context.forward` methods.",
    "For these users the ``--quiet`` flag is recommended.",
])
def test_pointers_to_a_post_or_other_documentation_are_no_candidates(sentence):
    assert why_not(sentence) == "points elsewhere"
    assert why_not("Use the option `--status`, to check the reason a task is not up-to-date.") is None


def test_a_section_of_a_configuration_file_is_no_part_of_the_documentation():
    from lab.evalsets.excerpts import vague

    assert not vague("What does the GLOBAL section in the configuration file contain?")
    assert vague("What does the 'index' section of the documentation cover?")


def test_the_census_says_what_the_rules_left_out_and_why():
    """The sidecar's ``sentences``: characters per kind of block, and each prose sentence left out
    counted under its reason, with its document, so a user can see what a rule takes away."""
    from lab.evalsets.census import census

    heading, prose = "Guide\n=====\n\n", ("It is the newest snapshot of the repository.\nThe repository keeps every "
                                         "snapshot for 30 days.\n\nBackups are good.\n\n")
    code = ".. code-block:: sh\n\n   restic backup\n"
    text = heading + prose + code
    cut, left = {"guide.rst": blocks(text, "guide.rst")}, {}
    found = {"guide.rst": candidates("guide.rst", text, cut["guide.rst"], left)}
    got = census({"guide.rst": text}, cut, found, left)
    assert got["prose_sentences"] == 3 and got["candidates"] == 1
    assert got["left_out"] == {
        "points elsewhere": {"n": 1, "examples": [{"source": "guide.rst",
                                                   "sentence": "It is the newest snapshot of the repository."}]},
        "short": {"n": 1, "examples": [{"source": "guide.rst", "sentence": "Backups are good."}]}}
    assert got["characters_by_kind"]["code"] == len(code)
    assert got["characters_by_kind"]["heading"] == len("Guide\n=====\n")
    assert sum(got["characters_by_kind"].values()) == len(text) - 3  # the blank lines between blocks are no block's


def test_myst_roles_colon_fences_footnotes_and_definition_lists():
    """structlog's MyST Markdown pages: a role ("{func}`structlog.configure`") is read as its text,
    a ":::{note}" fence is no part of the sentence under it, and a footnote's definition and a
    definition list's description (whose subject is the term above it) are no candidates."""
    md = ("# Processors\n\n"
          ":::{note}\n*structlog* only looks at the return value of the **last** processor.\n:::\n\n"
          "The highlight is {class}`structlog.dev.ConsoleRenderer` that offers colorful[^win] console output.\n\n"
          "[^win]: Requires the [*Colorama* package](https://pypi.org/project/colorama/) on Windows.\n\n"
          "{func}`structlog.twisted.JSONRenderer`\n\n"
          ": Goes a step further and circumvents Twisted logger's Exception handling and renders JSON strings.\n"
          "  That gives you regular and simple-to-parse single-line JSON log entries.\n\n"
          "After the list the processors run in the order given by `processors`.\n")
    assert [b.kind for b in blocks(md, "processors.md")] == [
        "heading", "comment", "prose", "comment", "prose", "comment", "prose", "table", "prose"]
    assert [clean(c.text) for c in candidates("processors.md", md)] == [
        "structlog only looks at the return value of the last processor.",
        "The highlight is structlog.dev.ConsoleRenderer that offers colorful console output.",
        "After the list the processors run in the order given by processors."]
    # code that opens with braces is no role
    assert clean("Use `{name}` placeholders and `{age}` in the `format` string.") == \
        "Use {name} placeholders and {age} in the format string."
    # the same lines in reStructuredText are what they were: ":::" and ": " mean nothing there
    assert [b.kind for b in blocks(":::\nThe cache lives in ``~/.cache``.\n", "x.rst")] == ["prose"]
    # pointers of the same pages
    for pointer in ["More general advice about logging can be found in the later chapter on {doc}`best-practices`.",
                    "If you require more complex behavior, please refer to the standard library's `logging` documentation.",
                    "You can find the details in the API documentation of {func}`structlog.configure`, at a high level."]:
        assert why_not(pointer) == "points elsewhere", pointer
    assert why_not("The term backend refers to the storage that `restic` writes to.") is None  # "refers to" is no pointer
    assert why_not("As you can see, `view`, `peer`, and `request_id` are present in **both** log entries.") == \
        "points elsewhere"  # the example above
    assert why_not("Originally, *structlog* used a generic wrapper class {class}`structlog.BoundLogger` by default.") == \
        "the project's history"  # asked as what is, its answer is wrong


def test_a_names_underscores_a_peps_role_and_a_link_lists_entries_in_myst():
    """attrs' MyST pages: a name in code keeps its underscores in the reference answer (the markup
    was taken off in an order that read ``__setattr__`` as emphasis), a PEP's role reads as Sphinx
    shows it, a sentence opening with a role is a sentence of its own, and a sentence whose subject
    is another page, or that opens with "Their", "Its" or "The result", points elsewhere."""
    for markup, reads in [
            ("*attrs* will attach a `__setattr__` method that raises {class}`attrs.exceptions.FrozenError`.",
             "attrs will attach a __setattr__ method that raises attrs.exceptions.FrozenError."),
            ("They are overwritten: {meth}`__getstate__ <object.__getstate__>`, ``__slots__``, __care__.",
             "They are overwritten: __getstate__, __slots__, care."),
            ("The result was {pep}`557`, and :rfc:`7231` says so.", "The result was PEP 557, and RFC 7231 says so."),
            # a reStructuredText link's text is no code: its trailing underscore goes with it
            ("The mode is ``ROUND_HALF_EVEN``, after `UTS #35 section 3.3`_ and Python's `Decimal`__ type.",
             "The mode is ROUND_HALF_EVEN, after UTS #35 section 3.3 and Python's Decimal type."),
            # a footnote's mark leaves no space before a comma; a Markdown reference link reads as its text
            ("*attrs* will happily write a `__hash__` for you [^fn1], however not by default.",
             "attrs will happily write a __hash__ for you, however not by default."),
            ("*attrs* supports [*Pyright*] through the [`dataclass_transform`][dt] specification.",
             "attrs supports Pyright through the dataclass_transform specification."),
            # a reStructuredText escape and a default role's target
            (r"`ErrorTree`\s support the `versioned validators <versioned-validators>` and ``a\b``.",
             r"ErrorTrees support the versioned validators and a\b.")]:
        assert clean(markup) == reads, markup
    md = ("# Day-to-Day Usage\n\n"
          "- *attrs* is built for extension from the ground up.\n"
          "  {doc}`extending` will show you the affordances it offers and how to build on them.\n"
          "- {doc}`types` help you to write *correct* and *self-documenting* code.\n")
    assert [clean(c.text) for c in candidates("index.md", md)] == []  # too short, and the page's link: none
    found = [clean(c.text) for c in candidates("x.rst", "The client keeps a pool of 10 connections. "
                                                         ":class:`Session` holds the cookies of every request.\n")]
    assert found == ["The client keeps a pool of 10 connections.", "Session holds the cookies of every request."]
    for pointer in ["Their main advantage is that they use less memory on CPython and are slightly faster.",
                    "Its default value performs a case-insensitive alphabetical sort.",
                    "The result, of course, was {pep}`557` which became the `dataclasses` module in Python 3.7.",
                    "You can only use this trick to tell *Mypy* that a class is actually an *attrs* class.",
                    "Due to backwards-compatibility, this feature is off by default in {func}`attr.s`, though.",
                    ":doc:`/server` and :doc:`/cli` have more information about running in debug mode.",
                    "Sometimes, you want to have your class's `__init__` method do more than the initialization.",
                    "Sometimes they're referred to as *next-generation* or *NG* APIs.",
                    # jsonschema's rows
                    "In other words, schema authors may wish to use values for the :kw:`format` keyword.",
                    "The error messages in this situation are not very helpful on their own."]:
        assert why_not(pointer) == "points elsewhere", pointer
    # the result of something named is a fact; a section's link often names a thing
    assert why_not("The result of the task is given by the returned value of the ``action`` function.") is None
    assert why_not(":ref:`Fixtures <fixtures-api>` are defined using the ``@pytest.fixture`` decorator.") is None
    assert why_not("Sometimes it is useful to save a `.Future` instead of yielding it immediately.") is None
    # an example's lead-in, the example a block below
    assert why_not("The easiest way is to install ``jsonschema`` with its ``format`` extra -- e.g.") == \
        "not a statement"


def _kept_and_logged(source: str, text: str, left: dict | None = None) -> tuple[list[str], int]:
    """A document's candidate sentences, markup off, and how many sentences it left out as a
    change log; ``left``: where they are counted, for a test that reads the examples too."""
    left = {} if left is None else left
    kept = [clean(c.text) for c in candidates(source, text, left_out=left)]
    return kept, left.get("a change log", {}).get("n", 0)


def test_a_change_logs_sections_are_no_candidates():
    """coverage.py's, factory_boy's and pexpect's change logs gave the most bad rows (a fixed bug
    asked as what the product does): a section headed by a release, or named as a change log, in
    a document with two or more release headings, is left out with its subsections, and counted."""
    from lab.evalsets.releases import change_log

    rst = ("Usage\n=====\n\nThe ``--fast`` option skips the checksum of every file.\n\n"
           "Changes\n=======\n\n"
           "2.1.0 (2020-01-05)\n------------------\n\nBug fixes\n~~~~~~~~~\n\n"
           "- Fixed a crash when the ``--fast`` option met an empty file.\n\n"
           "Version 2.0 \u2014 2019-12-01\n--------------------------\n\n"
           "- The ``--fast`` option was added to the ``sync`` command.\n\n"
           "Contributing\n============\n\nPull requests must include a test for every change.\n")
    left: dict = {}
    assert _kept_and_logged("guide.rst", rst, left) == ([
        "The --fast option skips the checksum of every file.",
        "Pull requests must include a test for every change."], 2)
    assert left["a change log"]["examples"][0]["sentence"] == "Fixed a crash when the ``--fast`` option met an empty file."
    start, end = change_log(rst, blocks(rst, "guide.rst"))[0]
    assert rst[start:].startswith("Changes\n") and rst[end:].startswith("Contributing\n")

    md = ("# Changelog\n\n## [23.1.0](https://example.org/compare/22.3.0...23.1.0) - 2023-04-06\n\n"
          "The `foo` processor now defaults to UTC timestamps.\n\n## 22.3.0 - 2022-12-01\n\n"
          "Python 3.6 is no longer supported by the `bar` module.\n")
    assert change_log(md, blocks(md, "changes.md")) == [(0, len(md))] and candidates("changes.md", md) == []
    # one release heading is no change log, nor are numbered sections
    one = "Upgrading\n=========\n\n3.0 (2021-01-01)\n----------------\n\nThe ``sync`` command keeps 14 copies by default.\n"
    assert change_log(one, blocks(one, "up.rst")) == [] and len(candidates("up.rst", one)) == 1
    numbered = ("# 1.1 Installing\n\nThe package needs Python 3.11 or newer on every machine.\n\n"
                "# 1.2 Configuring\n\nThe `cache_dir` setting defaults to the home folder.\n")
    assert change_log(numbered, blocks(numbered, "guide.md")) == [] and len(candidates("guide.md", numbered)) == 2
    # a release named with its product ("Psycopg 3.1.7") is one too; "Step 1.2" is no release
    named = ("Release notes\n=============\n\nPsycopg 3.1.7\n-------------\n\n- Fix a crash when the ``COPY`` block is empty.\n\n"
             "Psycopg 3.1.6\n-------------\n\n- The ``pool`` now waits 30 seconds before it gives up.\n")
    assert len(change_log(named, blocks(named, "news.rst"))) == 1 and candidates("news.rst", named) == []
    steps = ("Step 1.1\n--------\n\nThe ``init`` command writes a config file of 12 lines.\n\n"
             "Step 1.2\n--------\n\nThe ``run`` command reads the config file at every start.\n")
    assert change_log(steps, blocks(steps, "guide.rst")) == [] and len(candidates("guide.rst", steps)) == 2


def test_a_page_of_one_releases_notes_is_a_change_log():
    """Tornado's and Celery's release pages gave most of their sets' bad rows ("What is the new
    version of Celery?", "What does flush do?" of what 2.3 changed in it): a document titled by a
    release ("What's new in Tornado 2.4" over its date, "Change history for Celery 2.4") or by a
    change log's name is one whole, with a single release heading; "4.3.0 RC2" is a release; a page
    titled "History" alone (cmd2's command history) and a guide with one release section are not."""
    from lab.evalsets.releases import change_log

    tornado = ("What's new in Tornado 2.4\n=========================\n\nSep 4, 2012\n-----------\n\n"
               "General\n~~~~~~~\n\n* Fixed a memory leak in ``IOStream.close`` when a callback was pending.\n")
    assert change_log(tornado, blocks(tornado, "v2.4.0.rst")) == [(0, len(tornado))]
    assert candidates("v2.4.0.rst", tornado) == []
    for title in ("What's new in Celery 4.3 (rhubarb)", "Change history for Celery 2.4", "Changes in 3.0",
                  "Release notes for Foo 1.2", "Changelog"):
        page = f"{title}\n{'=' * len(title)}\n\nThe ``--fast`` option is now the default for every sync.\n"
        assert change_log(page, blocks(page, "p.rst")) == [(0, len(page))], title
    rc = ("Change history\n==============\n\n4.3.0\n=====\n\n- The 4.3 release keeps 14 copies.\n\n"
          "4.3.0 RC2\n=========\n\n- The filesystem backend now supports the ``max_size`` option.\n\n"
          "Contributing\n============\n\nPull requests must include a test for every change.\n")
    assert [clean(c.text) for c in candidates("rc.rst", rc)] == [
        "Pull requests must include a test for every change."]
    for title in ("pytest-7.2.1", "py.test 2.0.1: bug fixes, improved xfail/skip expressions"):  # pytest's announcements
        page = f"{title}\n{'=' * len(title)}\n\nThe ``--durations`` option now shows the 10 slowest calls.\n"
        assert change_log(page, blocks(page, "release.rst")) == [(0, len(page))], title
    step = "Step 1.2: Install\n=================\n\nThe ``init`` command writes a config file of 12 lines.\n"
    assert change_log(step, blocks(step, "step.rst")) == [] and len(candidates("step.rst", step)) == 1
    history = ("History\n=======\n\nThe ``history`` command lists the last 100 commands you entered.\n")
    assert change_log(history, blocks(history, "history.rst")) == [] and len(candidates("history.rst", history)) == 1
    guide = ("Guide\n=====\n\nThe ``sync`` command copies 3 files at a time by default.\n\n"
             "Version 2.0\n-----------\n\nThe ``sync`` command keeps 14 copies by default.\n")
    assert change_log(guide, blocks(guide, "guide.rst")) == [] and len(candidates("guide.rst", guide)) == 2


def test_an_issue_lists_entries_and_a_series_title_are_a_change_log():
    """IPython's release pages: "0.13 Series" over "Release 0.13" is a release's title, and an
    issue list ("Issues closed in the 0.11 development cycle") is a change log entry by entry,
    whatever its page's title; a sentence that only mentions an issue is none."""
    series = ("=============\n 0.13 Series\n=============\n\nRelease 0.13\n============\n\n"
              "IPython 0.13 contains several major new features, as well as 373 bug fixes.\n")
    assert candidates("version0.13.rst", series) == []
    issues = ("Issues closed in the 0.11 development cycle\n"
              "============================================\n\n"
              "The ``0.11`` cycle closed 10 issues and merged 6 pull requests on GitHub.\n\n"
              "* :ghpull:`7106`: Changed the display order of rich output in the live notebook.\n"
              "* `347 <https://github.com/ipython/ipython/issues/347>`_: Make ``ip.reset()`` work the same in "
              "interactive code.\n* #1234: The ``%paste`` magic no longer fails on Python 3.3.\n")
    assert _kept_and_logged("github-stats-0.11.rst", issues) == (
        ["The 0.11 cycle closed 10 issues and merged 6 pull requests on GitHub."], 3)
    assert len(candidates("guide.rst", "Guide\n=====\n\nThe fix for :ghissue:`4485` keeps 14 copies by default.\n")) == 1


def test_a_page_in_a_folder_of_release_notes_is_a_change_log_whole():
    """IPython's ``whatsnew/`` held a migration guide and "8.x Series" pages the titles missed, and
    pytest's ``announce/`` a sprint's announcement: a page in a folder named as release notes is
    left out whole, at any depth, whatever its title; a page named so (cmd2's
    ``features/history.rst``, click's ``upgrading.rst``), a folder that only contains such a word
    ("newsletter/", "history-tools/") and a "news/" or "changes/" folder are not."""
    from lab.evalsets.releases import release_folder

    guide = ("Migrating Widgets to IPython 3\n==============================\n\n"
             "The ``description`` attribute of a widget must now be set with ``value``.\n\n"
             "Set ``layout.width`` to ``200px`` to make the slider narrower.\n")
    for source in ("whatsnew/version3_widget_migration.rst.txt", "docs/releases/v2.rst", "announce/sprint2016.rst",
                   "release_notes/v2.2.0.rst", "What's New/intro.md", "changelog/4.x.md", "history/changelog-2.4.rst",
                   "whats-new/a.rst", "release-notes/a.rst", "Releases/v1.md"):
        assert release_folder(source), source
        assert _kept_and_logged(source, guide) == ([], 2), source
    for source in ("features/history.rst.txt", "upgrading.rst", "changelog.rst", "newsletter/a.rst",
                   "history-tools/a.rst", "guide/news.md", "whatsnew.rst", "news/2023.md", "changes/a.rst"):
        assert not release_folder(source), source
    assert len(candidates("features/history.rst.txt", guide)) == 2
    assert release_folder("a\\whatsnew\\b.rst")  # a Windows path
    # the title missed "8.x Series" before: a release's title alone makes its page a change log
    assert candidates("version8.rst", "============\n 8.x Series\n============\n\nIPython 8 drops Python 3.7 support.\n") == []
    assert len(candidates("py.rst", "Python 3.x support\n==================\n\nThe ``--fast`` option skips the checksum.\n")) == 1


def test_a_page_named_as_one_release_is_a_change_log_whole():
    """Django REST framework's site (MkDocs: ``NAME/index.html``) holds its release announcements in
    ``community/3.6-announcement/``, titled "Django REST framework 3.6", which no heading rule takes:
    7 of 45 held-out rows came from them, 5 bad (docs/own-documents.md#drf). A page whose own name,
    or its folder's, is a release's is left out whole; a page merely about a version is not."""
    from lab.evalsets.releases import release_folder

    page = ("Django REST framework 3.6\n=========================\n\n"
            "The 3.6 release adds two major new features to REST framework.\n\n"
            "The ``coreapi`` package must be installed for the ``include_docs_urls`` view.\n")
    for source in ("community/3.6-announcement/index.html", "community/kickstarter-announcement/index.html",
                   "whatsnew-5.2.rst.txt", "changelog-4.4.rst", "release-7.1.0.rst.txt", "1.2-release-notes.md",
                   "3.6_changes/index.html"):
        assert release_folder(source), source
        assert _kept_and_logged(source, page) == ([], 2), source
    for source in ("api-guide/fields/index.html", "tutorial/1-serialization/index.html", "3.6.rst", "release.rst",
                   "python-3.6-support.md", "announcing.rst", "index.html"):
        assert not release_folder(source), source
    assert len(candidates("api-guide/fields/index.html", page)) == 2


def test_an_admonitions_code_and_targets_are_no_part_of_its_sentences():
    """psycopg's warnings: a code block and a link target inside an admonition are cut from its
    prose, so no span runs into "$ pip install" or "..", and a sentence does not end inside
    inline code (":sql:`COPY ... TO STDOUT`")."""
    rst = (".. warning::\n    This module depends on the ``dnspython`` package. The package must be installed\n"
           "    manually with the ``pip`` tool.\n\n    .. code:: sh\n\n        $ pip install \"dnspython >= 2.1\"\n\n"
           "    .. _dnspython: https://dnspython.readthedocs.io/\n\n"
           "To produce data in the copy format you can use a :sql:`COPY ...\nTO STDOUT` statement and read 8 KB blocks.\n")
    kinds = [b.kind for b in blocks(rst, "dns.rst")]
    assert kinds == ["prose", "transcript", "comment", "prose"]
    found = [clean(c.text) for c in candidates("dns.rst", rst)]
    assert found[-1] == "To produce data in the copy format you can use a COPY ... TO STDOUT statement and read 8 KB blocks."
    assert not any("pip install" in c or ".." in c.replace("...", "") for c in found)
    # Sphinx's default role reads without its markers ("`!psycopg2`" shows "psycopg2"); a path stays
    assert clean("It behaves like `!psycopg2`: see `~Cursor.execute()`, :class:`!Xid` and `~/.cache`.") == \
        "It behaves like psycopg2: see Cursor.execute(), Xid and ~/.cache."


def test_the_local_round_trip_ranks_a_sentence_among_its_neighbours():
    """A question its neighbour answers better ranks its own sentence second there, by words or
    by meaning; the window stops at the document's bounds."""
    texts = ["A processor injects extra fields into a log record.", "Processors are called once a handler wants the record.",
             "Handlers are kept on a stack per thread.", "The stack is emptied at exit.", "Other document starts here."]
    vecs = np.eye(5)
    trip = RoundTrip(texts, lambda t: vecs[: len(t)])
    # "What does a processor inject?" asked of the second sentence: the first shares more words
    # ("processor", "inject") and means it (its direction)
    assert trip.local_ranks("What does a processor inject into a log record?", 1, vecs[0], 2, (0, 4)) == (2, 2)
    assert trip.local_ranks("When are processors called?", 1, vecs[1], 2, (0, 4)) == (1, 1)
    # a window of 1 leaves the fourth sentence out; the fifth is another document's
    assert trip.local_ranks("What is emptied at exit?", 3, vecs[3], 1, (0, 4)) == (1, 1)
    assert trip.local_ranks("Where does the other document start?", 3, vecs[4], 2, (0, 4)) == (1, 1)
    assert trip.local_ranks("Where does the other document start?", 3, vecs[4], 2, (0, 5)) == (2, 2)


def test_an_html_change_log_is_known_by_its_headings_and_a_pages_section_is_its_heading():
    """Scrapy's news.html: its releases are <h2> headings ("Scrapy 2.8.0 (2023-02-02)¶"); the text
    alone had no heading, so the change log was no change log and 11 of 45 generated rows were its
    entries. Read with the headings the loader found, no sentence of it is a candidate, and a
    sentence of another page is asked under its own section."""
    from lab.rag.htmlpages import html_read

    news = ("<html><body><h1>Release notes<a class='headerlink'>¶</a></h1>"
            "<h2>Scrapy 2.8.0 (2023-02-02)<a class='headerlink'>¶</a></h2>"
            "<p>The scrapy.downloadermiddlewares.decompression module is now deprecated (issue 5546).</p>"
            "<h2>Scrapy 2.7.1 (2022-11-02)<a class='headerlink'>¶</a></h2>"
            "<p>Relaxed the restriction introduced in 2.6.2 so that the Proxy-Authentication header can again "
            "be set explicitly (issue 5626).</p></body></html>")
    text, _, marked = html_read(news)
    cut = blocks(text, "news.html", marked)
    assert [(b.heading, b.level) for b in cut if b.kind == "heading"] == [
        ("Release notes", 1), ("Scrapy 2.8.0 (2023-02-02)", 2), ("Scrapy 2.7.1 (2022-11-02)", 2)]
    assert candidates("news.html", text, cut) == []
    assert len(candidates("news.html", text, blocks(text, "news.html"))) == 2  # without the headings: both
    page = ("<html><body><h1>Items</h1><h2>Item Types</h2><p>Scrapy supports four types of items via the "
            "itemadapter library: dictionaries, Item objects, dataclass objects and attrs objects.</p></body></html>")
    text, _, marked = html_read(page)
    (c,) = candidates("items.html", text, blocks(text, "items.html", marked))
    assert c.heading == "Item Types"


def test_a_sentence_on_most_pages_is_their_template_not_a_candidate():
    """A footer on every page ("Built with Sphinx using a theme provided by Read the Docs.", on 125
    of Scrapy's 126 HTML pages) is no candidate, counted as the pages' template; below five pages, a
    sentence repeated is kept (a knowledge base's twins are its own)."""
    from lab.evalsets.census import all_candidates

    footer = "Built with Sphinx using a theme provided by Read the Docs."
    docs = {f"p{i}.md": f"# Page {i}\n\nThe daily backup keeps {i + 10} copies of every file.\n\n{footer}\n"
            for i in range(6)}
    left: dict = {}
    found = all_candidates(docs, {s: blocks(t, s) for s, t in docs.items()}, left)
    assert [[c.text for c in v] for v in found.values()] == [
        [f"The daily backup keeps {i + 10} copies of every file."] for i in range(6)]
    assert left["the pages' template"]["n"] == 6
    few = {s: t for s, t in list(docs.items())[:4]}
    assert all(len(v) == 2 for v in all_candidates(few, {s: blocks(t, s) for s, t in few.items()}).values())
