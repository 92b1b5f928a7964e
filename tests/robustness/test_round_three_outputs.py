"""Commands that would destroy their input: every verb that writes a file checks it with
``lab.paths.check_output`` before any work (never an input of the same command, never a file
inside the knowledge base, never an existing file without --force, never a folder), and two
``lab generate`` into one --out at once cannot both write it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cli import main
from lab.errors import DataError
from lab.paths import OutputClaimed, check_output, claim_output
from report_fixtures import write_pair

ROOT = Path(__file__).resolve().parents[2]


def fix_of(err: str) -> str:
    return err.partition("\n  fix: ")[2]


# --- lab audit ----------------------------------------------------------------------------------


def test_audit_html_cannot_replace_the_eval_set_it_reads(cli, project):
    before = (project / "eval.jsonl").read_bytes()
    code, out, err = cli("audit", project / "eval.jsonl", "--kb", project / "kb", "--html", project / "eval.jsonl",
                         "--force")
    assert code == 2, err
    assert err.startswith(f"error: --html {project / 'eval.jsonl'} is {project / 'eval.jsonl'}, an input of this "
                          "command: writing it would destroy it")
    assert fix_of(err) == "give --html another path\n"
    assert (project / "eval.jsonl").read_bytes() == before and out == ""


def test_audit_html_cannot_replace_a_document_of_the_knowledge_base(cli, project):
    doc = project / "kb" / "company" / "about.md"
    before = doc.read_bytes()
    code, _, err = cli("audit", project / "eval.jsonl", "--kb", project / "kb", "--html", doc, "--force")
    assert code == 2
    assert f"error: --html {doc} is inside the knowledge base {project / 'kb'}: it would become one of its " \
           "documents, or replace one" in err
    assert doc.read_bytes() == before


def test_audit_html_of_an_existing_file_needs_force_and_a_folder_is_named_as_given(cli, project):
    page = project / "page.html"
    page.write_text("kept")
    code, _, err = cli("audit", project / "eval.jsonl", "--kb", project / "kb", "--html", page)
    assert code == 2 and f"error: --html {page} already exists" in err
    assert fix_of(err) == "pass --force to replace it, or give --html another path\n"
    assert page.read_text() == "kept"
    code, _, err = cli("audit", project / "eval.jsonl", "--kb", project / "kb", "--html", project / "kb")
    assert code == 2 and err.startswith(f"error: --html {project / 'kb'} is a folder\n")
    assert ".tmp-" not in err  # the path given, not a temporary file's


# --- lab generate -------------------------------------------------------------------------------


def test_generate_out_is_checked_before_any_model_loads(cli, project):
    kb = project / "kb"
    inside_kb = kb / "questions.jsonl"
    code, _, err = cli("generate", "--kb", kb, "--out", inside_kb, "--experiments", project / "experiments")
    assert code == 2 and f"error: --out {inside_kb} is inside the knowledge base {kb}" in err
    assert not inside_kb.exists()
    code, _, err = cli("generate", "--kb", kb, "--out", project / "eval.jsonl")
    assert code == 2 and f"error: --out {project / 'eval.jsonl'} already exists" in err and "--force" in err
    code, _, err = cli("generate", "--kb", kb, "--out", project / "experiments")
    assert code == 2 and err.startswith(f"error: --out {project / 'experiments'} is a folder\n")


def test_a_second_generate_into_the_same_out_stops_while_the_first_runs(cli, project):
    out = project / "new.jsonl"
    with claim_output(out):  # what the first `lab generate` holds while it runs
        code, _, err = cli("generate", "--kb", project / "kb", "--out", out, "--force")
        assert (out.parent / ".new.jsonl.lock").read_text() == f"{os.getpid()}\n"
    assert code == 2
    assert f"error: --out {out} is being written by another command now (process {os.getpid()}, lock " in err
    assert fix_of(err) == "wait for it to finish, or give --out another path\n"
    assert not out.exists() and not (out.parent / ".new.jsonl.lock").exists()


RACE = """
import sys, time
from pathlib import Path
from lab.paths import OutputClaimed, claim_output
out = Path(sys.argv[1])
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # both start together
try:
    with claim_output(out):
        time.sleep(1.5)
        out.write_text(sys.argv[3])
except OutputClaimed:
    sys.exit(2)
"""


def test_of_two_writers_started_together_exactly_one_writes(tmp_path):
    """The exclusive create of the lock file, across processes: no check-then-write window."""
    import time

    out = tmp_path / "set.jsonl"
    start = str(time.time() + 2.0)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", RACE, str(out), start, who], env=env) for who in ("a", "b")]
    codes = sorted(p.wait(timeout=60) for p in procs)
    assert codes == [0, 2]
    assert out.read_text() in {"a", "b"} and not (tmp_path / ".set.jsonl.lock").exists()


def test_a_lock_left_by_a_process_that_is_gone_is_taken_over(tmp_path):
    out = tmp_path / "set.jsonl"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / ".set.jsonl.lock").write_text(gone.stdout)
    with claim_output(out):
        assert (tmp_path / ".set.jsonl.lock").read_text() == f"{os.getpid()}\n"
        with pytest.raises(OutputClaimed):
            with claim_output(out):
                pass
    assert not (tmp_path / ".set.jsonl.lock").exists()


# --- lab import and lab export ------------------------------------------------------------------


def beir_folder(root: Path) -> Path:
    src = root / "beir"
    (src / "qrels").mkdir(parents=True)
    (src / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "Kilns", "text": "A kiln fires clay."}) + "\n"
                                      + json.dumps({"_id": "d2", "title": "", "text": "Glaze is glass."}) + "\n")
    (src / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "What fires clay?"}) + "\n")
    (src / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return src


def test_beir_kb_out_that_holds_files_says_force_and_force_counts_what_it_replaced(cli, tmp_path):
    src, kb_out = beir_folder(tmp_path), tmp_path / "kb"
    kb_out.mkdir()
    (kb_out / "d1.txt").write_text("my own notes on kilns\n")
    (kb_out / "d2.txt").write_text("Glaze is glass.")  # the same text: not counted
    code, _, err = cli("import", "beir", src, "--kb-out", kb_out, "--out", tmp_path / "set.jsonl")
    assert code == 2 and f"error: --kb-out {kb_out} is a file or a folder that already holds files" in err
    assert "--force" in fix_of(err) and "overwrite=True" not in err
    assert (kb_out / "d1.txt").read_text() == "my own notes on kilns\n"
    code, out, err = cli("import", "beir", src, "--kb-out", kb_out, "--out", tmp_path / "set.jsonl", "--force")
    assert code == 0, err
    assert "documents_written 2" in out and "documents_replaced 1" in out
    assert (kb_out / "d1.txt").read_text() == "Kilns\n\nA kiln fires clay."


def test_import_and_export_never_write_over_their_source(cli, tmp_path, project):
    csv_file = tmp_path / "qs.csv"
    csv_file.write_text("question,reference_answer,keywords\nWho?,Odile,Odile\n")
    code, _, err = cli("import", "csv", csv_file, "--out", csv_file, "--force")
    assert code == 2 and f"error: --out {csv_file} is {csv_file}, an input of this command" in err
    assert csv_file.read_text().startswith("question,")
    code, _, err = cli("export", project / "eval.jsonl", "--out", project / "eval.jsonl", "--force")
    assert code == 2 and "an input of this command: writing it would destroy it" in err
    code, _, err = cli("import", "csv", csv_file, "--out", tmp_path / "set.jsonl")
    assert code == 0, err
    code, _, err = cli("import", "csv", csv_file, "--out", tmp_path / "set.jsonl")
    assert code == 2 and f"error: --out {tmp_path / 'set.jsonl'} already exists" in err
    assert fix_of(err) == "pass --force to replace it, or give --out another path\n"  # a flag, not overwrite=True
    code, _, err = cli("export", project / "eval.jsonl", "--out", tmp_path)
    assert code == 2 and err.startswith(f"error: --out {tmp_path} is a folder\n") and ".tmp-" not in err


def test_a_ragas_import_never_writes_into_its_knowledge_base(project):
    source = project / "ragas.jsonl"
    source.write_text(json.dumps({"user_input": "q", "reference": "a", "keywords": ["k"]}) + "\n")
    with pytest.raises(DataError, match="is inside the knowledge base"):
        from lab.evalsets.interop import import_set

        import_set("ragas", source, project / "kb" / "set.jsonl", kb=project / "kb")
    assert not (project / "kb" / "set.jsonl").exists()


# --- lab sweep ----------------------------------------------------------------------------------


def test_a_sweep_over_other_values_does_not_replace_an_earlier_sweep(cli, project):
    folder = project / "reports" / "_sweep" / "small-retrieval-retriever.top_k"
    folder.mkdir(parents=True)
    earlier = {"dials": {"retriever.top_k": [1, 2]}, "points": []}
    (folder / "sweep.json").write_text(json.dumps(earlier))
    code, _, err = cli("sweep", "small-retrieval", "--set", "retriever.top_k=3,4", "--experiments",
                       project / "experiments", "--reports", project / "reports", "--cache", project / "cache")
    assert code == 2
    assert err.startswith(f"error: {folder} holds an earlier sweep over retriever.top_k=1,2: this one would "
                          "replace its page\n")
    assert fix_of(err) == "pass --force to replace it, or move the folder away first\n"
    assert json.loads((folder / "sweep.json").read_text()) == earlier
    assert not list((project / "reports").rglob("results.json"))  # nothing ran


def test_the_same_sweep_again_or_force_may_use_the_folder(tmp_path):
    from lab.eval.sweep import check_earlier, parse_dial

    (tmp_path / "sweep.json").write_text(json.dumps({"dials": {"retriever.top_k": [3, 4]}}))
    check_earlier(tmp_path, [parse_dial("retriever.top_k=3,4")])
    check_earlier(tmp_path, [parse_dial("retriever.top_k=5")], force=True)
    check_earlier(tmp_path / "new", [parse_dial("retriever.top_k=5")])


def test_optimize_does_not_replace_its_earlier_config_without_force(cli, project):
    written = project / "experiments" / "small-retrieval-optimized.yaml"
    written.write_text("# edited by hand\n")
    code, out, err = cli("optimize", "small-retrieval", "--trials", "1", "--experiments", project / "experiments",
                         "--reports", project / "reports", "--cache", project / "cache")
    assert code == 2 and out == ""
    assert err.startswith(f"error: {written} already exists: lab optimize writes its best point there\n")
    assert fix_of(err) == "pass --force to replace it, or --no-config to write no config\n"
    assert written.read_text() == "# edited by hand\n"
    assert not (project / "reports").exists()  # refused before any trial


# --- lab compare --out and lab gate --junit -----------------------------------------------------


def test_compare_out_cannot_write_into_a_compared_run(cli, tmp_path):
    a, b = write_pair(tmp_path / "reports")
    before = (a / "results.json").read_bytes()
    code, _, err = cli("compare", a, b, "--out", a, "--force")
    assert code == 2 and f"error: --out {a / 'compare.html'} is inside {a}, an input of this command" in err
    assert not (a / "compare.html").exists() and (a / "results.json").read_bytes() == before
    out = tmp_path / "cmp"
    assert cli("compare", a, b, "--out", out)[0] == 0
    code, _, err = cli("compare", a, b, "--out", out)
    assert code == 2 and f"error: --out {out / 'compare.html'} already exists" in err
    assert cli("compare", a, b, "--out", out, "--force")[0] == 0
    again = ("compare", a, b, "--reports", tmp_path / "reports")
    assert cli(*again)[0] == 0 and cli(*again)[0] == 0  # its own default folder: replaced


def test_gate_junit_cannot_replace_a_run_file_or_an_existing_file_without_force(cli, tmp_path):
    a, b = write_pair(tmp_path / "reports")
    before = (b / "results.json").read_bytes()
    code, _, err = cli("gate", a, b, "--junit", b / "results.json", "--force")
    assert code == 2 and f"error: --junit {b / 'results.json'} is inside {b}, an input of this command" in err
    assert (b / "results.json").read_bytes() == before
    junit = tmp_path / "gate.xml"
    junit.write_text("<kept/>")
    code, _, err = cli("gate", a, b, "--junit", junit)
    assert code == 2 and f"error: --junit {junit} already exists" in err and junit.read_text() == "<kept/>"
    assert cli("gate", a, b, "--junit", junit, "--force")[0] in (0, 1) and "<testsuites" in junit.read_text()


def test_check_output_refuses_a_hard_link_to_an_input(tmp_path):
    source = tmp_path / "set.jsonl"
    source.write_text("{}\n")
    os.link(source, tmp_path / "alias.jsonl")
    with pytest.raises(DataError, match="an input of this command"):
        check_output(tmp_path / "alias.jsonl", [source], force=True)


def test_split_never_writes_over_its_eval_set_nor_earlier_halves_without_force(cli, project, tmp_path):
    dev = tmp_path / "dev.jsonl"
    dev.write_bytes((project / "eval.jsonl").read_bytes())
    code, _, err = cli("split", dev, "--out", tmp_path, "--force")
    assert code == 2 and f"error: --out {dev} is {dev}, an input of this command: writing it would destroy it" in err
    assert dev.read_bytes() == (project / "eval.jsonl").read_bytes()
    out = tmp_path / "halves"
    assert cli("split", project / "eval.jsonl", "--out", out)[0] == 0
    code, _, err = cli("split", project / "eval.jsonl", "--out", out)
    assert code == 2 and f"error: --out {out / 'dev.jsonl'} already exists" in err
    assert cli("split", project / "eval.jsonl", "--out", out, "--force")[0] == 0
