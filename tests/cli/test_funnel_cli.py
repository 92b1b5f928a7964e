"""`lab funnel` in the terminal: the stage table of two runs, their movers and tests, each
question's evidence, and bad input (exit 2)."""

from report_fixtures import write_pair


def test_lab_funnel_prints_the_stages_the_movers_and_each_question(cli, tmp_path):
    write_pair(tmp_path)
    code, out, err = cli("funnel", "base", "better", "--reports", tmp_path, "--questions")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["lost", "at", "base", "better"]
    assert lines[1].split() == ["retrieval", "(stage", "not", "recorded)", "9", "(60%)", "4", "(27%)"]
    # better's q01 sent a passage holding neither keyword (its text is the fixture's script chunk)
    assert lines[2].split() == ["context", "budget", "0", "(0%)", "1", "(7%)"]
    assert lines[3].split() == ["generation", "6", "(40%)", "10", "(67%)"]
    assert lines[5].split() == ["kept", "0", "(0%)", "0", "(0%)"]
    assert lines[6].split() == ["questions", "with", "gold", "15", "15"]
    assert "base -> better: 5 recovered at retrieval (stage not recorded)" in lines
    test = next(x for x in lines if x.strip().startswith("past retrieval"))
    assert "40% -> 73%" in test and "+0.333" in test  # 6 of 15 get past retrieval in base, 11 in better
    assert test.endswith("p adj 0.062: not detectable")  # 5 wins, no loss: exact p 2/32, the only stage tested
    q05 = next(x for x in lines if x.strip().startswith("q05"))
    assert "retrieval (stage not recorded)" in q05 and "'item 5': lost at retrieval" in q05


def test_lab_funnel_by_category_and_bad_input(cli, tmp_path):
    write_pair(tmp_path)
    code, out, _ = cli("funnel", "base", "--reports", tmp_path, "--category", "temporal")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["lost", "at", "(temporal)"]
    gold = next(x for x in out.splitlines() if x.startswith("questions with gold"))
    assert gold.split()[-1] == "3"  # the 3 temporal ones
    code, _, err = cli("funnel", "base", "--reports", tmp_path, "--category", "nope")
    assert code == 2 and "no question of category 'nope'" in err and "direct_fact, temporal" in err
    code, _, err = cli("funnel", "missing", "--reports", tmp_path)
    assert code == 2 and "missing" in err
