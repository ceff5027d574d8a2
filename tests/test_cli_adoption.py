"""ruff's conveniences for adopting torchlint on a large codebase (issue 40), with ruff's names
and meanings: the `fixable` / `unfixable` and `extend-per-file-ignores` keys, and
`--fix-only`, `--show-fixes`, `--output-file`, `-q/--quiet`, `--show-files` and
`--show-settings`. Through click's runner, and a real subprocess per group."""

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

HEAD = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
SAVES = HEAD + "torch.save(model, 'm.pt')\ntorch.save(model, 'n.pt')\n"  # TL501 twice (safe fixes)
CUDA = HEAD + "model.cuda()\nmodel(torch.zeros(2))\n"  # TL201 (a safe fix)
CLEAN = HEAD + "torch.save(model.state_dict(), 'm.pt')\n"


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(main, ["check", "--no-cache", "-j", "1", *args], input=input)


def exe() -> str:
    return shutil.which("torchlint") or str(Path(sys.executable).parent / "torchlint")


def subprocess_run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([exe(), "check", "--no-cache", *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "saves.py").write_text(SAVES)
    (tmp_path / "place.py").write_text(CUDA)
    return tmp_path


def config(tmp_path: Path, body: str) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n" + body)


# --- fixable / unfixable ----------------------------------------------------------------


def test_unfixable_findings_lose_their_fix_mark_and_fix_leaves_them(project):
    config(project, 'unfixable = ["TL5"]\n')
    out = run("--output-format", "concise", ".").output
    assert "saves.py:4:12: TL501 `torch.save`" in out and "place.py:4:7: TL201 [*]" in out
    assert "[*] 1 fixable with the `--fix` option." in out
    result = run("--fix", ".")
    assert result.exit_code == 1
    assert (project / "saves.py").read_text() == SAVES
    assert (project / "place.py").read_text() != CUDA


def test_unfixable_findings_have_no_fix_in_json(project):
    config(project, 'unfixable = ["TL501"]\n')
    findings = json.loads(run("--output-format", "json", "saves.py").stdout)
    assert [f["fix"] for f in findings] == [None, None]


def test_fixable_limits_the_fixes_and_unfixable_wins_over_it(project):
    config(project, 'fixable = ["TL2", "TL501"]\nunfixable = ["TL501"]\n')
    assert run("--fix", ".").exit_code == 1
    assert (project / "saves.py").read_text() == SAVES
    assert "model.to(device)" in (project / "place.py").read_text()


def test_fixable_without_the_rule_keeps_it_from_fix(project):
    config(project, 'fixable = ["TL2"]\n')
    run("--fix", ".")
    assert (project / "saves.py").read_text() == SAVES


def test_unfixable_reaches_the_cached_findings_too(project):
    # The cache holds findings with their fixes: a changed `unfixable` must not read them back.
    args = ["check", "-j", "1", "--output-format", "concise", "saves.py"]
    assert "TL501 [*]" in CliRunner().invoke(main, args).output
    config(project, 'unfixable = ["TL501"]\n')
    assert "TL501 [*]" not in CliRunner().invoke(main, args).output


@pytest.mark.parametrize("body", ['unfixable = ["TL9"]\n', 'fixable = "TL5"\n', 'fixable = ["BOGUS"]\n'])
def test_a_bad_fixable_or_unfixable_is_an_error_naming_the_file(project, body):
    config(project, body)
    result = run(".")
    assert result.exit_code == 2 and "pyproject.toml" in result.output


def test_fixable_in_a_subprocess(project):
    config(project, 'unfixable = ["TL501"]\n')
    proc = subprocess_run("--fix", ".", cwd=project)
    assert proc.returncode == 1, proc.stderr
    assert "saves.py:4:12: TL501 `torch.save`" in proc.stdout
    assert (project / "saves.py").read_text() == SAVES


# --- extend-per-file-ignores --------------------------------------------------------------


def test_extend_per_file_ignores_adds_to_per_file_ignores(project):
    config(project, '[tool.torchlint.per-file-ignores]\n"place.py" = ["TL201"]\n[tool.torchlint.extend-per-file-ignores]\n"saves.py" = ["TL5"]\n')
    result = run(".")
    assert result.exit_code == 0, result.output
    config(project, '[tool.torchlint.extend-per-file-ignores]\n"saves.py" = ["TL5"]\n')
    assert "place.py:4:7: TL201" in run("--output-format", "concise", ".").output
    assert "saves.py" not in run("--output-format", "concise", ".").output


def test_extend_per_file_ignores_must_be_a_table(project):
    config(project, 'extend-per-file-ignores = ["TL5"]\n')
    result = run(".")
    assert result.exit_code == 2 and "`extend-per-file-ignores` must be a table" in result.output


# --- --fix-only, --show-fixes ------------------------------------------------------------------


def test_fix_only_applies_fixes_reports_nothing_left_and_exits_0(project):
    (project / "unsafe.py").write_text("import torch\nstate = torch.load('ckpt.pt')\n")  # TL503 is opt-in
    result = run("--fix-only", "--extend-select", "TL503", ".")
    assert result.exit_code == 0
    assert result.output.strip() == "Fixed 3 errors."
    assert "state_dict()" in (project / "saves.py").read_text()
    assert (project / "unsafe.py").read_text() == "import torch\nstate = torch.load('ckpt.pt')\n"


def test_fix_only_with_nothing_to_fix_prints_nothing(project):
    (project / "saves.py").write_text(CLEAN)
    (project / "place.py").unlink()
    result = run("--fix-only", ".")
    assert result.exit_code == 0 and result.output == ""


def test_fix_only_prints_nothing_in_json(project):
    result = run("--fix-only", "--output-format", "json", ".")
    assert result.exit_code == 0 and result.stdout == ""
    assert "state_dict()" in (project / "saves.py").read_text()


def test_show_fixes_lists_what_was_fixed_per_file_and_rule_before_the_summary(project):
    result = run("--fix", "--show-fixes", ".")
    assert result.exit_code == 0
    assert result.output == (
        "Fixed 3 errors:\n"
        "- place.py:\n"
        "    1 × TL201 (hardcoded-cuda)\n"
        "- saves.py:\n"
        "    2 × TL501 (save-whole-model)\n"
        "\n"
        "Found 3 errors (3 fixed, 0 remaining).\n"
    )


def test_show_fixes_with_fix_only_and_the_findings_left(project):
    (project / "left.py").write_text(HEAD + "for x in []:\n    model(x).backward()\n    opt.step()\n")
    only = run("--fix-only", "--show-fixes", "place.py")
    assert only.output == "Fixed 1 error:\n- place.py:\n    1 × TL201 (hardcoded-cuda)\n\nFixed 1 error.\n"
    both = run("--fix", "--show-fixes", "--output-format", "concise", "saves.py", "left.py")
    lines = both.output.splitlines()
    assert lines[0].startswith("left.py:6:5: TL101")
    assert lines[1:6] == ["", "Fixed 2 errors:", "- saves.py:", "    2 × TL501 (save-whole-model)", ""]
    assert lines[6] == "Found 3 errors (2 fixed, 1 remaining)."


def test_show_fixes_without_fix_adds_nothing(project):
    assert run("--show-fixes", "saves.py").output == run("saves.py").output


def test_show_fixes_and_fix_only_on_standard_input():
    result = run("--fix-only", "--show-fixes", "--stdin-filename", "t.py", "-", input=CUDA)
    assert "model.to(device)" in result.stdout
    assert "1 × TL201 (hardcoded-cuda)" in result.stderr and result.exit_code == 0


def test_fix_only_and_show_fixes_in_a_subprocess(project):
    proc = subprocess_run("--fix-only", "--show-fixes", "saves.py", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Fixed 2 errors:\n- saves.py:\n    2 × TL501 (save-whole-model)\n\nFixed 2 errors.\n"


# --- --output-file -------------------------------------------------------------------------------


def test_output_file_gets_the_report_and_stdout_nothing(project):
    result = run("--output-format", "json", "--output-file", "reports/lint.json", ".")
    assert result.exit_code == 1 and result.stdout == ""
    written = json.loads((project / "reports" / "lint.json").read_text())
    assert sorted(f["code"] for f in written) == ["TL201", "TL501", "TL501"]
    assert not [n for n in os.listdir(project / "reports") if n != "lint.json"]


def test_output_file_replaces_an_old_report_even_with_nothing_to_say(project):
    (project / "report.txt").write_text("stale\n")
    os.chmod(project / "report.txt", 0o640)
    (project / "saves.py").write_text(CLEAN)
    (project / "place.py").unlink()
    assert run("--output-file", "report.txt", ".").exit_code == 0
    assert (project / "report.txt").read_text() == "All checks passed!\n"
    assert (project / "report.txt").stat().st_mode & 0o777 == 0o640
    assert run("--fix-only", "--output-file", "report.txt", ".").exit_code == 0
    assert (project / "report.txt").read_text() == ""


def test_output_file_that_cannot_be_written_is_exit_2(project):
    (project / "taken").mkdir()
    (project / "taken" / "x").write_text("")
    result = run("--output-file", "taken/x/report.txt", ".")
    assert result.exit_code == 2 and "cannot write taken/x/report.txt" in result.stderr


def test_output_file_takes_the_diff(project):
    result = run("--diff", "--output-file", "fix.diff", "saves.py")
    assert result.exit_code == 1 and result.stdout == ""
    assert (project / "fix.diff").read_text().startswith("--- a/saves.py\n+++ b/saves.py\n")


def test_output_file_in_a_subprocess(project):
    proc = subprocess_run("--output-format", "concise", "--output-file", "out.txt", "saves.py", cwd=project)
    assert proc.returncode == 1 and proc.stdout == ""
    assert (project / "out.txt").read_text().startswith("saves.py:4:12: TL501 [*]")


# --- -q/--quiet -------------------------------------------------------------------------------------


def test_quiet_prints_the_findings_only(project):
    loud = run("--output-format", "concise", "saves.py").output
    quiet = run("-q", "--output-format", "concise", "saves.py")
    assert quiet.exit_code == 1
    assert quiet.output.splitlines() == [line for line in loud.splitlines() if line.startswith("saves.py:")]
    assert "Found" not in run("--quiet", "saves.py").output


def test_quiet_with_nothing_found_prints_nothing_and_no_warning(tmp_path):
    (tmp_path / "empty").mkdir()
    assert run("-q", "empty").output == ""
    (tmp_path / "ok.py").write_text(CLEAN)
    assert run("-q", "ok.py").output == ""


def test_quiet_statistics_and_diff(project):
    stats = run("-q", "--statistics", "saves.py").output
    assert stats.splitlines() == ["    2\tTL501\t[*] save-whole-model"]
    diff = run("-q", "--diff", "saves.py")
    assert diff.exit_code == 1 and "Would fix" not in diff.output and "+++ b/saves.py" in diff.output


def test_quiet_in_a_subprocess(project):
    proc = subprocess_run("-q", "--output-format", "concise", ".", cwd=project)
    assert proc.returncode == 1 and proc.stderr == ""
    assert [line.split(":")[0] for line in proc.stdout.splitlines()] == ["place.py", "saves.py", "saves.py"]


# --- --show-files, --show-settings ------------------------------------------------------------------


def test_show_files_lists_what_would_be_linted_and_exits_0(project):
    config(project, 'exclude = ["skip/"]\n')
    (project / "skip").mkdir()
    (project / "skip" / "x.py").write_text(SAVES)
    (project / "sub").mkdir()
    (project / "sub" / "nb.ipynb").write_text("{}")
    (project / "notes.txt").write_text("")
    result = run("--show-files", ".")
    assert result.exit_code == 0
    assert result.output.splitlines() == ["place.py", "saves.py", os.path.join("sub", "nb.ipynb")]
    assert (project / "saves.py").read_text() == SAVES


def test_show_settings_says_what_applies_to_one_file(project):
    config(
        project,
        'select = ["TL2", "TL5"]\nignore = ["TL503"]\nexclude = ["gen/"]\ntarget-torch = "2.1"\n'
        'unfixable = ["TL201"]\n[tool.torchlint.per-file-ignores]\n"tests/*" = ["TL501"]\n"other/*" = ["TL502"]\n',
    )
    (project / "tests").mkdir()
    result = run("--show-settings", "tests/test_x.py")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "Resolved settings for: tests/test_x.py"
    assert lines[1] == f"Settings path: {project / 'pyproject.toml'}"
    assert 'select = ["TL2", "TL5"]' in lines and 'ignore = ["TL503"]' in lines
    assert 'per-file-ignores applying = {"tests/*" = ["TL501"]}' in lines
    assert 'exclude = ["gen/"]' in lines and "excluded = false" in lines
    assert 'extend-exclude = []' in lines and "force-exclude = false" in lines
    assert 'target-torch = "2.1"' in lines
    assert "fixable = (default: every rule)" in lines and 'unfixable = ["TL201"]' in lines
    codes = [line.split()[0] for line in lines if line[:2] == "TL"]
    assert codes == ["TL201", "TL202", "TL203", "TL502"]  # TL501 ignored in tests/, TL503 ignored
    assert "TL201     hardcoded-cuda" in lines and "TL202 [*] device-move-in-forward" in lines
    assert "# Selected but ignored here by per-file-ignores: TL501" in lines


def test_show_settings_follows_the_command_line_and_reads_a_declared_torch(tmp_path):
    (tmp_path / "requirements.txt").write_text("torch>=1.13\n")
    result = run("--show-settings", "train.py", "--extend-select", "TL805", "--ignore", "TL2")
    lines = result.output.splitlines()
    assert "Settings path: (none: the defaults)" in lines
    assert 'extend-select = ["TL805"]' in lines and 'ignore = ["TL2"]' in lines
    assert 'target-torch = "1.13" (not set: the lower bound the project declares on torch)' in lines
    codes = [line.split()[0] for line in lines if line[:2] == "TL"]
    assert "TL805" in codes and "TL201" not in codes and "TL001" in codes


def test_show_settings_and_show_files_in_a_subprocess(project):
    config(project, 'exclude = ["place.py"]\n')
    files = subprocess_run("--show-files", ".", cwd=project)
    assert files.returncode == 0 and files.stdout == "saves.py\n"
    settings = subprocess_run("--show-settings", "place.py", cwd=project)
    excluded = [line for line in settings.stdout.splitlines() if line.startswith("excluded = ")]
    assert settings.returncode == 0
    assert excluded == ["excluded = true, by `place.py` of `exclude` in pyproject.toml (a file named on the command line is still linted: no force-exclude)"]


def test_show_settings_of_a_bad_config_is_exit_2(project):
    config(project, 'select = "TL5"\n')
    result = run("--show-settings", "saves.py")
    assert result.exit_code == 2 and "must be a list of strings" in result.output


def test_an_unfixable_finding_says_why_in_its_help_line(project):
    config(project, 'unfixable = ["TL501"]\n')
    out = run("saves.py").output
    assert "   = help: Save `state_dict()` instead (not applied: `fixable` / `unfixable` in the configuration)" in out
    assert "[*]" not in out
