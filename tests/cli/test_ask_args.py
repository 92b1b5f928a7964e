"""`lab ask NAME --kb DIR "QUESTION"`: the question may come after the options, as users write it."""

from lab.cli import main


def test_the_question_after_the_options_is_the_question(monkeypatch):
    seen = {}
    import lab.cli as cli_module

    monkeypatch.setitem(cli_module.COMMANDS, "ask", lambda args: seen.update(q=args.question, kb=args.kb) or 0)
    assert main(["ask", "turn13", "--kb", "docs", "How do I run a script?"]) == 0
    assert seen == {"q": "How do I run a script?", "kb": __import__("pathlib").Path("docs")}
    assert main(["ask", "turn13", "What is Carllm?", "--kb", "docs"]) == 0 and seen["q"] == "What is Carllm?"


def test_left_over_options_are_still_argparse_errors(capsys):
    try:
        main(["ask", "turn13", "--kb", "docs", "--no-such-option"])
    except SystemExit as exc:
        assert exc.code == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err
