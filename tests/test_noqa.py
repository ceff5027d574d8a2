"""`# noqa` for a team adopting torchlint on a large codebase (issue 40): TL001 unused-noqa
(ruff's RUF100), computed after suppression in the same pass, and `--add-noqa`, which writes
a baseline of `# noqa: CODES` comments. Through the engine, click's runner and a real
subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint.cli import main
from torchlint.config import select_rules
from torchlint.engine import FixMode, lint_module_source
from torchlint.noqa import add_noqa_source, line_with_codes, without_codes, directive, Comment
from torchlint.rule import Finding, Location

SAVE = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
BAD = SAVE + "torch.save(model, 'm.pt')\n"  # TL501 on row 4, with a safe fix
GOOD = SAVE + "torch.save(model.state_dict(), 'm.pt')\n"


def lint(source: str, *codes: str, fix: bool = False, with_edits: bool = False):
    rules = select_rules(list(codes), [], []) if codes else select_rules(None, [], [])
    return lint_module_source(source.encode(), rules, FixMode.SAFE if fix else FixMode.NONE, with_edits)


def codes_of(result) -> list[tuple[int, str]]:
    return [(f.start.row, f.code) for f in result.findings]


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(main, ["check", "--no-cache", "-j", "1", *args], input=input)


# --- TL001: what is reported ------------------------------------------------------------


def test_a_noqa_that_suppresses_a_finding_is_used_and_the_finding_stays_suppressed():
    assert codes_of(lint(BAD.replace("'m.pt')", "'m.pt')  # noqa: TL501"))) == []


def test_a_noqa_whose_finding_is_gone_is_unused_and_its_fix_removes_it():
    source = GOOD.replace("'m.pt')", "'m.pt')  # noqa: TL501")
    result = lint(source, with_edits=True)
    (finding,) = result.findings
    assert (finding.code, finding.start, finding.end) == ("TL001", Location(4, 41), Location(4, 54))
    assert finding.message == "unused `noqa` directive (unused: `TL501`)"
    assert finding.fix.applicability == "safe" and finding.fix.edits
    assert lint(source, fix=True).fixed_source.decode() == GOOD


def test_unknown_non_enabled_duplicated_and_unused_are_said_in_one_message():
    source = GOOD.replace("'m.pt')", "'m.pt')  # noqa: TL501, TL999, TL805, TL501, E501")
    (finding,) = lint(source).findings
    assert finding.message == (
        "unused `noqa` directive (duplicated: `TL501`; unused: `TL501`; non-enabled: `TL805`; unknown: `TL999`)"
    )
    assert lint(source, fix=True).fixed_source.decode() == GOOD.replace("'m.pt')", "'m.pt')  # noqa: E501")


def test_a_prefix_is_used_when_the_engine_suppressed_a_finding_it_names():
    assert codes_of(lint(BAD.replace("'m.pt')", "'m.pt')  # noqa: TL5"))) == []
    (finding,) = lint(GOOD.replace("'m.pt')", "'m.pt')  # noqa: TL5")).findings
    assert finding.message == "unused `noqa` directive (unused: `TL5`)"


def test_other_tools_codes_and_a_bare_noqa_are_never_reported():
    source = GOOD + "import os  # noqa: F401\nimport sys  # noqa\nx = 1  # noqa: E501,W291\n"
    assert codes_of(lint(source)) == []


def test_noqa_tl001_on_the_line_keeps_it_quiet():
    assert codes_of(lint(GOOD + "x = 1  # noqa: TL001, TL999\n")) == []


def test_a_finding_suppressed_at_file_level_uses_no_line_noqa():
    source = "# torchlint: noqa: TL501\n" + BAD.replace("'m.pt')", "'m.pt')  # noqa: TL501")
    assert codes_of(lint(source)) == [(5, "TL001")]


def test_tl001_not_selected_reports_nothing():
    source = GOOD.replace("'m.pt')", "'m.pt')  # noqa: TL999")
    assert codes_of(lint(source, "TL5")) == []
    assert codes_of(lint(source, "TL5", "TL001")) == [(4, "TL001")]


def test_a_noqa_in_a_file_no_other_rule_would_look_at_is_still_judged():
    # No rule's prescreen admits this module: TL001 alone makes the engine parse it.
    assert codes_of(lint("x = 1  # noqa: TL501\n")) == [(1, "TL001")]
    assert lint("x = 1  # noqa: TL501\n", fix=True).fixed_source == b"x = 1\n"


def test_the_codes_of_a_rule_that_raised_are_not_judged(monkeypatch):
    from torchlint.rules import rule_by_code

    rule = rule_by_code("TL501")

    def broken(self, node):
        raise RuntimeError("boom")

    monkeypatch.setattr(rule, "visit_Call", broken, raising=False)
    result = lint(GOOD.replace("'m.pt')", "'m.pt')  # noqa: TL501"))
    assert [f.code for f in result.failures] == ["TL501"]
    assert codes_of(result) == []


def test_a_comment_on_a_line_of_its_own_goes_with_its_line_and_other_text_stays():
    source = "import torch\n# noqa: TL501\nx = torch.zeros(3)  # type: ignore  # noqa: TL501\ny = 1  # noqa: TL501 kept on purpose\n"
    fixed = lint(source, fix=True).fixed_source.decode()
    assert fixed == "import torch\nx = torch.zeros(3)  # type: ignore\ny = 1  # kept on purpose\n"
    assert lint(fixed, fix=True).fixed_source.decode() == fixed


def test_without_codes_keeps_what_is_not_removed():
    def fixed(text: str, removed: set[int]) -> str | None:
        return without_codes(directive(Comment(1, 0, text)), removed)

    assert fixed("# noqa: E501, TL501", {1}) == "# noqa: E501"
    assert fixed("# noqa:TL501,E501", {0}) == "# noqa:E501"
    assert fixed("# noqa: TL501", {0}) is None
    assert fixed("# noqa: TL501  # why", {0}) == "# why"


def test_unfixable_tl001_is_reported_without_fix(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nunfixable = ["TL001"]\n')
    source = GOOD.replace("'m.pt')", "'m.pt')  # noqa: TL501")
    (tmp_path / "t.py").write_text(source)
    result = run("--fix", "--output-format", "concise", "t.py")
    assert "t.py:4:41: TL001 unused" in result.output and "[*]" not in result.output
    assert (tmp_path / "t.py").read_text() == source


def test_tl001_in_a_notebook_is_reported_in_its_cell(tmp_path):
    notebook = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# title"]},
            {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
             "source": ["import torch\n", "x = torch.zeros(3)  # noqa: TL201\n"]},
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(notebook, indent=1))
    result = run("--output-format", "json", "nb.ipynb")
    (finding,) = json.loads(result.stdout)
    assert (finding["code"], finding["cell"], finding["location"]["row"]) == ("TL001", 2, 2)
    assert run("--fix", "nb.ipynb").exit_code == 0
    assert json.loads(path.read_text())["cells"][1]["source"] == ["import torch\n", "x = torch.zeros(3)\n"]


def test_tl001_in_a_file_linted_in_pieces_is_the_whole_files():
    from torchlint.engine import lint_in_pieces

    filler = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(60))
    source = (SAVE + filler + "y = 1  # noqa: TL501\n" + filler.replace("def f", "def g") + "torch.save(model, 'p.pt')  # noqa: TL501\n").encode()
    rules = select_rules(None, [], [])
    whole = lint_module_source(source, rules)
    pieces = lint_in_pieces(source, rules, piece_lines=40, min_lines=100)
    assert pieces is not None
    assert [(f.start.row, f.code) for f in pieces.findings] == [(f.start.row, f.code) for f in whole.findings]
    assert [f.code for f in whole.findings] == ["TL001"]


# --- --add-noqa ---------------------------------------------------------------------------


def test_line_with_codes_merges_into_an_existing_noqa_and_appends_after_a_comment():
    noqa = Comment(1, 7, "# noqa: E501")
    assert line_with_codes("x = 1  # noqa: E501", noqa, ["TL201"]) == "x = 1  # noqa: E501, TL201"
    assert line_with_codes("x = 1  # noqa: TL2", Comment(1, 7, "# noqa: TL2"), ["TL201"]) == "x = 1  # noqa: TL2"
    assert line_with_codes("x = 1  # noqa", Comment(1, 7, "# noqa"), ["TL201"]) is None
    assert line_with_codes("x = 1  # why ", Comment(1, 7, "# why "), ["TL201", "TL501"]) == "x = 1  # why  # noqa: TL201, TL501"


ADD = (
    "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
    "torch.save(model, 'm.pt')  # keep\n"  # 4: TL501, after the comment
    "model.cuda()  # noqa: E501\n"  # 5: TL201, merged into another tool's noqa
    "torch.save(\n    model, 'n.pt')\n"  # 7: TL501, on the line it is reported on (of two)
    "x = model.cuda(); y = model.cuda()\n"  # 8: TL201 twice, one code
    "torch.save(model, '''a\nb''')\n"  # 9: TL501 on a line that ends inside a string
)
ADDED = (
    "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
    "torch.save(model, 'm.pt')  # keep  # noqa: TL501\n"
    "model.cuda()  # noqa: E501, TL201\n"
    "torch.save(\n    model, 'n.pt')  # noqa: TL501\n"
    "x = model.cuda(); y = model.cuda()  # noqa: TL201\n"
    "torch.save(model, '''a\nb''')\n"
)


def test_add_noqa_writes_a_baseline_then_nothing_is_reported_and_a_second_run_changes_nothing(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(ADD)
    result = run("--add-noqa", "train.py")
    assert result.exit_code == 0, result.output
    assert path.read_text() == ADDED
    assert "Added 4 noqa directives." in result.stderr
    assert "train.py:9 (the line ends inside a string" in result.stderr
    after = run("--output-format", "concise", "train.py")
    assert [line.split(": ")[1].split()[0] for line in after.output.splitlines() if line.startswith("train.py")] == ["TL501"]
    assert "train.py:9:" in after.output
    again = run("--add-noqa", "train.py")
    assert again.exit_code == 0 and "Added" not in again.stderr
    assert path.read_text() == ADDED


def test_add_noqa_keeps_encoding_bom_and_line_endings(tmp_path):
    source = ("\ufeff# -*- coding: utf-8 -*-\n" + BAD).replace("\n", "\r\n").encode("utf-8")
    path = tmp_path / "t.py"
    path.write_bytes(source)
    assert run("--add-noqa", "t.py").exit_code == 0
    assert path.read_bytes() == source.replace(b"'m.pt')\r\n", b"'m.pt')  # noqa: TL501\r\n")


def test_add_noqa_in_a_notebook_writes_in_the_cells_line(tmp_path):
    cell = {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": []}
    notebook = {
        "cells": [
            {**cell, "source": ["import torch\n", "from torch import nn\n", "%matplotlib inline\n", "model = nn.Linear(2, 2)"]},
            {"cell_type": "markdown", "metadata": {}, "source": "notes"},
            {**cell, "source": "if True:\n    torch.save(model, 'm.pt')  # why\n"},
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(notebook, indent=1) + "\n")
    result = run("--add-noqa", "nb.ipynb")
    assert result.exit_code == 0 and "Added 1 noqa directive." in result.stderr
    written = json.loads(path.read_text())
    assert written["cells"][2]["source"] == "if True:\n    torch.save(model, 'm.pt')  # why  # noqa: TL501\n"
    assert written["cells"][0] == notebook["cells"][0]
    assert run("nb.ipynb").exit_code == 0


def test_add_noqa_leaves_a_file_whole_when_it_cannot_be_written(tmp_path, monkeypatch):
    import torchlint.files

    path = tmp_path / "train.py"
    path.write_text(BAD)

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(torchlint.files, "write_atomic", refuse)
    result = run("--add-noqa", "train.py")
    assert result.exit_code == 2
    assert "train.py: cannot write: Permission denied" in result.stderr
    assert path.read_text() == BAD


def test_add_noqa_leaves_a_file_changed_meanwhile_alone(tmp_path, monkeypatch):
    import torchlint.noqa

    path = tmp_path / "train.py"
    path.write_text(BAD)
    real = torchlint.noqa.add_noqa_source

    def and_edited(source, findings, notebook=False):
        path.write_text(BAD + "# edited meanwhile\n")
        return real(source, findings, notebook)

    monkeypatch.setattr(torchlint.noqa, "add_noqa_source", and_edited)
    result = run("--add-noqa", "train.py")
    assert "changed on disk while noqa directives were added" in result.stderr
    assert path.read_text() == BAD + "# edited meanwhile\n"


def test_add_noqa_follows_the_selection(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(ADD)
    assert run("--add-noqa", "--select", "TL201", "train.py").exit_code == 0
    assert "# noqa: TL501" not in path.read_text() and "# noqa: E501, TL201" in path.read_text()


@pytest.mark.parametrize("other", ["--fix", "--diff", "--fix-only"])
def test_add_noqa_with_a_fix_option_is_a_usage_error(tmp_path, other):
    (tmp_path / "train.py").write_text(BAD)
    result = run("--add-noqa", other, "train.py")
    assert result.exit_code == 2 and f"--add-noqa cannot be combined with {other}" in result.output
    assert (tmp_path / "train.py").read_text() == BAD


def test_add_noqa_then_the_debt_is_paid_and_tl001_takes_the_noqa_away(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(BAD)
    run("--add-noqa", "train.py")
    path.write_text(path.read_text().replace("torch.save(model,", "torch.save(model.state_dict(),"))
    result = run("--fix", "train.py")
    assert result.exit_code == 0 and path.read_text() == GOOD


def test_add_noqa_in_a_subprocess(tmp_path):
    exe = shutil.which("torchlint") or str(Path(sys.executable).parent / "torchlint")
    path = tmp_path / "train.py"
    path.write_text(BAD)
    proc = subprocess.run([exe, "check", "--add-noqa", "--no-cache", "train.py"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "Added 1 noqa directive."
    assert path.read_text() == BAD.replace("'m.pt')\n", "'m.pt')  # noqa: TL501\n")
    check = subprocess.run([exe, "check", "--no-cache", "train.py"], capture_output=True, text=True, cwd=tmp_path)
    assert check.returncode == 0 and "All checks passed!" in check.stdout
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_add_noqa_source_refuses_a_backslash_continuation():
    source = (SAVE + "torch.save(model, \\\n    'm.pt')\n").encode()
    findings = [Finding("TL501", "", Location(4, 12), Location(4, 17))]
    result = add_noqa_source(source, findings)
    assert result.data is None and result.refused == ["4"]


def test_ignore_tl001_silences_it_and_a_per_file_ignored_code_is_non_enabled(tmp_path):
    source = GOOD.replace("'m.pt')", "'m.pt')  # noqa: TL501")
    (tmp_path / "t.py").write_text(source)
    assert run("--ignore", "TL001", "t.py").exit_code == 0
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint.per-file-ignores]\n"t.py" = ["TL5"]\n')
    result = run("--output-format", "concise", "t.py")
    assert "t.py:4:41: TL001 [*] unused `noqa` directive (non-enabled: `TL501`)" in result.output
    assert run("--ignore", "TL0", "t.py").exit_code == 2  # TL000 cannot be ignored: name TL001
