"""A rule that raises on a file is an internal error naming the file, the rule and the
exception, in every output format; the other rules' findings are still reported, the failing
rule contributes no fix, and the exit status is 2."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import libcst as cst
import pytest
from click.testing import CliRunner

from torchlint.cli import main
from torchlint.config import select_rules
from torchlint.engine import FixMode, lint_module_source
from torchlint.rule import Fix
from torchlint.rules import rule_by_code

SCHEMA = json.loads((Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
# TL801 has a fix for the first call (unsafe: `torch.amp.GradScaler` came with torch 2.3); `boom()`
# makes the patched TL801 raise afterwards.
SOURCE = (
    "import torch\n"
    "from torch import nn\n"
    "model = nn.Linear(2, 2)\n"
    "scaler = torch.cuda.amp.GradScaler()\n"
    "boom()\n"
    "torch.save(model, 'm.pt')\n"
)


@pytest.fixture
def failing_tl801(monkeypatch):
    """TL801 as a deliberately failing rule: it raises on a call of `boom`."""
    rule = rule_by_code("TL801")
    original = rule.visit_Call

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "boom":
            raise ValueError("deliberate failure")
        original(self, node)

    monkeypatch.setattr(rule, "visit_Call", visit_Call)
    return rule


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(SOURCE)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(main, ["check", "--no-cache", "-j", "1", "--select", "TL501,TL801", *args])


def test_engine_reports_the_failure_and_keeps_the_other_rules_findings(failing_tl801):
    result = lint_module_source(SOURCE.encode(), select_rules(["TL501", "TL801"], [], []))
    assert [f.code for f in result.findings] == ["TL501"]
    [failure] = result.failures
    assert failure.code == "TL801"
    assert "ValueError: deliberate failure" in failure.error and "test_isolation.py" in failure.error


def test_the_rule_runs_normally_without_the_trigger(failing_tl801):
    result = lint_module_source(SOURCE.replace("boom()\n", "").encode(), select_rules(["TL501", "TL801"], [], []))
    assert sorted(f.code for f in result.findings) == ["TL501", "TL801"] and not result.failures


def test_failing_rule_contributes_no_fix(failing_tl801):
    result = lint_module_source(SOURCE.encode(), select_rules(["TL501", "TL801"], [], []), FixMode.UNSAFE)
    fixed = result.fixed_source.decode()
    assert "torch.save(model.state_dict(), 'm.pt')" in fixed  # TL501's fix applied
    assert "torch.cuda.amp.GradScaler()" in fixed  # TL801's fix not applied
    assert [f.code for f in result.failures] == ["TL801"]


def test_failure_after_other_fixes_restarts_without_the_rule(monkeypatch):
    # TL801 raises only once TL501's fix is in the code: its earlier fix must not be kept.
    rule = rule_by_code("TL801")
    original = rule.visit_Call

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "state_dict":
            raise ValueError("fails on fixed code")
        original(self, node)

    monkeypatch.setattr(rule, "visit_Call", visit_Call)
    source = SOURCE.replace("boom()\n", "").encode()
    result = lint_module_source(source, select_rules(["TL501", "TL801"], [], []), FixMode.UNSAFE)
    fixed = result.fixed_source.decode()
    assert "model.state_dict()" in fixed and "torch.cuda.amp.GradScaler()" in fixed
    assert [f.code for f in result.failures] == ["TL801"]


def test_a_fix_that_cannot_be_applied_is_the_rule_failing(monkeypatch):
    rule = rule_by_code("TL501")
    original = rule.report

    def report(self, node, message=None, *, fix=None):
        # A removal where the tree does not allow one: applying or rendering it raises.
        broken = Fix("broken", {node: cst.RemovalSentinel.REMOVE}) if fix is not None else None
        original(self, node, message, fix=broken)

    monkeypatch.setattr(rule, "report", report)
    for mode, edits in ((FixMode.SAFE, False), (FixMode.NONE, True)):
        result = lint_module_source(SOURCE.encode(), select_rules(["TL501", "TL801"], [], []), mode, with_edits=edits)
        assert [f.code for f in result.failures] == ["TL501"], mode
        assert "TL501" not in {f.code for f in result.findings}


def test_facts_raising_are_the_asking_rules_failure(monkeypatch):
    import torchlint.semantic

    def broken(self, *args, **kwargs):
        raise AttributeError("'str' object has no attribute '_codegen'")

    monkeypatch.setattr(torchlint.semantic.SemanticModel, "__init__", broken)
    result = lint_module_source(SOURCE.encode(), select_rules(["TL501", "TL801"], [], []))
    assert {f.code for f in result.failures} == {"TL501", "TL801"}
    assert all("AttributeError" in f.error for f in result.failures)


@pytest.mark.parametrize("output_format", ["text", "concise", "json", "sarif", "github"])
def test_every_format_reports_the_internal_error(failing_tl801, project, output_format):
    result = run("--output-format", output_format, "train.py")
    assert result.exit_code == 2
    message = "train.py: internal error in rule TL801: ValueError: deliberate failure"
    assert f"torchlint: error: {message}" in result.stderr  # always on stderr
    out = result.stdout
    assert "All checks passed!" not in out
    if output_format in ("text", "concise"):
        assert "TL501" in out and "1 internal error" in out
    elif output_format == "json":
        [finding] = json.loads(out)  # the array holds findings only: its shape is stable
        assert finding["code"] == "TL501"
    elif output_format == "sarif":
        log = json.loads(out)
        jsonschema.Draft4Validator(SCHEMA).validate(log)
        run_ = log["runs"][0]
        assert [r["ruleId"] for r in run_["results"]] == ["TL501"]
        [invocation] = run_["invocations"]
        assert invocation["executionSuccessful"] is False
        [note] = invocation["toolExecutionNotifications"]
        assert message in note["message"]["text"] and note["associatedRule"]["id"] == "TL801"
        assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train.py"
    else:
        assert "::error file=train.py,title=torchlint internal error::internal error in rule TL801" in out
        assert "title=TL501" in out


def test_no_finding_but_an_internal_error_is_not_all_checks_passed(failing_tl801, tmp_path):
    (tmp_path / "x.py").write_text('boom("torch.cuda.amp.autocast")  # a string holding the words TL801 needs to run\n')
    result = run("x.py")
    assert result.exit_code == 2 and "All checks passed!" not in result.output
    assert "1 internal error (reported above)" in result.output


def test_fix_writes_the_other_rules_fixes_and_exits_2(failing_tl801, project):
    result = run("--fix", "--unsafe-fixes", "train.py")
    assert result.exit_code == 2
    fixed = (project / "train.py").read_text()
    assert "model.state_dict()" in fixed and "torch.cuda.amp.GradScaler()" in fixed


def test_internal_error_is_not_cached(failing_tl801, project):
    args = ["check", "-j", "1", "--select", "TL501,TL801", "train.py"]
    assert CliRunner().invoke(main, args).exit_code == 2
    assert CliRunner().invoke(main, args).exit_code == 2  # a second run lints again


def test_stdin_reports_the_internal_error(failing_tl801):
    result = CliRunner().invoke(main, ["check", "--select", "TL501,TL801", "-"], input=SOURCE)
    assert result.exit_code == 2 and "-: internal error in rule TL801" in result.stderr


def test_a_rule_failing_in_a_notebook_is_reported(failing_tl801, tmp_path):
    cells = [{"cell_type": "code", "source": line, "metadata": {}, "outputs": [], "execution_count": None}
             for line in SOURCE.splitlines(keepends=True)]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "train.ipynb"
    path.write_text(json.dumps(notebook))
    result = run(str(path))
    assert result.exit_code == 2
    assert "TL501" in result.output and "TL801" in result.output and "deliberate failure" in result.output
