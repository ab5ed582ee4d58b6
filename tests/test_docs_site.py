"""The docs site builds strictly (mkdocs.yml, docs/), and the README's links into docs/ hold.

A strict build fails on a broken link or anchor and on a page that is in docs/ but not in the
nav, so the reference cannot drift from itself unnoticed. Needs the `docs` extra
(`pip install -e ".[docs]"`); without mkdocs-material the build tests skip with that reason.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason='needs mkdocs-material (the docs extra: python -m pip install -e ".[docs]"); not installed')


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of `config` into `site`; its output in .stdout."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}   # material's banner is not a warning of ours
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site)],
        cwd=config.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=300)


def warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]


@needs_mkdocs
def test_the_site_builds_strictly_without_warnings(tmp_path):
    result = build(ROOT / "mkdocs.yml", tmp_path / "site")
    found = warnings(result.stdout)
    assert result.returncode == 0 and not found, (
        "mkdocs build --strict failed:\n" + "\n".join(found or result.stdout.splitlines()[-20:]))
    assert (tmp_path / "site" / "index.html").is_file()


@needs_mkdocs
def test_a_broken_link_fails_the_strict_build(tmp_path):
    """The check above can fail: the same site with one link to a page that does not exist."""
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    with open(tmp_path / "docs" / "index.md", "a") as index:
        index.write("\nSee [nowhere](no-such-page.md).\n")
    result = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert any("no-such-page.md" in line for line in warnings(result.stdout)), result.stdout


def readme_links_into_docs() -> list[str]:
    return re.findall(r"\]\((docs/[^)#\s]*)", README.read_text())


def test_the_readme_links_to_the_docs_pages():
    assert readme_links_into_docs(), "README.md links to no page under docs/"


@pytest.mark.parametrize("link", sorted(set(readme_links_into_docs())))
def test_every_readme_link_into_docs_exists(link):
    assert (ROOT / link).exists(), f"README.md links to {link}, which does not exist"
