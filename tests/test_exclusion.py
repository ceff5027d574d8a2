"""ruff's exclusion semantics (issue 40): a file named on the command line is linted even when
`exclude` matches it, unless `--force-exclude` (or `force-exclude = true`); a named path so
skipped is said on stderr with the pattern and the setting that exclude it; `extend-exclude`
and `--extend-exclude` add patterns. Through click's runner and the installed command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from torchlint.cli import main

BAD = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"


def run(*args: str):
    return CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "concise", *args], catch_exceptions=False)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchlint]\nexclude = ["legacy/"]\nextend-exclude = ["scratch_*.py", "!scratch_keep.py"]\n'
    )
    for name in ("legacy/old.py", "scratch_1.py", "scratch_keep.py", "main.py", "sub/gen.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(BAD)
    return tmp_path


def _linted(output: str) -> set[str]:
    return {line.split(":")[0] for line in output.splitlines() if ": TL501" in line}


def test_a_folders_walk_leaves_out_exclude_and_extend_exclude(project):
    assert _linted(run(".").output) == {"main.py", "scratch_keep.py", "sub/gen.py"}


def test_named_files_are_linted_even_when_excluded(project):
    result = run("legacy/old.py", "scratch_1.py", "main.py")
    assert _linted(result.output) == {"legacy/old.py", "scratch_1.py", "main.py"}
    assert result.stderr == ""
    assert _linted(run("legacy").output) == {"legacy/old.py"}  # a named folder is walked


def test_force_exclude_skips_named_files_and_says_why(project):
    result = run("--force-exclude", "legacy/old.py", "scratch_1.py", "main.py", "legacy")
    assert _linted(result.output) == {"main.py"}
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "torchlint: warning: legacy/old.py is excluded by `legacy/` of `exclude` in pyproject.toml (force-exclude): not linted",
        "torchlint: warning: scratch_1.py is excluded by `scratch_*.py` of `extend-exclude` in pyproject.toml (force-exclude): not linted",
        "torchlint: warning: legacy is excluded by `legacy/` of `exclude` in pyproject.toml (force-exclude): not linted",
    ]
    only_excluded = run("--force-exclude", "legacy/old.py")
    assert only_excluded.exit_code == 0 and "All checks passed!" in only_excluded.stdout


def test_force_exclude_in_the_configuration_and_its_override(project):
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text + "force-exclude = true\n")
    assert _linted(run("legacy/old.py", "main.py").output) == {"main.py"}
    assert _linted(run("--no-force-exclude", "legacy/old.py", "main.py").output) == {"legacy/old.py", "main.py"}
    (project / "pyproject.toml").write_text(text + 'force-exclude = "yes"\n')
    broken = run("main.py")
    assert broken.exit_code == 2 and "`force-exclude` must be true or false" in broken.stderr


def test_extend_exclude_on_the_command_line(project):
    # Comma-separated, gitignore-style, relative to the current folder.
    assert _linted(run("--extend-exclude", "sub/,main.py", ".").output) == {"scratch_keep.py"}
    os.chdir(project / "sub")
    assert _linted(run("--extend-exclude", "/gen.py", "..").output) == {"../main.py", "../scratch_keep.py"}
    forced = run("--force-exclude", "--extend-exclude", "gen.py", "gen.py")
    assert "gen.py is excluded by `gen.py` of `--extend-exclude` (force-exclude)" in forced.stderr


def test_exclusion_in_a_subprocess(project):
    exe = shutil.which("torchlint", path=os.path.dirname(sys.executable)) or shutil.which("torchlint")
    assert exe, "the torchlint console script is not installed"
    named = subprocess.run([exe, "check", "--no-cache", "legacy/old.py"], capture_output=True, text=True)
    assert named.returncode == 1 and "legacy/old.py:4:12: TL501" in named.stdout
    forced = subprocess.run([exe, "check", "--no-cache", "--force-exclude", "legacy/old.py"], capture_output=True, text=True)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "legacy/old.py is excluded by `legacy/` of `exclude` in pyproject.toml" in forced.stderr
