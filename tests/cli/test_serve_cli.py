"""`lab serve` and `lab agree` over the labels database from the command line: bad input (exit
2), the token a server bound beyond this machine makes and needs, and agreement read from the
database equal to agreement read from the labels file it was imported from."""

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from report_fixtures import KAPPA, LABELS, write_pair


def test_lab_serve_refuses_what_cannot_be_served(cli, tmp_path):
    code, _, err = cli("serve", "--reports", tmp_path / "missing")
    assert code == 2 and "no such folder" in err
    code, _, err = cli("serve", "--reports", tmp_path, "--token", "short")
    assert code == 2 and "too short" in err
    for port in ("70000", "0"):  # 0 would bind a port nobody is told of
        code, _, err = cli("serve", "--reports", tmp_path, "--port", port)
        assert code == 2 and "not a port" in err


def test_lab_agree_reads_the_labels_database_and_imports_a_labels_file(cli, tmp_path):
    write_pair(tmp_path)
    code, _, err = cli("agree", "base", "--reports", tmp_path)
    assert code == 2 and "no labels" in err and "/runs/base/20261122-100000/label" in err
    results = json.loads((tmp_path / "base" / "20261122-100000" / "results.json").read_text())
    path = tmp_path / "labels.json"
    path.write_text(json.dumps({"format": "lab-labels-v1", "run": "base/20261122-100000",
                                "fingerprint": results["config_fingerprint"], "labels": LABELS}))
    code, out, err = cli("agree", "base", str(path), "--import-as", "ana", "--reports", tmp_path)
    assert code == 0, err
    assert f"imported {len(LABELS)} labels" in out
    code, out, err = cli("agree", "base", "--reports", tmp_path)
    assert code == 0, err
    written = json.loads((tmp_path / "base" / "20261122-100000" / "agreement.json").read_text())
    assert written["overall"]["kappa"]["value"] == pytest.approx(KAPPA)
    assert written["labels_file"].endswith("labels.sqlite (ana)")
    code, _, err = cli("agree", "base", "--annotator", "ben", "--reports", tmp_path)
    assert code == 2 and "no labels by ben" in err
    code, _, err = cli("agree", "base", "--import-as", "ana", "--reports", tmp_path)
    assert code == 2 and "needs a LABELS file" in err


def test_bound_beyond_this_machine_it_prints_a_token_and_refuses_requests_without_it(tmp_path):
    write_pair(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "lab", "serve", "--reports", str(tmp_path), "--host", "0.0.0.0",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        assert "?token=" in line, line
        token = line.split("?token=", 1)[1].split()[0]
        url = f"http://127.0.0.1:{port}/api/runs"
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=2)
                raise AssertionError("served without a token")
            except urllib.error.HTTPError as exc:
                assert exc.code == 401
                break
            except urllib.error.URLError:
                assert time.time() < deadline
                time.sleep(0.2)
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        runs = json.loads(urllib.request.urlopen(req, timeout=5).read())["runs"]
        assert sorted(r["key"] for r in runs) == ["base/20261122-100000", "better/20261122-110000"]
    finally:
        proc.kill()
        proc.wait()
