"""The pre-commit hooks, run by the real `pre-commit try-repo` against a commit of this working
tree. pre-commit installs the hook's package from PyPI-built dependencies into its own virtual
environment, once for the module (deselect with `-m "not slow"`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

BAD = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
GOOD = BAD.replace("torch.save(model,", "torch.save(model.state_dict(),")
NOTEBOOK = (FIXTURES / "notebooks" / "training.ipynb").read_bytes()
FIXED_NOTEBOOK = (FIXTURES / "notebooks" / "training.fixed.ipynb").read_bytes()

pytestmark = pytest.mark.slow


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """This working tree (tracked and untracked files, as git sees them) committed in a copy,
    so that what is tested is what is here and this repository's git state is left alone."""
    copy = tmp_path_factory.mktemp("torchlint-repo")
    for name in _git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0"):
        source = ROOT / name
        if name and source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    _git(copy, "init", "-q")
    _git(copy, "config", "user.name", "torchlint tests")
    _git(copy, "config", "user.email", "tests@torchlint.invalid")
    _git(copy, "config", "commit.gpgsign", "false")
    _git(copy, "add", "-A")
    _git(copy, "commit", "-q", "-m", "working tree under test")
    return copy


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    # Shared by the tests of this module: pre-commit builds the hook's environment once.
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def user_repo(tmp_path) -> Path:
    repo = tmp_path / "user"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "bad.py").write_text(BAD)
    (repo / "good.py").write_text(GOOD)
    (repo / "bad.ipynb").write_bytes(NOTEBOOK)
    (repo / "good.ipynb").write_bytes(FIXED_NOTEBOOK)
    (repo / "notes.txt").write_text("torch.save(model, path)\n")
    _git(repo, "add", ".")
    return repo


@pytest.fixture
def try_repo(hook_repo, pre_commit_home, user_repo):
    def run(hook: str, *files: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PRE_COMMIT_HOME": str(pre_commit_home), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), hook, "--files", *files],
            cwd=user_repo, env=env, capture_output=True, text=True, timeout=900,
        )

    return run


def test_check_hook_fails_on_bad_files_and_passes_clean_ones(try_repo, user_repo):
    bad = try_repo("torchlint", "bad.py", "bad.ipynb")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "bad.py:4:12: TL501" in bad.stdout
    assert "bad.ipynb:cell 5:8:12: TL501" in bad.stdout
    good = try_repo("torchlint", "good.py", "good.ipynb")
    assert good.returncode == 0, good.stdout + good.stderr
    assert (user_repo / "bad.py").read_text() == BAD and (user_repo / "bad.ipynb").read_bytes() == NOTEBOOK


def test_hooks_apply_exclude_to_the_files_pre_commit_names(try_repo, user_repo):
    # As ruff's hooks: --force-exclude, so that `exclude` holds for the staged files named.
    (user_repo / "pyproject.toml").write_text('[tool.torchlint]\nexclude = ["legacy/"]\nextend-exclude = ["gen_*.py"]\n')
    (user_repo / "legacy").mkdir()
    (user_repo / "legacy" / "old.py").write_text(BAD)
    (user_repo / "gen_model.py").write_text(BAD)
    _git(user_repo, "add", ".")
    skipped = try_repo("torchlint", "legacy/old.py", "gen_model.py", "good.py")
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "TL501" not in skipped.stdout
    fixed = try_repo("torchlint-fix", "legacy/old.py", "gen_model.py")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert (user_repo / "legacy" / "old.py").read_text() == BAD and (user_repo / "gen_model.py").read_text() == BAD
    linted = try_repo("torchlint", "legacy/old.py", "bad.py")
    assert linted.returncode == 1 and "bad.py:4:12: TL501" in linted.stdout
    assert "legacy/old.py:4:12" not in linted.stdout
    assert "legacy/old.py is excluded by `legacy/` of `exclude` in pyproject.toml" in linted.stdout


def test_hooks_skip_files_that_are_not_python(try_repo):
    result = try_repo("torchlint", "notes.txt")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no files to check" in result.stdout


def test_fix_hook_rewrites_the_bad_files(try_repo, user_repo):
    result = try_repo("torchlint-fix", "bad.py", "bad.ipynb")
    # pre-commit fails a hook that changed files, so the user re-stages them.
    assert result.returncode == 1, result.stdout + result.stderr
    assert "files were modified by this hook" in result.stdout
    assert (user_repo / "bad.py").read_text() == GOOD
    assert (user_repo / "bad.ipynb").read_bytes() == FIXED_NOTEBOOK
    again = try_repo("torchlint-fix", "bad.py", "bad.ipynb")
    assert again.returncode == 0, again.stdout + again.stderr


def test_the_readmes_local_hook_runs_the_installed_torchlint(user_repo, pre_commit_home):
    """The README's `repo: local` snippet, as written there, in a user's repository: pre-commit
    runs the `torchlint` installed beside this interpreter."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- pre-commit-local -->\n", 1)[1].split("\n", 1)[1].split("\n```", 1)[0]
    (user_repo / ".pre-commit-config.yaml").write_text(block + "\n")
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(pre_commit_home),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }

    def run(*files: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "run", "--files", *files],
            cwd=user_repo, env=env, capture_output=True, text=True, timeout=600,
        )

    bad = run("bad.py", "bad.ipynb")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "bad.py:4:12: TL501" in bad.stdout and "bad.ipynb:cell 5:8:12: TL501" in bad.stdout
    good = run("good.py", "good.ipynb", "notes.txt")
    assert good.returncode == 0, good.stdout + good.stderr
