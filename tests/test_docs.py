"""The README's rule table and docs/rules.md are generated from the rules' code: keep them current."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT


def test_rule_docs_are_current():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_docs.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_readme_has_both_setup_blocks_that_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    for marker in ("setup-lint", "setup-test"):
        assert f"<!-- {marker} -->\n```bash\n" in readme
        assert marker in ci


def _readme_block(marker: str) -> str:
    """The fenced block that follows ``<!-- marker -->`` in the README (as .ci/run reads it)."""
    readme = (ROOT / "README.md").read_text()
    after = readme.split(f"<!-- {marker} -->\n", 1)[1]
    assert after.startswith("```")
    return after.split("\n", 1)[1].split("\n```", 1)[0]


def test_readme_leads_with_install_quick_start_and_configuration():
    headings = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("## ")]
    assert headings[:4] == ["## Install", "## Quick start", "## Configuration and noqa", "## Rules"]
    # What a newcomer needs before the rules table fits in a few screens.
    readme = (ROOT / "README.md").read_text()
    assert readme[: readme.index("<!-- rules:start -->")].count("\n") < 80
    assert 'pytest -q -m "not slow and not corpus"' in readme


def test_rule_table_rows_are_whole_clauses():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
    gen_docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_docs)
    rows = gen_docs.rule_table().splitlines()[2:]
    assert rows
    for row in rows:
        text = row.split(" | ")[2]
        assert text.count("`") % 2 == 0 and text.count("(") == text.count(")"), row
    tl402 = next(row for row in rows if row.startswith("| [TL402]"))
    assert "(the same code as TL401: evaluation functions" in tl402 and "`model.eval()`) that runs a model with gradients enabled |" in tl402


def test_rules_page_has_a_section_per_rule_and_a_subsection_per_docstring_section():
    from torchlint.rules import all_rules

    text = (ROOT / "docs" / "rules.md").read_text()
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("## ")] == [f"## {r.code} {r.name}" for r in all_rules()]
    assert lines.count("### What it does") == len(all_rules())


def test_the_docs_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site"), "--config-file", str(ROOT / "mkdocs.yml")],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "rules" / "index.html").is_file()
    # The pages' edit links point at the default branch, main (MkDocs' default says master).
    page = (tmp_path / "site" / "usage" / "index.html").read_text()
    assert "/edit/main/docs/usage.md" in page and "/master/" not in page
    # What `mkdocs build` leaves in the repository is ignored by git.
    ignored = subprocess.run(["git", "check-ignore", "-q", "site/index.html"], cwd=ROOT)
    assert ignored.returncode == 0, "site/ is not in .gitignore"
    # Every page under docs/ is in the site's navigation.
    nav = (ROOT / "mkdocs.yml").read_text()
    assert all(page.name in nav for page in (ROOT / "docs").glob("*.md"))


def _pyproject() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_projects_home_is_declared_once_and_the_findings_urls_follow_it(monkeypatch):
    import importlib.metadata

    from torchlint import rule as rule_module
    from torchlint.rules import all_rules, rule_by_code

    urls = _pyproject()["project"]["urls"]
    assert {"Homepage", "Repository", "Documentation", "Rules"} <= set(urls)
    assert f"repo_url: {urls['Repository']}\n" in (ROOT / "mkdocs.yml").read_text()
    # The findings' links come from the package's metadata...
    fake = {"Project-URL": ["Homepage, https://example.org/home", "Rules, https://example.org/docs/rules/"]}

    class Metadata:
        def get_all(self, name):
            return fake.get(name)

    monkeypatch.setattr(importlib.metadata, "metadata", lambda name: Metadata())
    rule_module.project_urls.cache_clear()
    try:
        tl501 = rule_by_code("TL501")
        assert tl501.url() == "https://example.org/docs/rules/#tl501-save-whole-model"
        # ... or, where the package is not installed, from the source tree's pyproject.toml.
        def missing(name):
            raise importlib.metadata.PackageNotFoundError(name)

        monkeypatch.setattr(importlib.metadata, "metadata", missing)
        rule_module.project_urls.cache_clear()
        assert tl501.url() == f"{urls['Rules']}#tl501-save-whole-model"
    finally:
        rule_module.project_urls.cache_clear()
    # Each anchor is a section of the rules page (GitHub's and MkDocs' anchors alike).
    headings = {line[3:].lower().replace(" ", "-") for line in (ROOT / "docs" / "rules.md").read_text().splitlines() if line.startswith("## ")}
    assert all(r.url().split("#")[1] in headings for r in all_rules())


def test_the_readmes_pre_commit_snippet_is_a_hook_the_repository_defines():
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load(_readme_block("pre-commit-local"))
    [repo] = config["repos"]
    assert repo["repo"] == "local"
    [hook] = repo["hooks"]
    defined = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert hook["id"] in defined
    for key in ("entry", "types_or", "require_serial"):
        assert hook[key] == defined[hook["id"]][key], key
    assert hook["entry"].split()[0] == "torchlint" and hook["language"] == "system"


def _first_console_example(text: str, after: str) -> tuple[list[str], str]:
    """The first command of the first ``console`` block after ``after`` (its arguments after
    ``torchlint``, its comment dropped) and the output shown for it."""
    import shlex

    block = text.split(after, 1)[1].split("```console\n", 1)[1].split("\n```", 1)[0]
    command, *rest = block.split("\n")
    output = []
    for line in rest:
        if line.startswith("$ "):
            break
        output.append(line)
    args = shlex.split(command.removeprefix("$ "), comments=True)
    assert args[0] == "torchlint"
    return args[1:], "\n".join(output) + "\n"


@pytest.mark.parametrize("page, after", [("README.md", "## Quick start"), ("docs/usage.md", "# The command line")])
def test_the_docs_show_what_a_clone_prints_on_the_bundled_example(page, after, monkeypatch):
    """The quick start's and the usage page's example is exactly what the command prints in
    this repository (issue 40: whether TL501's fix is offered there depends on the other files
    of the repository, and its help line says why)."""
    from click.testing import CliRunner

    from torchlint.cli import main

    args, shown = _first_console_example((ROOT / page).read_text(), after)
    assert "fixtures/example/train.py" in args
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, [*args, "--no-cache"], catch_exceptions=False)
    assert result.stdout == shown
