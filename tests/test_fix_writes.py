"""`--fix` writes only what the user may write, and keeps the file's mode, owner and links
(issue 40, defects 1 and 3): through click's runner and through the installed command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from torchlint.cli import main

BAD = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
GOOD = BAD.replace("torch.save(model,", "torch.save(model.state_dict(),")

posix = pytest.mark.skipif(os.name != "posix", reason="POSIX modes, owners and links")


def run(*args: str):
    return CliRunner().invoke(main, ["check", "--no-cache", "-j", "1", *args], catch_exceptions=False)


def _command() -> str:
    exe = shutil.which("torchlint", path=os.path.dirname(sys.executable)) or shutil.which("torchlint")
    assert exe, "the torchlint console script is not installed"
    return exe


def _refused_read_only(stdout: str, stderr: str) -> None:
    assert "torchlint: error: bad.py: cannot write: Permission denied" in stderr
    assert "Found 1 error." in stdout and "fixed" not in stdout
    # (Defect 3.) Not an internal error, and `--fix`, which was given, is not offered again.
    assert "internal error" not in stdout + stderr and "not fully checked" not in stdout
    assert "fixable with the `--fix` option" not in stdout
    assert "1 file could not be written (reported above): its fixes were not applied." in stdout


@posix
def test_a_read_only_file_is_not_fixed(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    os.chmod(tmp_path / "bad.py", 0o444)
    inode = (tmp_path / "bad.py").stat().st_ino
    result = run("--fix", "bad.py")
    assert result.exit_code == 2
    _refused_read_only(result.stdout, result.stderr)
    assert (tmp_path / "bad.py").read_text() == BAD
    assert (tmp_path / "bad.py").stat().st_ino == inode and (tmp_path / "bad.py").stat().st_mode & 0o777 == 0o444
    assert not [p for p in tmp_path.iterdir() if "torchlint" in p.name and p.suffix in (".tmp", ".bak")]


@posix
def test_a_read_only_file_is_not_fixed_by_the_installed_command(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    os.chmod(tmp_path / "bad.py", 0o444)
    proc = subprocess.run([_command(), "--fix", "--no-cache", "bad.py"], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    _refused_read_only(proc.stdout, proc.stderr)
    assert (tmp_path / "bad.py").read_text() == BAD


@posix
@pytest.mark.skipif(os.name == "posix" and os.geteuid() == 0, reason="root may write a file it does not own")
def test_a_file_the_user_has_no_write_access_to_is_not_fixed(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    os.chmod(tmp_path / "bad.py", 0o464)  # writable by its group only (the user's mode: r--)
    result = run("--fix", "bad.py")
    assert result.exit_code == 2 and "bad.py: cannot write: Permission denied" in result.stderr
    assert (tmp_path / "bad.py").read_text() == BAD


@posix
def test_a_hard_linked_file_is_fixed_in_place_and_keeps_its_links(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    os.link(tmp_path / "bad.py", tmp_path / "other_name.txt")
    os.chmod(tmp_path / "bad.py", 0o640)
    inode = (tmp_path / "bad.py").stat().st_ino
    result = run("--fix", "bad.py")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "bad.py").read_text() == GOOD
    assert (tmp_path / "other_name.txt").read_text() == GOOD  # the link sees the fix
    status = (tmp_path / "bad.py").stat()
    assert status.st_ino == inode and status.st_nlink == 2 and status.st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".torchlint")) == ["bad.py", "other_name.txt"]


@posix
def test_an_atomic_write_keeps_the_owner_and_group(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    uid, gid = os.getuid(), os.getgid()
    if os.geteuid() == 0:  # root can give the file away, and the fix must give it back
        uid, gid = 12345, 23456
        os.chown(tmp_path / "bad.py", uid, gid)
    inode = (tmp_path / "bad.py").stat().st_ino
    assert run("--fix", "bad.py").exit_code == 0
    status = (tmp_path / "bad.py").stat()
    assert (tmp_path / "bad.py").read_text() == GOOD
    assert (status.st_uid, status.st_gid) == (uid, gid)
    assert status.st_ino != inode  # replaced by a rename (atomic), owner and group restored


@posix
def test_a_file_whose_owner_cannot_be_kept_is_written_in_place(tmp_path, monkeypatch):
    # (As a user fixing a group-writable file of another user: the new file could not be
    # given back to its owner, so its content is overwritten through the file itself.)
    (tmp_path / "bad.py").write_text(BAD)
    real_stat = os.stat

    def other_owner(path, *args, **kwargs):
        status = real_stat(path, *args, **kwargs)
        if str(path).endswith("bad.py"):
            values = list(status)
            values[4] = status.st_uid + 1  # st_uid
            return os.stat_result(values)
        return status

    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    import pathlib

    monkeypatch.setattr(os, "chown", refuse)
    monkeypatch.setattr(pathlib.Path, "stat", lambda self, **kw: other_owner(self, **kw))
    inode = real_stat(tmp_path / "bad.py").st_ino
    assert run("--fix", "bad.py").exit_code == 0
    monkeypatch.undo()
    assert (tmp_path / "bad.py").read_text() == GOOD
    assert (tmp_path / "bad.py").stat().st_ino == inode  # the same file: written in place
    assert not [p for p in tmp_path.iterdir() if "torchlint" in p.name and p.suffix in (".tmp", ".bak")]


@posix
def test_an_in_place_write_that_fails_leaves_the_old_content(tmp_path, monkeypatch):
    from torchlint import files

    target = tmp_path / "bad.py"
    target.write_text(BAD)
    os.link(target, tmp_path / "link.py")
    real_open = type(target).open

    class Failing:
        def __init__(self, handle):
            self.handle = handle
            self.writes = 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.handle.__exit__(*exc)

        def write(self, data):
            self.writes += 1
            if self.writes == 1:
                self.handle.write(data[:5])  # half of it, then the disk is full
                raise OSError(28, "No space left on device")
            return self.handle.write(data)

        def __getattr__(self, name):
            return getattr(self.handle, name)

    def opening(self, mode="r", *args, **kwargs):
        handle = real_open(self, mode, *args, **kwargs)
        return Failing(handle) if mode == "r+b" else handle

    monkeypatch.setattr(type(target), "open", opening)
    with pytest.raises(OSError, match="No space left"):
        files.write_atomic(target, GOOD.encode(), expected=BAD.encode())
    monkeypatch.undo()
    assert target.read_text() == BAD
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".bak"]
