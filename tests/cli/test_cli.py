import re
from pathlib import Path

import pytest

from lab.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[2]


def test_every_command_is_documented_in_the_readme_and_has_an_example():
    readme = (ROOT / "README.md").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS)
    for name, p in sub.choices.items():
        assert f"`lab {name}" in readme, name
        assert (p.epilog or "").startswith("example: lab "), name


def test_readme_set_up_is_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set-up", 1)[1].split("##", 1)[0]
    block = re.search(r"```\n(.*?)```", setup, re.S).group(1).strip().splitlines()
    # the first command gives a real result in minutes: retrieval on every question, no LLM call
    assert block == ["make experiment NAME=turn13 RETRIEVAL_ONLY=1", "make test"]
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("make test")


def test_help_lists_the_verbs(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for verb in COMMANDS:
        assert verb in out


def test_list_and_validate(capsys):
    assert main(["list", "--experiments", str(ROOT / "experiments")]) == 0
    out = capsys.readouterr().out
    assert "turn22-offline" in out and "(extends turn18)" in out
    assert main(["validate", "turn13", "--experiments", str(ROOT / "experiments")]) == 0
    out = capsys.readouterr().out
    assert "chunk_size: 1000" in out and "# embedding model: sentence-transformers/all-MiniLM-L6-v2 ->" in out


def test_user_errors_exit_2_without_traceback(capsys):
    assert main(["run", "nope", "--experiments", str(ROOT / "experiments")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no experiment 'nope'") and "Traceback" not in err


def test_list_keeps_a_long_name_apart_from_its_description(capsys):
    assert main(["list", "--experiments", str(ROOT / "experiments")]) == 0
    lines = capsys.readouterr().out.splitlines()
    long = next(line for line in lines if line.startswith("hybrid-headers-summary-merged "))
    width = len("hybrid-headers-summary-merged") + 2  # the longest name here, and two spaces
    assert [line[:width].rstrip() for line in lines][:3] == ["bm25-headers-summary", "bm25-headers", "bm25"]
    assert long[width - 2:width] == "  " and long[width] != " "  # every description starts in one column
