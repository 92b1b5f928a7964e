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
    layout = tmp_path / "layout.md"
    layout.write_text(gen.LAYOUT.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(gen, "LAYOUT", layout)
    assert gen.main([]) == 0  # writes both
    assert gen.main(["--check"]) == 0
    (tmp_path / "cli.md").write_text("# Command reference\n\nold text\n")
    capsys.readouterr()
    assert gen.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "cli.md" in err and "config.md" not in err and "layout.md" not in err
    assert "run python scripts/reference_docs.py" in err
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


# --- the module map of docs/layout.md ---------------------------------------------------------------

PYPROJECT = """[tool.importlinter]
root_package = "lab"

[[tool.importlinter.contracts]]
name = "layers"
type = "layers"
containers = ["lab"]
layers = ["top | api", "errors"]
exhaustive_ignores = ["__main__"]

[[tool.importlinter.contracts]]
name = "the package's own order"
type = "layers"
containers = ["lab.top"]
layers = ["zeta", "alpha"]
"""


@pytest.fixture
def tree(gen, tmp_path, monkeypatch):
    """A small lab: a package ``top`` (two modules, in its own contract's order), ``api.py`` beside
    it, ``errors.py`` below; the layout page with its two markers; every generated file in tmp_path."""
    lab = tmp_path / "lab"
    (lab / "top").mkdir(parents=True)
    files = {"__init__.py": '"""The lab."""', "__main__.py": "", "api.py": '"""The API: functions."""',
             "errors.py": '"""Errors that say how to fix them. More here."""',
             "top/__init__.py": '"""The top package, e.g. a verb."""', "top/alpha.py": '"""Alpha: the first."""',
             "top/zeta.py": '"""Zeta? The last by name, first by layer."""'}
    for name, text in files.items():
        (lab / name).write_text(text + "\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    layout = tmp_path / "layout.md"
    layout.write_text(f"# Layout\n\nProse.\n\n{gen.MAP_START}\n{gen.MAP_END}\n\nMore prose.\n", encoding="utf-8")
    for name, value in {"PACKAGE": lab, "PYPROJECT": tmp_path / "pyproject.toml", "LAYOUT": layout,
                        "REFERENCE": tmp_path / "reference"}.items():
        monkeypatch.setattr(gen, name, value)
    return lab


def test_the_module_map_is_grouped_by_layer_with_each_first_sentence(gen, tree):
    assert gen.main([]) == 0
    text = gen.LAYOUT.read_text(encoding="utf-8")
    assert text.startswith("# Layout\n\nProse.\n\n") and text.endswith(f"{gen.MAP_END}\n\nMore prose.\n")
    region = text.split(gen.MAP_START)[1].split(gen.MAP_END)[0]
    assert region.splitlines()[3:] == [
        "### `top`, `api` {#layer-top-api}", "",
        "- `lab/top/`: The top package, e.g. a verb.",
        "    - `zeta.py`: Zeta? The last by name, first by layer.",  # the package's contract: zeta above alpha
        "    - `alpha.py`: Alpha: the first.",
        "- `lab/api.py`: The API: functions.", "",
        "### `errors` {#layer-errors}", "",
        "- `lab/errors.py`: Errors that say how to fix them.", "",
    ]
    assert "__main__" not in region and gen.main(["--check"]) == 0


def test_check_names_a_module_missing_from_the_map(gen, tree, capsys):
    assert gen.main([]) == 0
    (tree / "top" / "beta.py").write_text('"""Beta: new."""\n', encoding="utf-8")
    (tree / "top" / "alpha.py").unlink()
    before = gen.LAYOUT.read_text(encoding="utf-8")
    capsys.readouterr()
    assert gen.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "layout.md (its module map; not listed: lab/top/beta.py; listed but gone: lab/top/alpha.py)" in err
    assert "run python scripts/reference_docs.py" in err
    assert gen.LAYOUT.read_text(encoding="utf-8") == before  # --check writes nothing
    assert gen.main([]) == 0 and gen.main(["--check"]) == 0
    assert "- `beta.py`: Beta: new." in gen.LAYOUT.read_text(encoding="utf-8")


def test_a_new_package_without_docstrings_is_listed_by_name_and_named(gen, tree, capsys):
    (tree / "fresh").mkdir()
    (tree / "fresh" / "__init__.py").write_text("", encoding="utf-8")
    (tree / "fresh" / "half.py").write_text("def f(:\n", encoding="utf-8")  # being written: does not parse
    (tree / "top" / "bare.py").write_text("x = 1\n", encoding="utf-8")
    assert gen.main([]) == 0
    err = capsys.readouterr().err
    assert "without a docstring: lab/top/bare.py, lab/fresh/, lab/fresh/half.py" in err
    text = gen.LAYOUT.read_text(encoding="utf-8")
    assert "    - `bare.py`\n" in text
    assert "### In no layer of the contract yet {#layer-none}\n\n- `lab/fresh/`\n    - `half.py`\n" in text
    assert gen.main(["--check"]) == 0  # listed by name alone is current, not a failure


def test_a_layout_page_without_the_markers_says_where_the_map_goes(gen, tree):
    gen.LAYOUT.write_text("# Layout\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="no module map: put a line <!-- modules:start -->"):
        gen.main(["--check"])


@pytest.mark.parametrize("doc, sentence", [
    ("One. Two.", "One."),
    ("Uses :mod:`lab.rag.index` and :func:`~lab.rag.sent.send_windows`. More.", "Uses `lab.rag.index` and `send_windows`."),
    ("The ``lab`` command: verbs. ``lab --help`` lists them.", "The `lab` command: verbs."),
    ("Is it good? Findings before runs. More.", "Is it good? Findings before runs."),
    ("Names, e.g. Alice. Then more.", "Names, e.g. Alice."),
    ("A first\nparagraph over lines\n\nA second.", "A first paragraph over lines"),
    ("", ""),
])
def test_first_sentence(gen, doc, sentence):
    assert gen.first_sentence(doc) == sentence


def test_the_real_module_map_lists_every_module_of_lab(gen):
    listed = gen.map_paths(gen.module_map_markdown())
    lab = ROOT / "lab"
    modules = {f"lab/{p.relative_to(lab).as_posix()}" for p in lab.rglob("*.py")
               if p.name != "__init__.py" and p != lab / "__main__.py"}
    packages = {f"lab/{p.parent.relative_to(lab).as_posix()}/" for p in lab.rglob("__init__.py") if p.parent != lab}
    assert listed == modules | packages
    assert {"lab/tune/", "lab/serve/", "lab/tune/train.py", "lab/serve/app.py"} <= listed
    layers = [title for title, _ in gen.module_map()]
    assert layers[0] == ["api", "cli"] and layers[-1] == ["errors"]

