"""Two `--fix` runs at once over the same tree (pre-commit and an editor) never leave a
half-written file or a corrupt cache, and a file changed on disk between read and write is
not overwritten (issue 8, point 11)."""

from __future__ import annotations

import pickle
import subprocess
import sys

from click.testing import CliRunner

from torchlint.cli import main
from torchlint.files import FileChanged, write_atomic

SAFE = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
SAFE_FIXED = SAFE.replace("torch.save(model,", "torch.save(model.state_dict(),")


def _source(i: int) -> str:
    return f"# file {i}\n" + SAFE + "".join(f"x{j} = {j}\n" for j in range(i * 5))


def test_two_fix_runs_at_once_leave_whole_files_and_a_sound_cache(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "torchlint.toml").write_text("")
    command = [sys.executable, "-m", "torchlint", "check", "--select", "TL501", "--fix", "-j", "1", "."]
    for _ in range(3):
        for i in range(15):
            (tree / f"f{i}.py").write_text(_source(i))
        runs = [subprocess.Popen(command, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in runs]
        for code, out, err in results:
            assert code in (0, 1), (out, err)
            assert "Traceback" not in err
            # A file that the other run fixed first is reported, not overwritten.
            assert all("changed on disk while it was being fixed" in line for line in err.splitlines()), err
        for i in range(15):
            assert (tree / f"f{i}.py").read_text() == _source(i).replace(SAFE, SAFE_FIXED)
    assert not [p for p in tree.rglob("*") if p.name.endswith(".tmp")]
    # A third run reads the cache both wrote: every entry loads, and nothing is left to fix.
    entries = [p for p in (tree / ".torchlint_cache").rglob("*") if p.is_file() and p.name != ".gitignore"]
    for entry in entries:
        pickle.loads(entry.read_bytes())
    final = subprocess.run([sys.executable, "-m", "torchlint", "check", "--select", "TL501", "."], cwd=tree, capture_output=True, text=True)
    assert final.returncode == 0 and "All checks passed!" in final.stdout


def test_a_file_changed_between_read_and_write_is_not_overwritten(tmp_path, monkeypatch):
    import torchlint.runner

    (tmp_path / "safe.py").write_text(SAFE)
    edited = SAFE + "print('edited meanwhile')\n"
    real = torchlint.runner.lint_source

    def lint_then_edit(source, path, *args, **kwargs):
        result = real(source, path, *args, **kwargs)
        path.write_text(edited)  # another program saves the file while torchlint works
        return result

    monkeypatch.setattr(torchlint.runner, "lint_source", lint_then_edit)
    result = CliRunner().invoke(main, ["check", "--no-cache", "-j", "1", "--fix", "safe.py"])
    assert (tmp_path / "safe.py").read_text() == edited
    assert "torchlint: warning: safe.py: changed on disk while it was being fixed; left as it is" in result.stderr
    assert "fixed" not in result.stdout and result.exit_code == 1


def test_write_atomic_checks_the_expected_content(tmp_path):
    target = tmp_path / "a.py"
    target.write_bytes(b"old\n")
    try:
        write_atomic(target, b"new\n", expected=b"other\n")
    except FileChanged:
        pass
    else:
        raise AssertionError("wrote over content it did not read")
    assert target.read_bytes() == b"old\n"
    write_atomic(target, b"new\n", expected=b"old\n")
    assert target.read_bytes() == b"new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]  # no temporary file left
