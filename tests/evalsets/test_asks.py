"""The rules that read what a generated question asks for against its sentence, on rows people
graded as bad (restic's and Flask's manuals, docs/own-documents.md) and on good rows of the same
shape that must pass."""

import pytest

from lab.evalsets.asks import answer_type, asks_elsewhere, mentions_only, restates, says_not_to
from lab.evidence.text import stem

BAD = [  # (question, its sentence, what the rules say)
    ("What is the root user?", "On UNIX-like systems this is traditionally the ``root`` user.",
     "the question asks what root user is; its sentence only mentions it"),
    ("What is the manpage for ionice?", "Take a look at the `ionice manpage`_ to learn about the other classes.",
     "the question asks what manpage is; its sentence only mentions it"),
    ("What is the default layout for the S3 backend?", "The S3 backend understands and accepts both forms, new "
     "backends are always created with the default layout for compatibility reasons.",
     "the question asks for a default value; its answer holds none"),
    ("What are the environment variables used for Swift authentication?", "Because Swift supports various "
     "authentication methods, credentials are passed through environment variables.",
     "the question asks for a variable's name; its answer holds none"),
    ("What is the name of the command used to schedule backups with Restic?", "Restic does not have a built-in way "
     "of scheduling backups, as it's a tool that runs when executed rather than a daemon.",
     "the question asks for a name; its answer holds none"),
    ("What is the process for upgrading a repository from version 1 to version 2 using restic?", "Upgrading must be "
     "done explicitly as a newer repository version increases the minimum restic version required.",
     "the question asks for steps in order; its answer holds none"),
    ("What is the average Blob size in the implementation?", "Files smaller than 512 KiB are not split, Blobs are of "
     "512 KiB to 8 MiB in size.", "the question asks for an average; its answer holds none"),
    ("What is the recommended way to run the development server?", "Do not use the development server when "
     "deploying to production.", "the question asks what to do; its sentence says what not to do"),
    # Click's and Flask's rows (docs/generated-rows-read.md)
    ("What does the `click.argument()` function take as a parameter?", "click.argument() does not take a help "
     "parameter.", "the question asks what 'take' does or is; its sentence says it does not"),
    ("What is the name of the function that serializes arrays in Flask?", "In Flask 0.10 and lower, "
     ":func:`~flask.jsonify` did not serialize top-level arrays to JSON.",
     "the question asks what 'serialize' does or is; its sentence says it does not"),
    ("What are the two main reasons for using setuptools?", "With Click you can continue doing that, but there are "
     "better ways through setuptools.", "the question asks for several things; its sentence lists none"),
    ("What are some situations where perfectly fine code can lead to server errors?", "Even if your code is 100% "
     "correct, you will still see exceptions from time to time.",
     "the question asks for several things; its sentence lists none"),
    # Werkzeug's rows: things said to exist, none named
    ("What are the functions provided by Werkzeug for parsing and generating HTTP headers?", "Werkzeug provides a "
     "couple of functions to parse and generate HTTP headers that are useful when implementing WSGI middlewares.",
     "the question asks which things; its sentence says there are some and names none"),
    ("What are the built-in converters available in the routing system?", "Converters for common types of URL "
     "variables are built-in.", "the question asks which things; its sentence says there are some and names none"),
    # attrs' row: a glossary's term in a role is no name in code
    ("What are the advantages of using slotted classes in CPython?", "{term}`Slotted classes <slotted classes>` have "
     "several advantages on CPython.",
     "the question asks which things; its sentence says there are some and names none"),
]
GOOD = [
    ("What is a snapshot in the context of a restic repository?", "*Snapshot*: A Snapshot stands for the state of a "
     "file or directory that has been backed up at some point in time."),
    ("What are the two commands needed for remove operations?", "For all remove operations, two commands need to be "
     "called in sequence: ``forget`` to remove snapshots, and ``prune`` to remove the remaining data."),
    ("What are the options for specifying files to back up in restic?", "The options ``--files-from`` and "
     "``--files-from-raw`` allow you to give restic a file containing lists of file patterns."),
    ("What is the option to use Windows' VSS for backup?", "On Windows, the --use-fs-snapshot option will use "
     "Windows' Volume Shadow Copy Service (VSS) when creating backups."),
    ("What is the HTTP method that Flask automatically adds support for when GET is present?", "If GET is present, "
     "Flask automatically adds support for the HEAD method and handles HEAD requests."),
    ("What is the name of the new user created in the tutorial?", "For this tutorial, the new user will be named "
     "restic-demo-user."),
    ("What is the default log level in Python if logging is not configured?", "If you don't configure logging, "
     "Python's default log level is usually 'warning'."),
    ("What is the purpose of passwordless login in SFTP?", "Passwordless login is important since automatic backups "
     "are not possible if the server prompts for credentials."),
    ("What is the encoding version for new data?", "For new data the encoding version is currently always ``2``."),
    ("What does it mean to register blueprints multiple times?", "You can register blueprints multiple times though "
     "not every blueprint might respond properly to that."),
    ("What does the prune command do to backups older than 30 days?", "Backups older than 30 days are deleted by the "
     "prune command."),
    ("What does restic not back up by default?", "restic does not back up files in its cache directory by default."),
    ("What does the prune command remove?", "The prune command removes unreferenced data and does not touch "
     "snapshots."),
    ("What are some backends restic supports?", "restic supports local directories, SFTP servers and S3 buckets."),
    ("What are the main commands for maintenance?", "Maintenance needs ``forget`` and ``prune``."),
    ("Which functions parse HTTP headers?", "Werkzeug provides a couple of functions such as "
     ":func:`parse_dict_header` to parse HTTP headers."),  # a quantity, and one named
    ("What are some backends that work with rclone?", "Several backends, for example Google Drive and Dropbox, "
     "work with rclone."),
]


@pytest.mark.parametrize("question, sentence, said", BAD)
def test_rows_people_graded_bad_are_refused_with_their_reason(question, sentence, said):
    assert answer_type(question, sentence) == said


@pytest.mark.parametrize("question, sentence", GOOD)
def test_good_rows_of_the_same_shapes_pass(question, sentence):
    assert answer_type(question, sentence) is None
    assert restates(question, sentence) is None


def test_a_question_holding_every_word_of_its_sentence_restates_it():
    assert restates("What is the canonical URL for the about endpoint without a trailing slash?",
                    "The canonical URL for the ``about`` endpoint does not have a trailing slash.") == \
        "the question holds every content word of its sentence (5): nothing is left to answer"
    assert restates("What are the released binaries for restic built using a Docker container?",
                    "The released binaries for restic are built using a Docker container.") is not None
    assert restates("What is the response generated from a Request?", "response: The response generated from a "
                    "Request.") is not None  # three content words, all in the question
    # the same words in other forms ("using" and "use", "frameworks" and "framework"): Uvicorn's row, graded bad
    assert restates("What are the ASGI frameworks that can be run using Uvicorn, Daphne, or Hypercorn?",
                    "You can use Uvicorn, Daphne, or Hypercorn to run any ASGI framework.") == \
        "the question holds every content word of its sentence (7): nothing is left to answer"
    assert restates("What does Uvicorn use to run ASGI frameworks?",  # "Daphne" and "Hypercorn" are left to answer
                    "You can use Uvicorn, Daphne, or Hypercorn to run any ASGI framework.") is None
    assert [stem(w) for w in ("using", "use", "uses", "frameworks", "published", "is", "ring")] == \
        ["us", "us", "us", "framework", "publish", "is", "ring"]


def test_the_parts_alone():
    assert mentions_only("What is the purpose of X?", "X is used.") is None  # another rule's kind
    assert mentions_only("What is a tree?", "A tree contains a list of entries.") is None
    assert mentions_only("What is a tree?", "Nothing here.") is None  # not in the sentence: not this rule's to say
    assert says_not_to("How should I deploy?", "**Never** deploy on Fridays.") is not None
    assert says_not_to("What does deploy do?", "Never deploy on Fridays.") is None
    # a term in single quotes is a name the sentence must hold; an apostrophe is not a quote
    assert asks_elsewhere("What does the 'debug' option do in the flask run command?",
                          "The flask run command can do more than just start the development server.", "Run", "cli") \
        == "debug"
    assert asks_elsewhere("What is the option to use Windows' VSS for backup?",
                          "On Windows, the --use-fs-snapshot option will use Windows' Volume Shadow Copy Service "
                          "(VSS) when creating backups.", "Windows", "backup") is None


def test_the_eta_counts_computed_candidates_only():
    from lab.evalsets.pacing import Pace

    pace = Pace()
    for seconds in (0.01, 0.02, 9.0, 11.0):  # two from the cache, two computed: 10 s a candidate
        pace.add(seconds)
    # 6 questions wanted, 2 accepted of 4 tried: 12 candidates more, 10 s each; at most the budget left
    assert pace.left(6, 2, 4, 100) == 120.0
    assert pace.left(6, 2, 4, 5) == 50.0
    assert Pace().left(6, 2, 4, 100) is None


def test_closing_words_that_say_where_a_question_was_read_are_taken_off_when_a_thing_is_left():
    """Questions the model wrote on Lark's, Whoosh's and aiohttp's documentation, which the vague and
    file-naming checks refused whole: taken off "... in the documentation", "... in the schema
    section of the document", "... in the grammar.md file", each names its thing still."""
    from lab.evalsets.asks import without_where_read

    assert without_where_read("What does the %ignore directive do in the grammar.md file?") == \
        "What does the %ignore directive do?"
    assert without_where_read("What is the purpose of lexer_callbacks in the documentation?") == \
        "What is the purpose of lexer_callbacks?"
    assert without_where_read("What keyword argument sets FieldType.stored in the schema section of the document?") == \
        "What keyword argument sets FieldType.stored?"
    assert without_where_read("What is the `trace_request_ctx` parameter used for in the client advanced section of "
                              "the document?") == "What is the `trace_request_ctx` parameter used for?"
    assert without_where_read("What is the purpose of the 'Index' and 'Schema' objects in the quickstart "
                              "document?") == "What is the purpose of the 'Index' and 'Schema' objects?"
    assert without_where_read("What does ClientSession do, as described in this page?") == "What does ClientSession do?"
    # nothing named once the words go: left to the checks as asked
    assert without_where_read("What is the main feature of the parser described in the document?") is None
    assert without_where_read("What are the default response headers in the web_quickstart document?") is None
    # the document is what it asks about, or the words are not at the end: as asked
    assert without_where_read("What does the document 'web_advanced' discuss about Unicode support?") is None
    assert without_where_read("What does the 'grammar.md' file contain about rules?") is None
    assert without_where_read("What does parse() return in the JSON tutorial?") is None  # a tutorial is no location


def test_a_run_short_of_its_questions_says_why_and_what_gives_more():
    """Lark's documentation (42 files, 28 of them sphinx-gallery examples) gave 12 of 45 questions:
    every one of its 113 candidate sentences was tried, which a larger --max-candidates cannot
    change; a run that spent its budget can continue."""
    from lab.evalsets.pacing import short

    lark = {"documents_without_questions": ["grammar.md"] * 35, "n_accepted": 12, "n_requested": 45,
            "candidates": 113, "sentences": {"candidates": 113}, "stopped": None}
    assert short(lark, 42, "lark.gen.json") == [
        "35 of 42 documents have no question (see lark.gen.json)",  # a sidecar of before the census listed them
        "12 of 45 questions: every one of the 113 candidate sentences in these documents' prose was tried (the "
        "census above says what the sentence rules left out); more questions need more documents"]
    # sphinx-gallery's documentation: API pages of directives alone, example pages asked last
    gallery = {**lark, "n_accepted": 45, "documents_without_questions": [
        "faq.rst.txt", "gen_modules/sphinx_gallery.binder.rst.txt", "gen_modules/sphinx_gallery.sorting.rst.txt",
        "auto_examples/plot_0_sin.rst.txt", "tutorials/plot_parse.rst.txt", "auto_examples/index.rst.txt"],
        "sentences": {"candidates": 291, "documents_without_candidates": [
            "auto_examples/index.rst.txt", "gen_modules/sphinx_gallery.binder.rst.txt",
            "gen_modules/sphinx_gallery.sorting.rst.txt"]}}
    assert short(gallery, 44, "sg.gen.json") == ["6 of 44 documents have no question (3 of them hold no candidate "
                                                 "sentence, 2 are example or tutorial pages, asked last; see "
                                                 "sg.gen.json)"]
    # 10 of 45 from a budget of 100 of 495 sentences: 450 at that rate; at most the 495 there are
    spent = {**lark, "documents_without_questions": [], "n_accepted": 10, "candidates": 100,
             "sentences": {"candidates": 495}}
    assert short(spent, 42, "x.gen.json") == ["10 of 45 questions: the budget of 100 candidates was spent; the same "
                                              "command with --max-candidates 450 --force gives more (the calls made "
                                              "are cached)"]
    assert short({**spent, "n_accepted": 4}, 42, "x")[0].endswith("--max-candidates 495 --force gives more (the calls "
                                                                  "made are cached)")
    # all asked for, stopped (its own note says so), or the abstractive mode (no sentence census): nothing
    assert short({**spent, "n_accepted": 45}, 42, "x") == []
    assert short({**spent, "stopped": "time limit"}, 42, "x") == []
    assert short({k: v for k, v in spent.items() if k != "sentences"}, 42, "x") == []


def test_two_questions_in_one_are_refused():
    """Eight rows of the read sets asked two things of one sentence (docs/generated-rows-read.md):
    at best one is answered."""
    said = "the question asks two things; one sentence answers one at most"
    assert answer_type("What is Jinja2 and how does it work?", "Jinja2 supports template inheritance.") == said
    assert answer_type("What are mypyc wheels and how are they built?", "Wheels built with mypyc are platform "
                       "specific.") == said
    assert answer_type("What does Black do with tabs and spaces?", "Black turns tabs into spaces.") is None


def test_a_name_the_question_gives_itself_is_refused():
    """behave's and doit's rows: the title asked for is in the question's own words."""
    from lab.evalsets.asks import names_given

    assert names_given("What is the name of the tutorial on using Behave with Pyramid?",
                       "Wayne Witzel III, `Using Behave with Pyramid`_, 2014-01-10.") == \
        "the question asks for a name it gives itself ('Using Behave with Pyramid')"
    assert answer_type("What is the name of the signal that can be accessed with the blinker.base.NamedSignal.name "
                       "attribute?", "You can access the name of the signal with the "
                       ":attr:`~blinker.base.NamedSignal.name` attribute.").startswith("the question asks for a name it")
    assert names_given("What is the name of the new user created in the tutorial?",
                       "For this tutorial, the new user will be named ``restic-demo-user``.") is None
    assert names_given("What does the `--seek-file` option do?", "*doit* can seek for the ``dodo.py`` file on "
                       "parent folders if the option ``--seek-file`` is specified.") is None  # asks no name


@pytest.mark.parametrize("question, sentence, said", [  # CherryPy's and Werkzeug's rows
    ("What is a web application?", "A web application needs an HTTP server to be accessed to.",
     "the question asks what web application is; its sentence only mentions it"),
    ("What is the WSGI specification?", "The WSGI specification (:pep:`3333`) decided to always use the ``str`` type "
     "to represent values.", "the question asks what wsgi specification is; its sentence only mentions it"),
    ("What is a Toolbox?", "You can also make your own Toolboxes if you need more modularity.",
     "the question asks what toolbox is; its sentence only mentions it"),
    ("What is socket activation?", "Socket Activation is a systemd feature that starts services on demand.", None),
    ("What is Software Carpentry?", "The `Software Carpentry Foundation <http://software-carpentry.org>`_ is a "
     "non-profit membership organization.", None),
    ("What is a snapshot in the context of a restic repository?", "*Snapshot*: A Snapshot stands for the state of a "
     "file or directory that has been backed up at some point in time.", None),
    # "What does X mean?" asks the same (urwid's row): a requirement in X is not what X is
    ("What does pass-through mode mean in Urwid?", "In pass-through mode Urwid must still calculate character widths.",
     "the question asks what pass-through mode is; its sentence only mentions it"),
    ("What does the [100%] symbol mean?", "The [100%] symbol refers to the overall progress of the test run.", None),
    ("What does the --dry-run option mean for a prune?", "In a dry run nothing is deleted.", None),  # not bare
])
def test_a_bare_definition_question_needs_a_sentence_that_defines(question, sentence, said):
    """"What is X?" alone: a name near X or a parenthesis after it does not say what X is."""
    assert answer_type(question, sentence) == said
