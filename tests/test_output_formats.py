"""CI output formats: GitHub workflow annotations and SARIF 2.1.0 (SPEC section 7)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from torchlint.cli import main
from torchlint.rules import all_rules

SCHEMA = json.loads((Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
BAD = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
GOOD = BAD.replace("torch.save(model,", "torch.save(model.state_dict(),")
MESSAGE = "`torch.save` of a whole `nn.Module`; save its `state_dict()` instead"


def run(*args: str):
    return CliRunner().invoke(main, ["check", "--no-cache", *args], catch_exceptions=False)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "training.ipynb").write_bytes((FIXTURES / "notebooks" / "training.ipynb").read_bytes())
    return tmp_path


# --- GitHub annotations ------------------------------------------------------------------


def test_github_annotation_per_finding(project):
    result = run("--output-format", "github", "--select", "TL501", "bad.py", "good.py")
    assert result.exit_code == 1
    assert result.output == f"::error file=bad.py,line=4,col=12,endLine=4,endColumn=17,title=TL501::TL501 {MESSAGE}\n"


def test_github_escapes_properties_and_data(project):
    # `,` and `:` would end a property; `%`, CR and LF are escaped everywhere.
    (project / "a,b:100%.py").write_text(BAD)
    (project / "broken.py").write_text("x = (\n")
    lines = run("--output-format", "github", "a,b:100%.py", "broken.py").output.splitlines()
    assert lines[0].startswith("::error file=a%2Cb%3A100%25.py,line=4,col=12,")
    assert lines[1].startswith("::error file=broken.py,line=1,col=5,endLine=1,endColumn=5,title=TL000::TL000 SyntaxError")


def test_github_annotates_a_notebook_finding_on_the_file_with_its_cell(project):
    # Rows within a cell are not lines of the .ipynb file, so they go into the message.
    assert run("--output-format", "github", "--select", "TL501", "training.ipynb").output == (
        f"::error file=training.ipynb,title=TL501::cell 5:8:12: TL501 {MESSAGE}\n"
    )


def test_github_prints_nothing_when_clean(project):
    result = run("--output-format", "github", "good.py")
    assert result.exit_code == 0 and result.output == ""


# --- SARIF -------------------------------------------------------------------------------


def sarif(*args: str) -> dict:
    result = run("--output-format", "sarif", *args)
    log = json.loads(result.output)
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    return log


def test_schema_rejects_what_it_should():
    # The validation below means something only if the schema is really enforced.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(SCHEMA).validate({"version": "2.1.0", "runs": [{"results": []}]})


def test_sarif_driver_lists_every_rule_with_its_docs(project):
    [run_] = sarif("good.py")["runs"]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "torchlint" and driver["version"]
    rules = driver["rules"]
    assert [r["id"] for r in rules] == [rule.code for rule in all_rules()]
    for entry, rule in zip(rules, all_rules()):
        assert entry["name"] == rule.name
        assert entry["shortDescription"]["text"] == rule.message
        assert entry["fullDescription"]["text"] == rule.documentation() != ""
        assert "## What it does" in entry["help"]["markdown"]
        assert entry["helpUri"] == rule.url()
    assert run_["results"] == []


def test_sarif_result_with_region_and_fix(project):
    log = sarif("--select", "TL501", "bad.py", "good.py")
    [result] = log["runs"][0]["results"]
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert rules[result["ruleIndex"]]["id"] == result["ruleId"] == "TL501"
    assert result["level"] == "error" and result["message"]["text"] == MESSAGE
    [location] = result["locations"]
    assert location["physicalLocation"]["artifactLocation"] == {"uri": "bad.py", "uriBaseId": "%SRCROOT%"}
    assert location["physicalLocation"]["region"] == {"startLine": 4, "startColumn": 12, "endLine": 4, "endColumn": 17}
    assert log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.as_uri() + "/"
    [fix] = result["fixes"]
    assert fix["description"]["text"] == "Save `state_dict()` instead"
    [change] = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "bad.py"
    # Applying the SARIF replacements to the file gives what `--fix` writes.
    assert apply_replacements(BAD, change["replacements"]) == GOOD


def apply_replacements(text: str, replacements: list[dict]) -> str:
    lines = text.splitlines(keepends=True)

    def offset(line: int, column: int) -> int:
        return sum(len(x) for x in lines[: line - 1]) + column - 1

    for r in sorted(replacements, key=lambda r: (r["deletedRegion"]["startLine"], r["deletedRegion"]["startColumn"]), reverse=True):
        region = r["deletedRegion"]
        start, end = offset(region["startLine"], region["startColumn"]), offset(region["endLine"], region["endColumn"])
        text = text[:start] + r["insertedContent"]["text"] + text[end:]
    return text


def test_sarif_columns_count_characters_not_bytes(project):
    (project / "wide.py").write_text(BAD.replace("torch.save(model,", "ü = 1; torch.save(model,"))
    log = sarif("--select", "TL501", "wide.py")
    assert log["runs"][0]["columnKind"] == "unicodeCodePoints"
    assert log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startColumn"] == 19


def test_sarif_notebook_result_names_the_cell(project):
    [result] = sarif("--select", "TL501", "training.ipynb")["runs"][0]["results"]
    [location] = result["locations"]
    assert location["physicalLocation"] == {"artifactLocation": {"uri": "training.ipynb", "uriBaseId": "%SRCROOT%"}}
    assert location["logicalLocations"] == [{"name": "cell 5", "kind": "notebookCell"}]
    assert location["properties"] == {"cell": 5, "cellRegion": {"startLine": 8, "startColumn": 12, "endLine": 8, "endColumn": 17}}
    assert result["message"]["text"] == f"cell 5:8:12: {MESSAGE}"
    assert "fixes" not in result


def test_sarif_reports_unparsable_files_and_odd_paths(project):
    (project / "my folder").mkdir()
    (project / "my folder" / "broken #1.py").write_text("x = (\n")
    [result] = sarif("my folder")["runs"][0]["results"]
    assert result["ruleId"] == "TL000" and result["message"]["text"].startswith("SyntaxError")
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "my%20folder/broken%20%231.py"


def test_sarif_marks_the_run_unsuccessful_on_errors(project, monkeypatch):
    import torchlint.runner

    def fail(*_args):
        raise RuntimeError("boom")

    monkeypatch.setattr(torchlint.runner, "check_file", fail)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "sarif", "bad.py"])
    assert result.exit_code == 2
    log = json.loads(result.stdout)
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    [invocation] = log["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    assert "internal error: RuntimeError: boom" in invocation["toolExecutionNotifications"][0]["message"]["text"]
