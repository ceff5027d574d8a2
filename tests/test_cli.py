"""The command line, through click's runner and through the installed `torchlint` command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint import __version__
from torchlint.cli import main
from torchlint.rules import all_rules

BAD = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
GOOD = BAD.replace("torch.save(model,", "torch.save(model.state_dict(),")


def run(*args: str, input: bytes | None = None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text(GOOD)
    return tmp_path


def test_check_reports_and_exits_1(project):
    result = run("check", "bad.py", "good.py", "--output-format", "concise")
    assert result.exit_code == 1
    assert "bad.py:4:12: TL501 [*] `torch.save` of a whole `nn.Module`" in result.output
    assert "good.py" not in result.output.split("Found")[0]
    assert "Found 1 error." in result.output


def test_check_is_the_default_command(project):
    assert run("bad.py").exit_code == 1
    assert run("good.py").exit_code == 0
    assert "All checks passed!" in run("good.py").output


def test_text_format_shows_source_and_help(project):
    out = run("bad.py").output
    assert " 4 | torch.save(model, 'm.pt')" in out
    assert "^^^^^" in out and "help: Save `state_dict()` instead" in out


def test_fix_rewrites_in_place_and_exits_0(project):
    result = run("--fix", "bad.py")
    assert result.exit_code == 0, result.output
    assert (project / "bad.py").read_text() == GOOD
    assert "1 fixed" in result.output
    assert run("check", "--fix", "bad.py").exit_code == 0


def test_unsafe_fixes_flag_is_accepted(project):
    assert run("--fix", "--unsafe-fixes", "bad.py").exit_code == 0
    assert (project / "bad.py").read_text() == GOOD


def test_diff_changes_nothing(project):
    result = run("--diff", "bad.py")
    assert result.exit_code == 1
    assert "-torch.save(model, 'm.pt')" in result.output and "+torch.save(model.state_dict(), 'm.pt')" in result.output
    assert (project / "bad.py").read_text() == BAD
    assert run("--diff", "good.py").exit_code == 0


def test_select_ignore_and_prefixes(project):
    assert run("bad.py", "--select", "TL5").exit_code == 1
    assert run("bad.py", "--select", "TL501").exit_code == 1
    assert run("bad.py", "--ignore", "TL501").exit_code == 0
    assert run("bad.py", "--ignore", "TL5").exit_code == 0
    # The more specific selector wins, as in ruff.
    assert run("bad.py", "--select", "TL501", "--ignore", "TL5").exit_code == 1
    assert run("bad.py", "--select", "TL000", "--extend-select", "TL501").exit_code == 1


def test_unknown_selector_is_a_usage_error(project):
    result = run("bad.py", "--select", "TL999")
    assert result.exit_code == 2 and "unknown rule selector `TL999`" in result.output


def test_json_output_is_shaped_like_ruff(project):
    result = run("bad.py", "--output-format", "json")
    assert result.exit_code == 1
    [item] = json.loads(result.output)
    assert set(item) == {"code", "message", "filename", "location", "end_location", "noqa_row", "url", "fix"}
    assert item["code"] == "TL501" and item["filename"] == "bad.py"
    assert item["location"] == {"row": 4, "column": 12} and item["end_location"] == {"row": 4, "column": 17}
    assert item["noqa_row"] == 4 and item["url"].endswith("#tl501-save-whole-model")
    assert item["fix"]["applicability"] == "safe"
    assert item["fix"]["edits"] == [
        {"content": ".state_dict()", "location": {"row": 4, "column": 17}, "end_location": {"row": 4, "column": 17}}
    ]


def test_json_with_no_findings_is_an_empty_array(project):
    result = run("good.py", "--output-format", "json")
    assert result.exit_code == 0 and json.loads(result.output) == []


def test_statistics_then_the_summary_and_the_fixable_line_as_ruff_prints_them(project):
    (project / "bad2.py").write_text(BAD)
    result = run(".", "--statistics")
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "    2\tTL501\t[*] save-whole-model",
        "Found 2 errors.",
        "[*] 2 fixable with the `--fix` option.",
    ]
    # Nothing found: nothing printed, as ruff does.
    assert run("good.py", "--statistics").output == ""


def test_fix_summary_counts_every_finding_found_as_ruff_does(project):
    # Two findings, one fixed (safe) and one left (TL801 on GradScaler: an unsafe fix).
    (project / "two.py").write_text(BAD + "scaler = torch.cuda.amp.GradScaler()\n")
    before = run("two.py", "--output-format", "concise", "--no-cache")
    assert "Found 2 errors." in before.output
    result = run("--fix", "two.py", "--output-format", "concise", "--no-cache")
    assert "Found 2 errors (1 fixed, 1 remaining)." in result.output, result.output
    (project / "one.py").write_text(BAD)
    assert "Found 1 error (1 fixed, 0 remaining)." in run("--fix", "one.py", "--no-cache").output


def test_a_folder_with_nothing_to_lint_warns_as_ruff_does(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("torch.save(model, path)\n")
    result = CliRunner().invoke(main, ["check", "empty"], catch_exceptions=False)
    assert result.exit_code == 0
    assert result.stderr == "warning: No Python files found under the given path(s)\n"
    assert result.stdout == "All checks passed!\n"


def test_a_binary_files_code_frame_shows_no_control_bytes(tmp_path):
    (tmp_path / "bin.py").write_bytes(b"import torch\n\x01x\x7f\x1b[31m = 1\x0c\n")
    result = CliRunner().invoke(main, ["check", "--no-cache", "bin.py"], catch_exceptions=False)
    out = result.output
    assert "bin.py:2:1: TL000" in out
    assert " 2 | \u2401x\u2421\u241b[31m = 1\u240c" in out
    assert not any(ord(c) < 0x20 and c not in "\n" or 0x7F <= ord(c) < 0xA0 for c in out), repr(out)


def test_a_notebook_finding_gets_the_cells_rows_as_its_code_frame(tmp_path):
    import json as _json

    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": ["import torch\n", "from torch import nn\n", "model = nn.Linear(2, 2)\n"]},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
         "source": ["x = 1\n", "torch.save(model, 'm.pt')"]},
    ]
    notebook = {"cells": cells, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "nb.ipynb").write_text(_json.dumps(notebook))
    out = CliRunner().invoke(main, ["check", "--no-cache", "nb.ipynb"], catch_exceptions=False).output
    assert "nb.ipynb:cell 3:2:12: TL501" in out
    assert " 2 | torch.save(model, 'm.pt')\n   |            ^^^^^\n" in out
    stdin = CliRunner().invoke(
        main, ["check", "--stdin-filename", "nb.ipynb", "-"], input=(tmp_path / "nb.ipynb").read_bytes()
    ).output
    assert " 2 | torch.save(model, 'm.pt')\n" in stdin


def test_exit_zero(project):
    assert run("bad.py", "--exit-zero").exit_code == 0


def test_output_is_sorted_by_path_row_and_column(project):
    (project / "a.py").write_text(BAD + "torch.save(model, 'n.pt')\n")
    result = run(".", "--output-format", "concise", "--no-cache")
    lines = [l for l in result.output.splitlines() if ": TL" in l]
    assert lines == sorted(lines, key=lambda l: (l.split(":")[0], int(l.split(":")[1]), int(l.split(":")[2])))
    assert [l.split(":")[0] for l in lines] == ["a.py", "a.py", "bad.py"]


def test_stdin(project):
    result = run("-", "--output-format", "concise", input=BAD.encode())
    assert result.exit_code == 1 and "-:4:12: TL501" in result.output
    fixed = CliRunner().invoke(main, ["--fix", "-"], input=BAD.encode())
    assert fixed.stdout == GOOD and fixed.exit_code == 0


def test_unreadable_and_unparsable_files_are_tl000_and_others_still_linted(project):
    (project / "broken.py").write_text("def f(:\n")
    (project / "latin.py").write_bytes(b"x = '\xff'\n")
    result = run(".", "missing.py", "--output-format", "concise")
    assert result.exit_code == 1
    out = result.output
    assert "broken.py:1:7: TL000 SyntaxError" in out
    assert "latin.py:1:6: TL000 cannot decode file: byte 0xff is not valid utf-8 (invalid start byte)\n" in out
    assert "missing.py:1:1: TL000 cannot read file: No such file or directory" in out
    assert "bad.py:4:12: TL501" in out


def test_symlink_loop_is_reported_not_followed(project):
    (project / "sub").mkdir()
    os.symlink(project, project / "sub" / "loop")
    os.symlink(project / "self.py", project / "self.py")  # a file symlink loop
    result = run(".", "self.py", "--output-format", "concise")
    assert result.exit_code == 1
    assert "self.py:1:1: TL000 cannot read file" in result.output
    assert result.output.count("bad.py:4:12") == 1


def test_gitignore_and_exclude_are_honoured(project):
    (project / ".gitignore").write_text("ignored/\n")
    for folder in ("ignored", "excluded", "kept", ".venv"):
        (project / folder).mkdir()
        (project / folder / "bad.py").write_text(BAD)
    (project / "pyproject.toml").write_text('[tool.torchlint]\nexclude = ["excluded/"]\n')
    out = run(".", "--output-format", "concise").output
    assert "kept/bad.py" in out
    assert "ignored/" not in out and "excluded/" not in out and ".venv" not in out


def test_template_files_are_not_walked_but_linted_when_named(project):
    # cookiecutter's files and folders are named by template expressions: templates, not Python.
    template = project / "{{cookiecutter.name}}"
    template.mkdir()
    (template / "train.py").write_text("{% if cookiecutter.gpu %}\nx = 1\n{% endif %}\n")
    (project / "run_{{cookiecutter.slug}}.py").write_text("{%- if cookiecutter.tf %}\nimport tensorflow\n{%- endif %}\n")
    out = run(".", "--output-format", "concise").output
    assert "cookiecutter" not in out
    named = run("run_{{cookiecutter.slug}}.py", "--output-format", "concise").output
    assert "TL000" in named


def test_config_per_file_ignores_and_select(project):
    (project / "scripts").mkdir()
    (project / "scripts" / "bad.py").write_text(BAD)
    (project / "pyproject.toml").write_text('[tool.torchlint]\nper-file-ignores = {"scripts/*" = ["TL501"]}\n')
    out = run(".", "--output-format", "concise").output
    assert "scripts/bad.py" not in out and "bad.py:4:12" in out
    (project / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL5"]\n')
    assert run(".").exit_code == 0


def test_torchlint_toml_and_explicit_config(project):
    (project / "torchlint.toml").write_text('ignore = ["TL501"]\n')
    assert run("bad.py").exit_code == 0
    other = project / "other.toml"
    other.write_text('[tool.torchlint]\nselect = ["TL501"]\n')
    other = other.rename(project / "cfg" if False else project / "pyproject.toml")
    assert run("bad.py", "--config", str(other)).exit_code == 1


@pytest.mark.parametrize(
    "content, message",
    [
        ("[tool.torchlint\n", "cannot parse"),
        ('[tool.torchlint]\nselect = "TL5"\nbogus = 1\n', "unknown option `bogus`"),
        ("[tool.torchlint]\nselect = [1]\n", "`select` must be a list of strings"),
        ('[tool.torchlint]\nignore = ["XY1"]\n', "unknown rule selector `XY1`"),
    ],
)
def test_bad_config_is_a_clear_error_exit_2(project, content, message):
    (project / "pyproject.toml").write_text(content)
    result = run("bad.py")
    assert result.exit_code == 2
    assert message in result.output and "pyproject.toml" in result.output
    assert "Traceback" not in result.output


def test_rule_docs(project):
    result = run("rule", "TL501")
    assert result.exit_code == 0
    for heading in ("# save-whole-model (TL501)", "## What it does", "## Why is this bad?", "## Fix safety"):
        assert heading in result.output
    every = run("rule", "--all").output
    assert all(f"({rule.code})" in every for rule in all_rules())
    assert run("rule", "TL999").exit_code == 2


def test_version():
    result = run("--version")
    assert result.exit_code == 0 and result.output.strip() == f"torchlint {__version__}"


def test_cache_is_used_and_can_be_disabled(project):
    assert run("bad.py").exit_code == 1
    assert (project / ".torchlint_cache").is_dir()
    shutil.rmtree(project / ".torchlint_cache")
    assert run("bad.py", "--no-cache").exit_code == 1
    assert not (project / ".torchlint_cache").exists()


def test_cached_result_follows_content_changes(project):
    assert run("bad.py").exit_code == 1
    (project / "bad.py").write_text(GOOD)
    assert run("bad.py").exit_code == 0


def test_parallel_jobs_give_the_same_output(project):
    for i in range(12):
        (project / f"m{i:02}.py").write_text(BAD)
    serial = run(".", "-j", "1", "--no-cache", "--output-format", "json").output
    parallel = run(".", "-j", "2", "--no-cache", "--output-format", "json").output
    assert serial == parallel and len(json.loads(serial)) == 13


def test_fix_keeps_file_mode(project):
    os.chmod(project / "bad.py", 0o751)
    run("--fix", "bad.py")
    assert (project / "bad.py").stat().st_mode & 0o777 == 0o751
    assert not [p for p in project.iterdir() if p.name.endswith(".tmp")]


def test_installed_command_in_a_subprocess(project):
    exe = shutil.which("torchlint", path=os.path.dirname(sys.executable)) or shutil.which("torchlint")
    assert exe, "the torchlint console script is not installed"
    proc = subprocess.run([exe, "check", "bad.py", "--output-format", "concise"], capture_output=True, text=True)
    assert proc.returncode == 1 and "bad.py:4:12: TL501" in proc.stdout
    proc = subprocess.run([exe, "--fix", "bad.py"], capture_output=True, text=True)
    assert proc.returncode == 0 and (project / "bad.py").read_text() == GOOD
    proc = subprocess.run([exe, "check", "--select", "BOGUS"], capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown rule selector" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "torchlint", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("torchlint ")


def test_module_entry_exits_with_the_run_status_and_frozen_objects(project):
    # `python -m torchlint` and the console script are `cli.run`: `main`, with what the
    # process holds frozen out of the cyclic collector on the way out (the exit handlers
    # still run: the cache is written, the exit status is the run's).
    code = (
        "import atexit, gc, sys; from torchlint.cli import run; "
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, file=sys.stderr)); "
        "sys.argv[0] = 'torchlint'; run()"
    )
    proc = subprocess.run([sys.executable, "-c", code, "check", "bad.py", "--output-format", "concise"], capture_output=True, text=True)
    assert proc.returncode == 1 and "bad.py:4:12: TL501" in proc.stdout and "frozen True" in proc.stderr
    assert (project / ".torchlint_cache").is_dir()
    proc = subprocess.run([sys.executable, "-m", "torchlint", "check", "good.py"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_github_annotations(project):
    result = run("bad.py", "--output-format", "github")
    assert result.exit_code == 1
    assert result.output.strip() == (
        "::error file=bad.py,line=4,col=12,endLine=4,endColumn=17,title=TL501::"
        "TL501 `torch.save` of a whole `nn.Module`; save its `state_dict()` instead"
    )
