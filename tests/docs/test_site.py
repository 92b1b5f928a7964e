"""The docs site (mkdocs.yml, docs/) builds strict, and a broken link or anchor fails the build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build(project: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           str(project / "mkdocs.yml"), "--site-dir", str(site)],
                          capture_output=True, text=True, env=env, cwd=project)


def copy(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", project / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", project / "docs")
    return project


def test_the_site_builds_strict(tmp_path):
    p = build(ROOT, tmp_path / "site")
    assert p.returncode == 0, p.stderr
    home = (tmp_path / "site" / "index.html").read_text()
    assert "<title>the lab</title>" in home and "assets/stylesheets/main" in home
    assert "fonts.googleapis" not in home  # theme.font: false: nothing is fetched
    for page in ("reference/config.html", "reference/cli.html", "founding-story.html", "img/report.png"):
        assert (tmp_path / "site" / page).exists(), page


def test_a_broken_link_fails_the_build(tmp_path):
    project = copy(tmp_path)
    with open(project / "docs" / "configs.md", "a") as f:
        f.write("\nSee [a page that is not there](no-such-page.md).\n")
    p = build(project, tmp_path / "site")
    assert p.returncode != 0
    assert "no-such-page.md" in p.stderr


def test_a_broken_anchor_fails_the_build(tmp_path):
    project = copy(tmp_path)
    with open(project / "docs" / "configs.md", "a") as f:
        f.write("\nSee [a heading that is not there](reference/config.md#no-such-key).\n")
    p = build(project, tmp_path / "site")
    assert p.returncode != 0
    assert "no-such-key" in p.stderr
