"""The rough edges a newcomer met (issue 40): a mistyped subcommand, an undecodable or binary
file, a `noqa` that names a prefix. Through click's runner and the installed command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from click.testing import CliRunner

from torchlint.cli import main

BAD = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"


def run(*args: str, input: bytes | None = None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def _command() -> str:
    exe = shutil.which("torchlint", path=os.path.dirname(sys.executable)) or shutil.which("torchlint")
    assert exe, "the torchlint console script is not installed"
    return exe


# --- defect 4: a mistyped subcommand is click's "No such command", never a path -------------


def test_a_mistyped_subcommand_is_a_usage_error_with_a_suggestion(tmp_path):
    (tmp_path / "t.py").write_text(BAD)
    result = run("chekc", "t.py")
    assert result.exit_code == 2
    assert "Error: No such command 'chekc'. Did you mean 'check'?" in result.stderr
    assert "TL000" not in result.output and "TL501" not in result.output
    # The lazily loaded subcommands are suggested too.
    assert "Did you mean 'verify'?" in run("verfy", "train.py").stderr


def test_a_mistyped_subcommand_in_a_subprocess(tmp_path):
    (tmp_path / "t.py").write_text(BAD)
    proc = subprocess.run([_command(), "chekc", "t.py"], capture_output=True, text=True)
    assert proc.returncode == 2 and "No such command 'chekc'. Did you mean 'check'?" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_paths_are_still_linted_without_the_subcommand(tmp_path):
    (tmp_path / "t.py").write_text(BAD)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "train.py").write_text(BAD)
    (tmp_path / "chekc").write_text(BAD)  # an existing file of any name is a path
    assert "t.py:4:12: TL501" in run("t.py", "--no-cache").output
    assert "scripts/train.py:4:12: TL501" in run("scripts", "--no-cache").output
    assert "chekc:4:12: TL501" in run("chekc", "--no-cache").output
    assert "missing.py:1:1: TL000 cannot read file" in run("missing.py").output  # a path, not a command
    fixed = run("--fix", "--unsafe-fixes", "t.py")
    assert fixed.exit_code == 0 and "(1 fixed, 0 remaining)" in fixed.output


# --- defect 5: an undecodable file at its bad byte; a binary file without raw bytes ---------


def test_an_undecodable_byte_is_reported_where_it_is(tmp_path):
    cases = {
        # A comment's byte: Python's parser skips it, LibCST's decode fails (it said 1:1).
        "comment.py": (b"import torch\n# caf\xe9\nmodel = torch.nn.Linear(1, 1).cuda()\n", "2:6"),
        # Python's own columns count from where the string starts, or past it (they said 2:11).
        "string.py": (b"x = 1\ny = \"\xe9\xe9\"  # \xff\n", "2:6"),
        "multiline.py": (b'x = 1\n"""doc\n\xff"""\n', "3:1"),
        "crlf.py": (b"x = 1\r\ny = \"\xc3\"\r\n", "2:6"),
        "bom.py": (b"\xef\xbb\xbfx = 1\ny = 'caf\xe9'\n", "2:9"),
        "cookie.py": (b"# -*- coding: ascii -*-\nx = 1\ny = 'caf\xc3\xa9'\n", "3:9"),
    }
    for name, (content, _) in cases.items():
        (tmp_path / name).write_bytes(content)
    result = run("check", "--no-cache", "--output-format", "concise", *cases)
    for name, (_, where) in cases.items():
        assert f"{name}:{where}: TL000 cannot decode file: byte 0x" in result.output, (name, result.output)


def test_a_binary_file_gets_no_code_frame_of_raw_bytes(tmp_path):
    (tmp_path / "model.py").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00\x1b[31m\x9b2J" + bytes(range(256)) + b"\n")
    result = run("check", "--no-cache", "model.py")
    assert result.output.startswith("model.py:1:8: TL000 SyntaxError: the file contains null bytes\n\nFound 1 error.")
    assert " | " not in result.output  # no code frame: nothing of the file reaches the terminal
    proc = subprocess.run([_command(), "check", "--no-cache", "model.py"], capture_output=True, cwd=tmp_path)
    assert proc.returncode == 1 and b"ELF" not in proc.stdout and b"\x1b" not in proc.stdout


# --- defect 8: a noqa that names a prefix ---------------------------------------------------


def test_a_noqa_prefix_suppresses_the_codes_it_begins(tmp_path):
    saved = "torch.save(model, 'm.pt')"
    for comment, suppressed in [("TL5", True), ("TL50", True), ("tl501", True), ("TL6", False), ("TL5011", False)]:
        (tmp_path / "t.py").write_text(BAD.replace(saved, f"{saved}  # noqa: {comment}"))
        result = run("check", "--no-cache", "t.py")
        assert (result.exit_code == 0) is suppressed, (comment, result.output)
    (tmp_path / "t.py").write_text("# torchlint: noqa: TL5\n" + BAD)
    assert run("check", "--no-cache", "t.py").exit_code == 0
    (tmp_path / "t.py").write_text("# torchlint: noqa: TL6\n" + BAD)
    assert run("check", "--no-cache", "t.py").exit_code == 1


# --- defect 2: a fix withheld or made unsafe by the project says why -------------------------


def _help_lines(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if line.strip().startswith("= help:")]


def test_a_fix_withheld_by_another_file_says_which(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")  # the project's root
    (tmp_path / "train.py").write_text(BAD)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "evaluate.py").write_text("import torch\nmodel = torch.load('m.pt', weights_only=False)\nmodel.eval()\n")
    result = run("check", "--no-cache", "train.py")
    assert "train.py:4:12: TL501 `torch.save`" in result.output  # no [*]
    assert _help_lines(result.output) == ["= help: Save `state_dict()` instead (no fix: tools/evaluate.py loads the whole model)"]
    assert "fixable" not in result.output

    saved = BAD.replace("torch.save(model,", "torch.save({'model': model, 'epoch': 1},")
    (tmp_path / "train.py").write_text(saved)
    (tmp_path / "tools" / "evaluate.py").write_text("import torch\nckpt = torch.load('m.pt')\nckpt['model'].eval()\n")
    assert _help_lines(run("check", "--no-cache", "train.py").output) == [
        "= help: Save `state_dict()` instead (no fix: tools/evaluate.py uses the `model` entry of a loaded checkpoint as a module)"
    ]


def test_a_fix_withheld_by_a_load_in_the_same_file_says_so(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "train.py").write_text(BAD + "net = torch.load('other.pt', weights_only=False)\nnet.eval()\n")
    assert _help_lines(run("check", "--no-cache", "train.py").output) == [
        "= help: Save `state_dict()` instead (no fix: this file uses what `torch.load` gives as more than a `state_dict`)"
    ]


def test_a_fix_made_unsafe_by_an_unknown_project_says_why(tmp_path):
    # Not a project's root (no pyproject.toml, setup.py or .git), and it holds a folder: the
    # files that may load the checkpoint are not walked, so the fix is unsafe.
    (tmp_path / "train.py").write_text(BAD)
    (tmp_path / "data").mkdir()
    result = run("check", "--no-cache", "train.py")
    assert _help_lines(result.output) == ["= help: Save `state_dict()` instead (unsafe: which files of the project load it is not known)"]
    assert "1 hidden fix can be enabled with the `--unsafe-fixes` option." in result.output
    (tmp_path / "data").rmdir()
    alone = run("check", "--no-cache", "train.py")
    assert _help_lines(alone.output) == ["= help: Save `state_dict()` instead"] and "TL501 [*]" in alone.output


def test_the_reason_is_kept_by_the_cache(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "train.py").write_text(BAD)
    (tmp_path / "evaluate.py").write_text("import torch\nmodel = torch.load('m.pt', weights_only=False)\nmodel.eval()\n")
    expected = ["= help: Save `state_dict()` instead (no fix: evaluate.py loads the whole model)"]
    assert _help_lines(run("check", "train.py").output) == expected
    assert _help_lines(run("check", "train.py").output) == expected  # (from the cache)
    (tmp_path / "evaluate.py").write_text("import torch\nstate = torch.load('m.pt')\n")
    assert _help_lines(run("check", "train.py").output) == ["= help: Save `state_dict()` instead"]


# --- --watch (ruff's): lint again when a file changes ----------------------------------------


def test_watch_lints_again_when_a_file_changes(tmp_path, monkeypatch):
    import torchlint.cli

    (tmp_path / "t.py").write_text(BAD)
    polls = []

    def poll(seconds):
        polls.append(seconds)
        if len(polls) == 2:  # (one poll that sees nothing new)
            (tmp_path / "t.py").write_text(BAD.replace("torch.save(model,", "torch.save(model.state_dict(),") + "\n")
        elif len(polls) == 4:
            raise KeyboardInterrupt  # Ctrl-C

    monkeypatch.setattr(torchlint.cli.time, "sleep", poll)
    result = run("check", "--watch", "--no-cache", "--output-format", "concise", "t.py")
    assert result.exit_code == 0
    assert result.stdout == "t.py:4:12: TL501 [*] `torch.save` of a whole `nn.Module`; save its `state_dict()` instead\nFound 1 error.\n[*] 1 fixable with the `--fix` option.\nAll checks passed!\n"
    assert result.stderr.count("Starting linter in watch mode...") == 1
    assert result.stderr.count("File change detected...") == 1
    assert run("check", "--watch", "-").exit_code == 2  # standard input cannot be watched


def test_a_finding_without_a_fix_still_gets_a_help_line(tmp_path):
    """Issue 40, defect 2: a report-only finding says where to read what to write instead."""
    (tmp_path / "t.py").write_text(
        "import torch\nmodel = torch.nn.Linear(2, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x, y in loader:\n    optimizer.zero_grad()\n    optimizer.step()\n"
        "    loss = ((model(x) - y) ** 2).mean()\n    loss.backward()\n"
    )
    result = run("check", "--no-cache", "--select", "TL102", str(tmp_path / "t.py"))
    assert "   = help: no automatic fix; `torchlint rule TL102` shows what to write instead" in result.output
