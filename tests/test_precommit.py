"""The pre-commit hooks, run by the real `pre-commit try-repo` against this repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

BAD = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
GOOD = BAD.replace("torch.save(model,", "torch.save(model.state_dict(),")

pytestmark = pytest.mark.slow


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory):
    # Shared by the tests of this module: pre-commit builds the hook's environment once.
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def user_repo(tmp_path):
    repo = tmp_path / "user"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "bad.py").write_text(BAD)
    (repo / "good.py").write_text(GOOD)
    _git(repo, "add", ".")
    return repo


def try_repo(hook: str, repo: Path, home: Path, *files: str) -> subprocess.CompletedProcess:
    pre_commit = shutil.which("pre-commit", path=os.path.dirname(sys.executable)) or "pre-commit"
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    return subprocess.run(
        [pre_commit, "try-repo", str(ROOT), hook, "--files", *files],
        cwd=repo, env=env, capture_output=True, text=True, timeout=600,
    )


def test_check_hook_fails_on_a_bad_file_and_passes_a_clean_one(user_repo, pre_commit_home):
    bad = try_repo("torchlint", user_repo, pre_commit_home, "bad.py")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "bad.py:4:12: TL501" in bad.stdout
    good = try_repo("torchlint", user_repo, pre_commit_home, "good.py")
    assert good.returncode == 0, good.stdout + good.stderr
    assert (user_repo / "bad.py").read_text() == BAD


def test_fix_hook_rewrites_the_bad_file(user_repo, pre_commit_home):
    result = try_repo("torchlint-fix", user_repo, pre_commit_home, "bad.py")
    # pre-commit fails a hook that changed files, so the user re-stages them.
    assert result.returncode == 1, result.stdout + result.stderr
    assert "files were modified by this hook" in result.stdout
    assert (user_repo / "bad.py").read_text() == GOOD
