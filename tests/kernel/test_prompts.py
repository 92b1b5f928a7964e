import pytest

from lab.errors import ConfigError
from lab.rag.generation import ANSWER_FIELDS
from lab.judge.rubric import JUDGE_FIELDS
from lab.prompts import available, load_prompt


def test_shipped_prompts_load_with_their_placeholders():
    ans = load_prompt("answer-grounded-v1", ANSWER_FIELDS)
    assert ans.fields == {"context", "question"} and len(ans.sha256) == 12
    judge = load_prompt("judge-v1", JUDGE_FIELDS)
    assert judge.fields == {"question", "reference", "answer"}
    system, user = judge.messages(question="Q?", reference="R.", answer="A.")
    assert system["role"] == "system" and '{"accuracy": <1-5>, "completeness"' in system["content"]
    assert user["content"] == "Question: Q?\nReference answer: R.\nGenerated answer: A."
    assert not any(line.startswith("#") for line in system["content"].splitlines())


def test_unknown_prompt_suggests_the_closest():
    with pytest.raises(ConfigError) as exc:
        load_prompt("jugde-v1", JUDGE_FIELDS, where="judge.prompt")
    assert "judge.prompt: no prompt 'jugde-v1'" in str(exc.value) and "did you mean 'judge-v1'?" in str(exc.value)
    assert set(available()) >= {"answer-grounded-v1", "judge-v1"}


def test_missing_placeholder_value_is_an_error():
    with pytest.raises(KeyError):
        load_prompt("answer-grounded-v1").messages(question="q")


def test_prompt_with_unknown_placeholder_is_refused(tmp_path, monkeypatch):
    import lab.prompts as prompts

    (tmp_path / "bad-v1.txt").write_text("=== system\nS {nope}\n=== user\n{question}\n")
    monkeypatch.setattr(prompts, "PROMPTS_DIR", tmp_path)
    with pytest.raises(ConfigError) as exc:
        load_prompt("bad-v1", ANSWER_FIELDS)
    assert "unknown placeholders ['nope']" in str(exc.value)
