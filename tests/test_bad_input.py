"""Every kind of bad input named in the README and the spec gives one clear message naming the
file, never a traceback, and the other files are still linted."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from torchlint.cli import main

BAD = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"

CASES = {
    # name: (content, the one message expected for it, at the byte that cannot be decoded,
    # or the first NUL byte)
    "undecodable": (b"x = '\xff'\n", "undecodable.py:1:6: TL000 cannot decode file: byte 0xff is not valid utf-8 (invalid start byte)"),
    "cookie_mismatch": (b"# coding: ascii\nx = '\xc3\xa9'\n", "cookie_mismatch.py:2:6: TL000 cannot decode file: byte 0xc3 is not valid ascii"),
    "unknown_cookie": (b"# -*- coding: klingon -*-\nx = 1\n", "unknown_cookie.py:1:1: TL000 cannot decode file: unknown encoding: klingon"),
    "bom_and_cookie": (b"\xef\xbb\xbf# coding: latin-1\nx = 1\n", "bom_and_cookie.py:1:1: TL000 cannot decode file: encoding problem"),
    "binary": (b"\x7fELF\x02\x01\x01\x00\x00\x00", "binary.py:1:8: TL000 SyntaxError: the file contains null bytes"),
    "utf16": ("x = 1\n".encode("utf-16"), "utf16.py:1:4: TL000 SyntaxError: the file contains null bytes"),
    "syntax": (b"def f(:\n", "syntax.py:1:7: TL000 SyntaxError"),
    "deep": (("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n").encode(), "deep.py:1:205: TL000 SyntaxError: too many nested parentheses"),
    "deep_blocks": (
        "".join(" " * i + "if x:\n" for i in range(150)).encode() + b" " * 150 + b"pass\n",
        "deep_blocks.py:101:1: TL000 SyntaxError: too many levels of indentation",
    ),
    # Deep, but within what Python compiles: LibCST's visitors recurse once per level.
    "deep_calls": (
        ("x = " + "f(" * 190 + "y.cuda()" + ")" * 190 + "  # .cuda(): makes TL201 look\n").encode(),
        "deep_calls.py:1:1: TL000 the file is nested too deeply to analyse",
    ),
    "long_sum": (("x = 1" + " + 1" * 20000 + "\n").encode(), "long_sum.py:1:1: TL000 the file is nested too deeply to parse"),
}


def run(*args: str):
    return CliRunner().invoke(main, ["check", "--no-cache", "-j", "1", "--output-format", "concise", *args])


def _lines_naming(output: str, name: str) -> list[str]:
    return [line for line in output.splitlines() if name in line]


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_file_gives_one_clear_message_naming_it(tmp_path, name):
    content, message = CASES[name]
    (tmp_path / f"{name}.py").write_bytes(content)
    (tmp_path / "bad.py").write_text(BAD)
    result = run(f"{name}.py", "bad.py")
    assert "Traceback" not in result.output
    [line] = _lines_naming(result.output, f"{name}.py")
    assert line.startswith(message), line
    assert "bad.py:4:12: TL501" in result.output  # the other file is still linted
    assert result.exit_code == 1


def test_empty_and_blank_files_are_clean(tmp_path):
    (tmp_path / "empty.py").write_bytes(b"")
    (tmp_path / "blank.py").write_bytes(b"\n\n   \n")
    (tmp_path / "cr.py").write_bytes(b"\r")
    result = run("empty.py", "blank.py", "cr.py")
    assert result.exit_code == 0 and "All checks passed!" in result.output


def test_huge_file_is_linted(tmp_path):
    (tmp_path / "huge.py").write_text(BAD + 'x = "' + "a" * 5_000_000 + '"\n')
    result = run("huge.py")
    [line] = _lines_naming(result.output, "huge.py")
    assert line.startswith("huge.py:4:12: TL501")


def test_symlink_loops_are_one_message_each(tmp_path):
    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path, tmp_path / "sub" / "loop")  # a folder loop is not followed
    os.symlink(tmp_path / "self.py", tmp_path / "self.py")
    (tmp_path / "bad.py").write_text(BAD)
    result = run(".", "self.py")
    [line] = _lines_naming(result.output, "self.py")
    assert line.startswith("self.py:1:1: TL000 cannot read file: Too many levels of symbolic links")
    assert result.output.count("bad.py:4:12") == 1


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_one_message(tmp_path):
    (tmp_path / "secret.py").write_text(BAD)
    (tmp_path / "secret.py").chmod(0)
    result = run("secret.py")
    [line] = _lines_naming(result.output, "secret.py")
    assert line.startswith("secret.py:1:1: TL000 cannot read file: Permission denied")


def test_a_folder_named_like_a_file_and_a_missing_path(tmp_path):
    (tmp_path / "pkg.py").mkdir()
    (tmp_path / "pkg.py" / "inner.py").write_text(BAD)
    result = run("pkg.py", "missing.py")
    assert "pkg.py/inner.py:4:12: TL501" in result.output
    [line] = _lines_naming(result.output, "missing.py")
    assert line.startswith("missing.py:1:1: TL000 cannot read file: No such file or directory")


@pytest.mark.parametrize(
    "config, message",
    [
        ('select = ["TL5"\n', "cannot parse"),
        ('select = "TL501"\n', "`select` must be a list of strings"),
        ('per-file-ignores = { "a.py" = "TL501" }\n', "`per-file-ignores.a.py` must be a list of strings"),
        ("bogus = 1\n", "unknown option `bogus`"),
        ('ignore = ["TL000"]\n', "cannot be ignored"),
        (b"\xff\xfe".decode("latin-1"), "cannot parse"),
    ],
)
def test_broken_config_is_one_message_naming_it_and_exit_2(tmp_path, config, message):
    (tmp_path / "torchlint.toml").write_text(config, encoding="latin-1")
    (tmp_path / "bad.py").write_text(BAD)
    result = run("bad.py")
    assert result.exit_code == 2
    [line] = result.output.splitlines()
    assert line.startswith("torchlint: error: ") and "torchlint.toml" in line and message in line, line


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_config_is_one_message(tmp_path):
    (tmp_path / "torchlint.toml").write_text("select = []\n")
    (tmp_path / "torchlint.toml").chmod(0)
    result = run("--config", "torchlint.toml", ".")
    assert result.exit_code == 2 and "cannot read torchlint.toml: Permission denied" in result.output


def test_unreadable_file_is_one_message_even_as_root(tmp_path, monkeypatch):
    # Root reads a file of mode 000, so the refusal is simulated where torchlint reads.
    from pathlib import Path

    real = Path.read_bytes

    def read_bytes(self):
        if self.name == "secret.py":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    (tmp_path / "secret.py").write_text(BAD)
    (tmp_path / "bad.py").write_text(BAD)
    result = run("secret.py", "bad.py")
    [line] = _lines_naming(result.output, "secret.py")
    assert line.startswith("secret.py:1:1: TL000 cannot read file: Permission denied")
    assert "bad.py:4:12: TL501" in result.output
