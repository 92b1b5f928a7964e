"""scripts/reference_docs.py: the committed references are what the generator writes from the
code now, the generator sees a key or an option added (so adding one without writing the
references again fails here), and every config key has a description to show."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest
from pydantic import Field, create_model

from lab.cli import build_parser
from lab.config import DataConfig, ExperimentConfig, JudgeConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("reference_docs", ROOT / "scripts" / "reference_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_committed_references_are_current(gen):
    for path, text in gen.references().items():
        assert path.exists(), f"{path} is missing: run python scripts/reference_docs.py"
        assert path.read_text(encoding="utf-8") == text, \
            f"{path.relative_to(ROOT)} is stale: run python scripts/reference_docs.py and commit it"


def test_check_exits_1_and_names_the_stale_file(gen, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gen, "REFERENCE", tmp_path)
    assert gen.main([]) == 0  # writes both
    assert gen.main(["--check"]) == 0
    (tmp_path / "cli.md").write_text("# Command reference\n\nold text\n")
    capsys.readouterr()
    assert gen.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "cli.md" in err and "config.md" not in err and "run python scripts/reference_docs.py" in err
    assert (tmp_path / "cli.md").read_text() == "# Command reference\n\nold text\n"  # --check writes nothing


def test_a_new_key_changes_the_config_reference(gen):
    base = gen.config_reference(ExperimentConfig)
    top = create_model("Top", __base__=ExperimentConfig,
                       extra_key=(int, Field(7, gt=0, description="One more key.")))
    text = gen.config_reference(top)
    assert text != base
    assert "| `extra_key` | integer; > 0 | `7` | One more key. |" in text
    data = create_model("Data", __base__=DataConfig, extra_key=(bool, Field(False, description="A nested one.")))
    nested = create_model("Nested", __base__=ExperimentConfig, data=(data, ...))
    assert "| `data.extra_key` | boolean | `false` | A nested one. |" in gen.config_reference(nested)


def test_the_config_reference_reads_defaults_where_they_are_set(gen):
    text = gen.config_reference(ExperimentConfig)
    assert "| `judge.llm.max_tokens` | integer; > 0 | `160` |" in text
    assert "| `generation.llm.max_tokens` | integer; > 0 | `256` |" in text
    assert "| `generation.context` | one of [`top_n`](#generation-context-top-n)" in text
    for kind in ("recursive_character", "semantic", "fixed_token", "page", "sentence_window", "parent_child"):
        assert f"### `chunker`: `{kind}`" in text
    assert "| `chunker.name` | `recursive_character` | required |" in text


def test_a_new_option_changes_the_cli_reference(gen):
    parser = build_parser()
    base = gen.cli_reference(parser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["run"].add_argument("--new-option", metavar="N", default=3, help="one more option")
    text = gen.cli_reference(parser)
    assert text != base
    assert "| `--new-option N` | `3` | one more option |" in text


def test_every_verb_has_its_section_and_example(gen):
    parser = build_parser()
    text = gen.cli_reference(parser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        assert f"## `lab {name}` {{#{name}}}" in text
        assert p.epilog.removeprefix("example: ") in text



def test_every_config_key_has_a_description(gen):
    models = gen.config_models(ExperimentConfig)
    assert DataConfig in models and JudgeConfig in models and len(models) > 30
    missing = [f"{m.__name__}.{name}" for m in models for name, field in m.model_fields.items()
               if not (field.description or "").strip()]
    assert missing == [], "fields without a description (a docstring under the field): " + ", ".join(missing)
