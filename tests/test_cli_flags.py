"""Honest summaries and flags: `[*]` only for what `--fix` would apply, fixes counted only when
written, and each flag doing what it says (issue 8, points 7 and 9)."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from torchlint.cli import Progress, main

SAFE = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
SAFE_FIXED = SAFE.replace("torch.save(model,", "torch.save(model.state_dict(),")
UNSAFE = "import torch\nstate = torch.load('ckpt.pt')\n"  # TL503 (opt-in): an unsafe fix only


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(main, ["check", "--no-cache", "-j", "1", "--extend-select", "TL503", *args], input=input)


@pytest.fixture(autouse=True)
def files(tmp_path):
    (tmp_path / "safe.py").write_text(SAFE)
    (tmp_path / "unsafe.py").write_text(UNSAFE)


# --- point 7: [*] marks what --fix would change ---------------------------------------------


def test_star_only_for_safe_fixes_and_unsafe_ones_counted_as_hidden():
    out = run("--output-format", "concise", "safe.py", "unsafe.py").output
    assert "safe.py:4:12: TL501 [*] " in out
    assert "unsafe.py:2:9: TL503 `torch.load`" in out
    assert "[*] 1 fixable with the `--fix` option." in out
    assert "1 hidden fix can be enabled with the `--unsafe-fixes` option." in out


def test_an_unsafe_only_fix_has_no_star_and_diff_agrees():
    out = run("unsafe.py").output
    assert "[*]" not in out and "1 hidden fix can be enabled" in out
    diff = run("--diff", "unsafe.py")
    assert diff.exit_code == 0 and "No fixes available." in diff.output
    unsafe_diff = run("--diff", "--unsafe-fixes", "unsafe.py")
    assert unsafe_diff.exit_code == 1 and "map_location" in unsafe_diff.output


def test_unsafe_fixes_without_fix_stars_them_and_does_not_advise_the_flag_given():
    out = run("--unsafe-fixes", "--output-format", "concise", "unsafe.py").output
    assert "TL503 [*] " in out
    assert "[*] 1 fixable with the `--fix` option." in out
    assert "--unsafe-fixes` option" not in out


def test_statistics_star_follows_the_same_rule():
    assert "TL503\t    load-without-map-location" in run("--statistics", "unsafe.py").output
    assert "TL503\t[*] load-without-map-location" in run("--statistics", "--unsafe-fixes", "unsafe.py").output


# --- point 9: honest summaries and flags ----------------------------------------------------


def test_statistics_honours_json():
    result = run("--statistics", "--output-format", "json", "safe.py", "unsafe.py")
    assert json.loads(result.stdout) == [
        {"code": "TL501", "name": "save-whole-model", "count": 1, "fixable": True},
        {"code": "TL503", "name": "load-without-map-location", "count": 1, "fixable": False},
    ]


def test_a_fix_that_could_not_be_written_is_not_counted(tmp_path, monkeypatch):
    import torchlint.runner

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(torchlint.runner, "write_atomic", refuse)
    result = run("--fix", "safe.py")
    assert result.exit_code == 2
    assert "safe.py: cannot write: Permission denied" in result.stderr
    assert "fixed" not in result.stdout and "Found 1 error." in result.stdout
    assert "safe.py:4:12: TL501 [*]" in result.stdout  # what the file still holds
    assert "internal error" not in result.output and "fixable with the `--fix` option" not in result.stdout
    assert "1 file could not be written (reported above): its fixes were not applied." in result.stdout
    assert (tmp_path / "safe.py").read_text() == SAFE


def test_ignore_tl000_is_an_error():
    for selector in ("TL000", "TL00"):
        result = run("--ignore", selector, "safe.py")
        assert result.exit_code == 2 and "TL000 (a file that cannot be read or parsed) is always reported" in result.output
    assert run("--ignore", "TL", "safe.py").exit_code == 0  # a prefix of every rule still works


def test_config_file_of_any_name_with_a_tool_table(tmp_path):
    (tmp_path / "lint-settings.toml").write_text('[tool.torchlint]\nignore = ["TL501"]\n[tool.black]\nx = 1\n')
    result = run("--config", "lint-settings.toml", "safe.py")
    assert result.exit_code == 0, result.output


def test_config_file_without_torchlint_settings_says_so(tmp_path):
    (tmp_path / "other.toml").write_text("[tool.black]\nline-length = 100\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    for name in ("other.toml", "pyproject.toml"):
        result = run("--config", name, "safe.py")
        assert f"torchlint: warning: {name} has no [tool.torchlint] settings; using the defaults" in result.stderr
        assert result.exit_code == 1  # linted with the defaults


def test_a_string_where_a_list_is_expected_is_an_error(tmp_path):
    (tmp_path / "torchlint.toml").write_text('ignore = "TL501"\n')
    result = run("safe.py")
    assert result.exit_code == 2 and "`ignore` must be a list of strings" in result.output


def test_stdin_filename_applies_exclude_and_per_file_ignores(tmp_path):
    (tmp_path / "torchlint.toml").write_text('exclude = ["legacy/"]\nper-file-ignores = { "tests/*" = ["TL501"] }\n')
    linted = run("--stdin-filename", "src/train.py", "--output-format", "concise", "-", input=SAFE)
    assert linted.exit_code == 1 and "src/train.py:4:12: TL501" in linted.output
    ignored = run("--stdin-filename", "tests/test_train.py", "-", input=SAFE)
    assert ignored.exit_code == 0, ignored.output
    # As ruff's: the path named is linted unless --force-exclude (which editors' wrappers pass).
    named = run("--stdin-filename", "legacy/old.py", "--output-format", "concise", input=SAFE)
    assert named.exit_code == 1 and "legacy/old.py:4:12: TL501" in named.output
    excluded = run("--force-exclude", "--stdin-filename", "legacy/old.py", input=SAFE)  # no path: standard input
    assert excluded.exit_code == 0 and "All checks passed!" in excluded.stdout
    assert "legacy/old.py is excluded by `legacy/` of `exclude` in torchlint.toml" in excluded.stderr
    # With --fix an excluded file comes back unchanged, as pre-commit wrappers expect.
    fixed = run("--fix", "--force-exclude", "--stdin-filename", "legacy/old.py", "-", input=SAFE)
    assert fixed.stdout == SAFE


def test_stdin_filename_finds_the_config_from_its_folder(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "torchlint.toml").write_text('ignore = ["TL501"]\n')
    assert run("--stdin-filename", "pkg/new.py", "-", input=SAFE).exit_code == 0
    assert run("--stdin-filename", "other/new.py", "-", input=SAFE).exit_code == 1


def test_stdin_filename_of_a_notebook_lints_it_as_one():
    notebook = {
        "cells": [{"cell_type": "code", "metadata": {}, "source": SAFE, "outputs": [], "execution_count": None}],
        "metadata": {"kernelspec": {"language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    result = run("--stdin-filename", "n.ipynb", "--output-format", "concise", "-", input=json.dumps(notebook))
    assert "n.ipynb:cell 1:4:12: TL501" in result.output


def test_cr_line_endings_are_kept_by_fix(tmp_path):
    (tmp_path / "cr.py").write_bytes(SAFE.replace("\n", "\r").encode())
    assert run("--fix", "cr.py").exit_code == 0
    assert (tmp_path / "cr.py").read_bytes() == SAFE_FIXED.replace("\n", "\r").encode()


# --- progress --------------------------------------------------------------------------------


def test_progress_is_shown_only_after_a_delay(capsys):
    now = [0.0]
    progress = Progress()
    progress.clock = lambda: now[0]
    progress.start = 0.0
    progress(1, 10)
    assert capsys.readouterr().err == ""  # a quick run shows nothing
    now[0] = 2.5
    progress(5, 10)
    progress(6, 10)  # throttled
    now[0] = 3.0
    progress(10, 10)
    progress.clear()
    assert capsys.readouterr().err == "\rtorchlint: 5/10 files\rtorchlint: 10/10 files\r\x1b[K"


def test_progress_within_one_large_file_shows_its_pieces(capsys):
    now = [0.0]
    progress = Progress()
    progress.clock = lambda: now[0]
    progress.start = 0.0
    progress(0, 1)
    now[0] = 2.5
    progress.within("big.py", 12, 36, "pieces")
    now[0] = 3.0
    progress.within("big.py", 100, 3400, "statements (fix pass 2)")
    now[0] = 3.5
    progress(1, 1)
    progress.clear()
    assert capsys.readouterr().err == (
        "\rtorchlint: 0/1 files; big.py: 12/36 pieces\x1b[K"
        "\rtorchlint: 0/1 files; big.py: 100/3400 statements (fix pass 2)\x1b[K"
        "\rtorchlint: 1/1 files\x1b[K\r\x1b[K"
    )


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path):
    for i in range(5):
        (tmp_path / f"f{i}.py").write_text(SAFE)
    result = run(".")
    assert "files\r" not in result.stderr and "\r" not in result.stderr
